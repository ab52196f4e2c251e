/* cuda_embedding: row lookup and its scatter-add backward for one vocabulary shard (kernels/cpu/cpu_embedding.c).
 * An id outside the shard, valid or not, reads and writes nothing (forward: a zero row).
 * Backward without float atomics: each thread owns one column d of dweight and walks the tokens in order, adding
 * dout[t, d] to dweight[ids[t] - vocab_start, d] -- every element's sum is formed in token order, as on the CPU,
 * so the result is the CPU's bit for bit. Adjacent threads own adjacent columns (coalesced); the parallelism is
 * `dim` threads, each walking n_tokens tokens (a faster deterministic version, rows grouped by id, is for later). */
#include "kernels/cuda/cuda_device.h"

static __global__ void embedding_fwd(const int32_t *ids, int64_t n_tokens, int64_t n_rows, int64_t dim,
                                     int64_t vocab_start, int w_bf, const void *weight, int out_bf, void *out) {
    LCX_CUDA_FOR(i, n_tokens * dim) {
        const int64_t t = i / dim, d = i % dim, r = (int64_t)ids[t] - vocab_start;
        if (r < 0 || r >= n_rows) {
            if (out_bf) ((uint16_t *)out)[i] = 0; /* +0.0 */
            else ((float *)out)[i] = 0.0f;
        } else if (w_bf && out_bf) {
            ((uint16_t *)out)[i] = ((const uint16_t *)weight)[r * dim + d]; /* bf16 to bf16: the bits */
        } else {
            lcx_dev_store(out, i, lcx_dev_load(weight, r * dim + d, w_bf), out_bf);
        }
    }
}

extern "C" cudaError_t lcx_cuda_embedding_fwd_launch(cudaStream_t s, const lcx_embedding_args *a) {
    const int64_t n = a->n_tokens * a->dim;
    if (n <= 0) return cudaSuccess;
    embedding_fwd<<<lcx_cuda_blocks(n, LCX_CUDA_THREADS), LCX_CUDA_THREADS, 0, s>>>(
        a->ids, a->n_tokens, a->n_rows, a->dim, a->vocab_start, a->w_dtype == LCX_BF16, a->weight,
        a->dt == LCX_BF16, a->out);
    return cudaGetLastError();
}

static __global__ void embedding_bwd(const int32_t *ids, int64_t n_tokens, int64_t n_rows, int64_t dim,
                                     int64_t vocab_start, int bf, const void *dout, float *dweight) {
    LCX_CUDA_FOR(d, dim) {
        for (int64_t t = 0; t < n_tokens; t++) {
            const int64_t r = (int64_t)ids[t] - vocab_start;
            if (r < 0 || r >= n_rows) continue;
            dweight[r * dim + d] = __fadd_rn(dweight[r * dim + d], lcx_dev_load(dout, t * dim + d, bf));
        }
    }
}

extern "C" cudaError_t lcx_cuda_embedding_bwd_launch(cudaStream_t s, const lcx_embedding_args *a) {
    if (a->n_tokens <= 0 || a->dim <= 0 || a->n_rows <= 0) return cudaSuccess;
    embedding_bwd<<<lcx_cuda_blocks(a->dim, 128), 128, 0, s>>>(a->ids, a->n_tokens, a->n_rows, a->dim,
                                                               a->vocab_start, a->dt == LCX_BF16, a->dout,
                                                               a->dweight);
    return cudaGetLastError();
}
