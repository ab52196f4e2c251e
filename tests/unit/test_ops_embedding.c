/* Embedding lookup and scatter-add backward, whole vocabulary and one vocab-parallel shard, f32 and bf16
 * tables, f32 and bf16 activations, repeated ids (gradients of one row summed), ids outside [0, vocab) read and
 * write nothing (never validated by the op: the host does it). The reference is a plain loop in double; the
 * backward is also checked as the gradient of sum(r * out) by central differences. */
#include "ops_common.h"
#include "worst_of.h"

typedef struct ctx {
    int64_t T, V, D, start, rows;
    const int32_t *ids;
    double *w, *r; /* w: the shard [rows, D] */
} ctx;

static double loss(void *p) {
    ctx *c = p;
    double s = 0;
    for (int64_t t = 0; t < c->T; t++) {
        int64_t row = c->ids[t] - c->start;
        if (row < 0 || row >= c->rows) continue;
        for (int64_t d = 0; d < c->D; d++) s += c->r[t * c->D + d] * c->w[row * c->D + d];
    }
    return s;
}

static lcx_exec *X;

static lcx_status fwd(lcx_dtype dt, const int32_t *ids, const void *w, lcx_dtype w_dtype, void *out, int64_t T,
                      int64_t rows, int64_t D, int64_t start, int64_t V) {
    lcx_embedding_args a = {.dt = dt, .n_tokens = T, .n_rows = rows, .dim = D, .vocab_start = start, .n_vocab = V,
                            .ids = ids, .w_dtype = w_dtype, .weight = w, .out = out};
    return op_exact(X, LCX_OP_EMBEDDING_FWD, &a);
}
static lcx_status bwd(lcx_dtype dt, const int32_t *ids, const void *dout, float *dw, int64_t T, int64_t rows,
                      int64_t D, int64_t start, int64_t V) {
    lcx_embedding_args a = {.dt = dt, .n_tokens = T, .n_rows = rows, .dim = D, .vocab_start = start, .n_vocab = V,
                            .ids = ids, .dout = dout, .dweight = dw};
    return op_exact(X, LCX_OP_EMBEDDING_BWD, &a);
}

int main(void) {
    X = cpu_exec();
    rng_seed(11);
    const int64_t T = 50, V = 40, D = 70; /* D spans two column blocks of the backward */
    int32_t *ids = malloc(sizeof(int32_t) * T);
    for (int64_t t = 0; t < T; t++) ids[t] = (int32_t)rng_int(0, V - 1);
    ids[1] = ids[0];
    ids[7] = ids[0]; /* repeated id */
    double wf = 0, wb = 0;
    for (int shard = 0; shard < 2; shard++)
        for (int bf = 0; bf < 2; bf++) {
            int64_t start = shard ? 13 : 0, rows = shard ? 15 : V;
            float *w = rand_f32(rows * D, -1, 1);
            uint16_t *wb16 = malloc(sizeof(uint16_t) * (size_t)(rows * D));
            if (bf)
                for (int64_t i = 0; i < rows * D; i++) {
                    wb16[i] = lcx_f32_to_bf16(w[i]);
                    uint32_t u = (uint32_t)wb16[i] << 16;
                    memcpy(&w[i], &u, 4); /* the values the bf16 table holds */
                }
            float *out = rand_f32(T * D, -1, 1), *dout = rand_f32(T * D, -1, 1), *dw = rand_f32(rows * D, -1, 1);
            double *dw0 = to_f64(dw, rows * D), *ref = zeros_f64(T * D);
            CHECK_OK(fwd(LCX_F32, ids, bf ? (const void *)wb16 : (const void *)w, bf ? LCX_BF16 : LCX_F32, out, T, rows,
                         D, start, V));
            for (int64_t t = 0; t < T; t++) {
                int64_t row = ids[t] - start;
                for (int64_t d = 0; d < D; d++) ref[t * D + d] = row >= 0 && row < rows ? w[row * D + d] : 0.0;
            }
            wf = worst_of(wf, rel_err(out, ref, T * D, 1.0));
            /* bf16 activations: the rounded rows (the bf16 table's bits unchanged), and dout widened exactly */
            {
                uint16_t *oh = malloc(2 * (size_t)(T * D)), *gh = to_bf16(dout, T * D);
                float *gw = widen_bf16(gh, T * D), *d1 = zeros_f32(rows * D), *d2 = zeros_f32(rows * D);
                CHECK_OK(fwd(LCX_BF16, ids, bf ? (const void *)wb16 : (const void *)w, bf ? LCX_BF16 : LCX_F32, oh, T,
                             rows, D, start, V));
                CHECK(bf16_mismatch(oh, out, T * D) == 0);
                CHECK_OK(bwd(LCX_F32, ids, gw, d1, T, rows, D, start, V));
                CHECK_OK(bwd(LCX_BF16, ids, gh, d2, T, rows, D, start, V));
                CHECK(memcmp(d1, d2, sizeof(float) * (size_t)(rows * D)) == 0);
                free(oh); free(gh); free(gw); free(d1); free(d2);
            }
            CHECK_OK(bwd(LCX_F32, ids, dout, dw, T, rows, D, start, V));
            ctx c = {T, V, D, start, rows, ids, to_f64(w, rows * D), to_f64(dout, T * D)};
            double *g = zeros_f64(rows * D);
            fd_grad(loss, &c, c.w, rows * D, 1e-3, g); /* linear: any step is exact up to rounding */
            for (int64_t i = 0; i < rows * D; i++) g[i] += dw0[i];
            wb = worst_of(wb, rel_err(dw, g, rows * D, 1e-2));
            free(w); free(wb16); free(out); free(dout); free(dw); free(dw0); free(ref); free(c.w); free(c.r); free(g);
        }
    CHECK_ERR("embedding forward (exact copy expected)", wf, 0.0);
    CHECK_ERR("embedding backward vs central diff. (floor 1%)", wb, 1e-5);
    /* ids outside the vocabulary: a zero row forward, nothing backward (the valid id still works) */
    float buf[8] = {0}, tab[4] = {1, 2, 3, 4}, got[6], dtab[4] = {0}, g[6] = {1, 1, 1, 1, 1, 1};
    int32_t bad[3] = {1, 40, -5};
    memset(got, 0xff, sizeof got);
    CHECK_OK(fwd(LCX_F32, bad, tab, LCX_F32, got, 3, 2, 2, 0, 40));
    CHECK(got[0] == 3 && got[1] == 4 && got[2] == 0 && got[3] == 0 && got[4] == 0 && got[5] == 0);
    CHECK_OK(bwd(LCX_F32, bad, g, dtab, 3, 2, 2, 0, 40));
    CHECK(dtab[0] == 0 && dtab[1] == 0 && dtab[2] == 1 && dtab[3] == 1);
    CHECK_FAILS(fwd(LCX_F32, ids, buf, LCX_F32, buf, 1, 10, 1, 35, 40), LCX_ERR_INVALID, "vocab_start=35");
    CHECK_FAILS(fwd(LCX_F32, ids, buf, LCX_F16, buf, 1, 1, 1, 0, 40), LCX_ERR_UNSUPPORTED, "F16");
    CHECK_FAILS(fwd(LCX_F16, ids, buf, LCX_F32, buf, 1, 1, 1, 0, 40), LCX_ERR_UNSUPPORTED, "activation dtype F16");
    free(ids);
    return test_summary("test_ops_embedding");
}
