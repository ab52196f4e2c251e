#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

int lcx_cli_report(const char *cmd, lcx_status st) {
    fprintf(stderr, "lcextend %s: %s: %s\n", cmd, lcx_status_name(st), lcx_last_error());
    return LCX_EXIT_FAIL;
}

int lcx_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "lcextend %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'lcextend %s --help')\n", cmd);
    return LCX_EXIT_USAGE;
}

int lcx_cli_flag_value(int argc, char **argv, int *i, const char *name, const char **value, const char *cmd,
                       int *err) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) {
        lcx_cli_usage_error(cmd, "flag %s needs a value", name);
        *err = 1;
        *value = NULL;
        return 1;
    }
    *value = argv[++*i];
    return 1;
}

int lcx_cli_int(const char *cmd, const char *flag, const char *value, long lo, long hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (!*value || *end || errno || v < lo || v > hi) {
        lcx_cli_usage_error(cmd, "%s '%s': expected an integer in [%ld, %ld]", flag, value, lo, hi);
        return 0;
    }
    *out = (int)v;
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void lcx_cli_bar_init(lcx_cli_bar *b, int quiet, const char *what) {
    b->enabled = !quiet && isatty(fileno(stderr));
    b->start = now_s();
    b->what = what;
}

void lcx_cli_progress(void *user, uint64_t done, uint64_t total, uint64_t bytes_done, uint64_t bytes_total) {
    lcx_cli_bar *b = user;
    if (!b || !b->enabled) return;
    double el = now_s() - b->start;
    double mbs = el > 0 ? (double)bytes_done / 1e6 / el : 0;
    double frac = bytes_total ? (double)bytes_done / (double)bytes_total : total ? (double)done / (double)total : 1;
    double eta = frac > 0 ? el * (1 - frac) / frac : 0;
    char bar[31];
    int fill = (int)(frac * 30 + 0.5);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r[%s] %llu/%llu %s  %.1f MB/s  ETA %d:%02d ", bar, (unsigned long long)done, (unsigned long long)total, b->what, mbs, (int)eta / 60,
            (int)eta % 60);
    fflush(stderr);
}

void lcx_cli_bar_end(lcx_cli_bar *b) {
    if (b->enabled) fprintf(stderr, "\n");
}
