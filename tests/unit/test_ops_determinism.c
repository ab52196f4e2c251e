/* Determinism: every op except matmul gives bit-identical outputs with 1, 2 and 3 OpenMP threads (the
 * backend's promise); matmul is bit-identical from run to run. Shapes span several tiles/blocks of each op so
 * the work is really split between threads. */
#include <omp.h>

#include "ops_common.h"

static lcx_exec *X;

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

/* Runs every op once (each on an arena of exactly its workspace for the current thread count); returns the
 * concatenated outputs. */
static outbuf run_all(const inputs *in) {
    const int64_t nq = (int64_t)T * H * HD, nk = (int64_t)T * G * HD;
    outbuf o = {0};
    float *buf = zeros_f32(T * V > 3 * NV ? T * V : 3 * NV), *buf2 = zeros_f32(T * D);
    /* embedding: table [D, D], ids repeat */
    lcx_embedding_args em = {.dt = LCX_F32, .n_tokens = T, .n_rows = D, .dim = D, .n_vocab = NV, .ids = in->ids,
                             .w_dtype = LCX_F32, .weight = in->w, .out = buf};
    CHECK_OK(op_exact(X, LCX_OP_EMBEDDING_FWD, &em));
    PUTF(&o, buf, T * D);
    memset(buf, 0, sizeof(float) * D * D);
    em.dout = in->x, em.dweight = buf;
    CHECK_OK(op_exact(X, LCX_OP_EMBEDDING_BWD, &em));
    PUTF(&o, buf, D * D);
    /* rmsnorm */
    float *rstd = zeros_f32(T), *dnw = zeros_f32(D);
    lcx_rmsnorm_args rn = {.dt = LCX_F32, .n_rows = T, .dim = D, .eps = 1e-5f, .x = in->x, .w = in->w, .y = buf,
                           .rstd = rstd, .dy = in->x, .dx = buf, .dw = dnw};
    CHECK_OK(op_exact(X, LCX_OP_RMSNORM_FWD, &rn));
    PUTF(&o, buf, T * D);
    PUTF(&o, rstd, T);
    CHECK_OK(op_exact(X, LCX_OP_RMSNORM_BWD, &rn));
    PUTF(&o, buf, T * D);
    PUTF(&o, dnw, D);
    free(rstd);
    free(dnw);
    /* rope */
    lcx_rope_args ro = {.dt = LCX_F32, .n_tokens = T, .n_heads = H, .head_dim = HD, .rot_dim = HD, .n_pos = 4 * T,
                        .x = in->q, .out = buf, .pos = in->pos, .cos = in->cs, .sin = in->sn};
    CHECK_OK(op_exact(X, LCX_OP_ROPE_FWD, &ro));
    PUTF(&o, buf, nq);
    CHECK_OK(op_exact(X, LCX_OP_ROPE_BWD, &ro));
    PUTF(&o, buf, nq);
    /* attention: causal with offsets, fwd + bwd, then merge with a full-mask block */
    float *ao = zeros_f32(nq), *lse = zeros_f32(T * H), *dq = zeros_f32(nq), *dk = zeros_f32(nk), *dv = zeros_f32(nk);
    lcx_attn_args a = {.dt = LCX_F32, .n_q = T, .n_k = T, .n_heads = H, .n_kv_heads = G, .head_dim = HD,
                       .q_offset = 40, .mask = LCX_MASK_CAUSAL, .scale = 0.25f, .q = in->q, .k = in->k, .v = in->v,
                       .o = ao, .lse = lse, .dout = in->go, .dq = dq, .dk = dk, .dv = dv};
    CHECK_OK(op_exact(X, LCX_OP_ATTENTION_FWD, &a));
    PUTF(&o, ao, nq);
    PUTF(&o, lse, T * H);
    CHECK_OK(op_exact(X, LCX_OP_ATTENTION_BWD, &a));
    PUTF(&o, dq, nq);
    PUTF(&o, dk, nk);
    PUTF(&o, dv, nk);
    float *bo = zeros_f32(nq), *bl = zeros_f32(T * H);
    lcx_attn_args b = a;
    b.mask = LCX_MASK_FULL, b.o = bo, b.lse = bl;
    CHECK_OK(op_exact(X, LCX_OP_ATTENTION_FWD, &b));
    lcx_attn_merge_args mg = {.dt = LCX_F32, .n_rows = T, .n_heads = H, .head_dim = HD, .o_acc = ao, .lse_acc = lse,
                              .o_part = bo, .lse_part = bl};
    CHECK_OK(op_exact(X, LCX_OP_ATTENTION_MERGE, &mg));
    PUTF(&o, ao, nq);
    PUTF(&o, lse, T * H);
    free(ao); free(lse); free(bo); free(bl); free(dq); free(dk); free(dv);
    /* swiglu */
    lcx_swiglu_args sw = {.dt = LCX_F32, .n = T * D, .gate = in->x, .up = in->w, .h = buf, .dh = in->x, .dgate = buf,
                          .dup = buf2};
    CHECK_OK(op_exact(X, LCX_OP_SWIGLU_FWD, &sw));
    PUTF(&o, buf, T * D);
    CHECK_OK(op_exact(X, LCX_OP_SWIGLU_BWD, &sw));
    PUTF(&o, buf, T * D);
    PUTF(&o, buf2, T * D);
    /* cross-entropy (device loss and count, accumulated from 0) */
    double loss = 0;
    int64_t cnt = 0;
    lcx_xent_args xe = {.dt = LCX_F32, .n_rows = T, .vocab = V, .dscale = 0.01f, .logits = in->lg, .targets = in->tg,
                        .dlogits = buf, .loss_sum = &loss, .count = &cnt};
    CHECK_OK(op_exact(X, LCX_OP_CROSS_ENTROPY, &xe));
    PUTF(&o, buf, T * V);
    put(&o, &loss, sizeof loss);
    /* adamw with bf16 copy-out */
    float *prm = buf, *m = buf + NV, *vv = buf + 2 * NV;
    memcpy(prm, in->big, sizeof(float) * NV);
    memset(m, 0, sizeof(float) * 2 * NV);
    uint16_t bf[NV];
    lcx_adamw_args ad = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 3,
                         .grad_scale = 0.5, .n = NV, .param = prm, .grad = in->big + NV, .m = m, .v = vv,
                         .param_bf16 = bf};
    CHECK_OK(op_exact(X, LCX_OP_ADAMW, &ad));
    PUTF(&o, buf, 3 * NV);
    put(&o, bf, sizeof bf);
    double sq = 0;
    lcx_sqnorm_args sa = {.n = 2 * NV, .x = in->big, .out = &sq};
    CHECK_OK(op_exact(X, LCX_OP_SQNORM, &sa));
    put(&o, &sq, sizeof sq);
    free(buf);
    free(buf2);
    return o;
}

int main(void) {
    X = cpu_exec();
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
    lcx_cast_args ca = {.n = D * D, .src_dt = LCX_F32, .dst_dt = LCX_BF16, .src = in.w, .dst = wb};
    CHECK_OK(op_exact(X, LCX_OP_CAST, &ca));
    lcx_matmul_args g = {.trans_b = 1, .m = T, .n = D, .k = D, .batch = 1, .alpha = 1, .a_dtype = LCX_F32,
                         .a = in.x, .b_dtype = LCX_BF16, .b = wb, .c = c1};
    CHECK_OK(op_exact(X, LCX_OP_MATMUL, &g));
    g.c = c2;
    CHECK_OK(op_exact(X, LCX_OP_MATMUL, &g));
    CHECK(memcmp(c1, c2, sizeof(float) * T * D) == 0);
    free(c1); free(c2); free(wb); free(r1.p); free(r2.p); free(r3.p);
    free(in.x); free(in.w); free(in.q); free(in.k); free(in.v); free(in.go); free(in.cs); free(in.sn); free(in.lg);
    free(in.big);
    return test_summary("test_ops_determinism");
}
