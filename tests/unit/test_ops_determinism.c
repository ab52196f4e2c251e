/* Determinism: every op except matmul gives bit-identical outputs with 1, 2 and 3 OpenMP threads (the
 * backend's promise); matmul is bit-identical from run to run. Shapes span several tiles/blocks of each op so
 * the work is really split between threads. */
#include <omp.h>

#include "ops_common.h"

static const lcx_backend *be;

/* Sizes */
enum { T = 150, H = 8, G = 2, HD = 16, D = 200, V = 300, NV = 5000 };

typedef struct inputs {
    int32_t ids[T], pos[T], tg[T];
    float *x, *w, *q, *k, *v, *go, *cs, *sn, *lg, *big;
} inputs;

/* All outputs of one run, concatenated as bytes. */
typedef struct outbuf {
    unsigned char *p;
    size_t n;
} outbuf;

static void put(outbuf *o, const void *src, size_t bytes) {
    o->p = realloc(o->p, o->n + bytes);
    memcpy(o->p + o->n, src, bytes);
    o->n += bytes;
}
#define PUTF(o, ptr, count) put((o), (ptr), sizeof(float) * (size_t)(count))

/* Runs every op once; returns the concatenated outputs. */
static outbuf run_all(const inputs *in) {
    const int64_t nq = (int64_t)T * H * HD, nk = (int64_t)T * G * HD;
    outbuf o = {0};
    float *buf = zeros_f32(T * V > 3 * NV ? T * V : 3 * NV), *buf2 = zeros_f32(T * D);
    /* embedding: table [D, D], ids repeat */
    CHECK_OK(be->embedding_fwd(in->ids, in->w, LCX_F32, buf, T, D, D, 0, NV));
    PUTF(&o, buf, T * D);
    memset(buf, 0, sizeof(float) * D * D);
    CHECK_OK(be->embedding_bwd(in->ids, in->x, buf, T, D, D, 0, NV));
    PUTF(&o, buf, D * D);
    /* rmsnorm */
    float *rstd = zeros_f32(T), *dnw = zeros_f32(D);
    CHECK_OK(be->rmsnorm_fwd(in->x, in->w, buf, rstd, T, D, 1e-5f));
    PUTF(&o, buf, T * D);
    PUTF(&o, rstd, T);
    CHECK_OK(be->rmsnorm_bwd(in->x, in->x, in->w, rstd, buf, dnw, T, D));
    PUTF(&o, buf, T * D);
    PUTF(&o, dnw, D);
    free(rstd);
    free(dnw);
    /* rope */
    CHECK_OK(be->rope_fwd(in->q, buf, in->pos, in->cs, in->sn, T, H, HD, HD, 4 * T));
    PUTF(&o, buf, nq);
    CHECK_OK(be->rope_bwd(in->q, buf, in->pos, in->cs, in->sn, T, H, HD, HD, 4 * T));
    PUTF(&o, buf, nq);
    /* attention: causal with offsets, fwd + bwd, then merge with a full-mask block */
    lcx_attn_args a = {T, T, H, G, HD, 40, 0, LCX_MASK_CAUSAL, 0.25f};
    float *ao = zeros_f32(nq), *lse = zeros_f32(T * H), *dq = zeros_f32(nq), *dk = zeros_f32(nk), *dv = zeros_f32(nk);
    CHECK_OK(be->attention_fwd(&a, in->q, in->k, in->v, ao, lse));
    PUTF(&o, ao, nq);
    PUTF(&o, lse, T * H);
    CHECK_OK(be->attention_bwd(&a, in->q, in->k, in->v, ao, lse, in->go, dq, dk, dv));
    PUTF(&o, dq, nq);
    PUTF(&o, dk, nk);
    PUTF(&o, dv, nk);
    lcx_attn_args b = a;
    b.mask = LCX_MASK_FULL;
    float *bo = zeros_f32(nq), *bl = zeros_f32(T * H);
    CHECK_OK(be->attention_fwd(&b, in->q, in->k, in->v, bo, bl));
    CHECK_OK(be->attention_merge(ao, lse, bo, bl, T, H, HD));
    PUTF(&o, ao, nq);
    PUTF(&o, lse, T * H);
    free(ao); free(lse); free(bo); free(bl); free(dq); free(dk); free(dv);
    /* swiglu */
    CHECK_OK(be->swiglu_fwd(in->x, in->w, buf, T * D));
    PUTF(&o, buf, T * D);
    CHECK_OK(be->swiglu_bwd(in->x, in->x, in->w, buf, buf2, T * D));
    PUTF(&o, buf, T * D);
    PUTF(&o, buf2, T * D);
    /* cross-entropy */
    double loss;
    int64_t cnt;
    CHECK_OK(be->cross_entropy(in->lg, in->tg, buf, T, V, 0.01f, &loss, &cnt));
    PUTF(&o, buf, T * V);
    put(&o, &loss, sizeof loss);
    /* adamw with bf16 copy-out */
    float *prm = buf, *m = buf + NV, *vv = buf + 2 * NV;
    memcpy(prm, in->big, sizeof(float) * NV);
    memset(m, 0, sizeof(float) * 2 * NV);
    uint16_t bf[NV];
    lcx_adamw_args ad = {1e-3, 0.9, 0.95, 1e-8, 0.1, 3, 0.5};
    CHECK_OK(be->adamw(&ad, prm, in->big + NV, m, vv, bf, NV));
    PUTF(&o, buf, 3 * NV);
    put(&o, bf, sizeof bf);
    double sq;
    CHECK_OK(be->sqnorm(in->big, 2 * NV, &sq));
    put(&o, &sq, sizeof sq);
    free(buf);
    free(buf2);
    return o;
}

int main(void) {
    be = cpu();
    rng_seed(55);
    inputs in;
    for (int t = 0; t < T; t++) {
        in.ids[t] = (int32_t)rng_int(0, D - 1); /* rows of the first D ids: many repeats */
        in.pos[t] = (int32_t)rng_int(0, 4 * T - 1);
        in.tg[t] = t % 9 == 0 ? LCX_IGNORE_INDEX : (int32_t)rng_int(0, V - 1);
    }
    in.x = rand_f32(T * D, -2, 2);
    in.w = rand_f32(D * D, -1, 1); /* [D, D] table and weight; its first T*D values serve as [T, D] data */
    in.q = rand_f32(T * H * HD, -1, 1);
    in.k = rand_f32(T * G * HD, -1, 1);
    in.v = rand_f32(T * G * HD, -1, 1);
    in.go = rand_f32(T * H * HD, -1, 1);
    in.cs = rand_f32(4 * T * HD / 2, -1, 1);
    in.sn = rand_f32(4 * T * HD / 2, -1, 1);
    in.lg = rand_f32(T * V, -4, 4);
    in.big = rand_f32(2 * NV, -1, 1);

    omp_set_num_threads(1);
    outbuf r1 = run_all(&in);
    omp_set_num_threads(2);
    outbuf r2 = run_all(&in);
    omp_set_num_threads(3);
    outbuf r3 = run_all(&in);
    CHECK(r1.n == r2.n && r2.n == r3.n);
    CHECK_MSG(memcmp(r1.p, r2.p, r1.n) == 0, "1 vs 2 threads differ");
    CHECK_MSG(memcmp(r1.p, r3.p, r1.n) == 0, "1 vs 3 threads differ");
    size_t nonzero = 0;
    for (size_t i = 0; i < r1.n; i++) nonzero += r1.p[i] != 0;
    CHECK(nonzero > r1.n / 2); /* the comparison covered real outputs */
    printf("  %zu output bytes compared across 1/2/3 threads\n", r1.n);

    /* matmul: run to run (bf16 weights, the y = x W^T shape) */
    float *c1 = zeros_f32(T * V), *c2 = zeros_f32(T * V);
    uint16_t *wb = malloc(sizeof(uint16_t) * D * D);
    CHECK_OK(be->cast_f32_to_bf16(in.w, wb, D * D));
    lcx_matmul_args g = {.trans_b = 1, .m = T, .n = D, .k = D, .batch = 1, .alpha = 1, .a_dtype = LCX_F32,
                         .a = in.x, .b_dtype = LCX_BF16, .b = wb, .c = c1};
    CHECK_OK(be->matmul(&g));
    g.c = c2;
    CHECK_OK(be->matmul(&g));
    CHECK(memcmp(c1, c2, sizeof(float) * T * D) == 0);
    free(c1); free(c2); free(wb); free(r1.p); free(r2.p); free(r3.p);
    free(in.x); free(in.w); free(in.q); free(in.k); free(in.v); free(in.go); free(in.cs); free(in.sn); free(in.lg);
    free(in.big);
    return test_summary("test_ops_determinism");
}
