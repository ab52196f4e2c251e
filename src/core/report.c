/* report: see report.h. The terminal reporter at the bottom is the only code in src/ that writes to stdout or
 * stderr (tests/lint/terminal_output.sh checks it). */
#include "src/core/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { LINE_MAX_BYTES = 4096 };

void lcx_report(const lcx_reporter *r, lcx_report_level level, const char *fmt, ...) {
    if (!r || !r->line) return;
    char text[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    r->line(r->user, level, text);
}

static lcx_reporter warnings; /* all NULL: none installed */

void lcx_report_set_warnings(const lcx_reporter *r) { warnings = r ? *r : (lcx_reporter){0}; }

void lcx_report_warn(const char *fmt, ...) {
    if (!warnings.line) return;
    char text[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    warnings.line(warnings.user, LCX_REPORT_WARN, text);
}

void lcx_report_progress(const lcx_reporter *r, const lcx_progress *p) {
    if (r && r->progress && p) r->progress(r->user, p);
}

void lcx_report_progress_end(const lcx_reporter *r) {
    if (r && r->progress) r->progress(r->user, NULL);
}

void lcx_report_event(const lcx_reporter *r, const char *name, const char *json_fmt, ...) {
    if (!r || !r->event) return;
    char json[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, json_fmt);
    vsnprintf(json, sizeof json, json_fmt, ap);
    va_end(ap);
    r->event(r->user, name, json);
}

void lcx_report_table(const lcx_reporter *r, const lcx_table *t) {
    if (r && r->table && t) r->table(r->user, t);
}

char *lcx_report_format_eta(double s, char *buf, size_t cap) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, cap, "--:--");
    else if (s >= 3600) snprintf(buf, cap, "%d:%02d:%02d", (int)(s / 3600), (int)fmod(s / 60, 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%d:%02d", (int)(s / 60), (int)fmod(s, 60));
    return buf;
}

void lcx_report_table_write(FILE *f, const lcx_table *t) {
    if (t->title) fprintf(f, "%s\n", t->title);
    int *w = calloc((size_t)(t->n_cols > 0 ? t->n_cols : 1), sizeof *w);
    if (!w) return;
    for (int c = 0; c < t->n_cols; c++) {
        w[c] = t->widths ? t->widths[c] : 0;
        if (w[c] > 0) continue;
        w[c] = (int)strlen(t->header[c]);
        for (int r = 0; r < t->n_rows; r++) {
            int n = (int)strlen(t->cells[(size_t)r * (size_t)t->n_cols + (size_t)c]);
            if (n > w[c]) w[c] = n;
        }
    }
    fputc(' ', f);
    for (int c = 0; c < t->n_cols; c++) fprintf(f, " %*s", w[c], t->header[c]);
    fputc('\n', f);
    for (int r = 0; r < t->n_rows; r++) {
        fputc(' ', f);
        for (int c = 0; c < t->n_cols; c++) fprintf(f, " %*s", w[c], t->cells[(size_t)r * (size_t)t->n_cols + (size_t)c]);
        fputc('\n', f);
    }
    free(w);
}

/* ---- terminal ---------------------------------------------------------------------------------------------- */

/* A finished line must not land on top of an updating progress line. */
static void clear_progress(lcx_terminal *t) {
    if (!t->progress_shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    t->progress_shown = 0;
}

static void term_line(void *user, lcx_report_level level, const char *text) {
    lcx_terminal *t = user;
    if (level == LCX_REPORT_WARN) {
        clear_progress(t);
        if (t->rank != 0) fprintf(stderr, "warning: rank %d: %s\n", t->rank, text);
        else fprintf(stderr, "warning: %s\n", text);
        fflush(stderr);
        return;
    }
    if (t->rank != 0 || (level != LCX_REPORT_RESULT && t->quiet) || (level == LCX_REPORT_STEP && !t->steps)) return;
    clear_progress(t);
    printf("%s\n", text);
    fflush(stdout);
}

static void term_progress(void *user, const lcx_progress *p) {
    lcx_terminal *t = user;
    if (!t->progress || t->rank != 0) return;
    if (!p) {
        if (t->progress_shown) fputc('\n', stderr);
        fflush(stderr);
        t->progress_shown = 0;
        return;
    }
    char eta[32];
    fprintf(stderr, "\r\033[K%s %lld", p->what ? p->what : "", (long long)p->done);
    if (p->total > 0) fprintf(stderr, "/%lld", (long long)p->total);
    if (p->detail) fprintf(stderr, "  %s", p->detail);
    if (p->rate > 0) fprintf(stderr, "  %.0f %s", p->rate, p->unit ? p->unit : "/s");
    if (p->eta_s >= 0) fprintf(stderr, "  ETA %s", lcx_report_format_eta(p->eta_s, eta, sizeof eta));
    fflush(stderr);
    t->progress_shown = 1;
}

static void term_table(void *user, const lcx_table *tb) {
    lcx_terminal *t = user;
    if (t->rank != 0) return;
    clear_progress(t);
    lcx_report_table_write(stdout, tb);
    fflush(stdout);
}

lcx_reporter lcx_terminal_reporter(lcx_terminal *term) {
    return (lcx_reporter){.line = term_line, .progress = term_progress, .event = NULL, .table = term_table,
                          .user = term};
}

void lcx_report_internal_error(const char *expr, const char *file, int line) {
    fprintf(stderr, "lcextend: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    fflush(stderr);
}

int lcx_launch_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        char *end;
        long r = strtol(v, &end, 10);
        if (*end == 0 && r >= 0 && r < (1L << 30)) return (int)r;
    }
    return 0;
}
