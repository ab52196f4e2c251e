/* test_backend_ops: every op of kernels/backend.h on one backend (argv[1], default "cpu") against the CPU backend
 * in float32 on the same inputs -- the idea of ggml's tests/test-backend-ops.cpp. The cases are the table in
 * backend_ops_cases.h; this file is the runner. For each case, and each activation dtype (f32, and bf16 when the
 * op has `dt`):
 *  - Inputs are drawn once. A tensor stored in bf16 under test gets its values rounded to bf16 (RNE) first and the
 *    reference reads those same values in float32, so a difference comes from the op, never from the inputs.
 *  - The reference is the CPU backend with every float tensor in f32; the run under test uses the storage dtypes
 *    of the case. Each allocates through its backend, uploads with copy_h2d, reads back with copy_d2h, and gets a
 *    scratch arena of exactly the bytes `workspace` declares (an op that takes more overruns it).
 *  - Every output element must satisfy |got - ref| <= atol + rtol |ref| (llm.c's rule), rtol = the epsilon of
 *    the output's storage dtype (f32 2^-23, f64 results too; bf16 2^-8) times a per-op factor, atol per op
 *    (backend_ops_cases.h). Each case prints its worst element as error / allowed. When the backend under test is
 *    the CPU and nothing is stored in bf16, the results must be bit-identical: two runs, same bits (determinism).
 *  - Every buffer lies between 64-byte guard bands (a NaN byte pattern; on the CPU under ASan also poisoned), and
 *    strided tensors have NaN padding between rows and batches: after the op, guards, padding and every input must
 *    be byte-for-byte unchanged (an op writes its outputs and nothing else; a read of padding gives NaN).
 *  - Overwritten outputs start as NaN, so a result that depends on their old contents fails the comparison.
 *  - An op that declares a workspace must refuse an arena one byte short with LCX_ERR_INVALID (and touch nothing).
 * - A backend under test that reports LCX_ERR_UNSUPPORTED for an op gets that case counted as skipped, with its
 *   message; on the CPU it is a failure.
 * Usage: test_backend_ops [backend [name-filter]]: the filter keeps the cases whose name contains it; the
 * backend is looked up by name (lcx_backend_get).
 * Exit 77 (skipped) when a backend other than "cpu" is not compiled in or cannot run here. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ps_bounds.h"
#include "kernels/backend.h"
#include "src/core/tensor.h"
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define BO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BO_ASAN 1
#endif
#endif
#ifdef BO_ASAN
#include <sanitizer/asan_interface.h>
#endif

#ifndef BACKEND_OPS_DEFAULT
#define BACKEND_OPS_DEFAULT "cpu"
#endif

enum { MAX_T = 12, GUARD = 64 };
enum role { IN, OUT, ACC }; /* read only; overwritten (starts as NaN); read and updated (accumulated or in place) */
/* A tensor kind beside LCX_F32/LCX_BF16/LCX_I32/LCX_I64/LCX_F64: bf16 in the reference too (an argument that is
 * bf16 by type, e.g. adamw's param_bf16, or a cast's bf16 side). Plain LCX_BF16 tensors are f32 in the reference. */
#define KEEP_BF16 ((lcx_dtype)(LCX_DTYPE_COUNT + 1))

/* How a tensor's input values are drawn (outputs start as NaN whatever this says). */
typedef struct gen {
    int kind;
    double lo, hi;
} gen;
enum { G_UNI, G_INT, G_ZERO, G_CUSTOM };
#define UNI(lo, hi) ((gen){G_UNI, (lo), (hi)})  /* uniform in [lo, hi) */
#define INTS(lo, hi) ((gen){G_INT, (lo), (hi)}) /* integers in [lo, hi] */
#define ZERO ((gen){G_ZERO, 0, 0})
#define CUSTOM ((gen){G_CUSTOM, 0, 0}) /* zeros, filled in by the case (see fresh()) */

/* A tensor's n = nb * bs elements: nb blocks at stride bs, each of `rows` rows of `len` elements at stride ld.
 * The other elements (row padding, gaps between batch entries) are NaN and no op may write them. */
typedef struct layout {
    int64_t nb, bs, rows, ld, len;
} layout;
static layout dense(int64_t n) { return (layout){1, n, 1, n, n}; }
static layout strided(int64_t nb, int64_t bs, int64_t rows, int64_t ld, int64_t len) {
    return (layout){nb, bs, rows, ld, len};
}
static int inside(const layout *l, int64_t i) {
    int64_t o = i % l->bs;
    return o / l->ld < l->rows && o % l->ld < l->len;
}

/* One tensor of a case: made by the first (reference) run, shared by both runs. */
typedef struct tensor {
    const char *name;
    int role;
    lcx_dtype kind; /* storage under test */
    layout lay;
    int64_t n;
    void *host;   /* n input values: float for float kinds, else int32_t / int64_t / double */
    void *res[2]; /* results of the reference [0] and of the backend under test [1], same types */
} tensor;

typedef struct case_data {
    int n;
    tensor t[MAX_T];
} case_data;

/* A device buffer between two guard bands: base | GUARD | p: bytes | GUARD. `sent` is what was uploaded. */
typedef struct dbuf {
    char *base;
    void *p;
    lcx_dtype st;
    size_t bytes;
    unsigned char *sent;
} dbuf;

/* One execution of a case on one backend. */
typedef struct run {
    const lcx_backend *be;
    lcx_exec *x;
    int ref;        /* the reference run: float tensors in f32 */
    lcx_dtype act;  /* activation dtype under test (LCX_F32 or LCX_BF16) */
    case_data *d;
    int n_t;        /* tensors declared so far */
    int made_last;  /* the last ten() made its host values (the case may fill them in) */
    dbuf b[MAX_T];
    lcx_status st;  /* first failure while declaring */
    int unsupported; /* the op reported LCX_ERR_UNSUPPORTED (a backend under test other than the CPU) */
    char why[256];   /* ... and its message */
} run;

/* ---- small helpers ---------------------------------------------------------------------------------------- */
static uint64_t rng_s;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uni(double lo, double hi) { return lo + (hi - lo) * (double)(rng_next() >> 11) * 0x1p-53; }
static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1)); }

static int is_float(lcx_dtype k) { return k == LCX_F32 || k == LCX_BF16 || k == KEEP_BF16; }
static size_t host_size(lcx_dtype k) { return k == LCX_F64 || k == LCX_I64 ? 8 : 4; }
static size_t store_size(lcx_dtype st) { return st == LCX_BF16 ? 2 : host_size(st); }
static float bf16_round(float v) { return lcx_bf16_to_f32(lcx_f32_to_bf16(v)); }
static float nan_pattern(void) {
    uint32_t u = 0x7fa57fa5u; /* the guard bytes a5 7f read as f32: a NaN; as bf16 0x7fa5, a NaN too */
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static const char *dt_name(lcx_dtype d) { return d == LCX_BF16 ? "bf16" : "f32"; }

/* Storage dtype of a tensor kind in this run. */
static lcx_dtype st(const run *r, lcx_dtype kind) {
    if (kind == KEEP_BF16) return LCX_BF16;
    return r->ref && kind == LCX_BF16 ? LCX_F32 : kind;
}
/* The `dt` argument of an op with activations. */
static lcx_dtype act_st(const run *r) { return st(r, r->act); }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test_backend_ops: out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* Guarded device buffer of `bytes` bytes on r's backend; NULL (and r->st set) on failure. */
static void *dalloc(run *r, dbuf *b, size_t bytes) {
    memset(b, 0, sizeof *b);
    b->bytes = bytes;
    void *base = NULL;
    lcx_status s = r->be->alloc(bytes + 2 * GUARD, &base);
    if (s != LCX_OK) {
        if (r->st == LCX_OK) r->st = s;
        return NULL;
    }
    b->base = base;
    b->p = b->base + GUARD;
    b->sent = xmalloc(bytes + 2 * GUARD);
    for (size_t i = 0; i < bytes + 2 * GUARD; i++) b->sent[i] = i % 2 ? 0x7f : 0xa5;
    return b->p;
}

/* ASan on the CPU backend (device memory is host memory): poison the guard bands, so that any access to them,
 * a read included, stops the test with a report. */
static void guard_poison(const run *r, const dbuf *b, int on) {
#ifdef BO_ASAN
    if (strcmp(r->be->name, "cpu") != 0 || !b->base) return;
    if (on) {
        ASAN_POISON_MEMORY_REGION(b->base, GUARD);
        ASAN_POISON_MEMORY_REGION((char *)b->p + b->bytes, GUARD);
    } else {
        ASAN_UNPOISON_MEMORY_REGION(b->base, b->bytes + 2 * GUARD);
    }
#else
    (void)r, (void)b, (void)on;
#endif
}

static void dfree(run *r, dbuf *b) {
    guard_poison(r, b, 0);
    if (b->base) r->be->free(b->base);
    free(b->sent);
    memset(b, 0, sizeof *b);
}

/* ---- declaring tensors (called by the case makers, once per run, in the same order) ------------------------ */

static void make_host(tensor *t, gen g) {
    t->host = xmalloc((size_t)t->n * host_size(t->kind));
    for (int64_t i = 0; i < t->n; i++) {
        double v = 0;
        if (g.kind == G_UNI) v = uni(g.lo, g.hi);
        if (g.kind == G_INT) v = (double)irand((int64_t)g.lo, (int64_t)g.hi);
        if (is_float(t->kind)) {
            float f = !inside(&t->lay, i) || t->role == OUT ? nan_pattern() : (float)v;
            ((float *)t->host)[i] = t->kind == LCX_F32 ? f : bf16_round(f);
        } else if (t->kind == LCX_F64) {
            ((double *)t->host)[i] = v;
        } else if (t->kind == LCX_I32) {
            ((int32_t *)t->host)[i] = (int32_t)v;
        } else {
            ((int64_t *)t->host)[i] = (int64_t)v;
        }
    }
}

/* Declare the next tensor of the case and return its device pointer in this run. */
static void *ten_l(run *r, const char *name, int role, lcx_dtype kind, layout lay, gen g) {
    case_data *d = r->d;
    int i = r->n_t++;
    if (i >= MAX_T) {
        fprintf(stderr, "test_backend_ops: more than %d tensors in a case\n", MAX_T);
        exit(1);
    }
    tensor *t = &d->t[i];
    r->made_last = i == d->n;
    if (r->made_last) {
        d->n++;
        *t = (tensor){.name = name, .role = role, .kind = kind, .lay = lay, .n = lay.nb * lay.bs};
        make_host(t, g);
    } else if (strcmp(t->name, name) != 0) {
        fprintf(stderr, "test_backend_ops: tensor %d is '%s' in one run and '%s' in the other\n", i, t->name, name);
        exit(1);
    }
    dbuf *b = &r->b[i];
    void *p = dalloc(r, b, (size_t)t->n * store_size(st(r, kind)));
    b->st = st(r, kind);
    return p;
}
static void *ten(run *r, const char *name, int role, lcx_dtype kind, int64_t n, gen g) {
    return ten_l(r, name, role, kind, dense(n), g);
}
/* The host values of the tensor just declared when this run made them (for the case to fill in), else NULL. */
static void *fresh(const run *r) { return r->made_last ? r->d->t[r->n_t - 1].host : NULL; }
/* The host values of the case's tensor `name` (made in the first run). */
static void *host_of(const run *r, const char *name) {
    for (int i = 0; i < r->d->n; i++)
        if (strcmp(r->d->t[i].name, name) == 0) return r->d->t[i].host;
    fprintf(stderr, "test_backend_ops: no tensor '%s'\n", name);
    exit(1);
}

/* ---- the cases ---------------------------------------------------------------------------------------------- */
typedef union op_args {
    lcx_matmul_args mm;
    lcx_embedding_args emb;
    lcx_rmsnorm_args rms;
    lcx_rope_args rope;
    lcx_attn_args attn;
    lcx_attn_merge_args merge;
    lcx_swiglu_args sw;
    lcx_xent_args xent;
    lcx_adamw_args adamw;
    lcx_sqnorm_args sqnorm;
    lcx_cast_args cast;
    lcx_elementwise_args ew;
} op_args;

#include "backend_ops_cases.h"

static lcx_status call_op(const lcx_backend *be, lcx_exec *x, lcx_op op, const op_args *a) {
    switch (op) {
    case LCX_OP_MATMUL: return be->matmul(x, &a->mm);
    case LCX_OP_EMBEDDING_FWD: return be->embedding_fwd(x, &a->emb);
    case LCX_OP_EMBEDDING_BWD: return be->embedding_bwd(x, &a->emb);
    case LCX_OP_RMSNORM_FWD: return be->rmsnorm_fwd(x, &a->rms);
    case LCX_OP_RMSNORM_BWD: return be->rmsnorm_bwd(x, &a->rms);
    case LCX_OP_ROPE_FWD: return be->rope_fwd(x, &a->rope);
    case LCX_OP_ROPE_BWD: return be->rope_bwd(x, &a->rope);
    case LCX_OP_ATTENTION_FWD: return be->attention_fwd(x, &a->attn);
    case LCX_OP_ATTENTION_BWD: return be->attention_bwd(x, &a->attn);
    case LCX_OP_ATTENTION_MERGE: return be->attention_merge(x, &a->merge);
    case LCX_OP_SWIGLU_FWD: return be->swiglu_fwd(x, &a->sw);
    case LCX_OP_SWIGLU_BWD: return be->swiglu_bwd(x, &a->sw);
    case LCX_OP_CROSS_ENTROPY: return be->cross_entropy(x, &a->xent);
    case LCX_OP_ADAMW: return be->adamw(x, &a->adamw);
    case LCX_OP_SQNORM: return be->sqnorm(x, &a->sqnorm);
    case LCX_OP_CAST: return be->cast(x, &a->cast);
    case LCX_OP_ADD: return be->add(x, &a->ew);
    case LCX_OP_SCALE: return be->scale(x, &a->ew);
    case LCX_OP_AXPY: return be->axpy(x, &a->ew);
    default: return lcx_fail(LCX_ERR_INVALID, "op %d", (int)op);
    }
}

/* ---- one run: declare, upload, call, read back, check what must not change ---------------------------------- */

/* Encode host values into the storage dtype (the bytes between the guards). */
static void encode(const tensor *t, lcx_dtype s, unsigned char *dst) {
    if (s == LCX_BF16)
        for (int64_t i = 0; i < t->n; i++) {
            uint16_t h = lcx_f32_to_bf16(((const float *)t->host)[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
    else memcpy(dst, t->host, (size_t)t->n * host_size(t->kind));
}
static void decode(const tensor *t, lcx_dtype s, const unsigned char *src, void *out) {
    if (s == LCX_BF16)
        for (int64_t i = 0; i < t->n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            ((float *)out)[i] = lcx_bf16_to_f32(h);
        }
    else memcpy(out, src, (size_t)t->n * host_size(t->kind));
}

static int bytes_changed(const unsigned char *a, const unsigned char *b, size_t n) { return memcmp(a, b, n) != 0; }
static int guards_changed(const unsigned char *back, const dbuf *b) {
    return bytes_changed(back, b->sent, GUARD) ||
           bytes_changed(back + GUARD + b->bytes, b->sent + GUARD + b->bytes, GUARD);
}

/* "FAIL [case] name (dtype) backend: what"; returns 0 for `ok = fail(...)`. */
static int fail(const run *r, int ci, const op_case *c, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(const run *r, int ci, const op_case *c, const char *fmt, ...) {
    printf("FAIL [%d] %s (%s) %s: ", ci, c->name, op_has_dt(c->op) ? dt_name(r->act) : "-",
           r->ref ? "reference" : r->be->name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    return 0;
}

/* Upload every tensor: guards | values in the run's storage dtype | guards. */
static int upload(run *r, int ci, const op_case *c) {
    int ok = 1;
    for (int i = 0; i < r->d->n; i++) {
        tensor *t = &r->d->t[i];
        dbuf *b = &r->b[i];
        if (r->ref && t->kind != LCX_F32 && is_float(t->kind)) /* bf16 values: the ones a case filled in */
            for (int64_t e = 0; e < t->n; e++) ((float *)t->host)[e] = bf16_round(((float *)t->host)[e]);
        encode(t, b->st, b->sent + GUARD);
        if (r->be->copy_h2d(r->x, b->base, b->sent, b->bytes + 2 * GUARD) != LCX_OK)
            ok = fail(r, ci, c, "copy_h2d of %s: %s", t->name, lcx_last_error());
        guard_poison(r, b, 1);
    }
    return ok;
}

/* Call the op with an arena of exactly its declared workspace (first one byte short: it must refuse), wait for
 * it, and check the arena's guards. */
static int call_in_arena(run *r, int ci, const op_case *c, const op_args *a) {
    size_t ws = lcx_exec_workspace(r->x, c->op, a);
    dbuf arena;
    if (!dalloc(r, &arena, ws)) return fail(r, ci, c, "no arena of %zu bytes: %s", ws, lcx_last_error());
    void *keep_scratch = r->x->scratch;
    size_t keep_bytes = r->x->scratch_bytes;
    int ok = 1;
    lcx_status s = r->be->copy_h2d(r->x, arena.base, arena.sent, ws + 2 * GUARD);
    guard_poison(r, &arena, 1);
    r->x->scratch = arena.p;
    if (s == LCX_OK && ws > 0) {
        r->x->scratch_bytes = ws - 1;
        lcx_clear_error();
        lcx_status short_st = call_op(r->be, r->x, c->op, a);
        if (short_st != LCX_ERR_INVALID)
            ok = fail(r, ci, c, "an arena of %zu bytes for a workspace of %zu gave '%s' (%s), not an invalid "
                      "argument", ws - 1, ws, lcx_status_name(short_st), lcx_last_error());
    }
    r->x->scratch_bytes = ws;
    if (s == LCX_OK) s = call_op(r->be, r->x, c->op, a);
    if (s == LCX_ERR_UNSUPPORTED && !r->ref && strcmp(r->be->name, "cpu") != 0) { /* a skipped case */
        r->unsupported = 1;
        snprintf(r->why, sizeof r->why, "%s", lcx_last_error());
        ok = 0;
    } else {
        if (s == LCX_OK) s = r->be->sync(r->x);
        if (s != LCX_OK) ok = fail(r, ci, c, "%s: %s", lcx_status_name(s), lcx_last_error());
    }
    r->x->scratch = keep_scratch;
    r->x->scratch_bytes = keep_bytes;
    guard_poison(r, &arena, 0);
    unsigned char *back = xmalloc(ws + 2 * GUARD);
    if (ok && r->be->copy_d2h(r->x, back, arena.base, ws + 2 * GUARD) == LCX_OK && guards_changed(back, &arena))
        ok = fail(r, ci, c, "wrote outside its %zu-byte workspace", ws);
    free(back);
    dfree(r, &arena);
    return ok;
}

/* Read every tensor back: guards, padding and inputs must be as sent; the values go to res[0 or 1]. */
static int read_back(run *r, int ci, const op_case *c) {
    int ok = 1;
    for (int i = 0; i < r->d->n; i++) {
        tensor *t = &r->d->t[i];
        dbuf *b = &r->b[i];
        size_t total = b->bytes + 2 * GUARD, es = store_size(b->st);
        unsigned char *back = xmalloc(total);
        guard_poison(r, b, 0);
        if (r->be->copy_d2h(r->x, back, b->base, total) != LCX_OK) {
            ok = fail(r, ci, c, "copy_d2h of %s: %s", t->name, lcx_last_error());
            free(back);
            continue;
        }
        if (guards_changed(back, b)) ok = fail(r, ci, c, "wrote into a guard band of %s", t->name);
        for (int64_t e = 0; e < t->n; e++) {
            int keep = t->role == IN || !inside(&t->lay, e);
            if (keep && bytes_changed(back + GUARD + e * es, b->sent + GUARD + e * es, es)) {
                ok = fail(r, ci, c, "changed %s %s[%lld]", t->role == IN ? "input" : "padding element", t->name,
                          (long long)e);
                break;
            }
        }
        int slot = r->ref ? 0 : 1;
        t->res[slot] = xmalloc((size_t)t->n * host_size(t->kind));
        decode(t, b->st, back + GUARD, t->res[slot]);
        free(back);
    }
    return ok;
}

/* Execute case c on r's backend: declare (the first run also draws the inputs), upload, call, read back. */
static int execute(run *r, int ci, const op_case *c) {
    op_args a;
    memset(&a, 0, sizeof a);
    memset(r->b, 0, sizeof r->b);
    r->n_t = 0;
    r->st = LCX_OK;
    makers[c->op](c, r, &a);
    int ok = r->st == LCX_OK ? upload(r, ci, c) : fail(r, ci, c, "alloc failed: %s", lcx_last_error());
    ok = ok && call_in_arena(r, ci, c, &a);
    ok = ok && read_back(r, ci, c);
    for (int i = 0; i < MAX_T; i++) dfree(r, &r->b[i]);
    return ok;
}

/* ---- comparing ---------------------------------------------------------------------------------------------- */

typedef struct worst {
    double ratio, err, allowed, got, ref;
    const char *name;
    int64_t idx;
} worst;

/* |got - ref| against atol + rtol |ref|; equal values (infinities included) are exact, NaN always fails. */
static void judge(worst *w, const tensor *t, int64_t i, double g, double f, double rtol, double atol) {
    double err = g == f ? 0.0 : (isnan(g) || isnan(f)) ? INFINITY : fabs(g - f);
    double allowed = isnan(f) ? 0.0 : atol + rtol * fabs(f);
    double ratio = err == 0.0 ? 0.0 : allowed > 0 ? err / allowed : INFINITY;
    if (isnan(ratio)) ratio = INFINITY; /* inf error against an infinite allowance */
    if (ratio > w->ratio || !w->name) *w = (worst){ratio, err, allowed, g, f, t->name, i};
}

/* The largest |value| of the case's input tensor `name` (0 if absent). */
static double max_abs_of(const case_data *d, const char *name) {
    double m = 0;
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->t[i].name, name) == 0 && is_float(d->t[i].kind))
            for (int64_t e = 0; e < d->t[i].n; e++) m = fmax(m, fabs(((const float *)d->t[i].host)[e]));
    return m;
}

/* The case's input tensor `name` as floats (NULL if absent). */
static const float *host_floats(const case_data *d, const char *name) {
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->t[i].name, name) == 0 && is_float(d->t[i].kind)) return (const float *)d->t[i].host;
    return NULL;
}

/* Under LCX_CUDA_ATTN_BWD_BF16=1 a bf16 attention backward may take P and dS as one bf16 term each (the CUDA
 * tensor-core path, as FlashAttention 2 does): what that rounding can move dq, dk, dv by, elementwise
 * (attn_ps_bounds.h), in b[0..2]; 0 and nothing allocated otherwise. */
static int ps_allowance(const op_case *c, const case_data *d, double *b[3]) {
    const char *e = getenv("LCX_CUDA_ATTN_BWD_BF16");
    const float *q = host_floats(d, "q"), *k = host_floats(d, "k"), *v = host_floats(d, "v");
    const float *o = host_floats(d, "o"), *lse = host_floats(d, "lse"), *g = host_floats(d, "dout");
    if (c->op != LCX_OP_ATTENTION_BWD || !e || e[0] != '1' || !q || !k || !v || !o || !lse || !g) return 0;
    int bf = 0;
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->t[i].name, "q") == 0) bf = d->t[i].kind == LCX_BF16;
    if (!bf) return 0;
    const attn_p *p = &c->attn;
    lcx_attn_args a = {.n_q = p->nq, .n_k = p->nk, .n_heads = p->heads, .n_kv_heads = p->kv_heads, .head_dim = p->hd,
                       .q_offset = p->q_off, .k_offset = p->k_off, .mask = p->mask,
                       .scale = attn_scale(p)};
    for (int i = 0; i < d->n; i++) /* a document mask's starts (int32, host) */
        if (strcmp(d->t[i].name, "doc") == 0) a.q_doc_start = (const int32_t *)d->t[i].host;
    const size_t nq = (size_t)(p->nq * p->heads * p->hd), nk = (size_t)(p->nk * p->kv_heads * p->hd);
    b[0] = xmalloc(sizeof(double) * (nq + 1)), b[1] = xmalloc(sizeof(double) * (nk + 1));
    b[2] = xmalloc(sizeof(double) * (nk + 1));
    attn_ps_bounds(&a, q, k, v, o, lse, g, b[0], b[1], b[2]);
    return 1;
}

static worst compare(const op_case *c, const case_data *d, int *bit_identical) {
    const lcx_op op = c->op;
    worst w = {0};
    *bit_identical = 1;
    double *ps[3] = {NULL, NULL, NULL};
    const int has_ps = ps_allowance(c, d, ps);
    for (int i = 0; i < d->n; i++) {
        const tensor *t = &d->t[i];
        if (t->role == IN) continue;
        const double *extra = !has_ps                     ? NULL
                              : strcmp(t->name, "dq") == 0 ? ps[0]
                              : strcmp(t->name, "dk") == 0 ? ps[1]
                              : strcmp(t->name, "dv") == 0 ? ps[2]
                                                           : NULL;
        int bf = t->kind == LCX_BF16 || t->kind == KEEP_BF16;
        double rtol = bf ? 0x1p-8 * tols[op].bf16 : 0x1p-23 * tols[op].f32, atol = tols[op].atol;
        /* A bf16 attention forward may take P rounded to bf16 for P V (the CUDA tensor-core path, as FlashAttention
         * does): each p_j / l moves by at most 2^-8 of itself (8 significant bits, round to nearest), so O by at
         * most 2^-8 sum_j (p_j / l) |v_j| <= 2^-8 max |v|. Allowed: that, on top of the output's own rounding and
         * the float32 sums' tolerance. */
        if (op == LCX_OP_ATTENTION_FWD && bf && strcmp(t->name, "o") == 0) atol += 0x1p-8 * max_abs_of(d, "v");
        /* The matmul's atol is for k <= 257 products of values <= 1. Each of the k additions rounds at the size
         * of the partial sum, which itself grows like sqrt(k) for terms of random sign, so two summation orders
         * (the reference's, a blocked or split-k one, FMA or not) drift apart like k u: the allowance grows with
         * k / 257 (at k 4500, 17.5 x 3e-5; a lost or repeated block of k moves a result by ~sqrt(block) x 0.3,
         * far more). Measured: 1.1 x the unscaled allowance with OpenBLAS's AVX-512 (Cooperlake) kernels on an AMD
         * EPYC, 0.65 with its Haswell kernels. */
        if (op == LCX_OP_MATMUL && c->mm.k > 257) atol *= (double)c->mm.k / 257.0;
        size_t hs = host_size(t->kind);
        for (int64_t e = 0; e < t->n; e++) {
            if (!inside(&t->lay, e)) continue;
            const void *g = (const char *)t->res[1] + e * hs, *f = (const char *)t->res[0] + e * hs;
            if (memcmp(g, f, hs) != 0) *bit_identical = 0;
            if (is_float(t->kind))
                judge(&w, t, e, *(const float *)g, *(const float *)f, rtol, atol + (extra ? extra[e] : 0.0));
            else if (t->kind == LCX_F64) judge(&w, t, e, *(const double *)g, *(const double *)f, rtol, atol);
            else if (t->kind == LCX_I32) judge(&w, t, e, *(const int32_t *)g, *(const int32_t *)f, 0, 0);
            else judge(&w, t, e, (double)*(const int64_t *)g, (double)*(const int64_t *)f, 0, 0);
        }
    }
    for (int i = 0; i < 3; i++) free(ps[i]);
    return w;
}

static void free_case(case_data *d) {
    for (int i = 0; i < d->n; i++) {
        free(d->t[i].host);
        free(d->t[i].res[0]);
        free(d->t[i].res[1]);
    }
    memset(d, 0, sizeof *d);
}

static int n_skipped;

/* Run case ci for one activation dtype: the reference, the backend under test, the comparison. */
static void run_case(int ci, const op_case *c, lcx_dtype act, lcx_exec *xref, lcx_exec *xtest) {
    case_data d = {0};
    rng_s = 0x5eed0000ull + (uint64_t)ci * 16 + (act == LCX_BF16);
    run ref = {.be = xref->be, .x = xref, .ref = 1, .act = act, .d = &d};
    run test = {.be = xtest->be, .x = xtest, .ref = 0, .act = act, .d = &d};
    const char *dts = op_has_dt(c->op) ? dt_name(act) : "-";
    int ok = execute(&ref, ci, c) && execute(&test, ci, c);
    if (!ok && test.unsupported) {
        printf("[%3d] %-52s %-4s SKIPPED  %s\n", ci, c->name, dts, test.why);
        n_skipped++;
    } else if (ok) {
        int same = 0;
        worst w = compare(c, &d, &same);
        /* the CPU against itself with the reference's dtypes: two runs must give the same bits */
        int must_match = xtest->be == xref->be;
        for (int i = 0; i < d.n; i++)
            if (d.t[i].kind == LCX_BF16) must_match = 0;
        char where[160] = "";
        if (w.name)
            snprintf(where, sizeof where, "%s[%lld] err %.3g allowed %.3g", w.name, (long long)w.idx, w.err,
                     w.allowed);
        printf("[%3d] %-52s %-4s worst %9.3e of allowed  %s%s\n", ci, c->name, dts, w.ratio, where,
               must_match ? (same ? "  bit-identical" : "  NOT bit-identical") : "");
        CHECK_MSG(w.ratio <= 1.0, "case %d '%s' (%s): %s[%lld] = %.9g, reference %.9g: |err| %.3g > allowed %.3g", ci,
                  c->name, dts, w.name, (long long)w.idx, w.got, w.ref, w.err, w.allowed);
        CHECK_MSG(!must_match || same, "case %d '%s' (%s): the CPU backend is not bit-identical to itself", ci,
                  c->name, dts);
    } else {
        CHECK_MSG(0, "case %d '%s' (%s) failed to run", ci, c->name, dts);
    }
    free_case(&d);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* one line per case, in order with the failures on stderr */
    const char *name = argc > 1 ? argv[1] : BACKEND_OPS_DEFAULT;
    int nb = 0;
    const lcx_backend *const *list = lcx_backend_list(&nb);
    printf("compiled backends:");
    for (int i = 0; i < nb; i++) printf(" %s%s", list[i]->name, list[i]->available() ? "" : " (not available here)");
    printf("\n");
    const lcx_backend *be = lcx_backend_get(name);
    if (!be || !be->available()) {
        printf("test_backend_ops: backend '%s' %s\n", name, be ? "cannot run here" : lcx_last_error());
        if (strcmp(name, "cpu") != 0) {
            printf("test_backend_ops: skipped\n");
            return 77;
        }
        return 1;
    }
    lcx_exec *xref = NULL, *xtest = NULL;
    CHECK_OK(lcx_exec_create(lcx_backend_cpu(), &xref));
    CHECK_OK(lcx_exec_create(be, &xtest));
    if (!xref || !xtest) return test_summary("test_backend_ops");
    printf("backend '%s' against the CPU backend in f32; worst = max over outputs of |got - ref| / (atol + rtol "
           "|ref|)\n", be->name);
    const char *filter = argc > 2 ? argv[2] : "";
    int n_cases = (int)(sizeof cases / sizeof cases[0]);
    for (int ci = 0; ci < n_cases; ci++) {
        if (!strstr(cases[ci].name, filter)) continue;
        run_case(ci, &cases[ci], LCX_F32, xref, xtest);
        if (op_has_dt(cases[ci].op)) run_case(ci, &cases[ci], LCX_BF16, xref, xtest);
    }
    if (n_skipped) printf("%d case(s) skipped: unsupported on backend '%s'\n", n_skipped, be->name);
    lcx_exec_free(xtest);
    lcx_exec_free(xref);
    return test_summary(strcmp(be->name, "cpu") == 0 ? "test_backend_ops" : "test_backend_ops_cuda");
}
