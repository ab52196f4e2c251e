/* Shared helpers of the command-line tools: the one place that turns a status into a message and exit code. */
#ifndef LCX_TOOLS_CLI_H
#define LCX_TOOLS_CLI_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "src/comm/run_ranks.h"
#include "src/core/report.h"
#include "src/core/status.h"
#include "src/core/tensor.h"
#include "src/core/units.h"

enum { LCX_EXIT_OK = 0, LCX_EXIT_FAIL = 1, LCX_EXIT_USAGE = 2 };

/* Print "lcextend <cmd>: <status name>: <detail>" on one line to stderr; return LCX_EXIT_FAIL. */
int lcx_cli_report(const char *cmd, lcx_status st);

/* Print "lcextend <cmd>: <message>" plus a hint to run --help; return LCX_EXIT_USAGE. */
int lcx_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- flags: one declarative table per command -------------------------------------------------------------
 *
 *     const lcx_cli_flag flags[] = {
 *         LCX_FLAG_STR("--ids", ids_path),
 *         LCX_FLAG_INT("--chunk", chunk, 1, INT32_MAX),
 *         LCX_FLAG_CHOICE("--dtype", dtype, lcx_cli_weight_dtypes),
 *         LCX_FLAG_SWITCH("--quiet", quiet),
 *     };
 *     const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &ckpt, "one CKPT only"};
 *     int stop = lcx_cli_parse(&spec, argc, argv);
 *     if (stop != LCX_CLI_RUN) return stop;
 *
 * lcx_cli_parse reads argv[1..] in order: "--name value" and "--name=value"; --help / -h (help printed, exit
 * 0); "--" (everything after it is an operand); operands (arguments not starting with '-', and a lone "-").
 * A later occurrence of a flag replaces the earlier value, except STRS flags, which collect them. Each
 * problem is one usage error line naming the flag and the value, exit 2: "flag --x needs a value", "unknown
 * flag '--x'", "unexpected argument 'x' (one CKPT only)", "--chunk '0' is not an integer in [1, 2147483647]",
 * "--dtype 'f16' (expected f32 or bf16)". Numbers go through the strict parsers of src/core/units.h. Checks that
 * involve several flags (one of A or B, required flags) stay with the command, after the parse. */

typedef enum lcx_cli_kind {
    LCX_CLI_SWITCH,  /* no value: sets an int to 1 */
    LCX_CLI_STR,     /* the text as given */
    LCX_CLI_INT,     /* an integer in [lo, hi] into an int, int64_t (or an enum) */
    LCX_CLI_REAL,    /* a finite real in [real_lo, real_hi] into a double */
    LCX_CLI_LENGTH,  /* a length ("32768", "32k", "1m") in [lo, hi] into an int64_t */
    LCX_CLI_SIZE,    /* a positive byte size ("512MiB", "80GB") into a uint64_t */
    LCX_CLI_CHOICE,  /* one of `words`: its value into an int or enum, and/or the word itself via `text` */
    LCX_CLI_STRS,    /* repeatable: each occurrence appends its text to an array */
    LCX_CLI_REALS,   /* "0,0.5,1": reals in [real_lo, real_hi] into an array */
    LCX_CLI_LENGTHS, /* "256,512,1k": lengths in [lo, hi] into an array */
} lcx_cli_kind;

/* A word of a CHOICE flag and what it stands for; a NULL word ends the list. */
typedef struct lcx_cli_word {
    const char *word;
    int value;
} lcx_cli_word;

extern const lcx_cli_word lcx_cli_weight_dtypes[]; /* --dtype: f32, bf16 */
extern const lcx_cli_word lcx_cli_act_dtypes[];    /* --activations: bf16, f32 */
extern const lcx_cli_word lcx_cli_act_policies[];  /* --policy: keep, recompute, offload, recompute+offload */
extern const lcx_cli_word lcx_cli_act_policies_auto[]; /* the same and auto (the planner's per-layer split) */

/* One flag. Fill it with the LCX_FLAG_* macros below (they check the destination's type), or with designated
 * initializers for the optional fields. */
typedef struct lcx_cli_flag {
    const char *name; /* "--seq"; "-q" works too */
    lcx_cli_kind kind;
    union {                   /* where the value goes */
        int *on;              /* SWITCH */
        const char **str;     /* STR */
        void *integer;        /* INT, CHOICE: an int, int64_t or enum of `size` bytes; may be NULL for CHOICE */
        double *real;         /* REAL */
        int64_t *length;      /* LENGTH */
        uint64_t *bytes;      /* SIZE */
        const char **strs;    /* STRS: array of cap */
        double *reals;        /* REALS: array of cap */
        int64_t *lengths;     /* LENGTHS: array of cap */
    } to;
    size_t size;              /* INT, CHOICE: sizeof the integer destination (4 or 8) */
    int64_t lo, hi;           /* INT, LENGTH, LENGTHS: inclusive range */
    double real_lo, real_hi;  /* REAL, REALS: inclusive range */
    lcx_byte_units units;     /* SIZE: what a bare K/M/G/T means */
    const lcx_cli_word *words; /* CHOICE */
    int *count;               /* STRS, REALS, LENGTHS: values stored */
    int cap;                  /* STRS, REALS, LENGTHS: capacity of the array */
    int greedy;               /* STRS: also takes the following arguments up to the next one starting with "--" */
    const char **text;        /* optional: also the value as given (a name built from it, "was it given") */
    const char *rule;         /* optional: the bad-value message becomes "<name> <rule>, not '<value>'" */
} lcx_cli_flag;

#define LCX_CLI_COUNT(array) (sizeof(array) / sizeof((array)[0]))
/* An integer destination: int or int64_t, anything else does not compile. */
#define LCX_CLI_INTEGER_REF(var) _Generic((var), int: &(var), int64_t: &(var))

#define LCX_FLAG_SWITCH(flag, var) {.name = (flag), .kind = LCX_CLI_SWITCH, .to.on = &(var)}
#define LCX_FLAG_STR(flag, var) {.name = (flag), .kind = LCX_CLI_STR, .to.str = &(var)}
#define LCX_FLAG_INT(flag, var, min, max)                                                                        \
    {.name = (flag), .kind = LCX_CLI_INT, .to.integer = LCX_CLI_INTEGER_REF(var), .size = sizeof(var),           \
     .lo = (min), .hi = (max)}
#define LCX_FLAG_REAL(flag, var, min, max)                                                                       \
    {.name = (flag), .kind = LCX_CLI_REAL, .to.real = &(var), .real_lo = (min), .real_hi = (max)}
/* A real > 0 ("is not a positive number"). */
#define LCX_FLAG_POSITIVE(flag, var) LCX_FLAG_REAL(flag, var, DBL_TRUE_MIN, DBL_MAX)
#define LCX_FLAG_LENGTH(flag, var, min, max)                                                                     \
    {.name = (flag), .kind = LCX_CLI_LENGTH, .to.length = &(var), .lo = (min), .hi = (max)}
#define LCX_FLAG_SIZE(flag, var, byte_units)                                                                     \
    {.name = (flag), .kind = LCX_CLI_SIZE, .to.bytes = &(var), .units = (byte_units)}
/* CHOICE into an int or enum variable: the chosen word's value. */
#define LCX_FLAG_CHOICE(flag, var, word_list)                                                                    \
    {.name = (flag), .kind = LCX_CLI_CHOICE, .to.integer = &(var), .size = sizeof(var), .words = (word_list)}
/* CHOICE into a string variable: the chosen word itself. */
#define LCX_FLAG_WORD(flag, var, word_list)                                                                      \
    {.name = (flag), .kind = LCX_CLI_CHOICE, .text = &(var), .words = (word_list)}
#define LCX_FLAG_STRS(flag, array, n, capacity)                                                                  \
    {.name = (flag), .kind = LCX_CLI_STRS, .to.strs = (array), .count = &(n), .cap = (capacity)}
#define LCX_FLAG_REALS(flag, array, n, capacity, min, max)                                                       \
    {.name = (flag), .kind = LCX_CLI_REALS, .to.reals = (array), .count = &(n), .cap = (capacity),               \
     .real_lo = (min), .real_hi = (max)}
#define LCX_FLAG_LENGTHS(flag, array, n, capacity, min, max)                                                     \
    {.name = (flag), .kind = LCX_CLI_LENGTHS, .to.lengths = (array), .count = &(n), .cap = (capacity),           \
     .lo = (min), .hi = (max)}

/* A command's arguments: its flags and at most one operand. */
typedef struct lcx_cli_spec {
    const char *cmd;            /* "score": messages read "lcextend score: ..." */
    void (*help)(void);         /* prints the help on stdout */
    const lcx_cli_flag *flags;
    size_t n_flags;
    const char **operand;       /* the one positional argument (CKPT, PATH); NULL when the command takes none */
    const char *one_only;       /* a second operand's message, e.g. "one CKPT only" */
} lcx_cli_spec;

/* lcx_cli_parse's "go on": the arguments are parsed and stored. */
#define LCX_CLI_RUN (-1)

/* Parse argv[1..argc) by spec. Returns LCX_CLI_RUN, or the exit code to return at once: LCX_EXIT_OK after the
 * help, LCX_EXIT_USAGE after a usage error (printed). */
int lcx_cli_parse(const lcx_cli_spec *spec, int argc, char **argv);

/* 1 when argv[1..argc) holds flag NAME ("--to" or "--to=..."): for choosing a command before parsing. */
int lcx_cli_flag_given(int argc, char **argv, const char *name);

/* Read a text file of whitespace-separated token ids (integers in [0, 2^31)). *ids is malloc'd. Errors name
 * the file and the token index ("ids.txt: token 3: 'abc' is not a non-negative integer"). */
lcx_status lcx_cli_read_ids(const char *path, int32_t **ids, int64_t *n);

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

/* The terminal reporter for a command: progress on stderr when it is a terminal and not quiet, per-step lines
 * unless the progress line shares that terminal with stdout, only rank 0 printing under a launcher. It becomes the
 * process's warning reporter too (src/core/report.h lcx_report_set_warnings). term must outlive the reporter. */
lcx_reporter lcx_cli_reporter(lcx_terminal *term, int quiet);

/* fflush(stdout); LCX_ERR_IO "writing to stdout failed" when that fails (a full disk or closed pipe). */
lcx_status lcx_cli_flush_stdout(void);

/* ---- --backend: where a command's model runs (kernels/backend.h) --------------------------------------------
 * The flag is a STR flag holding the name (default "cpu"); after the parse, before any output or file is written,
 *     const lcx_backend *be = NULL;
 *     if ((stop = lcx_cli_backend(CMD, backend, &be)) != LCX_CLI_RUN) return stop;
 * resolves it through the registry (lcx_backend_get) and checks that it can run here (->available()). Each
 * problem is one line naming the flag, exit 1: "--backend: unknown backend 'tpu' (available: cpu, cuda)",
 * "--backend cuda: no CUDA device is visible". Under a launcher rank 0 alone says it, as for usage errors (every
 * rank parses the same flags, and the ranks of a node see the same devices). */
typedef struct lcx_backend lcx_backend;
int lcx_cli_backend(const char *cmd, const char *name, const lcx_backend **out);

/* ---- a data mix: --data repeated (a STRS flag) with --data-weights (a REALS flag of positive numbers) ----------
 * After the parse: two or more --data need as many weights, one --data none (one line naming the flag, exit 2,
 * as any usage error). n_data 0 (no --data) passes: the command checks its own alternative. */
int lcx_cli_data_mix(const char *cmd, int n_data, int n_weights);

/* ---- --distribute-saved-activations / --no-distribute-saved-activations of the planning commands ------------
 * on, off: the two switches; tp: --tp as given (0: not given), gpus: --gpus (0: no search). Sets *distribute
 * (lcx_plan_opts.distribute_saved) to 1 or 0 when one was given, else leaves the planner's choice (-1). Both, or
 * distribution where there is one TP rank (--tp 1, --gpus 1, or neither --tp 2+ nor --gpus): one line, exit 2. */
int lcx_cli_distribute_saved(const char *cmd, int on, int off, int64_t tp, int64_t gpus, int *distribute);
/* ---- --sequence-parallel / --no-sequence-parallel of the planning commands -------------------------------------
 * The same for lcx_plan_opts.sequence_parallel; also refused with --distribute-saved-activations (distributed:
 * that switch was given), which sequence parallelism covers. */
int lcx_cli_sequence_parallel(const char *cmd, int on, int off, int64_t tp, int64_t gpus, int distributed, int *sp);
/* ---- --zero1 / --no-zero1 of the planning commands ------------------------------------------------------------
 * Sets *zero1 (lcx_plan_opts.zero1) to 1 or 0 when one was given, else leaves the planner's choice (-1). Both, or
 * --zero1 where the gradient group has one rank (grad_ranks: CP x DP when known, 0 when the world decides): one
 * line, exit 2. */
int lcx_cli_zero1(const char *cmd, int on, int off, int64_t grad_ranks, int *zero1);
/* ---- --reserve SIZE / --no-reserve of the planning commands ---------------------------------------------------
 * Sets *reserve (lcx_plan_opts.reserve) to SIZE (bytes, non-zero when given) or 0 (--no-reserve), else leaves
 * the planner's choice (-1). Both, either without a budget (budget: bytes per device, 0 = none), or a reserve of
 * the whole budget: one line, exit 2. */
int lcx_cli_reserve(const char *cmd, uint64_t size, int off, double budget, double *reserve);

/* ---- the mesh of a training command (docs/parallel.md "Data parallelism") ----------------------------------
 * lcx_cli_mesh_open: the world from the launcher (lcx_comm_world_init, once), the TP x CP x DP mesh (dp 0: the
 * world / (tp * cp)) and its groups, checked before any work (both training commands run TP, CP and DP; the
 * model's heads against TP are the pipeline's check). be is the model's backend (lcx_cli_backend; NULL: the
 * CPU): for any other backend, a world of more than one rank becomes a device communicator first
 * (lcx_comm_for_backend, src/comm/comm_device.h: NCCL with one rank per GPU, else MPI staged through pinned host
 * memory; it also picks each rank's GPU), so the groups move device buffers. Each problem is one line printed by
 * rank 0 only. Returns LCX_CLI_RUN, or the exit code.
 * lcx_cli_mesh_close: every rank learns the run's outcome (an all-reduce over the world); the lowest failing
 * rank prints its error line; the groups and the world are freed (MPI finalised). Returns the exit code. */
typedef struct lcx_cli_mesh {
    lcx_comm *world;
    lcx_comm *group[4];       /* the lcx_comm_groups communicators (TP, CP, DP, GRAD) */
    int dp_rank, dp_size;
    int cp_rank, cp_size;
    int tp_rank, tp_size;
} lcx_cli_mesh;
int lcx_cli_mesh_open(const char *cmd, int tp, int cp, int dp, const lcx_backend *be, lcx_cli_mesh *out);
int lcx_cli_mesh_close(const char *cmd, lcx_cli_mesh *mm, lcx_status st);
/* An open mesh as a training run's ranks (src/comm/run_ranks.h): a group of one rank is NULL. */
lcx_run_ranks lcx_cli_mesh_ranks(const lcx_cli_mesh *mm, int zero1);

#endif
