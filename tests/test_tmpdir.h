/* A scratch folder per test run, made under a given folder (the test's build folder), removed with everything
 * in it when the test passed and kept, named on stderr, after a failure so that what the test wrote can be read.
 * Include after tests/test_util.h (it reads test_failures_). */
#ifndef LCX_TEST_TMPDIR_H
#define LCX_TEST_TMPDIR_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Empty the folder open as fd (closed here) and everything below it, never following a link. 0 on success. */
static int test_tmpdir_empty_(int fd) {
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int bad = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) continue;
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 || test_tmpdir_empty_(sub) != 0 || unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) != 0) bad = 1;
    }
    closedir(d);
    return bad ? -1 : 0;
}

/* buf = "<parent>/<name>.XXXXXX", created by mkdtemp. 0 on success; -1 (and a message) if it could not be made. */
static inline int test_tmpdir_make(char *buf, size_t cap, const char *parent, const char *name) {
    int n = snprintf(buf, cap, "%s/%s.XXXXXX", parent, name);
    if (n < 0 || (size_t)n >= cap || !mkdtemp(buf)) {
        fprintf(stderr, "%s: cannot make a scratch folder under %s\n", name, parent);
        return -1;
    }
    return 0;
}

/* Call once, at the end: removes dir and all below it (never following a link) unless a check failed. A folder
 * that cannot be removed fails the test: the next run would find it. */
static inline void test_tmpdir_done(const char *dir) {
    if (test_failures_) {
        fprintf(stderr, "kept %s for a look (a check failed)\n", dir);
        return;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    CHECK_MSG(fd >= 0 && test_tmpdir_empty_(fd) == 0 && rmdir(dir) == 0, "could not remove %s", dir);
}

#endif
