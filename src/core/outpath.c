#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#include "src/core/outpath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/core/fileio.h"
#include "src/core/report.h"
#include "src/core/strbuf.h"

#define TMP_TAG ".tmp-"

lcx_status lcx_out_absent(const char *path) {
    struct stat sb;
    LCX_FAIL_IF(lstat(path, &sb) == 0, LCX_ERR_INVALID, "%s: already exists (refusing to overwrite)", path);
    return LCX_OK;
}

/* This host, as 8 hex digits: a pid only means something on the host that made it. */
static unsigned host_id(void) {
    char h[256] = {0};
    if (gethostname(h, sizeof h - 1) != 0) strcpy(h, "?");
    unsigned x = 2166136261u; /* FNV-1a */
    for (const char *p = h; *p; p++) x = (x ^ (unsigned char)*p) * 16777619u;
    return x;
}

static unsigned long long random_bits(void) {
    static unsigned long long counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long x = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 30) ^
                           (++counter * 0x9E3779B97F4A7C15ull) ^ ((unsigned long long)getpid() << 16);
    x ^= x >> 33; /* splitmix finaliser */
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

char *lcx_out_temp_name(const char *path) {
    size_t n = strlen(path) + 64;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s" TMP_TAG "%08x-%ld-%08llx", path, host_id(), (long)getpid(),
                 random_bits() & 0xffffffffull);
    return p;
}

/* Owner of a temporary's name: 1 with host and pid when the text after the last ".tmp-" is HOST-PID-RANDOM. */
static int temp_owner(const char *name, unsigned *host, long *pid) {
    const char *t = NULL;
    for (const char *p = strstr(name, TMP_TAG); p; p = strstr(p + 1, TMP_TAG)) t = p;
    if (!t) return 0;
    unsigned h;
    long pd;
    int used = 0;
    if (sscanf(t + strlen(TMP_TAG), "%8x-%ld-%*x%n", &h, &pd, &used) != 2 || used == 0 || pd <= 0) return 0;
    *host = h;
    *pid = pd;
    return 1;
}

int lcx_out_temp_stale(const char *name) {
    unsigned h;
    long pid;
    if (!temp_owner(name, &h, &pid) || h != host_id() || pid == (long)getpid()) return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

void lcx_out_remove_temp(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(fd, e->d_name, 0); /* never a directory: ours hold files only */
    closedir(d);
    rmdir(path);
}

static char *dir_part(const char *path, const char **base) {
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* 1 when process pid runs the same program file as this one: a concurrent run of ours, whose temporary is its
 * work in progress. 0 when it runs another program (its pid may be a reused one of a killed run) or we cannot
 * tell. */
static int same_program(long pid) {
    char exe[64];
    struct stat a, b;
    snprintf(exe, sizeof exe, "/proc/%ld/exe", pid);
    return stat(exe, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Why a temporary of path's that is not stale stays, in words; NULL when there is nothing to tell (this process's
 * own, or a concurrent run of this program still writing it). */
static const char *kept_reason(const char *name, char *buf, size_t cap) {
    unsigned h;
    long pid;
    if (!temp_owner(name, &h, &pid)) return "no owner in its name";
    if (h != host_id()) return "made on another host";
    if (pid == (long)getpid() || same_program(pid)) return NULL;
    snprintf(buf, cap, "process %ld is running", pid);
    return buf;
}

enum { KEPT_NAMED = 8 }; /* the warning names this many, then counts the rest */

int lcx_out_sweep(const char *path, char **kept) {
    if (kept) *kept = NULL;
    const char *base;
    char *dir = dir_part(path, &base);
    if (!dir) return 0;
    size_t bl = strlen(base);
    int removed = 0, n_kept = 0;
    lcx_strbuf names = {0};
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *nm = e->d_name;
        if (strncmp(nm, base, bl) != 0 || strncmp(nm + bl, TMP_TAG, strlen(TMP_TAG)) != 0) continue;
        char why_buf[64];
        const char *why;
        if (lcx_out_temp_stale(nm)) {
            char *p = lcx_path_join(dir, nm);
            if (p) lcx_out_remove_temp(p), removed++;
            free(p);
        } else if ((why = kept_reason(nm, why_buf, sizeof why_buf)) && n_kept++ < KEPT_NAMED) {
            char shown[160]; /* a name with a newline must not break the one line */
            lcx_strbuf_printf(&names, "%s%s (%s)", n_kept > 1 ? ", " : "", lcx_printable(nm, shown, sizeof shown), why);
        }
    }
    if (d) closedir(d);
    free(dir);
    if (kept && n_kept > 0) {
        lcx_strbuf msg = {0};
        lcx_strbuf_printf(&msg, "%s: kept %d temporar%s of other runs beside it: %s", path, n_kept,
                           n_kept == 1 ? "y" : "ies", names.s ? names.s : "");
        if (n_kept > KEPT_NAMED) lcx_strbuf_printf(&msg, " and %d more", n_kept - KEPT_NAMED);
        lcx_strbuf_printf(&msg, "; remove %s once no run is writing %s", n_kept == 1 ? "it" : "them",
                           n_kept == 1 ? "it" : "them");
        *kept = msg.s;
    }
    lcx_strbuf_free(&names);
    return removed;
}

void lcx_out_sweep_warn(const char *path) {
    char *kept = NULL;
    lcx_out_sweep(path, &kept);
    if (kept) lcx_report_warn("%s", kept);
    free(kept);
}

lcx_status lcx_out_temp_dir(const char *path, char **tmp) {
    *tmp = NULL;
    lcx_out_sweep_warn(path);
    for (int tries = 0; tries < 16; tries++) {
        char *p = lcx_out_temp_name(path);
        LCX_FAIL_IF(!p, LCX_ERR_OOM, "out of memory");
        if (mkdir(p, 0777) == 0) {
            *tmp = p;
            return LCX_OK;
        }
        int e = errno;
        free(p);
        LCX_FAIL_IF(e != EEXIST, LCX_ERR_IO, "%s: cannot create a temporary directory beside it: %s", path,
                    strerror(e));
    }
    return lcx_fail(LCX_ERR_IO, "%s: cannot create a temporary directory beside it", path);
}

/* Claim without renameat2 (a filesystem that refuses RENAME_NOREPLACE): link() fails on an existing name; for a
 * directory, mkdir() claims the name and rename() then replaces only that empty directory of ours. */
static int claim_fallback(const char *tmp, const char *path) {
    struct stat sb;
    if (lstat(tmp, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) {
        if (link(tmp, path) != 0) return -1;
        unlink(tmp);
        return 0;
    }
    if (mkdir(path, 0700) != 0) return -1;
    if (rename(tmp, path) != 0) {
        int e = errno;
        rmdir(path);
        errno = e;
        return -1;
    }
    return 0;
}

lcx_status lcx_out_claim(const char *tmp, const char *path) {
    int r = renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE);
    if (r != 0 && (errno == EINVAL || errno == ENOSYS)) r = claim_fallback(tmp, path);
    LCX_FAIL_IF(r != 0 && (errno == EEXIST || errno == ENOTEMPTY), LCX_ERR_INVALID,
                "%s: already exists (refusing to overwrite)", path);
    LCX_FAIL_IF(r != 0, LCX_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    const char *base;
    char *dir = dir_part(path, &base);
    LCX_FAIL_IF(!dir, LCX_ERR_OOM, "out of memory");
    lcx_status st = lcx_fsync_dir(dir);
    free(dir);
    return st;
}
