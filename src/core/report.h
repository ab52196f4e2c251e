/* report: how the library tells a person (or a program) what it is doing, without ever writing to the terminal.
 *
 * Long library calls (the extension pipeline, training, evaluation, tokenizing) take an lcx_reporter: a table
 * of callbacks plus user data. The library hands it finished lines (results, notes, warnings), progress states
 * (done/total, rate, ETA), structured events (a name and a JSON object: "stage_start", "eval", "saved", ...) and
 * tables. What becomes of them is the caller's choice: tools/ installs the terminal reporter below (the one
 * place that prints); a test installs one that records; a NULL reporter or a NULL callback drops them.
 *
 * Under MPI every rank runs the same library code with its own reporter; the terminal reporter of a rank other
 * than 0 prints nothing but warnings tagged with the rank, so a job's output reads as one run's. */
#ifndef LCX_REPORT_H
#define LCX_REPORT_H

#include <stdint.h>
#include <stdio.h>

typedef enum lcx_report_level {
    LCX_REPORT_RESULT, /* what the user asked for (a table row, "exported X"): the terminal sends it to stdout */
    LCX_REPORT_NOTE,   /* what the run is doing ("resuming from X", "stage 1/2: ..."): stdout unless quiet */
    LCX_REPORT_STEP,   /* a per-step record ("stage 1/2 step 3/10 loss ..."): stdout unless quiet or unless an
                          updating progress line on the same terminal stands for it */
    LCX_REPORT_WARN    /* something the user should act on: stderr, "warning: " prefix, never silenced */
} lcx_report_level;

/* A progress state. The terminal reporter shows it as one updating line on a terminal (nothing otherwise). */
typedef struct lcx_progress {
    const char *what;   /* "stage 1/2 step", "tensors", "documents" */
    int64_t done, total; /* total <= 0: unknown */
    double rate;        /* units per second (<= 0: unknown) */
    const char *unit;   /* of rate: "tok/s", "MB/s" */
    double eta_s;       /* seconds left (< 0: unknown) */
    const char *detail; /* extra text ("loss 4.1234  lr 3e-4"), or NULL */
} lcx_progress;

/* A table: title, column headers and row-major cells (all text, the library formats the numbers). widths[c] is
 * the column's width (right-aligned) for a fixed-width rendering, 0 for "as wide as the widest cell". */
typedef struct lcx_table {
    const char *title; /* NULL: none */
    int n_cols, n_rows;
    const char *const *header; /* n_cols */
    const char *const *cells;  /* n_rows * n_cols */
    const int *widths;         /* n_cols, or NULL */
} lcx_table;

typedef struct lcx_reporter {
    void (*line)(void *user, lcx_report_level level, const char *text); /* text has no trailing newline */
    void (*progress)(void *user, const lcx_progress *p);                /* p == NULL: the progress is over */
    void (*event)(void *user, const char *name, const char *json);      /* json: one object, no newline */
    void (*table)(void *user, const lcx_table *t);
    void *user;
} lcx_reporter;

/* Calls that tolerate a NULL reporter and NULL callbacks. A line longer than 4 KiB is cut. */
void lcx_report(const lcx_reporter *r, lcx_report_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lcx_report_progress(const lcx_reporter *r, const lcx_progress *p);
void lcx_report_progress_end(const lcx_reporter *r);
void lcx_report_event(const lcx_reporter *r, const char *name, const char *json_fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lcx_report_table(const lcx_reporter *r, const lcx_table *t);

/* ---- warnings from helpers that are passed no reporter ------------------------------------------------------
 * A few helpers under every command (outpath's sweep of stale temporaries) have something to tell the user but no
 * reporter handed down to them. They warn through the process's warning reporter: the tool installs one at start
 * and each command's own reporter replaces it (tools/cli.c lcx_cli_reporter). None installed: dropped. Install it
 * before any thread that may warn starts; the reporter is copied, its user data must outlive its use. */
void lcx_report_set_warnings(const lcx_reporter *r);
void lcx_report_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "m:ss", "h:mm:ss", or "--:--" when unknown (< 0, NaN) or absurd (> 10^7 s): the format every ETA uses. */
char *lcx_report_format_eta(double seconds, char *buf, size_t cap);

/* ---- the terminal reporter (the library's only writer to stdout/stderr) ---------------------------------- */
typedef struct lcx_terminal {
    int quiet;    /* 1: no NOTE lines (results and warnings still print) */
    int progress; /* 1: progress lines on stderr (set it when stderr is a terminal) */
    int steps;    /* 1: print STEP lines (set it unless the progress line shares a terminal with stdout) */
    int rank;     /* this process's rank; only rank 0 prints results, notes and progress */
    int progress_shown; /* internal: an updating line is on screen */
} lcx_terminal;

/* A reporter printing through term (which must outlive it). */
lcx_reporter lcx_terminal_reporter(lcx_terminal *term);

/* Write a table the way the terminal reporter does (to any stream: summaries in files use it too). */
void lcx_report_table_write(FILE *f, const lcx_table *t);

/* "lcextend: internal error: assertion 'EXPR' failed at FILE:LINE" on stderr (LCX_ASSERT, before abort). */
void lcx_report_internal_error(const char *expr, const char *file, int line);

/* This process's rank in the job from the launcher's environment (Open MPI, PMIx, PMI, Slurm), 0 without one. */
int lcx_launch_rank(void);

#endif
