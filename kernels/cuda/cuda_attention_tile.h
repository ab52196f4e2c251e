/* cuda_attention_tile: what the flash attention kernels share (cuda_attention_fwd.cu, cuda_attention_bwd.cu):
 * the tile shape, the mask geometry of kernels/cpu/cpu_attention_common.h, tile loads into shared memory (the
 * tensor-core kernels' by cp.async) and warp reductions. Included by .cu files only.
 *
 * Tile shape (every kernel): ATT_T = 32 query rows and 32 keys per tile, 4 warps of 32 lanes. A warp owns
 * ATT_RPW = 8 rows of the tile (the forward and dQ: query rows; dK/dV: keys); in the score products a lane owns
 * one key (forward, dQ) or one query row (dK/dV), in the accumulations it owns the head dims lane + 32 c,
 * c < NC = ceil(head_dim / 32) <= 8 (a template parameter, so the accumulators stay in registers). */
#ifndef LCX_KERNELS_CUDA_ATTENTION_TILE_H
#define LCX_KERNELS_CUDA_ATTENTION_TILE_H

#include <stdlib.h>

#include "kernels/cuda/cuda_cp_async.h"
#include "kernels/cuda/cuda_device.h"

enum { ATT_T = 32, ATT_WARPS = 4, ATT_THREADS = ATT_WARPS * 32, ATT_RPW = ATT_T / ATT_WARPS };

/* Number of visible keys of query row i (a prefix of the key block): att_key_end of the CPU. */
static __device__ __forceinline__ int64_t att_key_end(const lcx_attn_args &a, int64_t i) {
    if (a.mask == LCX_MASK_NONE) return 0;
    if (a.mask == LCX_MASK_FULL) return a.n_k;
    const int64_t e = a.q_offset + i - a.k_offset + 1; /* keys at positions <= the query's position */
    return e < 0 ? 0 : e > a.n_k ? a.n_k : e;
}

/* The first visible key of a row whose document starts at global position doc: the key block's index of it,
 * clamped to [0, n_k]. Monotone in doc, so the smallest (largest) start of some rows gives their first key. */
static __device__ __forceinline__ int64_t att_doc_key(const lcx_attn_args &a, int32_t doc) {
    const int64_t b = (int64_t)doc - a.k_offset;
    return b < 0 ? 0 : b > a.n_k ? a.n_k : b;
}

/* First visible key of query row i: 0, or with a document mask the first key of its document (att_key_begin of
 * the CPU). */
static __device__ __forceinline__ int64_t att_key_begin(const lcx_attn_args &a, int64_t i) {
    return a.q_doc_start ? att_doc_key(a, a.q_doc_start[i]) : 0;
}

/* The smallest att_key_begin of rows [i0, i1) (n_k when empty): key tiles before it hold nothing visible. Every
 * thread reads the same rows, so the result is uniform over the block. */
static __device__ __forceinline__ int64_t att_tile_key_begin(const lcx_attn_args &a, int64_t i0, int64_t i1) {
    if (!a.q_doc_start) return 0;
    int64_t b = a.n_k;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t bi = att_key_begin(a, i);
        b = bi < b ? bi : b;
    }
    return b;
}

/* First query row that may see key j (n_q if none): att_row_begin of the CPU (exact without a document mask). */
static __device__ __forceinline__ int64_t att_row_begin(const lcx_attn_args &a, int64_t j) {
    if (a.mask == LCX_MASK_NONE) return a.n_q;
    if (a.mask == LCX_MASK_FULL) return 0;
    const int64_t b = a.k_offset + j - a.q_offset;
    return b < 0 ? 0 : b > a.n_q ? a.n_q : b;
}

/* Row stride in shared memory of a tile read with one row per lane: odd, so that the 32 lanes' rows fall in 32
 * different banks. */
static __host__ __device__ __forceinline__ int att_ld_odd(int hd) { return hd | 1; }

/* Rows r0 .. r0 + ATT_T - 1 of head `head` of an act tensor [n][nh][hd] into sh[ATT_T][ld] as float32; rows
 * at or past n become 0. Called by the whole block (coalesced along the head dims). */
static __device__ __forceinline__ void att_load_tile(float *sh, int ld, const void *src, int bf, int64_t r0,
                                                     int64_t n, int64_t nh, int64_t head, int hd) {
    for (int e = threadIdx.x; e < ATT_T * hd; e += ATT_THREADS) {
        const int r = e / hd, d = e - r * hd;
        const int64_t row = r0 + r;
        sh[r * ld + d] = row < n ? lcx_dev_load(src, (row * nh + head) * hd + d, bf) : 0.0f;
    }
}

/* Max / sum over the 32 lanes of a warp as a butterfly: every lane ends with the same bits (each step adds the
 * same two values on both partners, and float addition commutes). */
static __device__ __forceinline__ float att_warp_max(float v) {
    for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
static __device__ __forceinline__ float att_warp_sum(float v) {
    for (int off = 16; off > 0; off /= 2) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
static __device__ __forceinline__ int att_warp_min_i(int v) {
    for (int off = 16; off > 0; off /= 2) {
        const int o = __shfl_xor_sync(0xffffffffu, v, off);
        v = o < v ? o : v;
    }
    return v;
}
static __device__ __forceinline__ int att_warp_max_i(int v) {
    for (int off = 16; off > 0; off /= 2) {
        const int o = __shfl_xor_sync(0xffffffffu, v, off);
        v = o > v ? o : v;
    }
    return v;
}

/* The smallest *lo and the largest *hi over the block's threads, into every thread's *lo and *hi: the warps' by
 * shuffles, then through red (2 ints a warp of shared memory that nothing else uses). Called by the whole block
 * (the tensor-core kernels, on their rows' document starts). */
static __device__ __forceinline__ void att_block_min_max(int *lo, int *hi, int *red, int warps) {
    int l = att_warp_min_i(*lo), h = att_warp_max_i(*hi);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = l, red[warps + threadIdx.x / 32] = h;
    __syncthreads();
    for (int w = 0; w < warps; w++) {
        l = red[w] < l ? red[w] : l;
        h = red[warps + w] > h ? red[warps + w] : h;
    }
    *lo = l, *hi = h;
}

/* The dot products over head_dim of the score side, in fmaf order: s[r] = x[lane] . y[w + r] for the warp's 8 rows
 * w + r of y (broadcast reads, row stride ldy) against the lane's row of x (row stride ldx, odd: no bank
 * conflicts); with TWO also t[r] = x2[lane] . y2[w + r] in the same pass (the backward's dO . v). */
template <bool TWO>
static __device__ __forceinline__ void att_dots(float (&s)[ATT_RPW], float (&t)[ATT_RPW], const float *x,
                                                const float *x2, int ldx, const float *y, const float *y2, int ldy,
                                                int hd) {
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32 * ATT_RPW;
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) s[r] = t[r] = 0.0f;
    for (int d = 0; d < hd; d++) {
        const float xd = x[lane * ldx + d], x2d = TWO ? x2[lane * ldx + d] : 0.0f;
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            s[r] = fmaf(xd, y[(w + r) * ldy + d], s[r]);
            if (TWO) t[r] = fmaf(x2d, y2[(w + r) * ldy + d], t[r]);
        }
    }
}

/* acc[r][c] += sum over j < jn of w[r][j] m[j][lane + 32 c] for the warp's 8 rows r: w is the warp's
 * [8][32] tile of probabilities or dS in shared memory, m a shared tile with row stride ld. The forward's P V,
 * dQ's dS K, and (w indexed [key][row], summing over rows) dK's dS^T Q and dV's P^T dO. */
template <int NC>
static __device__ __forceinline__ void att_acc_rows(float (&acc)[ATT_RPW][NC], const float *w, const float *m, int ld,
                                                    int jn, int hd) {
    const int lane = threadIdx.x % 32;
    for (int j = 0; j < jn; j++) {
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int d = lane + 32 * c;
            const float md = d < hd ? m[j * ld + d] : 0.0f;
#pragma unroll
            for (int r = 0; r < ATT_RPW; r++) acc[r][c] = fmaf(w[r * ATT_T + j], md, acc[r][c]);
        }
    }
}

/* dst[row0 + r, head, lane + 32 c] += scale acc[r][c] for the warp's rows below n (dst f32 [n][nh][hd], owned by
 * this block: a plain +=). */
template <int NC>
static __device__ __forceinline__ void att_add_rows(float *dst, const float (&acc)[ATT_RPW][NC], int64_t row0,
                                                    int64_t n, int64_t nh, int64_t head, int hd, float scale) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        if (row0 + r >= n) continue;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int d = lane + 32 * c;
            if (d >= hd) continue;
            const int64_t e = ((row0 + r) * nh + head) * hd + d;
            dst[e] = __fadd_rn(dst[e], __fmul_rn(scale, acc[r][c]));
        }
    }
}

/* Queue the copy (cp.async, 16 bytes each; the tensor-core kernels) of `rows` rows of head h of a bf16 tensor
 * [n][heads][HD], from row r0, into dst [rows][ld]; rows at or past n are zeroed at once (they enter products
 * with weight 0, and 0 * NaN would not be 0). Called by the whole block of `threads` threads. */
template <int HD>
static __device__ __forceinline__ void att_tc_load_rows(uint16_t *dst, int ld, const uint16_t *src, int64_t r0,
                                                        int rows, int64_t n, int64_t heads, int64_t h, int threads) {
    constexpr int CH = HD / 8;
    for (int e = threadIdx.x; e < rows * CH; e += threads) {
        const int r = e / CH, c = e % CH * 8;
        uint16_t *d = dst + r * ld + c;
        if (r0 + r < n) lcx_cp_async16(d, src + ((r0 + r) * heads + h) * HD + c);
        else
            for (int z = 0; z < 8; z++) d[z] = 0;
    }
}

/* Queue keys j0.. of K and V (kv head kvh) into buf: K as [rows][ld], V right after it. */
template <int HD>
static __device__ __forceinline__ void att_tc_load_kv(uint16_t *buf, int ld, const lcx_attn_args &a, int64_t j0,
                                                      int rows, int64_t kvh, int threads) {
    att_tc_load_rows<HD>(buf, ld, (const uint16_t *)a.k, j0, rows, a.n_k, a.n_kv_heads, kvh, threads);
    att_tc_load_rows<HD>(buf + rows * ld, ld, (const uint16_t *)a.v, j0, rows, a.n_k, a.n_kv_heads, kvh, threads);
}

/* The double-buffer step of the tensor-core kernels: with the next tile just queued (next), close its group and
 * wait for every older one; else wait for all. Then this thread's copies of the current tile have landed (a
 * __syncthreads after it makes every thread's visible). */
static __device__ __forceinline__ void att_tc_wait_current(bool next) {
    if (next) {
        lcx_cp_async_commit();
        lcx_cp_async_wait<1>();
    } else {
        lcx_cp_async_wait<0>();
    }
}

/* P and dS of one (query row, key) pair from the raw dot products; 0 for a masked pair or a row without keys. */
static __device__ __forceinline__ void att_p_ds(int vis, float scale, float s, float dp, float L, float Dx, float *p,
                                                float *ds) {
    if (!vis || L == -INFINITY) {
        *p = *ds = 0.0f;
        return;
    }
    *p = expf(__fsub_rn(__fmul_rn(scale, s), L));
    *ds = __fmul_rn(*p, __fsub_rn(dp, Dx));
}

/* Opt a kernel into more than 48 KiB of dynamic shared memory when it needs it (sm_80: up to 163 KiB,
 * sm_90: 227 KiB), then launch it on grid x threads (att_launch: the scalar kernels' ATT_THREADS). */
template <typename K, typename... Args>
static cudaError_t att_launch_n(K kernel, dim3 grid, int threads, size_t smem, cudaStream_t s, Args... args) {
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    kernel<<<grid, threads, smem, s>>>(args...);
    return cudaGetLastError();
}
template <typename K, typename... Args>
static cudaError_t att_launch(K kernel, dim3 grid, size_t smem, cudaStream_t s, Args... args) {
    return att_launch_n(kernel, grid, ATT_THREADS, smem, s, args...);
}

/* Whether the environment variable `name` is set to 1. */
static inline int att_env_on(const char *name) {
    const char *e = getenv(name);
    return e && e[0] == '1';
}

/* LCX_CUDA_ATTN_SCALAR=1 keeps every call on the scalar kernels (to compare them with the tensor-core ones). */
static inline int att_scalar_only(void) {
    static int v = -1;
    if (v < 0) v = att_env_on("LCX_CUDA_ATTN_SCALAR");
    return v;
}

/* LCX_CUDA_ATTN_BWD_BF16=1: the tensor-core backward's P and dS enter their products as one bf16 term each, as
 * FlashAttention 2's (cuda_attention_bwd_tc.cu), instead of a hi + lo pair. Read at every call, so that a test can
 * run both in one process. */
static inline int att_bwd_bf16_ps(void) { return att_env_on("LCX_CUDA_ATTN_BWD_BF16"); }

/* LCX_CUDA_ATTN_BWD_FUSED=1: the tensor-core backward computes dQ in the dK/dV pass and adds it in key-block order
 * (cuda_order.h) instead of recomputing S and dP in a pass of its own (cuda_attention_bwd_tc.cu). Read at every
 * call, as above. */
static inline int att_bwd_fused(void) { return att_env_on("LCX_CUDA_ATTN_BWD_FUSED"); }

/* LCX_CUDA_ATTN_FWD_ROWS64=1: the tensor-core forward runs 64-row query blocks (one 16-row tile per warp) instead
 * of 128 (two), to compare the two (cuda_attention_fwd_tc.cu). Read at every call, as above. */
static inline int att_fwd_rows64(void) { return att_env_on("LCX_CUDA_ATTN_FWD_ROWS64"); }

/* LCX_CUDA_ATTN_BWD_KEYS64=1: the tensor-core backward's dK/dV blocks own 64 keys (4 warps) at every head_dim,
 * instead of 128 (8 warps) at head_dim 64 and 128 (cuda_attention_bwd_tc.cu). Read at every call, as above. */
static inline int att_bwd_keys64(void) { return att_env_on("LCX_CUDA_ATTN_BWD_KEYS64"); }

/* Instantiate fn<NC> for NC = ceil(hd / 32) in 1..8 (the backend refuses head_dim > LCX_CUDA_ATTN_MAX_HEAD_DIM). */
#define ATT_DISPATCH_NC(hd, fn, ...)                                                                              \
    switch (((hd) + 31) / 32) {                                                                                  \
    case 1: return fn<1>(__VA_ARGS__);                                                                           \
    case 2: return fn<2>(__VA_ARGS__);                                                                           \
    case 3: return fn<3>(__VA_ARGS__);                                                                           \
    case 4: return fn<4>(__VA_ARGS__);                                                                           \
    case 5: return fn<5>(__VA_ARGS__);                                                                           \
    case 6: return fn<6>(__VA_ARGS__);                                                                           \
    case 7: return fn<7>(__VA_ARGS__);                                                                           \
    case 8: return fn<8>(__VA_ARGS__);                                                                           \
    default: return cudaErrorInvalidValue;                                                                       \
    }

#endif /* LCX_KERNELS_CUDA_ATTENTION_TILE_H */
