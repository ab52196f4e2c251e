#include "src/core/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

lcx_status lcx_read_file(const char *path, size_t max_bytes, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    LCX_FAIL_IF(fd < 0, errno == ENOENT ? LCX_ERR_NOT_FOUND : LCX_ERR_IO, "%s: cannot open: %s", path,
                strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return lcx_fail(LCX_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > max_bytes) {
        close(fd);
        return lcx_fail(LCX_ERR_FORMAT, "%s: file is %lld bytes, more than the %zu allowed", path,
                        (long long)sb.st_size, max_bytes);
    }
    size_t n = (size_t)sb.st_size;
    char *b = malloc(n + 1);
    if (!b) {
        close(fd);
        return lcx_fail(LCX_ERR_OOM, "%s: cannot allocate %zu bytes", path, n + 1);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(b);
            close(fd);
            return lcx_fail(LCX_ERR_IO, "%s: read failed: %s", path, r < 0 ? strerror(errno) : "file shrank");
        }
        got += (size_t)r;
    }
    close(fd);
    b[n] = '\0';
    *buf = b;
    *len = n;
    return LCX_OK;
}

lcx_status lcx_map_file(const char *path, lcx_mapping *m) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    LCX_FAIL_IF(fd < 0, errno == ENOENT ? LCX_ERR_NOT_FOUND : LCX_ERR_IO, "%s: cannot open: %s", path,
                strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return lcx_fail(LCX_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return LCX_OK;
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    LCX_FAIL_IF(p == MAP_FAILED, LCX_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    m->data = p;
    m->size = (size_t)sb.st_size;
    return LCX_OK;
}

void lcx_unmap(lcx_mapping *m) {
    if (m->data && m->size) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

char *lcx_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *p = malloc(a + (size_t)slash + b + 1);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + (size_t)slash, name, b + 1);
    return p;
}

int lcx_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int lcx_is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

void lcx_remove_flat_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *p = lcx_path_join(dir, e->d_name);
            if (p) unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Directory part of a path ("." when none), heap-allocated. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

lcx_status lcx_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    LCX_FAIL_IF(fd < 0, LCX_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    int r = fsync(fd);
    int e = errno;
    close(fd);
    /* Some filesystems refuse fsync on directories (EINVAL); that is not a failure of ours. */
    LCX_FAIL_IF(r != 0 && e != EINVAL, LCX_ERR_IO, "%s: fsync of directory failed: %s", dir, strerror(e));
    return LCX_OK;
}

lcx_status lcx_atomic_open(const char *path, lcx_atomic_file *af) {
    af->fd = -1;
    af->path = strdup(path);
    size_t n = strlen(path) + 32;
    af->tmp_path = malloc(n);
    if (!af->path || !af->tmp_path) {
        free(af->path);
        free(af->tmp_path);
        af->path = af->tmp_path = NULL;
        return lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long r = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)getpid() << 20);
    for (int tries = 0; tries < 16; tries++, r = r * 6364136223846793005ull + 1442695040888963407ull) {
        snprintf(af->tmp_path, n, "%s.tmp-%06llx", path, (r >> 20) & 0xffffffull);
        af->fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (af->fd >= 0 || errno != EEXIST) break;
    }
    if (af->fd < 0) {
        lcx_status st = lcx_fail(LCX_ERR_IO, "%s: cannot create temporary file: %s", path, strerror(errno));
        free(af->path);
        free(af->tmp_path);
        af->path = af->tmp_path = NULL;
        return st;
    }
    return LCX_OK;
}

lcx_status lcx_atomic_write(lcx_atomic_file *af, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(af->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        LCX_FAIL_IF(w <= 0, LCX_ERR_IO, "%s: write failed: %s", af->path, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return LCX_OK;
}

void lcx_atomic_abort(lcx_atomic_file *af) {
    if (af->fd >= 0) close(af->fd);
    if (af->tmp_path) unlink(af->tmp_path);
    free(af->path);
    free(af->tmp_path);
    af->fd = -1;
    af->path = af->tmp_path = NULL;
}

lcx_status lcx_atomic_commit(lcx_atomic_file *af) {
    lcx_status st = LCX_OK;
    if (fsync(af->fd) != 0) {
        st = lcx_fail(LCX_ERR_IO, "%s: fsync failed: %s", af->path, strerror(errno));
        lcx_atomic_abort(af);
        return st;
    }
    if (close(af->fd) != 0) {
        af->fd = -1;
        st = lcx_fail(LCX_ERR_IO, "%s: close failed: %s", af->path, strerror(errno));
        lcx_atomic_abort(af);
        return st;
    }
    af->fd = -1;
    if (rename(af->tmp_path, af->path) != 0) {
        st = lcx_fail(LCX_ERR_IO, "%s: rename failed: %s", af->path, strerror(errno));
        lcx_atomic_abort(af);
        return st;
    }
    char *dir = dir_of(af->path);
    st = dir ? lcx_fsync_dir(dir) : lcx_fail(LCX_ERR_OOM, "out of memory");
    free(dir);
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    return st;
}

lcx_status lcx_write_file_atomic(const char *path, const void *buf, size_t n) {
    lcx_atomic_file af;
    LCX_TRY(lcx_atomic_open(path, &af));
    lcx_status st = lcx_atomic_write(&af, buf, n);
    if (st != LCX_OK) {
        lcx_atomic_abort(&af);
        return st;
    }
    return lcx_atomic_commit(&af);
}
