/* outpath and the input opener (docs/reliability.md "Inputs and outputs"): a FIFO is refused without blocking,
 * LCX_IN_OWN refuses a symlink that plain opening follows; a claim never replaces a file, a dangling symlink or a
 * directory; a sweep removes the temporaries whose owner is gone (files and directories), keeps a live owner's
 * and one it cannot attribute and names both, with why, in one warning line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/core/fileio.h"
#include "src/core/outpath.h"
#include "src/core/report.h"
#include "test_util.h"
#include "test_tmpdir.h"

static char dir[64];

/* Every path the test makes, freed at the end (the sanitizer pass checks for leaks). */
static char *g_paths[64];
static int g_n_paths;
static char *keep_path(char *p) {
    if (!p || g_n_paths == (int)(sizeof g_paths / sizeof g_paths[0])) abort();
    return g_paths[g_n_paths++] = p;
}
static void free_paths(void) {
    while (g_n_paths > 0) free(g_paths[--g_n_paths]);
}

static char *at(const char *name) { return keep_path(lcx_path_join(dir, name)); }

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* The warning reporter's lines: how many and the last. */
static int g_n_warn;
static char g_warn[4096];
static void record_line(void *user, lcx_report_level level, const char *text) {
    (void)user;
    if (level != LCX_REPORT_WARN) return;
    g_n_warn++;
    snprintf(g_warn, sizeof g_warn, "%s", text);
}

/* A pid that was ours and is gone now. */
static long dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

int main(void) {
    if (test_tmpdir_make(dir, sizeof dir, ".", "test_outpath") != 0) return 1;

    /* inputs */
    char *fifo = at("fifo"), *file = at("file"), *link = at("link");
    CHECK(mkfifo(fifo, 0600) == 0);
    put(file, "x");
    CHECK(symlink("file", link) == 0);
    CHECK_FAILS(lcx_check_input(fifo, 0, NULL), LCX_ERR_FORMAT, "fifo: not a regular file");
    CHECK_FAILS(lcx_check_input(dir, 0, NULL), LCX_ERR_FORMAT, "not a regular file");
    CHECK_FAILS(lcx_check_input(link, LCX_IN_OWN, NULL), LCX_ERR_FORMAT, "link: is a symlink");
    uint64_t size = 0;
    CHECK_OK(lcx_check_input(link, 0, &size));
    CHECK(size == 1);
    int present = 1;
    CHECK_OK(lcx_optional_input(at("absent"), 0, &present));
    CHECK(present == 0);
    CHECK_FAILS(lcx_optional_input(fifo, 0, &present), LCX_ERR_FORMAT, "not a regular file");

    /* claims: never replace what is there */
    char *out = at("out"), *t1 = keep_path(lcx_out_temp_name(out)), *t2 = keep_path(lcx_out_temp_name(out));
    CHECK(t1 && t2 && strcmp(t1, t2) != 0 && strstr(t1, "out.tmp-"));
    put(t1, "first");
    put(t2, "second");
    CHECK_OK(lcx_out_claim(t1, out));
    CHECK_FAILS(lcx_out_claim(t2, out), LCX_ERR_INVALID, "out: already exists (refusing to overwrite)");
    char *buf = NULL;
    size_t len;
    CHECK_OK(lcx_read_file(out, 100, &buf, &len));
    CHECK(buf && strcmp(buf, "first") == 0 && exists(t2));
    free(buf);
    char *dangling = at("dangling");
    CHECK(symlink("nowhere", dangling) == 0);
    CHECK_FAILS(lcx_out_claim(t2, dangling), LCX_ERR_INVALID, "already exists");
    CHECK(!exists(at("nowhere")));
    char *d1 = NULL, *dout = at("dirout");
    CHECK(mkdir(dout, 0700) == 0);
    CHECK_OK(lcx_out_temp_dir(at("dirnew"), &d1));
    keep_path(d1);
    CHECK_FAILS(lcx_out_claim(d1, dout), LCX_ERR_INVALID, "already exists"); /* an empty directory is not replaced */
    CHECK_OK(lcx_out_claim(d1, at("dirnew")));
    CHECK_FAILS(lcx_out_absent(dangling), LCX_ERR_INVALID, "already exists");

    /* sweep: a dead owner's temporaries go (a directory with files, a file), a live one's stay */
    char host[16] = {0};
    const char *tag = strstr(t2, ".tmp-");
    CHECK(tag && sscanf(tag + 5, "%8[0-9a-f]", host) == 1);
    char name[256];
    long dead = dead_pid();
    snprintf(name, sizeof name, "sw.tmp-%s-%ld-0000abcd", host, dead);
    char *stale_dir = at(name);
    CHECK(mkdir(stale_dir, 0700) == 0);
    put(keep_path(lcx_path_join(stale_dir, "data-0.bin")), "junk");
    snprintf(name, sizeof name, "sw.tmp-%s-%ld-0000abce", host, dead);
    char *stale_file = at(name);
    put(stale_file, "junk");
    snprintf(name, sizeof name, "sw.tmp-%s-1-0000abcf", host); /* pid 1 is always there */
    char *live = at(name);
    put(live, "busy");
    char *legacy = at("sw.tmp-a1b2c3");
    put(legacy, "old");
    char *kept = NULL;
    CHECK(lcx_out_sweep(at("sw"), &kept) == 2);
    CHECK(!exists(stale_dir) && !exists(stale_file) && exists(live) && exists(legacy));
    /* the kept line names both, each with its reason */
    char live_why[300];
    snprintf(live_why, sizeof live_why, "%s (process 1 is running)", strrchr(live, '/') + 1);
    CHECK(kept && strstr(kept, "kept 2 temporaries") && strstr(kept, "sw.tmp-a1b2c3 (no owner in its name)") &&
          strstr(kept, live_why) && !strchr(kept, '\n'));
    free(kept);
    kept = NULL;
    CHECK(lcx_out_sweep(at("nothing-beside"), &kept) == 0 && kept == NULL);

    /* lcx_out_temp_dir warns once, through the warning reporter, and keeps them */
    lcx_report_set_warnings(&(lcx_reporter){.line = record_line});
    char *d0 = NULL;
    CHECK_OK(lcx_out_temp_dir(at("sw"), &d0));
    keep_path(d0);
    CHECK(g_n_warn == 1 && strstr(g_warn, "sw: kept 2 temporaries") && strstr(g_warn, "sw.tmp-a1b2c3"));
    CHECK(exists(live) && exists(legacy));
    lcx_out_remove_temp(d0);
    lcx_report_set_warnings(NULL);
    CHECK(!lcx_out_temp_stale("sw") && !lcx_out_temp_stale(t2) && lcx_out_temp_stale(strrchr(stale_file, '/') + 1));

    /* a temporary directory for a path sweeps first */
    snprintf(name, sizeof name, "sw.tmp-%s-%ld-0000abd0", host, dead);
    char *stale2 = at(name), *d2 = NULL;
    CHECK(mkdir(stale2, 0700) == 0);
    CHECK_OK(lcx_out_temp_dir(at("sw"), &d2));
    CHECK(!exists(stale2) && d2 && exists(d2));
    keep_path(d2);
    lcx_out_remove_temp(d2);
    CHECK(!exists(d2));

    test_tmpdir_done(dir);
    free_paths();
    return test_summary("test_outpath");
}
