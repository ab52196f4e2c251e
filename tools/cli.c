#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

#include "src/core/fileio.h"

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

lcx_status lcx_cli_read_ids(const char *path, int32_t **ids, int64_t *n) {
    *ids = NULL;
    *n = 0;
    char *buf = NULL;
    size_t len = 0;
    LCX_TRY(lcx_read_file(path, (size_t)1 << 32, &buf, &len));
    size_t cap = 1024;
    int32_t *out = malloc(cap * sizeof *out);
    lcx_status st = LCX_OK;
    if (!out) {
        free(buf);
        return lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
    }
    int64_t k = 0;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        while (p < end && isspace((unsigned char)*p)) p++;
        if (p == end) break;
        const char *q = p;
        while (q < end && !isspace((unsigned char)*q)) q++;
        char word[32];
        size_t wl = (size_t)(q - p);
        int ok = wl > 0 && wl < sizeof word;
        long long v = -1;
        if (ok) {
            memcpy(word, p, wl);
            word[wl] = 0;
            char *e;
            errno = 0;
            v = strtoll(word, &e, 10);
            ok = *e == 0 && errno == 0 && isdigit((unsigned char)word[0]) && v >= 0 && v <= INT32_MAX;
        }
        if (!ok) {
            char shown[40];
            snprintf(shown, sizeof shown, "%.*s%s", (int)(wl < 24 ? wl : 24), p, wl < 24 ? "" : "...");
            for (char *c = shown; *c; c++)
                if (!isprint((unsigned char)*c)) *c = '?';
            st = lcx_fail(LCX_ERR_FORMAT, "%s: token %lld: '%s' is not a non-negative 32-bit integer", path,
                          (long long)k, shown);
            break;
        }
        if ((size_t)k == cap) {
            int32_t *grown = realloc(out, cap * 2 * sizeof *out);
            if (!grown) {
                st = lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
                break;
            }
            out = grown;
            cap *= 2;
        }
        out[k++] = (int32_t)v;
        p = q;
    }
    free(buf);
    if (st != LCX_OK) {
        free(out);
        return st;
    }
    *ids = out;
    *n = k;
    return LCX_OK;
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

double lcx_cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int lcx_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (*s == 0 || *e != 0 || errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

int lcx_cli_parse_real(const char *s, double lo, double hi, double *out) {
    char *e;
    double v = strtod(s, &e);
    if (*s == 0 || *e != 0 || !(v >= lo && v <= hi)) return 0;
    *out = v;
    return 1;
}

void lcx_cli_bar_init(lcx_cli_bar *b, int quiet, const char *what) {
    b->enabled = !quiet && isatty(fileno(stderr));
    b->start = lcx_cli_now_s();
    b->what = what;
}

void lcx_cli_progress(void *user, uint64_t done, uint64_t total, uint64_t bytes_done, uint64_t bytes_total) {
    lcx_cli_bar *b = user;
    if (!b || !b->enabled) return;
    double el = lcx_cli_now_s() - b->start;
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

int lcx_cli_operand(const char *cmd, const char *arg, const char *what, const char **operand) {
    if (arg[0] == '-' && arg[1] != 0) return lcx_cli_usage_error(cmd, "unknown flag '%s'", arg);
    if (*operand) return lcx_cli_usage_error(cmd, "unexpected argument '%s' (one %s only)", arg, what);
    *operand = arg;
    return 0;
}

int lcx_cli_dtype(const char *cmd, const char *value, lcx_dtype *out) {
    if (strcmp(value, "f32") == 0) {
        *out = LCX_F32;
    } else if (strcmp(value, "bf16") == 0) {
        *out = LCX_BF16;
    } else {
        lcx_cli_usage_error(cmd, "--dtype '%s' (expected f32 or bf16)", value);
        return 0;
    }
    return 1;
}

int lcx_cli_act_dtype(const char *cmd, const char *value, lcx_dtype *out) {
    if (strcmp(value, "f32") == 0) {
        *out = LCX_F32;
    } else if (strcmp(value, "bf16") == 0) {
        *out = LCX_BF16;
    } else {
        lcx_cli_usage_error(cmd, "--activations '%s' (expected bf16 or f32)", value);
        return 0;
    }
    return 1;
}

lcx_status lcx_cli_flush_stdout(void) {
    LCX_FAIL_IF(fflush(stdout) != 0, LCX_ERR_IO, "writing to stdout failed");
    return LCX_OK;
}

lcx_reporter lcx_cli_reporter(lcx_terminal *term, int quiet) {
    int progress = isatty(2) && !quiet;
    *term = (lcx_terminal){.quiet = quiet, .progress = progress, .steps = !(progress && isatty(1)),
                           .rank = lcx_launch_rank()};
    return lcx_terminal_reporter(term);
}
