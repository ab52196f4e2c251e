/* Attention forward/backward/merge of the CPU backend against a naive softmax attention written here in double
 * (full score rows, no tiling), and the naive backward against central differences. Covers lengths that are
 * not multiples of the tiles, GQA ratios 1/2/4/8, query and key blocks at global offsets, causal/full/none
 * masks, document masks, fully masked rows, the LSE, merging key-block partials and ring-style accumulation of
 * the backward; bf16 activations against float32 on the same values. Every call runs on an arena of exactly its
 * workspace. */
#include "ops_common.h"
#include "worst_of.h"

static lcx_exec *X;

/* The ops on an arena of exactly their workspace (a's pointers are set here). */
static lcx_status attn_fwd(const lcx_attn_args *a, const void *q, const void *k, const void *v, void *o, float *lse) {
    lcx_attn_args b = *a;
    b.q = q, b.k = k, b.v = v, b.o = o, b.lse = lse;
    return op_exact(X, LCX_OP_ATTENTION_FWD, &b);
}
static lcx_status attn_bwd(const lcx_attn_args *a, const void *q, const void *k, const void *v, const void *o,
                           const float *lse, const void *go, float *dq, float *dk, float *dv) {
    lcx_attn_args b = *a;
    b.q = q, b.k = k, b.v = v, b.o = (void *)o, b.lse = (float *)lse, b.dout = go, b.dq = dq, b.dk = dk, b.dv = dv;
    return op_exact(X, LCX_OP_ATTENTION_BWD, &b);
}
static lcx_status attn_merge_dt(lcx_dtype dt, void *o_acc, float *lse_acc, const void *o_part, const float *lse_part,
                                int64_t rows, int64_t heads, int64_t hd) {
    lcx_attn_merge_args m = {.dt = dt, .n_rows = rows, .n_heads = heads, .head_dim = hd, .o_acc = o_acc,
                             .lse_acc = lse_acc, .o_part = o_part, .lse_part = lse_part};
    return op_exact(X, LCX_OP_ATTENTION_MERGE, &m);
}
static lcx_status attn_merge(float *o_acc, float *lse_acc, const float *o_part, const float *lse_part, int64_t rows,
                             int64_t heads, int64_t hd) {
    return attn_merge_dt(LCX_F32, o_acc, lse_acc, o_part, lse_part, rows, heads, hd);
}

/* ---- naive reference in double ------------------------------------------------------------------------- */
static int visible(const lcx_attn_args *a, int64_t i, int64_t j) {
    if (a->mask == LCX_MASK_NONE) return 0;
    if (a->q_doc_start && a->k_offset + j < a->q_doc_start[i]) return 0; /* an earlier document */
    if (a->mask == LCX_MASK_FULL) return 1;
    return a->k_offset + j <= a->q_offset + i;
}

/* o [nq, H, hd], lse [nq, H] */
static void naive_fwd(const lcx_attn_args *a, const double *q, const double *k, const double *v, double *o,
                      double *lse) {
    int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, rep = H / G;
    double *s = malloc(sizeof(double) * (size_t)(a->n_k + 1));
    for (int64_t i = 0; i < a->n_q; i++)
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / rep;
            double mx = -INFINITY;
            for (int64_t j = 0; j < a->n_k; j++) {
                if (!visible(a, i, j)) continue;
                double d = 0;
                for (int64_t c = 0; c < hd; c++) d += q[(i * H + h) * hd + c] * k[(j * G + g) * hd + c];
                s[j] = d * a->scale;
                mx = fmax(mx, s[j]);
            }
            double *oi = o + (i * H + h) * hd;
            for (int64_t c = 0; c < hd; c++) oi[c] = 0;
            if (mx == -INFINITY) {
                lse[i * H + h] = -INFINITY;
                continue;
            }
            double z = 0;
            for (int64_t j = 0; j < a->n_k; j++)
                if (visible(a, i, j)) z += exp(s[j] - mx);
            for (int64_t j = 0; j < a->n_k; j++) {
                if (!visible(a, i, j)) continue;
                double p = exp(s[j] - mx) / z;
                for (int64_t c = 0; c < hd; c++) oi[c] += p * v[(j * G + g) * hd + c];
            }
            lse[i * H + h] = mx + log(z);
        }
    free(s);
}

/* Textbook softmax backward: dP = dO V^T, dS = P (dP - sum_j P dP), dQ = scale dS K, dK = scale dS^T Q,
 * dV = P^T dO. Outputs are overwritten. */
static void naive_bwd(const lcx_attn_args *a, const double *q, const double *k, const double *v, const double *go,
                      double *dq, double *dk, double *dv) {
    int64_t H = a->n_heads, G = a->n_kv_heads, hd = a->head_dim, rep = H / G;
    memset(dq, 0, sizeof(double) * (size_t)(a->n_q * H * hd));
    memset(dk, 0, sizeof(double) * (size_t)(a->n_k * G * hd));
    memset(dv, 0, sizeof(double) * (size_t)(a->n_k * G * hd));
    double *p = malloc(sizeof(double) * (size_t)(a->n_k + 1)), *dp = malloc(sizeof(double) * (size_t)(a->n_k + 1));
    for (int64_t i = 0; i < a->n_q; i++)
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / rep;
            const double *qi = q + (i * H + h) * hd, *gi = go + (i * H + h) * hd;
            double mx = -INFINITY;
            for (int64_t j = 0; j < a->n_k; j++) {
                p[j] = -INFINITY;
                if (!visible(a, i, j)) continue;
                double d = 0;
                for (int64_t c = 0; c < hd; c++) d += qi[c] * k[(j * G + g) * hd + c];
                p[j] = d * a->scale;
                mx = fmax(mx, p[j]);
            }
            if (mx == -INFINITY) continue;
            double z = 0;
            for (int64_t j = 0; j < a->n_k; j++) z += p[j] == -INFINITY ? 0 : exp(p[j] - mx);
            double pdp = 0;
            for (int64_t j = 0; j < a->n_k; j++) {
                p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx) / z;
                double d = 0;
                for (int64_t c = 0; c < hd; c++) d += gi[c] * v[(j * G + g) * hd + c];
                dp[j] = d;
                pdp += p[j] * d;
            }
            for (int64_t j = 0; j < a->n_k; j++) {
                if (p[j] == 0) continue;
                double ds = p[j] * (dp[j] - pdp);
                for (int64_t c = 0; c < hd; c++) {
                    dq[(i * H + h) * hd + c] += a->scale * ds * k[(j * G + g) * hd + c];
                    dk[(j * G + g) * hd + c] += a->scale * ds * qi[c];
                    dv[(j * G + g) * hd + c] += p[j] * gi[c];
                }
            }
        }
    free(p);
    free(dp);
}

/* ---- one problem instance ------------------------------------------------------------------------------- */
typedef struct prob {
    lcx_attn_args a;
    int64_t nqe, nke, nle; /* element counts of q/o, k/v, lse */
    float *q, *k, *v, *go;
    double *qd, *kd, *vd, *god;
    int32_t *doc; /* [nq] document starts, or NULL */
} prob;

static prob make(int64_t nq, int64_t nk, int64_t H, int64_t G, int64_t hd, int64_t qoff, int64_t koff,
                 lcx_attn_mask mask, double amp) {
    prob p = {.a = {.dt = LCX_F32, .n_q = nq, .n_k = nk, .n_heads = H, .n_kv_heads = G, .head_dim = hd,
                    .q_offset = qoff, .k_offset = koff, .mask = mask, .scale = (float)(1.0 / sqrt((double)hd))}};
    p.nqe = nq * H * hd;
    p.nke = nk * G * hd;
    p.nle = nq * H;
    p.q = rand_f32(p.nqe, -amp, amp);
    p.k = rand_f32(p.nke, -amp, amp);
    p.v = rand_f32(p.nke, -1, 1);
    p.go = rand_f32(p.nqe, -1, 1);
    p.qd = to_f64(p.q, p.nqe);
    p.kd = to_f64(p.k, p.nke);
    p.vd = to_f64(p.v, p.nke);
    p.god = to_f64(p.go, p.nqe);
    return p;
}
static void unmake(prob *p) {
    free(p->q); free(p->k); free(p->v); free(p->go);
    free(p->qd); free(p->kd); free(p->vd); free(p->god); free(p->doc);
}

/* Document masking: query rows in documents of random lengths (mean len) that start at or before the key block
 * (a row may see none, some or all of its keys), or every token its own document when len is 1. */
static void with_docs(prob *p, int64_t len) {
    lcx_attn_args *a = &p->a;
    p->doc = malloc(sizeof(int32_t) * (size_t)(a->n_q + 1));
    int64_t lo = a->q_offset < a->k_offset ? a->q_offset : a->k_offset, start = lo - rng_int(0, 3);
    if (start < 0) start = 0;
    for (int64_t pos = start; pos < a->q_offset + a->n_q; pos++) {
        if (pos > start && rng_int(1, len) == 1) start = pos; /* a document begins at pos */
        if (pos >= a->q_offset) p->doc[pos - a->q_offset] = (int32_t)start;
    }
    a->q_doc_start = p->doc;
}

static double lse_err(const float *got, const double *want, int64_t n, int *inf_mismatch) {
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        if (want[i] == -INFINITY || got[i] == -INFINITY) {
            if (!(want[i] == -INFINITY && got[i] == -INFINITY)) (*inf_mismatch)++;
            continue;
        }
        double d = fabs(got[i] - want[i]) / (1.0 + fabs(want[i]));
        e = worst_of(e, d);
    }
    return e;
}

static double worst_fwd_o = 0, worst_fwd_lse = 0, worst_bwd = 0;

/* forward and backward against the naive reference */
static void check_prob(prob *p, const char *tag) {
    lcx_attn_args *a = &p->a;
    float *o = zeros_f32(p->nqe), *lse = zeros_f32(p->nle);
    double *od = zeros_f64(p->nqe), *lsed = zeros_f64(p->nle);
    CHECK_OK(attn_fwd(a, p->q, p->k, p->v, o, lse));
    naive_fwd(a, p->qd, p->kd, p->vd, od, lsed);
    int infm = 0, nan = 0, masked_nonzero = 0;
    for (int64_t i = 0; i < p->nqe; i++) nan += isnan(o[i]);
    for (int64_t x = 0; x < p->nle; x++)
        if (lsed[x] == -INFINITY)
            for (int64_t c = 0; c < a->head_dim; c++) masked_nonzero += o[x * a->head_dim + c] != 0.0f;
    double eo = rel_err(o, od, p->nqe, 1.0), el = lse_err(lse, lsed, p->nle, &infm);
    CHECK_MSG(nan == 0 && infm == 0 && masked_nonzero == 0, "%s: nan %d, -inf mismatches %d, masked rows nonzero %d",
              tag, nan, infm, masked_nonzero);
    CHECK_MSG(eo <= 2e-5 && el <= 2e-6, "%s: fwd O err %.3e, LSE err %.3e", tag, eo, el);
    worst_fwd_o = worst_of(worst_fwd_o, eo);
    worst_fwd_lse = worst_of(worst_fwd_lse, el);

    /* backward: accumulates, so start from a known nonzero value and subtract it */
    float *dq = rand_f32(p->nqe, -1, 1), *dk = rand_f32(p->nke, -1, 1), *dv = rand_f32(p->nke, -1, 1);
    double *dq0 = to_f64(dq, p->nqe), *dk0 = to_f64(dk, p->nke), *dv0 = to_f64(dv, p->nke);
    CHECK_OK(attn_bwd(a, p->q, p->k, p->v, o, lse, p->go, dq, dk, dv));
    double *rq = zeros_f64(p->nqe), *rk = zeros_f64(p->nke), *rv = zeros_f64(p->nke);
    naive_bwd(a, p->qd, p->kd, p->vd, p->god, rq, rk, rv);
    for (int64_t i = 0; i < p->nqe; i++) rq[i] += dq0[i];
    for (int64_t i = 0; i < p->nke; i++) { rk[i] += dk0[i]; rv[i] += dv0[i]; }
    double e = worst_of(rel_err(dq, rq, p->nqe, 1e-2),
                        worst_of(rel_err(dk, rk, p->nke, 1e-2), rel_err(dv, rv, p->nke, 1e-2)));
    CHECK_MSG(e <= 1e-4, "%s: bwd err %.3e", tag, e);
    worst_bwd = worst_of(worst_bwd, e);
    free(o); free(lse); free(od); free(lsed); free(dq); free(dk); free(dv); free(dq0); free(dk0); free(dv0);
    free(rq); free(rk); free(rv);
}

/* ---- gradient check: loss = sum(go * O) in double, central differences ------------------------------------ */
static double fd_loss(void *ctx) {
    prob *p = ctx;
    double *o = zeros_f64(p->nqe), *lse = zeros_f64(p->nle), s = 0;
    naive_fwd(&p->a, p->qd, p->kd, p->vd, o, lse);
    for (int64_t i = 0; i < p->nqe; i++) s += o[i] * p->god[i];
    free(o);
    free(lse);
    return s;
}

/* max |got - want| / max(|want|, floor); NaN in got makes it NaN */
static double floored_err(const float *got, const double *want, int64_t n, double floor) {
    double err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), floor);
        err = worst_of(err, e);
    }
    return err;
}

static void grad_check(prob *p, const char *tag, double *worst_naive, double *worst_ours) {
    double *fq = zeros_f64(p->nqe), *fk = zeros_f64(p->nke), *fv = zeros_f64(p->nke);
    fd_grad(fd_loss, p, p->qd, p->nqe, 1e-5, fq);
    fd_grad(fd_loss, p, p->kd, p->nke, 1e-5, fk);
    fd_grad(fd_loss, p, p->vd, p->nke, 1e-5, fv);
    /* the naive double backward must match to FD accuracy */
    double *rq = zeros_f64(p->nqe), *rk = zeros_f64(p->nke), *rv = zeros_f64(p->nke);
    naive_bwd(&p->a, p->qd, p->kd, p->vd, p->god, rq, rk, rv);
    double en = 0, mx = 0;
    for (int64_t i = 0; i < p->nqe; i++) mx = fmax(mx, fabs(fq[i]));
    for (int64_t i = 0; i < p->nke; i++) mx = fmax(mx, fmax(fabs(fk[i]), fabs(fv[i])));
    for (int64_t i = 0; i < p->nqe; i++) en = worst_of(en, fabs(rq[i] - fq[i]) / mx);
    for (int64_t i = 0; i < p->nke; i++) en = worst_of(en, worst_of(fabs(rk[i] - fk[i]), fabs(rv[i] - fv[i])) / mx);
    /* ours (float32) against the same differences */
    float *o = zeros_f32(p->nqe), *lse = zeros_f32(p->nle);
    float *dq = zeros_f32(p->nqe), *dk = zeros_f32(p->nke), *dv = zeros_f32(p->nke);
    CHECK_OK(attn_fwd(&p->a, p->q, p->k, p->v, o, lse));
    CHECK_OK(attn_bwd(&p->a, p->q, p->k, p->v, o, lse, p->go, dq, dk, dv));
    /* relative to 1% of the largest gradient of the three (a dQ that is exactly 0 in double, one key, comes out as
     * float32 rounding of the order of 1e-7, since the backward recomputes P = exp(s - LSE) ~ 1 + 1 ulp) */
    double eo = worst_of(floored_err(dq, fq, p->nqe, 1e-2 * mx),
                         worst_of(floored_err(dk, fk, p->nke, 1e-2 * mx), floored_err(dv, fv, p->nke, 1e-2 * mx)));
    CHECK_MSG(en <= 1e-8, "%s: naive backward vs FD %.3e", tag, en);
    CHECK_MSG(eo <= 1e-4, "%s: backward vs FD %.3e", tag, eo);
    *worst_naive = worst_of(*worst_naive, en);
    *worst_ours = worst_of(*worst_ours, eo);
    free(fq); free(fk); free(fv); free(rq); free(rk); free(rv); free(o); free(lse); free(dq); free(dk); free(dv);
}

/* ---- merge of two key blocks and ring-style backward ------------------------------------------------------ */
static double worst_merge = 0, worst_ring = 0;

static void check_split(prob *p, int64_t split, const char *tag) {
    lcx_attn_args a = p->a, a1 = p->a, a2 = p->a;
    int64_t G = a.n_kv_heads, hd = a.head_dim, off2 = split * G * hd;
    a1.n_k = split;
    a2.n_k = a.n_k - split;
    a2.k_offset = a.k_offset + split;
    float *o1 = zeros_f32(p->nqe), *l1 = zeros_f32(p->nle), *o2 = zeros_f32(p->nqe), *l2 = zeros_f32(p->nle);
    CHECK_OK(attn_fwd(&a1, p->q, p->k, p->v, o1, l1));
    CHECK_OK(attn_fwd(&a2, p->q, p->k + off2, p->v + off2, o2, l2));
    CHECK_OK(attn_merge(o1, l1, o2, l2, a.n_q, a.n_heads, hd));
    double *od = zeros_f64(p->nqe), *ld = zeros_f64(p->nle);
    naive_fwd(&a, p->qd, p->kd, p->vd, od, ld);
    int infm = 0, nan = 0;
    for (int64_t i = 0; i < p->nqe; i++) nan += isnan(o1[i]);
    double e = worst_of(rel_err(o1, od, p->nqe, 1.0), lse_err(l1, ld, p->nle, &infm));
    CHECK_MSG(e <= 2e-5 && infm == 0 && nan == 0, "%s: merge err %.3e, inf mismatches %d, nan %d", tag, e, infm, nan);
    worst_merge = worst_of(worst_merge, e);

    /* ring backward: each key block with the merged O/LSE, gradients accumulated */
    /* accumulate onto random values (as a ring does onto earlier steps) so every tensor has an O(1) scale */
    float *dq = rand_f32(p->nqe, -1, 1), *dk = rand_f32(p->nke, -1, 1), *dv = rand_f32(p->nke, -1, 1);
    double *rq = to_f64(dq, p->nqe), *rk = to_f64(dk, p->nke), *rv = to_f64(dv, p->nke);
    double *nq = zeros_f64(p->nqe), *nk = zeros_f64(p->nke), *nv = zeros_f64(p->nke);
    CHECK_OK(attn_bwd(&a1, p->q, p->k, p->v, o1, l1, p->go, dq, dk, dv));
    CHECK_OK(attn_bwd(&a2, p->q, p->k + off2, p->v + off2, o1, l1, p->go, dq, dk + off2, dv + off2));
    naive_bwd(&a, p->qd, p->kd, p->vd, p->god, nq, nk, nv);
    for (int64_t i = 0; i < p->nqe; i++) rq[i] += nq[i];
    for (int64_t i = 0; i < p->nke; i++) { rk[i] += nk[i]; rv[i] += nv[i]; }
    double eb = worst_of(rel_err(dq, rq, p->nqe, 1e-2),
                         worst_of(rel_err(dk, rk, p->nke, 1e-2), rel_err(dv, rv, p->nke, 1e-2)));
    CHECK_MSG(eb <= 1e-4, "%s: ring backward err %.3e", tag, eb);
    worst_ring = worst_of(worst_ring, eb);
    free(o1); free(l1); free(o2); free(l2); free(od); free(ld); free(dq); free(dk); free(dv);
    free(rq); free(rk); free(rv); free(nq); free(nk); free(nv);
}

/* ---- bf16 activations and the arena ------------------------------------------------------------------------ */
static double worst_b16_o = 0, worst_b16_lse = 0, worst_b16_bwd = 0;
static int short_checked = 0;

/* bf16 q/k/v/dO against float32 on the same values: O within its bf16 rounding, LSE and the float32 gradients to
 * float32 accuracy (the backward of both fed the bf16 O), merge the rounding of the float32 merge. */
static void check_bf16(prob *p) {
    lcx_attn_args a = p->a, ah = p->a;
    ah.dt = LCX_BF16;
    int64_t nq = p->nqe, nk = p->nke;
    uint16_t *qh = to_bf16(p->q, nq), *kh = to_bf16(p->k, nk), *vh = to_bf16(p->v, nk), *gh = to_bf16(p->go, nq);
    float *qw = widen_bf16(qh, nq), *kw = widen_bf16(kh, nk), *vw = widen_bf16(vh, nk), *gw = widen_bf16(gh, nq);
    uint16_t *oh = malloc(2 * (size_t)(nq > 0 ? nq : 1));
    float *o = zeros_f32(nq), *lse = zeros_f32(p->nle), *lseh = zeros_f32(p->nle);
    CHECK_OK(attn_fwd(&a, qw, kw, vw, o, lse));
    CHECK_OK(attn_fwd(&ah, qh, kh, vh, oh, lseh));
    float *ow = widen_bf16(oh, nq);
    double *od = to_f64(o, nq), *ld = to_f64(lse, p->nle);
    int infm = 0;
    worst_b16_o = worst_of(worst_b16_o, rel_err(ow, od, nq, 1e-2));
    worst_b16_lse = worst_of(worst_b16_lse, lse_err(lseh, ld, p->nle, &infm));
    CHECK(infm == 0);
    float *dq = zeros_f32(nq), *dk = zeros_f32(nk), *dv = zeros_f32(nk);
    float *dqh = zeros_f32(nq), *dkh = zeros_f32(nk), *dvh = zeros_f32(nk);
    CHECK_OK(attn_bwd(&a, qw, kw, vw, ow, lseh, gw, dq, dk, dv));
    CHECK_OK(attn_bwd(&ah, qh, kh, vh, oh, lseh, gh, dqh, dkh, dvh));
    double *rq = to_f64(dq, nq), *rk = to_f64(dk, nk), *rv = to_f64(dv, nk);
    worst_b16_bwd = worst_of(worst_b16_bwd, worst_of(rel_err(dqh, rq, nq, 1e-2),
                                                     worst_of(rel_err(dkh, rk, nk, 1e-2), rel_err(dvh, rv, nk, 1e-2))));
    /* merge of the bf16 output into itself at other LSEs: the rounding of the float32 merge of the same values */
    float *la = zeros_f32(p->nle), *lb = zeros_f32(p->nle), *la2 = zeros_f32(p->nle);
    for (int64_t i = 0; i < p->nle; i++) la[i] = la2[i] = (float)rng_uniform(-2, 2), lb[i] = (float)rng_uniform(-2, 2);
    uint16_t *acc = malloc(2 * (size_t)(nq > 0 ? nq : 1));
    memcpy(acc, oh, 2 * (size_t)nq);
    float *accw = widen_bf16(oh, nq);
    CHECK_OK(attn_merge_dt(LCX_BF16, acc, la, oh, lb, a.n_q, a.n_heads, a.head_dim));
    CHECK_OK(attn_merge(accw, la2, ow, lb, a.n_q, a.n_heads, a.head_dim));
    CHECK(bf16_mismatch(acc, accw, nq) == 0 && memcmp(la, la2, sizeof(float) * (size_t)p->nle) == 0);
    /* an arena one byte short, both dtypes */
    ah.q = qh, ah.k = kh, ah.v = vh, ah.o = oh, ah.lse = lseh, ah.dout = gh, ah.dq = dqh, ah.dk = dkh, ah.dv = dvh;
    a.q = qw, a.k = kw, a.v = vw, a.o = ow, a.lse = lseh, a.dout = gw, a.dq = dq, a.dk = dk, a.dv = dv;
    check_arena_short(X, LCX_OP_ATTENTION_FWD, &ah, &short_checked);
    check_arena_short(X, LCX_OP_ATTENTION_BWD, &ah, &short_checked);
    check_arena_short(X, LCX_OP_ATTENTION_FWD, &a, &short_checked);
    check_arena_short(X, LCX_OP_ATTENTION_BWD, &a, &short_checked);
    free(qh); free(kh); free(vh); free(gh); free(qw); free(kw); free(vw); free(gw); free(oh); free(o); free(lse);
    free(lseh); free(ow); free(od); free(ld); free(dq); free(dk); free(dv); free(dqh); free(dkh); free(dvh);
    free(rq); free(rk); free(rv); free(la); free(lb); free(la2); free(acc); free(accw);
}

int main(void) {
    X = cpu_exec();
    rng_seed(1234);
    char tag[160];

    /* hand-picked shapes: tile edges, GQA ratios, offsets, fully masked rows */
    static const struct { int64_t nq, nk, H, G, hd, qoff, koff; lcx_attn_mask mask; } cases[] = {
        {1, 1, 1, 1, 4, 0, 0, LCX_MASK_CAUSAL},
        {16, 64, 2, 2, 8, 48, 0, LCX_MASK_CAUSAL},   /* exactly one tile each */
        {17, 65, 4, 2, 8, 48, 0, LCX_MASK_CAUSAL},   /* one past the tiles */
        {45, 150, 8, 1, 16, 105, 0, LCX_MASK_CAUSAL}, /* ratio 8, last query sees all keys */
        {45, 150, 8, 2, 12, 0, 0, LCX_MASK_CAUSAL},  /* ratio 4, queries see only a prefix */
        {33, 70, 4, 4, 8, 20, 40, LCX_MASK_CAUSAL},  /* ratio 1, rows 0..19 fully masked */
        {33, 70, 2, 1, 8, 10, 100, LCX_MASK_CAUSAL}, /* all rows fully masked */
        {31, 97, 4, 2, 16, 0, 500, LCX_MASK_FULL},   /* full mask ignores positions */
        {20, 129, 8, 8, 4, 7, 3, LCX_MASK_FULL},
        {9, 40, 4, 1, 8, 0, 0, LCX_MASK_NONE},       /* nothing visible */
        {70, 0, 2, 1, 8, 0, 0, LCX_MASK_FULL},       /* empty key block */
        {0, 30, 2, 1, 8, 0, 0, LCX_MASK_CAUSAL},     /* empty query block */
        /* the forward's tiles (256 queries x 512 keys) crossed, with head_dim 64 and 72 (the AVX2 products'
         * 16- and 8-column blocks, row blocks of 6 with a remainder) and 20 (OpenBLAS products) */
        {300, 1100, 3, 1, 64, 800, 0, LCX_MASK_CAUSAL},
        {263, 530, 2, 2, 72, 0, 0, LCX_MASK_FULL},
        {517, 517, 2, 1, 20, 0, 0, LCX_MASK_CAUSAL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        prob p = make(cases[c].nq, cases[c].nk, cases[c].H, cases[c].G, cases[c].hd, cases[c].qoff, cases[c].koff,
                      cases[c].mask, 1.5);
        snprintf(tag, sizeof tag, "case %zu", c);
        check_prob(&p, tag);
        unmake(&p);
    }
    /* random shapes */
    static const int64_t ratios[] = {1, 2, 4, 8};
    for (int t = 0; t < 40; t++) {
        int64_t G = rng_int(1, 2), H = G * ratios[rng_int(0, 3)], hd = 4 * rng_int(1, 5);
        int64_t nq = rng_int(1, 80), nk = rng_int(1, 160);
        int64_t koff = rng_int(0, 100), qoff = rng_int(0, 200);
        lcx_attn_mask mask = rng_int(0, 3) == 0 ? LCX_MASK_FULL : LCX_MASK_CAUSAL;
        prob p = make(nq, nk, H, G, hd, qoff, koff, mask, rng_uniform(0.5, 4.0));
        snprintf(tag, sizeof tag, "random %d (q %lld@%lld k %lld@%lld H %lld G %lld hd %lld mask %d)", t,
                 (long long)nq, (long long)qoff, (long long)nk, (long long)koff, (long long)H, (long long)G,
                 (long long)hd, (int)mask);
        check_prob(&p, tag);
        check_split(&p, rng_int(0, nk), tag);
        unmake(&p);
    }
    /* document masks: the forward's and backward's tiles crossed (AVX2 and OpenBLAS products), one-token
     * documents, documents wider than a tile, causal and full (a ring step's earlier block) */
    static const struct { int64_t nq, nk, H, G, hd, qoff, koff, len; lcx_attn_mask mask; } docs[] = {
        {300, 1100, 3, 1, 64, 800, 0, 200, LCX_MASK_CAUSAL},
        {517, 517, 2, 1, 20, 0, 0, 150, LCX_MASK_CAUSAL},
        {263, 530, 2, 2, 72, 600, 0, 300, LCX_MASK_FULL},
        {40, 40, 4, 2, 8, 0, 0, 1, LCX_MASK_CAUSAL},
        {130, 140, 2, 1, 16, 10, 0, 1000, LCX_MASK_CAUSAL},
    };
    for (size_t c = 0; c < sizeof docs / sizeof docs[0]; c++) {
        prob p = make(docs[c].nq, docs[c].nk, docs[c].H, docs[c].G, docs[c].hd, docs[c].qoff, docs[c].koff,
                      docs[c].mask, 1.5);
        with_docs(&p, docs[c].len);
        snprintf(tag, sizeof tag, "docs %zu", c);
        check_prob(&p, tag);
        check_split(&p, docs[c].nk / 3, tag);
        unmake(&p);
    }
    for (int t = 0; t < 30; t++) {
        int64_t G = rng_int(1, 2), H = G * ratios[rng_int(0, 3)], hd = 4 * rng_int(1, 5);
        int64_t nq = rng_int(1, 80), nk = rng_int(1, 160), koff = rng_int(0, 100), qoff = koff + rng_int(0, 100);
        lcx_attn_mask mask = rng_int(0, 3) == 0 ? LCX_MASK_FULL : LCX_MASK_CAUSAL;
        prob p = make(nq, nk, H, G, hd, qoff, koff, mask, rng_uniform(0.5, 4.0));
        with_docs(&p, rng_int(1, 60));
        snprintf(tag, sizeof tag, "random docs %d (q %lld@%lld k %lld@%lld mask %d)", t, (long long)nq,
                 (long long)qoff, (long long)nk, (long long)koff, (int)mask);
        check_prob(&p, tag);
        check_split(&p, rng_int(0, nk), tag);
        unmake(&p);
    }
    printf("attention vs naive double (%d checks so far)\n", test_checks_);
    CHECK_ERR("forward O (normwise)", worst_fwd_o, 1e-5);
    CHECK_ERR("forward LSE (|d|/(1+|lse|))", worst_fwd_lse, 2e-6);
    CHECK_ERR("backward dQ/dK/dV (rel, floor 1% of max)", worst_bwd, 1e-4);
    CHECK_ERR("merge of two key blocks", worst_merge, 1e-5);
    CHECK_ERR("ring backward (two key blocks, accumulated)", worst_ring, 1e-4);

    /* gradient checks against central differences on small shapes */
    double wn = 0, wo = 0;
    for (int t = 0; t < 9; t++) {
        int64_t G = rng_int(1, 2), H = G * ratios[rng_int(0, 2)], hd = 4 * rng_int(1, 2);
        int64_t nq = rng_int(1, 20), nk = rng_int(1, 24), qoff = rng_int(0, 20), koff = rng_int(0, 10);
        if (t >= 6) qoff = koff = 0, nk = nk > nq ? nk : nq; /* documents: row i sees at least key i */
        prob p = make(nq, nk, H, G, hd, qoff, koff, t % 3 == 2 ? LCX_MASK_FULL : LCX_MASK_CAUSAL, 2.0);
        if (t >= 6) with_docs(&p, 6); /* document masks */
        snprintf(tag, sizeof tag, "fd %d", t);
        grad_check(&p, tag, &wn, &wo);
        unmake(&p);
    }
    CHECK_ERR("naive double backward vs central differences", wn, 1e-8);
    CHECK_ERR("backward (f32) vs central differences", wo, 1e-4);

    /* none-visible mask: O = 0, LSE = -inf, backward adds nothing */
    {
        prob p = make(5, 7, 2, 1, 4, 0, 0, LCX_MASK_NONE, 1.0);
        float *o = rand_f32(p.nqe, -1, 1), *lse = zeros_f32(p.nle), *dk = zeros_f32(p.nke), *dv = zeros_f32(p.nke);
        float *dq = zeros_f32(p.nqe);
        CHECK_OK(attn_fwd(&p.a, p.q, p.k, p.v, o, lse));
        int bad = 0;
        for (int64_t i = 0; i < p.nqe; i++) bad += o[i] != 0.0f;
        for (int64_t i = 0; i < p.nle; i++) bad += lse[i] != -INFINITY;
        CHECK_OK(attn_bwd(&p.a, p.q, p.k, p.v, o, lse, p.go, dq, dk, dv));
        for (int64_t i = 0; i < p.nke; i++) bad += dk[i] != 0.0f || dv[i] != 0.0f;
        for (int64_t i = 0; i < p.nqe; i++) bad += dq[i] != 0.0f;
        /* merging two empty partials stays empty, merging a real partial into an empty one copies it */
        float *o2 = rand_f32(p.nqe, -1, 1), *l2 = zeros_f32(p.nle);
        for (int64_t i = 0; i < p.nle; i++) l2[i] = -INFINITY;
        CHECK_OK(attn_merge(o, lse, o2, l2, 5, 2, 4));
        for (int64_t i = 0; i < p.nqe; i++) bad += o[i] != 0.0f;
        for (int64_t i = 0; i < p.nle; i++) bad += lse[i] != -INFINITY;
        for (int64_t i = 0; i < p.nle; i++) l2[i] = 3.0f;
        CHECK_OK(attn_merge(o, lse, o2, l2, 5, 2, 4));
        for (int64_t i = 0; i < p.nqe; i++) bad += o[i] != o2[i];
        for (int64_t i = 0; i < p.nle; i++) bad += lse[i] != 3.0f;
        CHECK_MSG(bad == 0, "none-visible mask / empty merges: %d wrong values", bad);
        /* merge stays finite for very different LSEs */
        for (int64_t i = 0; i < p.nle; i++) { lse[i] = 80.0f; l2[i] = -80.0f; }
        CHECK_OK(attn_merge(o, lse, o2, l2, 5, 2, 4));
        for (int64_t i = 0; i < p.nle; i++) bad += !(fabsf(lse[i] - 80.0f) < 1e-5f);
        for (int64_t i = 0; i < p.nqe; i++) bad += !isfinite(o[i]);
        CHECK_MSG(bad == 0, "merge of distant LSEs: %d wrong values", bad);
        free(o); free(lse); free(dk); free(dv); free(dq); free(o2); free(l2);
        unmake(&p);
    }

    /* bf16 activations, and arenas one byte short */
    for (int t = 0; t < 8; t++) {
        int64_t G = rng_int(1, 2), H = G * ratios[rng_int(0, 3)], hd = 4 * rng_int(1, 5);
        int64_t nq = rng_int(1, 150), nk = rng_int(1, 300), qoff = rng_int(0, 200), koff = rng_int(0, 100);
        prob p = make(nq, nk, H, G, hd, qoff, koff, t % 4 == 3 ? LCX_MASK_FULL : LCX_MASK_CAUSAL, 2.0);
        if (t % 2) with_docs(&p, 40); /* document masks */
        check_bf16(&p);
        unmake(&p);
    }
    CHECK_ERR("bf16 forward O vs float32 (rel, floor 1%)", worst_b16_o, 0x1p-8 + 1e-6); /* its rounding */
    CHECK_ERR("bf16 forward LSE vs float32", worst_b16_lse, 1e-6);
    CHECK_ERR("bf16 backward vs float32 (rel, floor 1%)", worst_b16_bwd, 1e-5);
    printf("  %d calls checked with an arena one byte short\n", short_checked);
    CHECK(short_checked >= 16);

    /* argument errors */
    {
        lcx_attn_args a = {.dt = LCX_F32, .n_q = 4, .n_k = 4, .n_heads = 3, .n_kv_heads = 2, .head_dim = 8,
                           .mask = LCX_MASK_CAUSAL, .scale = 0.3f};
        float buf[256] = {0};
        CHECK_FAILS(attn_fwd(&a, buf, buf, buf, buf, buf), LCX_ERR_INVALID, "kv_heads=2");
        a.n_heads = 4;
        a.mask = (lcx_attn_mask)7;
        CHECK_FAILS(attn_fwd(&a, buf, buf, buf, buf, buf), LCX_ERR_INVALID, "mask");
        a.mask = LCX_MASK_CAUSAL;
        a.dt = LCX_F16;
        CHECK_FAILS(attn_fwd(&a, buf, buf, buf, buf, buf), LCX_ERR_UNSUPPORTED, "activation dtype F16");
    }
    return test_summary("test_ops_attention");
}
