#include "cli.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

#include "kernels/backend.h"
#include "src/comm/comm.h"
#include "src/comm/comm_device.h"
#include "src/core/fileio.h"
#include "src/pipeline/run_common.h"
#include "src/model/act_policy.h"

int lcx_cli_report(const char *cmd, lcx_status st) {
    fprintf(stderr, "lcextend %s: %s: %s\n", cmd, lcx_status_name(st), lcx_last_error());
    return LCX_EXIT_FAIL;
}

int lcx_cli_usage_error(const char *cmd, const char *fmt, ...) {
    if (lcx_launch_rank() != 0) return LCX_EXIT_USAGE; /* every rank parses the same flags: rank 0 says it */
    va_list ap;
    fprintf(stderr, "lcextend %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'lcextend %s --help')\n", cmd);
    return LCX_EXIT_USAGE;
}

lcx_status lcx_cli_read_ids(const char *path, int32_t **ids, int64_t *n) { return lcx_tool_read_ids(path, ids, n); }

double lcx_cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

lcx_status lcx_cli_flush_stdout(void) {
    LCX_FAIL_IF(fflush(stdout) != 0, LCX_ERR_IO, "writing to stdout failed");
    return LCX_OK;
}

lcx_reporter lcx_cli_reporter(lcx_terminal *term, int quiet) {
    int progress = isatty(2) && !quiet;
    *term = (lcx_terminal){.quiet = quiet, .progress = progress, .steps = !(progress && isatty(1)),
                           .rank = lcx_launch_rank()};
    lcx_reporter rep = lcx_terminal_reporter(term);
    lcx_report_set_warnings(&rep); /* helpers with no reporter of their own warn through the command's */
    return rep;
}

/* ---- flags ------------------------------------------------------------------------------------------------- */

const lcx_cli_word lcx_cli_weight_dtypes[] = {{"f32", LCX_F32}, {"bf16", LCX_BF16}, {NULL, 0}};
const lcx_cli_word lcx_cli_act_dtypes[] = {{"bf16", LCX_BF16}, {"f32", LCX_F32}, {NULL, 0}};
const lcx_cli_word lcx_cli_act_policies[] = {
    {"keep", LCX_ACT_KEEP}, {"recompute", LCX_ACT_RECOMPUTE}, {"offload", LCX_ACT_OFFLOAD},
    {"recompute+offload", LCX_ACT_RECOMPUTE_OFFLOAD}, {"recompute_offload", LCX_ACT_RECOMPUTE_OFFLOAD}, {NULL, 0}};
const lcx_cli_word lcx_cli_act_policies_auto[] = {
    {"keep", LCX_ACT_KEEP},         {"recompute", LCX_ACT_RECOMPUTE},
    {"offload", LCX_ACT_OFFLOAD},   {"recompute+offload", LCX_ACT_RECOMPUTE_OFFLOAD},
    {"recompute_offload", LCX_ACT_RECOMPUTE_OFFLOAD}, {"auto", LCX_ACT_AUTO}, {NULL, 0}};

/* Integer destinations are int, int64_t or an enum (int-sized); the table recorded which size. */
static void store_integer(void *dest, size_t size, int64_t v) {
    if (size == sizeof(int64_t)) {
        memcpy(dest, &v, sizeof v);
        return;
    }
    LCX_ASSERT(size == sizeof(int32_t) && v >= INT32_MIN && v <= INT32_MAX);
    int32_t narrow = (int32_t)v;
    memcpy(dest, &narrow, sizeof narrow);
}

static const lcx_cli_word *find_word(const lcx_cli_word *words, const char *value) {
    for (const lcx_cli_word *w = words; w->word; w++)
        if (strcmp(w->word, value) == 0) return w;
    return NULL;
}

/* What a bad value is not, after "<flag> '<value>' ": "is not an integer in [1, 8]", "(expected f32 or bf16)".
 * For lists, what one item is not. */
static const char *describe(const lcx_cli_flag *f, char *buf, size_t cap) {
    char lo[32], hi[32];
    switch (f->kind) {
    case LCX_CLI_INT:
        snprintf(buf, cap, "is not an integer in [%lld, %lld]", (long long)f->lo, (long long)f->hi);
        break;
    case LCX_CLI_REAL:
    case LCX_CLI_REALS:
        if (f->real_lo == -DBL_MAX && f->real_hi == DBL_MAX) snprintf(buf, cap, "is not a number");
        else if (f->real_lo == DBL_TRUE_MIN && f->real_hi == DBL_MAX) snprintf(buf, cap, "is not a positive number");
        else snprintf(buf, cap, "is not a number in [%g, %g]", f->real_lo, f->real_hi);
        break;
    case LCX_CLI_LENGTH:
    case LCX_CLI_LENGTHS:
        snprintf(buf, cap, "is not a length in [%s, %s] (digits with an optional k or m suffix, e.g. 32768, 32k, 1m)",
                 lcx_format_length(f->lo, lo, sizeof lo), lcx_format_length(f->hi, hi, sizeof hi));
        break;
    case LCX_CLI_SIZE:
        snprintf(buf, cap, "is not a positive size (e.g. %s)",
                 f->units == LCX_BYTES_BINARY ? "80G, 24GiB, 512M; K, M, G, T are binary" : "4GB, 512MiB, 1.5G");
        break;
    case LCX_CLI_CHOICE: {
        size_t n = (size_t)snprintf(buf, cap, "(expected ");
        for (const lcx_cli_word *w = f->words; w->word && n < cap; w++)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", w->word, !w[1].word ? ")" : !w[2].word ? " or " : ", ");
        break;
    }
    default:
        snprintf(buf, cap, "is not valid");
        break;
    }
    return buf;
}

static int bad_value(const char *cmd, const lcx_cli_flag *f, const char *value) {
    char what[256];
    if (f->rule) return lcx_cli_usage_error(cmd, "%s %s, not '%s'", f->name, f->rule, value);
    return lcx_cli_usage_error(cmd, "%s '%s' %s", f->name, value, describe(f, what, sizeof what));
}

/* "a,b,c" into the flag's array (REALS, LENGTHS); replaces what an earlier occurrence stored. */
static int take_list(const char *cmd, const lcx_cli_flag *f, const char *value) {
    int n = 0;
    for (const char *item = value;; n++) {
        size_t len = strcspn(item, ",");
        if (n == f->cap) return lcx_cli_usage_error(cmd, "%s '%s': more than %d values", f->name, value, f->cap), 0;
        char text[64];
        int ok = len < sizeof text;
        if (ok) {
            memcpy(text, item, len);
            text[len] = '\0';
            ok = f->kind == LCX_CLI_REALS ? lcx_parse_real(text, f->real_lo, f->real_hi, &f->to.reals[n]) == LCX_OK
                                          : lcx_parse_length_in(text, f->lo, f->hi, &f->to.lengths[n]) == LCX_OK;
        }
        if (!ok) {
            char what[256];
            return lcx_cli_usage_error(cmd, "%s '%s': '%.*s' %s", f->name, value, (int)len, item,
                                       describe(f, what, sizeof what)), 0;
        }
        if (item[len] == '\0') break;
        item += len + 1;
    }
    *f->count = n + 1;
    return 1;
}

/* One value of flag f: checked, converted and stored. 0 after a usage error. */
static int take_value(const char *cmd, const lcx_cli_flag *f, const char *value) {
    int ok = 1;
    switch (f->kind) {
    case LCX_CLI_STR:
        *f->to.str = value;
        break;
    case LCX_CLI_INT: {
        LCX_ASSERT(f->size == sizeof(int64_t) || (f->lo >= INT32_MIN && f->hi <= INT32_MAX)); /* fits the int */
        int64_t v;
        ok = lcx_parse_int(value, f->lo, f->hi, &v) == LCX_OK;
        if (ok) store_integer(f->to.integer, f->size, v);
        break;
    }
    case LCX_CLI_REAL:
        ok = lcx_parse_real(value, f->real_lo, f->real_hi, f->to.real) == LCX_OK;
        break;
    case LCX_CLI_LENGTH:
        ok = lcx_parse_length_in(value, f->lo, f->hi, f->to.length) == LCX_OK;
        break;
    case LCX_CLI_SIZE: {
        uint64_t v;
        ok = lcx_parse_bytes(value, f->units, &v) == LCX_OK && v > 0;
        if (ok) *f->to.bytes = v;
        break;
    }
    case LCX_CLI_CHOICE: {
        const lcx_cli_word *w = find_word(f->words, value);
        ok = w != NULL;
        if (ok && f->to.integer) store_integer(f->to.integer, f->size, w->value);
        break;
    }
    case LCX_CLI_STRS:
        if (*f->count == f->cap)
            return lcx_cli_usage_error(cmd, "%s '%s': more than %d values", f->name, value, f->cap), 0;
        f->to.strs[(*f->count)++] = value;
        break;
    case LCX_CLI_REALS:
    case LCX_CLI_LENGTHS:
        ok = take_list(cmd, f, value);
        if (!ok) return 0;
        break;
    case LCX_CLI_SWITCH:
        LCX_ASSERT(!"a switch takes no value");
    }
    if (!ok) return bad_value(cmd, f, value), 0;
    if (f->text) *f->text = value;
    return 1;
}

/* The value after "--name=" in arg, "" (matched, no '=') or NULL (not this flag). */
static const char *match_flag(const char *arg, const char *name) {
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) return NULL;
    return arg[n] == '=' ? arg + n + 1 : arg[n] == '\0' ? arg + n : NULL;
}

static int starts_with_dashes(const char *arg) { return arg[0] == '-' && arg[1] == '-'; }

/* argv[*i] is flag f: take its value(s), advancing *i. 0 after a usage error. */
static int take_flag(const char *cmd, const lcx_cli_flag *f, int argc, char **argv, int *i) {
    const char *arg = argv[*i];
    const char *inline_value = match_flag(arg, f->name);
    int has_inline = arg[strlen(f->name)] == '=';
    if (f->kind == LCX_CLI_SWITCH) {
        if (has_inline) return lcx_cli_usage_error(cmd, "flag %s takes no value, not '%s'", f->name, inline_value), 0;
        *f->to.on = 1;
        return 1;
    }
    const char *value = NULL;
    if (has_inline) value = inline_value;
    else if (*i + 1 < argc && !(f->greedy && starts_with_dashes(argv[*i + 1]))) value = argv[++*i];
    if (!value) return lcx_cli_usage_error(cmd, "flag %s needs a value", f->name), 0;
    if (!take_value(cmd, f, value)) return 0;
    while (f->greedy && *i + 1 < argc && !starts_with_dashes(argv[*i + 1]))
        if (!take_value(cmd, f, argv[++*i])) return 0;
    return 1;
}

static int take_operand(const lcx_cli_spec *s, const char *arg) {
    if (!s->operand) return lcx_cli_usage_error(s->cmd, "unexpected argument '%s'", arg), 0;
    if (*s->operand) return lcx_cli_usage_error(s->cmd, "unexpected argument '%s' (%s)", arg, s->one_only), 0;
    *s->operand = arg;
    return 1;
}

static const lcx_cli_flag *find_flag(const lcx_cli_spec *s, const char *arg) {
    for (size_t k = 0; k < s->n_flags; k++)
        if (match_flag(arg, s->flags[k].name)) return &s->flags[k];
    return NULL;
}

int lcx_cli_parse(const lcx_cli_spec *s, int argc, char **argv) {
    int operands_only = 0; /* after "--" */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (operands_only || arg[0] != '-' || arg[1] == '\0') {
            if (!take_operand(s, arg)) return LCX_EXIT_USAGE;
        } else if (strcmp(arg, "--") == 0) {
            operands_only = 1;
        } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            s->help();
            return LCX_EXIT_OK;
        } else {
            const lcx_cli_flag *f = find_flag(s, arg);
            if (!f) return lcx_cli_usage_error(s->cmd, "unknown flag '%s'", arg);
            if (!take_flag(s->cmd, f, argc, argv, &i)) return LCX_EXIT_USAGE;
        }
    }
    return LCX_CLI_RUN;
}

int lcx_cli_flag_given(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (match_flag(argv[i], name)) return 1;
    return 0;
}

/* ---- --backend ------------------------------------------------------------------------------------------------ */

int lcx_cli_backend(const char *cmd, const char *name, const lcx_backend **out) {
    *out = NULL;
    const lcx_backend *be = lcx_backend_get(name);
    lcx_status st = LCX_OK;
    if (!be) st = lcx_fail_context(LCX_ERR_INVALID, "--backend: "); /* "unknown backend 'x' (available: ...)" */
    else if (!be->available())
        st = strcmp(be->name, "cuda") == 0
                 ? lcx_fail(LCX_ERR_CUDA, "--backend %s: no CUDA device is visible", be->name)
                 : lcx_fail(LCX_ERR_UNSUPPORTED, "--backend %s: the backend cannot run here", be->name);
    if (st != LCX_OK) return lcx_launch_rank() == 0 ? lcx_cli_report(cmd, st) : LCX_EXIT_FAIL;
    *out = be;
    return LCX_CLI_RUN;
}

int lcx_cli_data_mix(const char *cmd, int n_data, int n_weights) {
    if (n_data > 1 && n_weights != n_data)
        return lcx_cli_usage_error(cmd, "--data given %d times: a data mix needs --data-weights with %d weights "
                                   "(got %d)", n_data, n_data, n_weights);
    if (n_data <= 1 && n_weights > 0)
        return lcx_cli_usage_error(cmd, "--data-weights: weights a data mix of two or more --data (got %d)", n_data);
    return LCX_CLI_RUN;
}

/* A switch that splits rows over the TP ranks, --FLAG / --no-FLAG: refused where there is one TP rank, or both
 * given; *out = on when one was given. */
static int tp_rows_switch(const char *cmd, const char *flag, int on, int off, int64_t tp, int64_t gpus, int *out) {
    if (on && (tp == 1 || gpus == 1 || (!gpus && tp == 0)))
        return lcx_cli_usage_error(cmd, "flag --%s: the rows are split over TP ranks, and %s", flag,
                                   tp == 1     ? "--tp 1 has one"
                                   : gpus == 1 ? "--gpus 1 has one"
                                               : "there is one without --tp 2 or more (or --gpus N)");
    if (on && off) return lcx_cli_usage_error(cmd, "flags --%s and --no-%s: give one", flag, flag);
    if (on || off) *out = on;
    return LCX_CLI_RUN;
}

int lcx_cli_distribute_saved(const char *cmd, int on, int off, int64_t tp, int64_t gpus, int *distribute) {
    return tp_rows_switch(cmd, "distribute-saved-activations", on, off, tp, gpus, distribute);
}

int lcx_cli_sequence_parallel(const char *cmd, int on, int off, int64_t tp, int64_t gpus, int distributed, int *sp) {
    int v = *sp, stop = tp_rows_switch(cmd, "sequence-parallel", on, off, tp, gpus, &v);
    if (stop != LCX_CLI_RUN) return stop;
    if (on && distributed)
        return lcx_cli_usage_error(cmd, "flags --sequence-parallel and --distribute-saved-activations: sequence "
                                        "parallelism already keeps only each TP rank's rows of every layer's input");
    *sp = v;
    return LCX_CLI_RUN;
}

int lcx_cli_zero1(const char *cmd, int on, int off, int64_t grad_ranks, int *zero1) {
    if (on && off) return lcx_cli_usage_error(cmd, "flags --zero1 and --no-zero1: give one");
    if (on && grad_ranks == 1)
        return lcx_cli_usage_error(cmd, "flag --zero1: the AdamW moments are sharded over the CP x DP ranks, and "
                                        "this layout has one (give --cp or --dp 2 or more, or --gpus N)");
    if (on || off) *zero1 = on;
    return LCX_CLI_RUN;
}

int lcx_cli_reserve(const char *cmd, uint64_t size, int off, double budget, double *reserve) {
    if (size && off) return lcx_cli_usage_error(cmd, "flags --reserve and --no-reserve: give one");
    if ((size || off) && !(budget > 0))
        return lcx_cli_usage_error(cmd, "flag %s: the reserve is kept out of a memory budget, and none was given "
                                        "(--gpus N --gpu-memory SIZE, or --memory SIZE)",
                                   size ? "--reserve" : "--no-reserve");
    if (size && (double)size >= budget)
        return lcx_cli_usage_error(cmd, "flag --reserve: %.2f GiB leaves nothing of the %.2f GiB budget per device",
                                   (double)size / 1073741824.0, budget / 1073741824.0);
    if (size || off) *reserve = off ? 0 : (double)size;
    return LCX_CLI_RUN;
}

/* ---- the mesh of a training command ------------------------------------------------------------------------ */

static void mesh_free(lcx_cli_mesh *mm) {
    lcx_comm_groups g;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < LCX_GROUP_COUNT; i++) g.group[i] = mm->group[i];
    lcx_comm_groups_free(&g);
    memset(mm->group, 0, sizeof mm->group);
}

int lcx_cli_mesh_open(const char *cmd, int tp, int cp, int dp, const lcx_backend *be, lcx_cli_mesh *out) {
    memset(out, 0, sizeof *out);
    lcx_status st = lcx_comm_world_init(&out->world);
    if (st != LCX_OK) return lcx_cli_report(cmd, st);
    const int rank0 = out->world->rank == 0, world = out->world->size;
    if (dp == 0) {
        if (world % (tp * cp) != 0) {
            if (rank0) fprintf(stderr, "lcextend %s: --tp %d x --cp %d does not divide the world of %d ranks\n",
                               cmd, tp, cp, world);
            goto fail;
        }
        dp = world / (tp * cp);
    }
    if (world > 1 && be && be != lcx_backend_cpu()) {
        /* the model's buffers live on the device: a communicator that moves them (collective, agreed by every rank:
         * the same line everywhere), before any exec of the backend exists, since it picks this rank's GPU */
        lcx_comm *dev = NULL;
        st = lcx_comm_for_backend(out->world, be, &dev);
        if (st != LCX_OK) {
            lcx_fail_context(st, "--backend %s: ", be->name);
            if (rank0) lcx_cli_report(cmd, st);
            goto fail;
        }
        out->world = dev; /* owns the world now (finalised with it) */
    }
    lcx_mesh mesh;
    lcx_comm_groups g;
    if ((st = lcx_mesh_init(&mesh, tp, cp, dp)) == LCX_OK) st = lcx_comm_mesh(out->world, &mesh, &g);
    if (st != LCX_OK) { /* the same message on every rank */
        if (rank0) fprintf(stderr, "lcextend %s: %s (launch with mpirun -np %lld, or change --tp/--cp/--dp)\n", cmd,
                           lcx_last_error(), (long long)tp * cp * dp);
        goto fail;
    }
    for (int i = 0; i < LCX_GROUP_COUNT && i < 4; i++) out->group[i] = g.group[i];
    out->dp_rank = g.coord.d;
    out->dp_size = dp;
    out->cp_rank = g.coord.c;
    out->cp_size = cp;
    out->tp_rank = g.coord.t;
    out->tp_size = tp;
    return LCX_CLI_RUN;
fail:
    mesh_free(out);
    lcx_comm_finalize(out->world);
    out->world = NULL;
    return LCX_EXIT_FAIL;
}

lcx_run_ranks lcx_cli_mesh_ranks(const lcx_cli_mesh *mm, int zero1) {
    const int many = mm->world && mm->world->size > 1;
    return (lcx_run_ranks){
        .world = many ? mm->world : NULL,
        .grad = many ? mm->group[LCX_GROUP_GRAD] : NULL,
        .cp_comm = mm->world && mm->cp_size > 1 ? mm->group[LCX_GROUP_CP] : NULL,
        .tp_comm = mm->world && mm->tp_size > 1 ? mm->group[LCX_GROUP_TP] : NULL,
        .dp_rank = mm->dp_rank, .dp_size = mm->dp_size,
        .cp_rank = mm->cp_rank, .cp_size = mm->cp_size,
        .tp_rank = mm->tp_rank, .tp_size = mm->tp_size,
        .zero1 = zero1,
    };
}

int lcx_cli_mesh_close(const char *cmd, lcx_cli_mesh *mm, lcx_status st) {
    int code = LCX_EXIT_OK;
    int64_t flag = st != LCX_OK && mm->world ? (int64_t)(mm->world->size - mm->world->rank) : 0;
    if (mm->world && mm->world->size > 1 &&
        lcx_comm_all_reduce(mm->world, NULL, &flag, &flag, 1, LCX_I64, LCX_COMM_MAX) != LCX_OK)
        flag = 1;
    if (st != LCX_OK) {
        /* the lowest failing rank says why (the others' messages name it) */
        if (!mm->world || mm->world->size - (int)flag == mm->world->rank) lcx_cli_report(cmd, st);
        code = LCX_EXIT_FAIL;
    } else if (flag) {
        code = LCX_EXIT_FAIL;
    }
    mesh_free(mm);
    lcx_comm_finalize(mm->world);
    mm->world = NULL;
    return code;
}
