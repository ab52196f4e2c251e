/* cuda_attention_bwd: the flash-attention-2 backward of one (query block, key block) pair
 * (kernels/cpu/cpu_attention_bwd.c), float32 math for f32 and bf16 storage, deterministic: no float atomics,
 * every sum has one owner that adds in a fixed order. Three kernels on the stream, in this order:
 *  1. D[i, h] = rowsum(dO * O), one warp per (row, head), in double (the CPU's precision), into the arena (after
 *     it the fused tensor-core backward's counters, which this kernel zeroes).
 *  2. dK, dV: one block per (key tile, kv head). It keeps the tile's K and V in shared memory, walks the query
 *     heads of its group in head order and for each the query tiles that see the key tile (from the one holding
 *     att_row_begin), recomputing P = exp(scale q.k - LSE) and dS = P (dO.v - D), and sums dV += P^T dO,
 *     dK += dS^T Q in registers (lane = query row for the products, lane = head dim for the sums). At the end it
 *     adds scale dK and dV into the caller's accumulators: the group's heads are summed here, never by atomics.
 *  3. dQ: one block per (query tile, head), the forward's geometry: it walks the key tiles the tile sees,
 *     recomputes P and dS the same way (lane = key) and sums dS K in registers; at the end dQ += scale sum.
 * Rows with LSE = -inf (no visible key in the whole context) get no gradient, as on the CPU.
 *
 * Shared memory, floats: dK/dV kernel K, V [32][hd], Q, dO [32][hd|1], LSE, D [32], P, dS [4][8][32]:
 * 40 KiB at head_dim 64, 72 KiB at 128, 136 KiB at 256; dQ kernel Q, dO [32][hd], K, V [32][hd|1], dS [4][8][32]:
 * 36 KiB at 64, 68 KiB at 128, 132 KiB at 256 (over 48 KiB: opted in; sm_80 allows 163 KiB, sm_90 227 KiB).
 * Differs from the CPU in summation order (dot products, the sums over rows and keys: the CPU sums each head's
 * dK/dV apart and adds the heads into the accumulator one by one, this adds one total) and in CUDA's expf. */
#include "kernels/cuda/cuda_attention_tile.h"

/* D[x] = sum over d of dO[x, d] O[x, d] for x = i * n_heads + h, in double (products exact), lanes then a
 * butterfly: fixed order. Also zeroes the n_order counters of the fused tensor-core backward (n_order <= n), which
 * saves a launch. */
static __global__ void attn_bwd_rowdot(int bf, int64_t n, int hd, const void *dout, const void *o, float *D,
                                       int *order, int64_t n_order) {
    const int lane = threadIdx.x % 32;
    const int64_t warps = (int64_t)gridDim.x * (ATT_THREADS / 32);
    for (int64_t x = ((int64_t)blockIdx.x * ATT_THREADS + threadIdx.x) / 32; x < n; x += warps) {
        if (lane == 0 && x < n_order) order[x] = 0;
        double acc = 0.0;
        for (int d = lane; d < hd; d += 32)
            acc = __dadd_rn(acc, __dmul_rn((double)lcx_dev_load(dout, x * hd + d, bf),
                                           (double)lcx_dev_load(o, x * hd + d, bf)));
        for (int off = 16; off > 0; off /= 2) acc = __dadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, off));
        if (lane == 0) D[x] = (float)acc;
    }
}

static size_t dkv_smem(int hd) {
    return sizeof(float) * ((size_t)ATT_T * (size_t)(2 * hd + 2 * att_ld_odd(hd) + 2) +
                            (size_t)2 * ATT_WARPS * ATT_RPW * ATT_T);
}

template <int NC>
static __global__ void __launch_bounds__(ATT_THREADS) attn_bwd_dkv(lcx_attn_args a, int bf, const float *D) {
    extern __shared__ float sm[];
    const int hd = (int)a.head_dim, ldq = att_ld_odd(hd);
    float *ks = sm, *vs = ks + ATT_T * hd, *qs = vs + ATT_T * hd, *gs = qs + ATT_T * ldq, *ls = gs + ATT_T * ldq;
    float *dsh = ls + ATT_T, *ps = dsh + ATT_T, *dss = ps + ATT_WARPS * ATT_RPW * ATT_T;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t H = a.n_heads, G = a.n_kv_heads, rep = H / G, g = blockIdx.y, j0 = (int64_t)blockIdx.x * ATT_T;
    float *pw = ps + warp * ATT_RPW * ATT_T, *dsw = dss + warp * ATT_RPW * ATT_T; /* [8 keys][32 rows] */

    att_load_tile(ks, hd, a.k, bf, j0, a.n_k, G, g, hd);
    att_load_tile(vs, hd, a.v, bf, j0, a.n_k, G, g, hd);
    float dk[ATT_RPW][NC], dv[ATT_RPW][NC];
#pragma unroll
    for (int k = 0; k < ATT_RPW; k++)
#pragma unroll
        for (int c = 0; c < NC; c++) dk[k][c] = dv[k][c] = 0.0f;
    const int64_t ib = att_row_begin(a, j0) / ATT_T * ATT_T; /* the first query tile that sees key j0 */
    for (int64_t h = g * rep; h < (g + 1) * rep; h++) {      /* the group's heads, in head order */
        for (int64_t i0 = ib; i0 < a.n_q; i0 += ATT_T) {
            const int64_t i1 = i0 + ATT_T < a.n_q ? i0 + ATT_T : a.n_q;
            if (att_key_end(a, i1 - 1) <= j0) continue; /* the tile's widest row sees none of these keys */
            if (att_tile_key_begin(a, i0, i1) >= j0 + ATT_T) continue; /* every row's document starts later */
            __syncthreads(); /* the previous tile's Q, dO, P and dS are no longer read (first: K, V loaded) */
            att_load_tile(qs, ldq, a.q, bf, i0, a.n_q, H, h, hd);
            att_load_tile(gs, ldq, a.dout, bf, i0, a.n_q, H, h, hd);
            if (threadIdx.x < ATT_T) {
                const int64_t i = i0 + threadIdx.x;
                ls[threadIdx.x] = i < a.n_q ? a.lse[i * H + h] : -INFINITY;
                dsh[threadIdx.x] = i < a.n_q ? D[i * H + h] : 0.0f;
            }
            __syncthreads();
            /* lane = query row i0 + lane, against this warp's 8 keys */
            float s[ATT_RPW], dp[ATT_RPW];
            att_dots<true>(s, dp, qs, gs, ldq, ks, vs, hd, hd);
            const int64_t i = i0 + lane, kend = i < a.n_q ? att_key_end(a, i) : 0;
            const int64_t kbeg = i < a.n_q ? att_key_begin(a, i) : 0;
#pragma unroll
            for (int k = 0; k < ATT_RPW; k++) {
                const int64_t j = j0 + warp * ATT_RPW + k; /* j < kend implies j < n_k */
                att_p_ds(j < kend && j >= kbeg, a.scale, s[k], dp[k], ls[lane], dsh[lane], &pw[k * ATT_T + lane],
                         &dsw[k * ATT_T + lane]);
            }
            __syncwarp();
            /* lane = head dims: dV[k] += sum_r P[r][k] dO[r], dK[k] += sum_r dS[r][k] Q[r] */
            att_acc_rows<NC>(dv, pw, gs, ldq, (int)(i1 - i0), hd);
            att_acc_rows<NC>(dk, dsw, qs, ldq, (int)(i1 - i0), hd);
        }
    }
    const int64_t jw = j0 + warp * ATT_RPW; /* this warp's keys */
    att_add_rows<NC>(a.dk, dk, jw, a.n_k, G, g, hd, a.scale);
    att_add_rows<NC>(a.dv, dv, jw, a.n_k, G, g, hd, 1.0f);
}

static size_t dq_smem(int hd) {
    return sizeof(float) *
           ((size_t)ATT_T * (size_t)(2 * hd + 2 * att_ld_odd(hd)) + (size_t)ATT_WARPS * ATT_RPW * ATT_T);
}

template <int NC>
static __global__ void __launch_bounds__(ATT_THREADS) attn_bwd_dq(lcx_attn_args a, int bf, const float *D) {
    extern __shared__ float sm[];
    const int hd = (int)a.head_dim, ldk = att_ld_odd(hd);
    float *qs = sm, *gs = qs + ATT_T * hd, *ks = gs + ATT_T * hd, *vs = ks + ATT_T * ldk, *dss = vs + ATT_T * ldk;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t H = a.n_heads, G = a.n_kv_heads, h = blockIdx.y, g = h / (H / G);
    const int64_t i0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * ATT_T; /* the longest causal tiles first */
    const int64_t i1 = i0 + ATT_T < a.n_q ? i0 + ATT_T : a.n_q;
    float *dsw = dss + warp * ATT_RPW * ATT_T; /* [8 rows][32 keys] */

    att_load_tile(qs, hd, a.q, bf, i0, a.n_q, H, h, hd);
    att_load_tile(gs, hd, a.dout, bf, i0, a.n_q, H, h, hd);
    float L[ATT_RPW], Dx[ATT_RPW], acc[ATT_RPW][NC];
    int64_t kend[ATT_RPW], kbeg[ATT_RPW];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const int64_t i = i0 + warp * ATT_RPW + r;
        L[r] = i < a.n_q ? a.lse[i * H + h] : -INFINITY;
        Dx[r] = i < a.n_q ? D[i * H + h] : 0.0f;
        kend[r] = i < a.n_q ? att_key_end(a, i) : 0;
        kbeg[r] = i < a.n_q ? att_key_begin(a, i) : 0;
#pragma unroll
        for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;
    }
    const int64_t kend_tile = att_key_end(a, i1 - 1);
    for (int64_t j0 = att_tile_key_begin(a, i0, i1) / ATT_T * ATT_T; j0 < kend_tile; j0 += ATT_T) {
        __syncthreads(); /* the previous tile's K, V and dS are no longer read (first: Q, dO loaded) */
        att_load_tile(ks, ldk, a.k, bf, j0, a.n_k, G, g, hd);
        att_load_tile(vs, ldk, a.v, bf, j0, a.n_k, G, g, hd);
        __syncthreads();
        /* lane = key j0 + lane, against this warp's 8 query rows */
        float s[ATT_RPW], dp[ATT_RPW];
        att_dots<true>(s, dp, ks, vs, ldk, qs, gs, hd, hd);
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            float p;
            att_p_ds(j0 + lane < kend[r] && j0 + lane >= kbeg[r], a.scale, s[r], dp[r], L[r], Dx[r], &p,
                     &dsw[r * ATT_T + lane]);
        }
        __syncwarp();
        /* lane = head dims: dQ[r] += sum_j dS[r][j] K[j] */
        att_acc_rows<NC>(acc, dsw, ks, ldk, kend_tile - j0 < ATT_T ? (int)(kend_tile - j0) : ATT_T, hd);
    }
    att_add_rows<NC>(a.dq, acc, i0 + warp * ATT_RPW, a.n_q, H, h, hd, a.scale);
}

template <int NC>
static cudaError_t bwd_launch(cudaStream_t s, const lcx_attn_args *a, const float *D) {
    const int hd = (int)a->head_dim, bf = a->dt == LCX_BF16;
    const dim3 kv_grid((unsigned)((a->n_k + ATT_T - 1) / ATT_T), (unsigned)a->n_kv_heads);
    cudaError_t e = att_launch(attn_bwd_dkv<NC>, kv_grid, dkv_smem(hd), s, *a, bf, D);
    if (e != cudaSuccess) return e;
    const dim3 q_grid((unsigned)((a->n_q + ATT_T - 1) / ATT_T), (unsigned)a->n_heads);
    return att_launch(attn_bwd_dq<NC>, q_grid, dq_smem(hd), s, *a, bf, D);
}

extern "C" cudaError_t lcx_cuda_attention_bwd_launch(cudaStream_t s, const lcx_attn_args *a, void *scratch) {
    if (lcx_cuda_attention_bwd_ws(a) == 0) return cudaSuccess; /* no query, no key or no visible key */
    float *D = (float *)scratch;
    const int64_t rows = a->n_q * a->n_heads;
    const int64_t n_order = lcx_cuda_attention_bwd_counters(a);
    int *order = (int *)((char *)scratch + lcx_cuda_ws_part(rows, sizeof(float))); /* lcx_cuda_attention_bwd_ws */
    attn_bwd_rowdot<<<lcx_cuda_blocks(rows, ATT_THREADS / 32), ATT_THREADS, 0, s>>>(
        a->dt == LCX_BF16, rows, (int)a->head_dim, a->dout, a->o, D, order, n_order);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    if (!att_scalar_only() && lcx_cuda_attention_bwd_tc_takes(a))
        return lcx_cuda_attention_bwd_tc_launch(s, a, D, order);
    ATT_DISPATCH_NC(a->head_dim, bwd_launch, s, a, D)
}
