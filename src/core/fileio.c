#include "src/core/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/core/outpath.h"

/* Open without blocking (a FIFO or a device never hangs the open), then fstat the descriptor itself: what is
 * checked is what gets read. LCX_IN_OWN adds O_NOFOLLOW: a file of our own .lcx is never a symlink. */
lcx_status lcx_open_input(const char *path, int flags, int *fd_out, uint64_t *size) {
    *fd_out = -1;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | ((flags & LCX_IN_OWN) ? O_NOFOLLOW : 0));
    if (fd < 0 && errno == ELOOP && (flags & LCX_IN_OWN))
        return lcx_fail(LCX_ERR_FORMAT, "%s: is a symlink (a checkpoint never holds one; refusing to follow it)",
                        path);
    LCX_FAIL_IF(fd < 0, errno == ENOENT ? LCX_ERR_NOT_FOUND : LCX_ERR_IO, "%s: cannot open: %s", path,
                strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return lcx_fail(LCX_ERR_FORMAT, "%s: not a regular file", path);
    }
    /* Regular files ignore O_NONBLOCK for reads, but clear it so nothing depends on that. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    *size = (uint64_t)sb.st_size;
    return LCX_OK;
}

lcx_status lcx_check_input(const char *path, int flags, uint64_t *size) {
    int fd;
    uint64_t sz;
    LCX_TRY(lcx_open_input(path, flags, &fd, &sz));
    close(fd);
    if (size) *size = sz;
    return LCX_OK;
}

lcx_status lcx_optional_input(const char *path, int flags, int *present) {
    *present = 0;
    lcx_status st = lcx_check_input(path, flags, NULL);
    if (st == LCX_ERR_NOT_FOUND) {
        lcx_clear_error();
        return LCX_OK;
    }
    *present = st == LCX_OK;
    return st;
}

lcx_status lcx_read_input(const char *path, int flags, size_t max_bytes, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    LCX_TRY(lcx_open_input(path, flags, &fd, &size));
    if (size > max_bytes) {
        close(fd);
        return lcx_fail(LCX_ERR_FORMAT, "%s: file is %llu bytes, more than the %zu allowed", path,
                        (unsigned long long)size, max_bytes);
    }
    size_t n = (size_t)size;
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

lcx_status lcx_read_file(const char *path, size_t max_bytes, char **buf, size_t *len) {
    return lcx_read_input(path, 0, max_bytes, buf, len);
}

lcx_status lcx_map_input(const char *path, int flags, lcx_mapping *m) {
    m->data = NULL;
    m->size = 0;
    int fd;
    uint64_t size;
    LCX_TRY(lcx_open_input(path, flags, &fd, &size));
    if (size == 0) {
        close(fd);
        return LCX_OK;
    }
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    LCX_FAIL_IF(p == MAP_FAILED, LCX_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    m->data = p;
    m->size = (size_t)size;
    return LCX_OK;
}

lcx_status lcx_map_file(const char *path, lcx_mapping *m) { return lcx_map_input(path, 0, m); }

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

static lcx_status atomic_open(const char *path, int noreplace, lcx_atomic_file *af) {
    af->fd = -1;
    af->noreplace = noreplace;
    af->path = strdup(path);
    af->tmp_path = NULL;
    LCX_FAIL_IF(!af->path, LCX_ERR_OOM, "%s: out of memory", path);
    for (int tries = 0; tries < 16 && af->fd < 0; tries++) {
        free(af->tmp_path);
        af->tmp_path = lcx_out_temp_name(path);
        if (!af->tmp_path) break;
        af->fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (af->fd < 0 && errno != EEXIST) break;
    }
    if (af->fd < 0) {
        lcx_status st = af->tmp_path ? lcx_fail(LCX_ERR_IO, "%s: cannot create temporary file: %s", path,
                                                strerror(errno))
                                     : lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
        free(af->path);
        free(af->tmp_path);
        af->path = af->tmp_path = NULL;
        return st;
    }
    return LCX_OK;
}

lcx_status lcx_atomic_open(const char *path, lcx_atomic_file *af) { return atomic_open(path, 0, af); }

lcx_status lcx_atomic_open_new(const char *path, lcx_atomic_file *af) {
    af->fd = -1;
    af->path = af->tmp_path = NULL;
    LCX_TRY(lcx_out_absent(path));
    lcx_out_sweep_warn(path);
    return atomic_open(path, 1, af);
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
    if (af->noreplace) {
        st = lcx_out_claim(af->tmp_path, af->path);
        if (st != LCX_OK) {
            lcx_atomic_abort(af);
            return st;
        }
    } else {
        if (rename(af->tmp_path, af->path) != 0) {
            st = lcx_fail(LCX_ERR_IO, "%s: rename failed: %s", af->path, strerror(errno));
            lcx_atomic_abort(af);
            return st;
        }
        char *dir = dir_of(af->path);
        st = dir ? lcx_fsync_dir(dir) : lcx_fail(LCX_ERR_OOM, "out of memory");
        free(dir);
    }
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    return st;
}

static lcx_status write_whole(const char *path, int noreplace, const void *buf, size_t n) {
    lcx_atomic_file af;
    LCX_TRY(noreplace ? lcx_atomic_open_new(path, &af) : lcx_atomic_open(path, &af));
    lcx_status st = lcx_atomic_write(&af, buf, n);
    if (st != LCX_OK) {
        lcx_atomic_abort(&af);
        return st;
    }
    return lcx_atomic_commit(&af);
}

lcx_status lcx_write_file_atomic(const char *path, const void *buf, size_t n) { return write_whole(path, 0, buf, n); }
lcx_status lcx_write_file_new(const char *path, const void *buf, size_t n) { return write_whole(path, 1, buf, n); }
