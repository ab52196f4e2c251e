/* cuda_attention_fwd: the flash-style attention forward (kernels/cpu/cpu_attention.c, fwd_tile), float32 math for
 * f32 and bf16 storage. One block per (query tile, head): the tile's 32 query rows stay in shared memory while
 * the key/value tiles of the key block stream through it (keys up to the last visible one of the tile's last
 * row, as the CPU walks them); online softmax per row in float32; O and LSE written once at the end. O(n)
 * memory: nothing of size n_q x n_k exists. GQA by indexing: query head h reads key/value head
 * h / (n_heads / n_kv_heads).
 *
 * Per key tile, a warp computes the scores of its 8 rows with lane = key (the dot product over head_dim in
 * fmaf order), takes the row max and sum of exponentials over the lanes, parks the probabilities in shared
 * memory, and then each lane adds P V into its head dims lane + 32 c. A row with no visible key in a tile keeps
 * its state (the CPU's rule); a row that saw no key at all gets O = 0 and LSE = -inf.
 *
 * Shared memory: Q [32][hd], K [32][hd|1], V [32][hd], P [4 warps][8][32] floats = 4 (32 (3 hd + 1) + 1024)
 * bytes: 28 KiB at head_dim 64, 52 KiB at 128, 100 KiB at 256 (over 48 KiB: opted in, fine on sm_80/sm_90).
 * Differs from the CPU in the order of the sums inside a dot product and a row, and in CUDA's expf/logf. */
#include "kernels/cuda/cuda_attention_tile.h"

static size_t fwd_smem(int hd) {
    return sizeof(float) * ((size_t)ATT_T * (size_t)(2 * hd + att_ld_odd(hd)) + (size_t)ATT_WARPS * ATT_RPW * ATT_T);
}

template <int NC>
static __global__ void __launch_bounds__(ATT_THREADS) attn_fwd(lcx_attn_args a, int bf) {
    extern __shared__ float sm[];
    const int hd = (int)a.head_dim, ldk = att_ld_odd(hd);
    float *qs = sm, *ks = qs + ATT_T * hd, *vs = ks + ATT_T * ldk, *ps = vs + ATT_T * hd;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t H = a.n_heads, G = a.n_kv_heads, h = blockIdx.y, g = h / (H / G);
    const int64_t i0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * ATT_T; /* the longest causal tiles first */
    const int64_t i1 = i0 + ATT_T < a.n_q ? i0 + ATT_T : a.n_q;
    float *pw = ps + warp * ATT_RPW * ATT_T; /* this warp's probabilities [8 rows][32 keys] */

    att_load_tile(qs, hd, a.q, bf, i0, a.n_q, H, h, hd);
    float o[ATT_RPW][NC], m[ATT_RPW], l[ATT_RPW];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++) o[r][c] = 0.0f;
    }
    const int64_t kend_tile = att_key_end(a, i1 - 1); /* the last row sees the most keys */
    /* document mask: each row's first visible key; tiles before every row's document are skipped */
    int64_t kbeg[ATT_RPW];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const int64_t i = i0 + warp * ATT_RPW + r;
        kbeg[r] = i < a.n_q ? att_key_begin(a, i) : 0;
    }
    for (int64_t j0 = att_tile_key_begin(a, i0, i1) / ATT_T * ATT_T; j0 < kend_tile; j0 += ATT_T) {
        __syncthreads(); /* the previous tile's K, V and P are no longer read */
        att_load_tile(ks, ldk, a.k, bf, j0, a.n_k, G, g, hd);
        att_load_tile(vs, hd, a.v, bf, j0, a.n_k, G, g, hd);
        __syncthreads();
        float s[ATT_RPW], unused[ATT_RPW];
        att_dots<false>(s, unused, ks, nullptr, ldk, qs, nullptr, hd, hd); /* lane = key, against the warp's rows */
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            const int64_t i = i0 + warp * ATT_RPW + r;
            float p = 0.0f;
            if (i < a.n_q) { /* uniform over the warp, like every branch around a shuffle here */
                const int vis = lane < att_key_end(a, i) - j0 && lane >= kbeg[r] - j0;
                const float sv = vis ? __fmul_rn(a.scale, s[r]) : -INFINITY;
                const float mt = att_warp_max(sv);
                if (mt != -INFINITY) { /* else nothing visible in this tile: the row keeps its state */
                    const float mnew = fmaxf(m[r], mt);
                    const float corr = m[r] == -INFINITY ? 0.0f : expf(__fsub_rn(m[r], mnew));
                    p = vis ? expf(__fsub_rn(sv, mnew)) : 0.0f;
                    l[r] = __fadd_rn(__fmul_rn(l[r], corr), att_warp_sum(p));
                    m[r] = mnew;
#pragma unroll
                    for (int c = 0; c < NC; c++) o[r][c] = __fmul_rn(o[r][c], corr);
                }
            }
            pw[r * ATT_T + lane] = p;
        }
        __syncwarp();
        att_acc_rows<NC>(o, pw, vs, hd, kend_tile - j0 < ATT_T ? (int)(kend_tile - j0) : ATT_T, hd); /* O += P V */
    }
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const int64_t i = i0 + warp * ATT_RPW + r;
        if (i >= a.n_q) continue;
        const int64_t x = i * H + h;
        const float inv = l[r] == 0.0f ? 0.0f : 1.0f / l[r]; /* l = 0: no visible key at all, O = 0 */
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const int d = lane + 32 * c;
            if (d < hd) lcx_dev_store(a.o, x * hd + d, __fmul_rn(o[r][c], inv), bf);
        }
        if (lane == 0) a.lse[x] = l[r] == 0.0f ? -INFINITY : __fadd_rn(m[r], logf(l[r]));
    }
}

template <int NC>
static cudaError_t fwd_launch(cudaStream_t s, const lcx_attn_args *a) {
    const dim3 grid((unsigned)((a->n_q + ATT_T - 1) / ATT_T), (unsigned)a->n_heads);
    return att_launch(attn_fwd<NC>, grid, fwd_smem((int)a->head_dim), s, *a, a->dt == LCX_BF16);
}

extern "C" cudaError_t lcx_cuda_attention_fwd_launch(cudaStream_t s, const lcx_attn_args *a) {
    if (a->n_q <= 0) return cudaSuccess;
    if (!att_scalar_only() && lcx_cuda_attention_fwd_tc_takes(a)) return lcx_cuda_attention_fwd_tc_launch(s, a);
    ATT_DISPATCH_NC(a->head_dim, fwd_launch, s, a)
}
