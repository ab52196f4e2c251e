/* cuda_attention_fwd_tc: the attention forward on tensor cores, for bf16 storage and head_dim 32, 64, 96 or 128
 * (cuda_attention_fwd.cu takes every other call, and f32 storage, in scalar float32). The same contract: LSE,
 * q/k offsets, the three masks, document masks, GQA by indexing, O(n) memory, a row with no visible key gets O = 0,
 * LSE = -inf.
 *
 * One block of 4 warps per (64 MT query rows, head); a warp owns MT row tiles of 16 (rows 16 w + 64 mt..). 64-key
 * tiles of K and V come into shared memory by cp.async, double-buffered (tile j + 1 loads while tile j is
 * computed on); S = Q K^T and O += P V are mma.sync m16n8k16 (bf16 in, float32 accumulate, cuda_mma.h) with the
 * B fragments read by ldmatrix (V's transposed, so V keeps its row-major layout); the online softmax runs on S's
 * accumulator fragments in float32 (a row's max and sum over the 4 lanes that hold it by shuffles; base-2
 * exponentials of scores prescaled by scale * log2(e)); tiles every row of the block sees whole skip the mask.
 * A document mask (q_doc_start) gives each row a first visible key too: the walk starts at the tile holding the
 * block's earliest (a tile before it leaves every row's state as it is, so where a block starts changes no value),
 * and a tile counts as whole only from the block's latest on.
 * The row sum l is taken from the float32 probabilities; P V takes them rounded to bf16, as FlashAttention does:
 * that one rounding (relative 2^-8: bf16 keeps 8 significant bits) changes O by at most 2^-8 sum_j (p_j / l) |v_j|
 * <= 2^-8 max |v|, which the bf16 op cases allow for explicitly (tests/unit/test_backend_ops.c, compare).
 *
 * MT = 2 (128-row blocks, the default) is FlashAttention 2's tiling for sm_80/sm_90: each K or V fragment a warp
 * reads from shared memory feeds 2 MT products instead of 2, and each K/V tile brought in serves 128 rows. With
 * one mma.sync m16n8k16 every 2 cycles per SM and 128 bytes of shared memory per cycle, the 256-byte fragment of
 * MT = 1 would keep shared memory as busy as the tensor cores. Q's fragments stay in registers where they fit
 * (MT KS 4 <= 32 registers: MT = 1, or head_dim <= 64); else they are read again per key tile. Each row's result
 * is the same for either MT: only which warp computes it changes. LCX_CUDA_ATTN_FWD_ROWS64=1 selects MT = 1.
 *
 * Shared memory (bf16, rows padded by 8 elements so the 8 rows of an ldmatrix hit 32 different banks): Q
 * [64 MT][hd + 8] and two buffers of K and V [64][hd + 8] each: MT = 2, 54 KiB at head_dim 64 and 102 KiB at
 * 128 (opted in). */
#include "kernels/cuda/cuda_attention_tile.h"
#include "kernels/cuda/cuda_mma.h"

enum { TC_M = 64, TC_N = 64, TC_THREADS = 128, TC_PAD = 8 };

/* doc: with a document mask, after the tiles each row's visible keys (first, end) [2][64 mt], 8 ints for the
 * block's smallest and largest document start and one for the first key in every row's document */
static size_t tc_fwd_smem(int hd, int mt, bool doc) {
    return sizeof(uint16_t) * (size_t)(mt * TC_M + 4 * TC_N) * (size_t)(hd + TC_PAD) +
           (doc ? sizeof(int) * (size_t)(2 * mt * TC_M + 2 * (TC_THREADS / 32) + 1) : 0);
}

/* DOC: a document mask (q_doc_start); without it the kernel is the same code as before there was one. */
template <int HD, int MT, bool DOC>
static __global__ void __launch_bounds__(TC_THREADS) attn_fwd_tc(lcx_attn_args a) {
    extern __shared__ float sm[];
    constexpr int LD = HD + TC_PAD, KS = HD / 16, ND = HD / 8, NT = TC_N / 8, TILE = 2 * TC_N * LD, BM = MT * TC_M;
    constexpr bool QREG = MT * KS * 4 <= 32; /* Q's fragments in registers */
    uint16_t *qs = (uint16_t *)sm, *kbuf = qs + BM * LD; /* buffer b: K at kbuf + b TILE, V after it */
    const uint16_t *q = (const uint16_t *)a.q;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t H = a.n_heads, G = a.n_kv_heads, h = blockIdx.y, kvh = h / (H / G);
    const int64_t i0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * BM; /* the longest causal tiles first */
    const int64_t i1 = i0 + BM < a.n_q ? i0 + BM : a.n_q;
    const int64_t kend_tile = att_key_end(a, i1 - 1); /* the block's last row sees the most keys */
    const int64_t kall = att_key_end(a, i0);          /* and its first the fewest: keys below it need no mask */
    const int ntiles = (int)((kend_tile + TC_N - 1) / TC_N);

    /* this lane's rows: fragment rows g and g + 8 of each of its tiles, row_of(mt, x) */
    const auto row_of = [&](int mt, int x) { return i0 + mt * TC_M + warp * 16 + g + 8 * x; };
    att_tc_load_rows<HD>(qs, LD, q, i0, BM, a.n_q, H, h, TC_THREADS);
    /* document mask: row i0 + r sees keys [kb[r], ke[r]), kept in shared memory (at MT 2 the registers are all
     * taken: there they spilled); the walk starts at the tile of the block's earliest document, and keys from
     * *kwhole on lie in every row's document */
    int *kb = (int *)(kbuf + 2 * TILE), *ke = kb + BM, *kwhole = ke + BM + 2 * (TC_THREADS / 32);
    int it0 = 0;
    if constexpr (DOC) {
        int lo = INT32_MAX, hi = INT32_MIN; /* rows past n_q count for neither */
        for (int r = threadIdx.x; r < BM; r += TC_THREADS) {
            const int d = i0 + r < a.n_q ? a.q_doc_start[i0 + r] : INT32_MAX;
            kb[r] = (int)att_doc_key(a, d);
            ke[r] = i0 + r < a.n_q ? (int)att_key_end(a, i0 + r) : 0;
            lo = d < lo ? d : lo;
            hi = i0 + r < a.n_q && d > hi ? d : hi;
        }
        att_block_min_max(&lo, &hi, ke + BM, TC_THREADS / 32); /* its barrier publishes kb and ke too */
        it0 = (int)(att_doc_key(a, lo) / TC_N);
        if (threadIdx.x == 0) *kwhole = (int)att_doc_key(a, hi); /* read after the walk's first barrier */
    }
    if (ntiles > it0) att_tc_load_kv<HD>(kbuf + (it0 & 1) * TILE, LD, a, (int64_t)it0 * TC_N, TC_N, kvh, TC_THREADS);
    lcx_cp_async_commit();

    uint32_t qa[QREG ? MT : 1][QREG ? KS : 1][4];
    /* how many keys this lane's rows see; n_k < 2^31 (lcx_cuda_attention_fwd_tc_takes): 32-bit keys spare registers */
    int kend[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int x = 0; x < 2; x++) kend[mt][x] = row_of(mt, x) < a.n_q ? (int)att_key_end(a, row_of(mt, x)) : 0;
    const float sl2 = __fmul_rn(a.scale, 1.4426950408889634f); /* scale * log2(e) */
    float o[MT][ND][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
        for (int nd = 0; nd < ND; nd++) o[mt][nd][0] = o[mt][nd][1] = o[mt][nd][2] = o[mt][nd][3] = 0.0f;
    }

    for (int it = it0; it < ntiles; it++) {
        const int j0 = it * TC_N;
        const bool next = it + 1 < ntiles; /* into the other buffer, free since the barrier ending it - 1 */
        if (next) att_tc_load_kv<HD>(kbuf + ((it + 1) & 1) * TILE, LD, a, j0 + TC_N, TC_N, kvh, TC_THREADS);
        att_tc_wait_current(next);
        __syncthreads();
        if (QREG && it == it0)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int kk = 0; kk < KS; kk++)
                    lcx_mma_frag_a(qa[QREG ? mt : 0][QREG ? kk : 0], qs, LD, mt * TC_M + warp * 16, kk * 16);
        const uint16_t *ks = kbuf + (it & 1) * TILE, *vs = ks + TC_N * LD;

        /* S = Q K^T; ldmatrix's matrix i = lane / 8 is keys 8 (nt + i / 2).., head dims 16 kk + 8 (i % 2).. */
        float s[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            uint32_t qf[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if (QREG)
#pragma unroll
                    for (int r = 0; r < 4; r++) qf[mt][r] = qa[QREG ? mt : 0][QREG ? kk : 0][r];
                else
                    lcx_mma_frag_a(qf[mt], qs, LD, mt * TC_M + warp * 16, kk * 16);
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt += 2) {
                uint32_t b[4];
                lcx_ldmatrix_x4(b, ks + (nt * 8 + lane / 16 * 8 + lane % 8) * LD + kk * 16 + lane / 8 % 2 * 8);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    lcx_mma_bf16(s[mt][nt], qf[mt], b[0], b[1]);
                    lcx_mma_bf16(s[mt][nt + 1], qf[mt], b[2], b[3]);
                }
            }
        }
        /* online softmax on the fragments: element c of tile nt is row (c / 2), key j0 + 8 nt + 2 t + (c & 1) */
        const bool whole = j0 + TC_N <= kall && (!DOC || j0 >= *kwhole); /* the same for the whole block */
        float mnew[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int x = c / 2;
                    const int j = j0 + nt * 8 + 2 * t + (c & 1);
                    const int r = (int)(row_of(mt, x) - i0);
                    const bool vis = whole || (DOC ? j >= kb[r] && j < ke[r] : j < kend[mt][x]);
                    s[mt][nt][c] = vis ? __fmul_rn(s[mt][nt][c], sl2) : -INFINITY;
                    mx[x] = fmaxf(mx[x], s[mt][nt][c]);
                }
#pragma unroll
            for (int x = 0; x < 2; x++) {
                mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 1));
                mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 2));
                mnew[mt][x] = fmaxf(m[mt][x], mx[x]);
                /* nothing visible yet: keep the state (corr 1, every p 0); else rescale what was summed before */
                const float corr = mnew[mt][x] == -INFINITY ? 1.0f
                                   : m[mt][x] == -INFINITY  ? 0.0f
                                                            : exp2f(__fsub_rn(m[mt][x], mnew[mt][x]));
                l[mt][x] = __fmul_rn(l[mt][x], corr);
                m[mt][x] = mnew[mt][x];
#pragma unroll
                for (int nd = 0; nd < ND; nd++) o[mt][nd][2 * x] = __fmul_rn(o[mt][nd][2 * x], corr),
                                                o[mt][nd][2 * x + 1] = __fmul_rn(o[mt][nd][2 * x + 1], corr);
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int x = c / 2;
                    const float p = mnew[mt][x] == -INFINITY ? 0.0f : exp2f(__fsub_rn(s[mt][nt][c], mnew[mt][x]));
                    s[mt][nt][c] = p;
                    l[mt][x] = __fadd_rn(l[mt][x], p);
                }
        }
        /* O += P V: P's accumulator fragments are the A fragments of the next product (16 keys per step);
         * ldmatrix.trans's matrix i is keys 16 kk + 8 (i % 2).., head dims 8 (nd + i / 2).. */
#pragma unroll
        for (int kk = 0; kk < TC_N / 16; kk++) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                pa[mt][0] = lcx_mma_pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                pa[mt][1] = lcx_mma_pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                pa[mt][2] = lcx_mma_pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                pa[mt][3] = lcx_mma_pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int nd = 0; nd < ND; nd += 2) {
                uint32_t b[4];
                lcx_ldmatrix_x4_trans(b, vs + (kk * 16 + lane / 8 % 2 * 8 + lane % 8) * LD + nd * 8 + lane / 16 * 8);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    lcx_mma_bf16(o[mt][nd], pa[mt], b[0], b[1]);
                    lcx_mma_bf16(o[mt][nd + 1], pa[mt], b[2], b[3]);
                }
            }
        }
        __syncthreads(); /* every warp is done with this buffer before the next iteration refills it */
    }
    lcx_cp_async_wait<0>(); /* no tile at all: Q's copy is still in flight */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int x = 0; x < 2; x++) {
            float lx = l[mt][x];
            lx = __fadd_rn(lx, __shfl_xor_sync(0xffffffffu, lx, 1));
            lx = __fadd_rn(lx, __shfl_xor_sync(0xffffffffu, lx, 2));
            if (row_of(mt, x) >= a.n_q) continue;
            const int64_t base = row_of(mt, x) * H + h;
            const float inv = lx == 0.0f ? 0.0f : 1.0f / lx; /* l = 0: no visible key at all, O = 0 */
#pragma unroll
            for (int nd = 0; nd < ND; nd++)
                *(uint32_t *)((uint16_t *)a.o + base * HD + nd * 8 + 2 * t) =
                    lcx_mma_pack(__fmul_rn(o[mt][nd][2 * x], inv), __fmul_rn(o[mt][nd][2 * x + 1], inv));
            if (t == 0)
                a.lse[base] = lx == 0.0f ? -INFINITY : __fmul_rn(__fadd_rn(m[mt][x], log2f(lx)), 0.6931471805599453f);
        }
}

template <int HD, int MT>
static cudaError_t fwd_tc_launch_mt(cudaStream_t s, const lcx_attn_args *a) {
    const dim3 grid((unsigned)((a->n_q + MT * TC_M - 1) / (MT * TC_M)), (unsigned)a->n_heads);
    const bool doc = a->q_doc_start != NULL;
    return doc ? att_launch_n(attn_fwd_tc<HD, MT, true>, grid, TC_THREADS, tc_fwd_smem(HD, MT, true), s, *a)
               : att_launch_n(attn_fwd_tc<HD, MT, false>, grid, TC_THREADS, tc_fwd_smem(HD, MT, false), s, *a);
}
template <int HD>
static cudaError_t fwd_tc_launch(cudaStream_t s, const lcx_attn_args *a) {
    return att_fwd_rows64() ? fwd_tc_launch_mt<HD, 1>(s, a) : fwd_tc_launch_mt<HD, 2>(s, a);
}

/* Whether the tensor-core forward takes this call: bf16 storage, head_dim 32/64/96/128, q, k, v at 16-byte
 * alignment (cp.async moves 16 bytes), o at 4 (stores move bf16 pairs), and fewer than 2^31 keys. */
extern "C" int lcx_cuda_attention_fwd_tc_takes(const lcx_attn_args *a) {
    const int hd = (int)a->head_dim;
    const uintptr_t al = (uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v;
    return a->dt == LCX_BF16 && (hd == 32 || hd == 64 || hd == 96 || hd == 128) && (al & 15u) == 0 &&
           ((uintptr_t)a->o & 3u) == 0 && a->n_k <= INT32_MAX;
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
