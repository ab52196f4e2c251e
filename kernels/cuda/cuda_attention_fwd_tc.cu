/* cuda_attention_fwd_tc: the attention forward on tensor cores, for bf16 storage and head_dim 32, 64, 96 or 128
 * (cuda_attention_fwd.cu takes every other call, and f32 storage, in scalar float32). The same contract: LSE,
 * q/k offsets, the three masks, GQA by indexing, O(n) memory, a row with no visible key gets O = 0, LSE = -inf.
 *
 * One block of 4 warps per (64 query rows, head); a warp owns 16 rows. Q's fragments stay in registers; per
 * 64-key tile, K and V^T pass through shared memory, S = Q K^T and O += P V are mma.sync m16n8k16 (bf16 in,
 * float32 accumulate, cuda_mma.h), and the online softmax runs on S's accumulator fragments in float32 (a row's
 * max and sum over the 4 lanes that hold it by shuffles; base-2 exponentials of scores prescaled by
 * scale * log2(e)). The row sum l is taken from the float32 probabilities; P V takes them rounded to bf16, as
 * FlashAttention does: that one rounding changes O by at most 2^-9 sum_j (p_j / l) |v_j| <= 2^-9 max |v|, which the
 * bf16 op cases allow for explicitly (tests/unit/backend_ops_cases.h).
 *
 * Shared memory (bf16): Q [64][hd + 8], K [64][hd + 8], V^T [hd][64 + 8]: 27 KiB at head_dim 64, 53 KiB at 128
 * (opted in). Rows padded by 8 elements so the fragment loads of a warp hit 32 different banks. */
#include "kernels/cuda/cuda_attention_tile.h"
#include "kernels/cuda/cuda_mma.h"

enum { TC_M = 64, TC_N = 64, TC_THREADS = 128, TC_PAD = 8 };

static size_t tc_fwd_smem(int hd) {
    return sizeof(uint16_t) * ((size_t)(TC_M + TC_N) * (size_t)(hd + TC_PAD) + (size_t)hd * (TC_N + TC_PAD));
}

template <int HD>
static __global__ void __launch_bounds__(TC_THREADS) attn_fwd_tc(lcx_attn_args a) {
    extern __shared__ float sm[];
    constexpr int LDQ = HD + TC_PAD, LDV = TC_N + TC_PAD, KS = HD / 16, ND = HD / 8, NT = TC_N / 8;
    uint16_t *qs = (uint16_t *)sm, *ks = qs + TC_M * LDQ, *vt = ks + TC_N * LDQ;
    const uint16_t *q = (const uint16_t *)a.q, *k = (const uint16_t *)a.k, *v = (const uint16_t *)a.v;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t H = a.n_heads, G = a.n_kv_heads, h = blockIdx.y, kvh = h / (H / G);
    const int64_t i0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * TC_M; /* the longest causal tiles first */
    const int64_t i1 = i0 + TC_M < a.n_q ? i0 + TC_M : a.n_q;

    for (int e = threadIdx.x; e < TC_M * HD / 2; e += TC_THREADS) {
        const int r = e / (HD / 2), c = e % (HD / 2) * 2;
        const int64_t row = i0 + r;
        *(uint32_t *)(qs + r * LDQ + c) = row < a.n_q ? lcx_mma_ld32(q + (row * H + h) * HD + c) : 0u;
    }
    __syncthreads();
    const int wr = warp * 16;
    uint32_t qa[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) lcx_mma_frag_a(qa[kk], qs, LDQ, wr, kk * 16);
    /* this lane's two rows (fragment rows g and g + 8) and how many keys each sees */
    const int64_t row[2] = {i0 + wr + g, i0 + wr + g + 8};
    int64_t kend[2];
#pragma unroll
    for (int x = 0; x < 2; x++) kend[x] = row[x] < a.n_q ? att_key_end(a, row[x]) : 0;
    const float sl2 = __fmul_rn(a.scale, 1.4426950408889634f); /* scale * log2(e) */
    float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;

    const int64_t kend_tile = att_key_end(a, i1 - 1); /* the block's last row sees the most keys */
    for (int64_t j0 = 0; j0 < kend_tile; j0 += TC_N) {
        __syncthreads(); /* every warp is done with the previous K and V^T */
        for (int e = threadIdx.x; e < TC_N * HD / 2; e += TC_THREADS) {
            const int r = e / (HD / 2), c = e % (HD / 2) * 2;
            const int64_t key = j0 + r;
            uint32_t kv = 0u, vv = 0u;
            if (key < a.n_k) {
                const int64_t at = (key * G + kvh) * HD + c;
                kv = lcx_mma_ld32(k + at), vv = lcx_mma_ld32(v + at);
            }
            *(uint32_t *)(ks + r * LDQ + c) = kv;
            vt[c * LDV + r] = (uint16_t)vv, vt[(c + 1) * LDV + r] = (uint16_t)(vv >> 16);
        }
        __syncthreads();
        float s[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                const uint16_t *p = ks + (nt * 8 + g) * LDQ + kk * 16 + 2 * t;
                lcx_mma_bf16(s[nt], qa[kk], lcx_mma_ld32(p), lcx_mma_ld32(p + 8));
            }
        }
        /* online softmax on the fragments: element c of tile nt is row (c / 2), key j0 + 8 nt + 2 t + (c & 1) */
        float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int x = c / 2;
                const int64_t j = j0 + nt * 8 + 2 * t + (c & 1);
                s[nt][c] = j < kend[x] ? __fmul_rn(s[nt][c], sl2) : -INFINITY;
                mt[x] = fmaxf(mt[x], s[nt][c]);
            }
        float mnew[2];
#pragma unroll
        for (int x = 0; x < 2; x++) {
            mt[x] = fmaxf(mt[x], __shfl_xor_sync(0xffffffffu, mt[x], 1));
            mt[x] = fmaxf(mt[x], __shfl_xor_sync(0xffffffffu, mt[x], 2));
            mnew[x] = fmaxf(m[x], mt[x]);
            /* nothing visible yet: keep the state (corr 1, every p 0); else rescale what was summed before */
            const float corr = mnew[x] == -INFINITY ? 1.0f : m[x] == -INFINITY ? 0.0f : exp2f(__fsub_rn(m[x], mnew[x]));
            l[x] = __fmul_rn(l[x], corr);
            m[x] = mnew[x];
#pragma unroll
            for (int nd = 0; nd < ND; nd++) o[nd][2 * x] = __fmul_rn(o[nd][2 * x], corr),
                                            o[nd][2 * x + 1] = __fmul_rn(o[nd][2 * x + 1], corr);
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int x = c / 2;
                const float p = mnew[x] == -INFINITY ? 0.0f : exp2f(__fsub_rn(s[nt][c], mnew[x]));
                s[nt][c] = p;
                l[x] = __fadd_rn(l[x], p);
            }
        /* O += P V: P's accumulator fragments are the A fragments of the next product (16 keys per step) */
#pragma unroll
        for (int kk = 0; kk < TC_N / 16; kk++) {
            const uint32_t pa[4] = {lcx_mma_pack(s[2 * kk][0], s[2 * kk][1]), lcx_mma_pack(s[2 * kk][2], s[2 * kk][3]),
                                    lcx_mma_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    lcx_mma_pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int nd = 0; nd < ND; nd++) {
                const uint16_t *p = vt + (nd * 8 + g) * LDV + kk * 16 + 2 * t;
                lcx_mma_bf16(o[nd], pa, lcx_mma_ld32(p), lcx_mma_ld32(p + 8));
            }
        }
    }
#pragma unroll
    for (int x = 0; x < 2; x++) {
        l[x] = __fadd_rn(l[x], __shfl_xor_sync(0xffffffffu, l[x], 1));
        l[x] = __fadd_rn(l[x], __shfl_xor_sync(0xffffffffu, l[x], 2));
        if (row[x] >= a.n_q) continue;
        const int64_t base = row[x] * H + h;
        const float inv = l[x] == 0.0f ? 0.0f : 1.0f / l[x]; /* l = 0: no visible key at all, O = 0 */
#pragma unroll
        for (int nd = 0; nd < ND; nd++)
            *(uint32_t *)((uint16_t *)a.o + base * HD + nd * 8 + 2 * t) =
                lcx_mma_pack(__fmul_rn(o[nd][2 * x], inv), __fmul_rn(o[nd][2 * x + 1], inv));
        if (t == 0)
            a.lse[base] = l[x] == 0.0f ? -INFINITY : __fmul_rn(__fadd_rn(m[x], log2f(l[x])), 0.6931471805599453f);
    }
}

template <int HD>
static cudaError_t fwd_tc_launch(cudaStream_t s, const lcx_attn_args *a) {
    const dim3 grid((unsigned)((a->n_q + TC_M - 1) / TC_M), (unsigned)a->n_heads);
    return att_launch_n(attn_fwd_tc<HD>, grid, TC_THREADS, tc_fwd_smem(HD), s, *a);
}

/* Whether the tensor-core forward takes this call: bf16 storage, head_dim 32/64/96/128, and q, k, v, o at 4-byte
 * alignment (fragments move bf16 pairs). */
extern "C" int lcx_cuda_attention_fwd_tc_takes(const lcx_attn_args *a) {
    const int hd = (int)a->head_dim;
    const uintptr_t al = (uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v | (uintptr_t)a->o;
    return a->dt == LCX_BF16 && (hd == 32 || hd == 64 || hd == 96 || hd == 128) && (al & 3u) == 0;
}

extern "C" cudaError_t lcx_cuda_attention_fwd_tc_launch(cudaStream_t s, const lcx_attn_args *a) {
    if (a->n_q <= 0) return cudaSuccess;
    switch (a->head_dim) {
    case 32: return fwd_tc_launch<32>(s, a);
    case 64: return fwd_tc_launch<64>(s, a);
    case 96: return fwd_tc_launch<96>(s, a);
    case 128: return fwd_tc_launch<128>(s, a);
    default: return cudaErrorInvalidValue;
    }
}
