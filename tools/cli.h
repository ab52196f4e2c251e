/* Shared helpers of the command-line tools: the one place that turns a status into a message and exit code. */
#ifndef LCX_TOOLS_CLI_H
#define LCX_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "src/core/report.h"
#include "src/core/status.h"
#include "src/core/tensor.h"

enum { LCX_EXIT_OK = 0, LCX_EXIT_FAIL = 1, LCX_EXIT_USAGE = 2 };

/* Print "lcextend <cmd>: <status name>: <detail>" on one line to stderr; return LCX_EXIT_FAIL. */
int lcx_cli_report(const char *cmd, lcx_status st);

/* Print "lcextend <cmd>: <message>" plus a hint to run --help; return LCX_EXIT_USAGE. */
int lcx_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse a flag. Accepts "--name value" and "--name=value". On match stores the value (NULL if missing -> usage
 * error already printed and *err set) and advances *i. Returns 1 if argv[*i] is this flag. */
int lcx_cli_flag_value(int argc, char **argv, int *i, const char *name, const char **value, const char *cmd,
                       int *err);

/* Read a text file of whitespace-separated token ids (integers in [0, 2^31)). *ids is malloc'd. Errors name
 * the file and the token index ("ids.txt: token 3: 'abc' is not a non-negative integer"). */
lcx_status lcx_cli_read_ids(const char *path, int32_t **ids, int64_t *n);

/* Parse an integer flag value in [lo, hi]; on failure prints a usage error naming the flag and returns 0. */
int lcx_cli_int(const char *cmd, const char *flag, const char *value, long lo, long hi, int *out);

/* Progress bar on stderr when it is a terminal (tensors done, MB/s, ETA); silent otherwise or when quiet.
 * Use lcx_cli_progress as an lcx_progress_fn with a lcx_cli_bar as user data; lcx_cli_bar_end finishes the
 * line. */
typedef struct lcx_cli_bar {
    int enabled;
    double start;
    const char *what; /* "tensors", "shards" */
} lcx_cli_bar;
void lcx_cli_bar_init(lcx_cli_bar *b, int quiet, const char *what);
void lcx_cli_progress(void *user, uint64_t done, uint64_t total, uint64_t bytes_done, uint64_t bytes_total);
void lcx_cli_bar_end(lcx_cli_bar *b);

/* Monotonic clock in seconds (progress rates, ETAs). */
double lcx_cli_now_s(void);

/* Strict number parsing for flag values: the whole string, inside [lo, hi] (no message; the caller names the
 * flag). Return 1 on success. */
int lcx_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int lcx_cli_parse_real(const char *s, double lo, double hi, double *out);

/* Flag-loop branches. Inside `for (int i = 1; i < argc; i++)` of a command that has `static const char *CMD` and
 * locals `const char *v` and `int err`, each expands to an `else if` that matches flag NAME ("--name value" or
 * "--name=value"), returns LCX_EXIT_USAGE (message printed) on a missing or bad value and else stores it in VAR:
 * STR the text, INT an integer in [LO, HI] (int64_t VAR), REAL a number in [LO, HI] (double VAR). Chain them
 * after an `if`. */
#define LCX_CLI_STR_FLAG(name, var)                                                                              \
    else if (lcx_cli_flag_value(argc, argv, &i, name, &v, CMD, &err)) {                                          \
        if (err) return LCX_EXIT_USAGE;                                                                          \
        var = v;                                                                                                 \
    }
#define LCX_CLI_INT_FLAG(name, var, lo, hi)                                                                      \
    else if (lcx_cli_flag_value(argc, argv, &i, name, &v, CMD, &err)) {                                          \
        if (err) return LCX_EXIT_USAGE;                                                                          \
        if (!lcx_cli_parse_i64(v, lo, hi, &var))                                                                 \
            return lcx_cli_usage_error(CMD, "%s '%s' is not an integer in [%lld, %lld]", name, v, (long long)(lo), \
                                       (long long)(hi));                                                         \
    }
#define LCX_CLI_REAL_FLAG(name, var, lo, hi)                                                                     \
    else if (lcx_cli_flag_value(argc, argv, &i, name, &v, CMD, &err)) {                                          \
        if (err) return LCX_EXIT_USAGE;                                                                          \
        if (!lcx_cli_parse_real(v, lo, hi, &var))                                                                \
            return lcx_cli_usage_error(CMD, "%s '%s' is not a number in [%g, %g]", name, v, (double)(lo),        \
                                       (double)(hi));                                                            \
    }

/* The last branch of a flag loop, for an argument no flag matched: a flag ("-x", not a lone "-") is unknown, a
 * second operand is one too many ("unexpected argument 'x' (one WHAT only)"); both print a usage error and
 * return LCX_EXIT_USAGE. Otherwise stores arg in *operand and returns 0. */
int lcx_cli_operand(const char *cmd, const char *arg, const char *what, const char **operand);

/* --dtype VALUE: "f32" or "bf16" into *out; else prints "--dtype 'x' (expected f32 or bf16)" and returns 0. */
int lcx_cli_dtype(const char *cmd, const char *value, lcx_dtype *out);
/* --activations bf16|f32 (activation storage dtype, docs/model.md "bf16 activations"): 1 and *out set, or 0
 * after a one-line usage error naming the flag. */
int lcx_cli_act_dtype(const char *cmd, const char *value, lcx_dtype *out);

/* The terminal reporter for a command: progress on stderr when it is a terminal and not quiet, per-step lines
 * unless the progress line shares that terminal with stdout, only rank 0 printing under a launcher. term must
 * outlive the reporter. */
lcx_reporter lcx_cli_reporter(lcx_terminal *term, int quiet);

/* fflush(stdout); LCX_ERR_IO "writing to stdout failed" when that fails (a full disk or closed pipe). */
lcx_status lcx_cli_flush_stdout(void);

#endif
