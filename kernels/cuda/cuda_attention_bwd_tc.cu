/* cuda_attention_bwd_tc: the attention backward on tensor cores, for bf16 storage and head_dim 32, 64, 96 or
 * 128 (cuda_attention_bwd.cu runs the rest, and D = rowsum(dO * O) for both). The same geometry and the same
 * determinism as the scalar kernels: no float atomics, one owner per sum.
 *  - dK, dV: one block of 8 warps per (128 keys, kv head) at head_dim 64 and 128, as FlashAttention 2's backward
 *    (each Q/dO tile brought in serves 128 keys, and the fused dQ below waits on half as many key blocks), else
 *    (or with LCX_CUDA_ATTN_BWD_KEYS64=1) of 4 warps per 64 keys; a warp owns 16 keys. A block walks the group's
 *    query heads in head order and, per head, the 32-row query tiles that see its keys. Each key's sums are the
 *    same in both block sizes. S^T = K Q^T and dP^T = V dO^T are
 *    mma.sync m16n8k16 (bf16 in, float32 accumulate); P = exp(scale s - LSE) and dS = P (dP - D) in float32 as
 *    on the CPU; dV += P^T dO and dK += dS^T Q on tensor cores too.
 *  - dQ: one block per (64 query rows, head), 32-key tiles: S = Q K^T, dP = dO V^T, dQ += dS K.
 * Document masks (q_doc_start): a pair is visible only from its row's document start on. dQ starts its key walk at
 * the tile of its rows' earliest start; a dK/dV block walks only the query tiles that have a row whose document
 * starts before its last key: a pass over the starts (one load and a warp min per tile) finds the first and the
 * last, and only if some between do not (starts out of order) is each tile checked before it is loaded. A query
 * tile's fused dQ is then summed by the key blocks from the one holding its earliest start's key to the last that
 * sees it, each at its rank from the first.
 * The walked tiles (Q and dO for dK/dV, K and V for dQ) come by cp.async into two buffers, the next while the
 * current is computed on; every fragment is read by ldmatrix from the row-major tiles (transposed where the
 * tile is the product's B by rows: dO, Q, K in the accumulations), so no tile is stored twice.
 * P and dS enter their products as two bf16 terms each, hi = bf16(x) and lo = bf16(x - hi) (x = hi + lo to 2^-16
 * relative), so the gradients keep float32-level accuracy and meet the scalar path's f32 tolerances (two mma
 * instead of one for those three products). The score side needs no split: q, k, v and dO are bf16 already.
 * LCX_CUDA_ATTN_BWD_BF16=1 drops the lo terms, as FlashAttention 2 does (7 products of a tile pair instead of 10):
 * rounding P and dS to bf16 (relative 2^-8) moves dV by at most 2^-8 sum_i |P_ij| |dO_i|, dK by 2^-8 scale
 * sum_i |dS_ij| |Q_i| and dQ by 2^-8 scale sum_j |dS_ij| |K_j|, elementwise (tests/cuda_emu checks those bounds).
 * LCX_CUDA_ATTN_BWD_FUSED=1 drops the dQ pass and its recomputation of S and dP (2 products fewer): the dK/dV
 * block puts dS in shared memory, multiplies it by its K tile and adds the result into dQ in key-block order,
 * waiting on a counter per (head, query tile) for the key blocks before it (cuda_order.h), so dQ is still a
 * fixed-order sum, the same bits on every run. Its blocks walk the query tiles downward (tb_tile), so each waits
 * about one tile for the block before it. Both variables together: 5 products, FlashAttention 2's count.
 *
 * Shared memory (bf16; rows padded by 8 so the 8 rows of an ldmatrix hit 32 different banks): dK/dV K, V
 * [keys][hd + 8] and two buffers of Q, dO [32][hd + 8] and of LSE, D [32] floats: 102.5 KiB at head_dim 128 with
 * 128 keys (68.5 with 64), fused 17 KiB more for dS hi and lo [32][keys + 8] (8.5 with one term); dQ Q, dO
 * [64][hd + 8] and two buffers of K, V [32][hd + 8]: 68 KiB at 128 (opted in). */
#include "kernels/cuda/cuda_attention_tile.h"
#include "kernels/cuda/cuda_mma.h"
#include "kernels/cuda/cuda_order.h"

enum { TB_ROWS = 64, TB_COLS = LCX_CUDA_ATTN_BWD_QTILE, TB_THREADS = 128, TB_PAD = 8 }; /* TB_COLS: cuda_ops.h */

/* The bf16 pair of x0, x1 (hi) and of what that rounding left (lo). */
static __device__ __forceinline__ void tb_split(float x0, float x1, uint32_t *hi, uint32_t *lo) {
    *hi = lcx_mma_pack(x0, x1);
    *lo = lcx_mma_pack(__fsub_rn(x0, lcx_dev_bf16_to_f32((uint16_t)(*hi & 0xffffu))),
                       __fsub_rn(x1, lcx_dev_bf16_to_f32((uint16_t)(*hi >> 16))));
}

/* s[nt] += A B^T over head dims 16 kk.. for the warp's 16 x 16 A fragment af and B the 32 rows of a row-major
 * bf16 tile in shared memory (row stride ld); B's fragments by ldmatrix, matrix i = lane / 8 being rows
 * 8 (nt + i / 2).., columns 16 kk + 8 (i % 2)... */
static __device__ __forceinline__ void tb_dot32(float (&s)[4][4], const uint32_t (&af)[4], const uint16_t *b, int ld,
                                                int kk) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int nt = 0; nt < 4; nt += 2) {
        uint32_t f[4];
        lcx_ldmatrix_x4(f, b + (nt * 8 + lane / 16 * 8 + lane % 8) * ld + kk * 16 + lane / 8 % 2 * 8);
        lcx_mma_bf16(s[nt], af, f[0], f[1]);
        lcx_mma_bf16(s[nt + 1], af, f[2], f[3]);
    }
}

/* acc[nd] += X M for X the warp's 16 x 32 tile held as accumulator fragments x[4][4] (columns 8 nt + 2t..) and M a
 * row-major [32][HD] bf16 tile in shared memory (row stride ld), X split in hi + lo (SPLIT) or hi alone; M's
 * fragments by ldmatrix.trans, matrix i = lane / 8 being rows 16 kk + 8 (i % 2).., columns 8 (nd + i / 2)... */
template <int ND, bool SPLIT>
static __device__ __forceinline__ void tb_acc(float (&acc)[ND][4], const float (&x)[4][4], const uint16_t *m, int ld) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < 2; kk++) {
        uint32_t hi[4], lo[4];
        tb_split(x[2 * kk][0], x[2 * kk][1], &hi[0], &lo[0]);
        tb_split(x[2 * kk][2], x[2 * kk][3], &hi[1], &lo[1]);
        tb_split(x[2 * kk + 1][0], x[2 * kk + 1][1], &hi[2], &lo[2]);
        tb_split(x[2 * kk + 1][2], x[2 * kk + 1][3], &hi[3], &lo[3]);
#pragma unroll
        for (int nd = 0; nd < ND; nd += 2) {
            uint32_t f[4];
            lcx_ldmatrix_x4_trans(f, m + (kk * 16 + lane / 8 % 2 * 8 + lane % 8) * ld + nd * 8 + lane / 16 * 8);
            lcx_mma_bf16(acc[nd], hi, f[0], f[1]);
            if (SPLIT) lcx_mma_bf16(acc[nd], lo, f[0], f[1]);
            lcx_mma_bf16(acc[nd + 1], hi, f[2], f[3]);
            if (SPLIT) lcx_mma_bf16(acc[nd + 1], lo, f[2], f[3]);
        }
    }
}

/* dst[(row0 + r) * nh + head][d] += scale acc for this lane's fragment rows (g, g + 8) below n. */
template <int ND>
static __device__ __forceinline__ void tb_add(float *dst, const float (&acc)[ND][4], int64_t row0, int64_t n,
                                              int64_t nh, int64_t head, float scale) {
    constexpr int HD = ND * 8;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int64_t row = row0 + g + 8 * x;
        if (row >= n) continue;
        float *p = dst + (row * nh + head) * HD + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            p[nd * 8] = __fadd_rn(p[nd * 8], __fmul_rn(scale, acc[nd][2 * x]));
            p[nd * 8 + 1] = __fadd_rn(p[nd * 8 + 1], __fmul_rn(scale, acc[nd][2 * x + 1]));
        }
    }
}

/* K, V [keys], two buffers of Q, dO, LSE, D; with the fused dQ (terms: 1, or 2 for hi + lo) dS [32][keys + 8]
 * per term; with a document mask (doc) two buffers of the rows' document starts [32] and 3 ints a warp */
static size_t tb_dkv_smem(int hd, int ds_terms, int keys, bool doc) {
    return sizeof(uint16_t) * (size_t)(2 * keys + 4 * TB_COLS) * (size_t)(hd + TB_PAD) + sizeof(float) * 4 * TB_COLS +
           sizeof(uint16_t) * (size_t)(ds_terms * TB_COLS * (keys + TB_PAD)) +
           (doc ? sizeof(int) * (size_t)(2 * TB_COLS + 3 * (keys / 16)) : 0);
}

/* Tile n of a dK/dV block's walk (rep heads x per_head query tiles from row ib): the two-pass backward walks the
 * heads in order and each one's tiles upward; the fused one the tiles downward and the heads within each, so
 * that key block kb reaches a query tile right after key block kb - 1 (which walks the same tiles in the same
 * order, plus the ones below kb's) and the ordered dQ sum waits about one tile per block (cuda_order.h). */
template <bool FUSED>
static __device__ __forceinline__ void tb_tile(int64_t n, int64_t rep, int64_t per_head, int64_t ib, int64_t kvh,
                                               int64_t *h, int64_t *i0) {
    *h = kvh * rep + (FUSED ? n % rep : n / per_head);
    *i0 = ib + (FUSED ? per_head - 1 - n / rep : n % per_head) * TB_COLS;
}

/* dS^T of the warp's 16 keys x 32 queries (accumulator fragments x[nt][c]: key wr + g + 8 (c / 2), query
 * 8 nt + 2 t + (c & 1)) into dsb as dS [32 queries][KEYS + pad], as bf16 hi and (SPLIT) lo after it. */
template <bool SPLIT, int KEYS>
static __device__ __forceinline__ void tb_store_ds(uint16_t *dsb, const float (&x)[4][4], int wr) {
    constexpr int LDS = KEYS + TB_PAD;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int nt = 0; nt < 4; nt++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int at = (nt * 8 + 2 * t + (c & 1)) * LDS + wr + g + 8 * (c / 2);
            const uint16_t hi = lcx_dev_f32_to_bf16(x[nt][c]);
            dsb[at] = hi;
            if (SPLIT) dsb[TB_COLS * LDS + at] = lcx_dev_f32_to_bf16(__fsub_rn(x[nt][c], lcx_dev_bf16_to_f32(hi)));
        }
}

/* The fused backward's dQ of query tile (head h, rows i0..): dQ += scale dS K over this block's KEYS = 16 NW keys,
 * added into a.dq in key-block order (`counter`: this tile's, rank: this block's key block). dS in dsb
 * (tb_store_ds), K the block's [KEYS][ld] tile. Warp w of NW computes rows 16 (w % 2).. and head dims
 * (w / 2) 2 HD / NW.. (NW = 8 needs head_dim 64 or 128: two 8-column tiles per warp at least). */
template <int HD, bool SPLIT, int NW>
static __device__ __forceinline__ void tb_dq_ordered(const lcx_attn_args &a, const uint16_t *dsb, const uint16_t *ks,
                                                     int ld, int64_t h, int64_t i0, int *counter, int rank) {
    constexpr int KEYS = 16 * NW, LDS = KEYS + TB_PAD, NH = 2 * HD / NW / 8; /* the warp's 8-column tiles */
    static_assert(NH % 2 == 0, "two 8-column tiles per ldmatrix.x4");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int mr = warp % 2 * 16, dc = warp / 2 * (2 * HD / NW);
    float acc[NH][4];
#pragma unroll
    for (int nd = 0; nd < NH; nd++) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.0f;
#pragma unroll
    for (int term = 0; term < (SPLIT ? 2 : 1); term++) /* hi, then lo: one A fragment live at a time */
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; kk++) {
            uint32_t af[4];
            lcx_mma_frag_a(af, dsb + term * TB_COLS * LDS, LDS, mr, kk * 16);
#pragma unroll
            for (int nd = 0; nd < NH; nd += 2) {
                uint32_t f[4];
                lcx_ldmatrix_x4_trans(f, ks + (kk * 16 + lane / 8 % 2 * 8 + lane % 8) * ld + dc + nd * 8 +
                                             lane / 16 * 8);
                lcx_mma_bf16(acc[nd], af, f[0], f[1]);
                lcx_mma_bf16(acc[nd + 1], af, f[2], f[3]);
            }
        }
    lcx_order_wait(counter, rank);
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int64_t row = i0 + mr + g + 8 * x;
        if (row >= a.n_q) continue;
        float *p = a.dq + (row * a.n_heads + h) * HD + dc + 2 * t;
#pragma unroll
        for (int nd = 0; nd < NH; nd++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                __stcg(p + nd * 8 + e, __fadd_rn(__ldcg(p + nd * 8 + e), __fmul_rn(a.scale, acc[nd][2 * x + e])));
    }
    lcx_order_post(counter);
}

/* Query tile (head h, rows i0..) of the dK/dV walk into one buffer: Q and dO by cp.async, LSE and D (strided by
 * the heads, so not cp.async's 16 contiguous bytes) and with DOC the rows' document starts (INT32_MAX past n_q) by
 * plain stores; readable after the wait and a barrier. */
template <int HD, bool DOC>
static __device__ __forceinline__ void tb_dkv_tile(const lcx_attn_args &a, const float *D, int64_t h, int64_t i0,
                                                   uint16_t *qs, float *ls, int *dc, int threads) {
    constexpr int LD = HD + TB_PAD;
    att_tc_load_rows<HD>(qs, LD, (const uint16_t *)a.q, i0, TB_COLS, a.n_q, a.n_heads, h, threads);
    att_tc_load_rows<HD>(qs + TB_COLS * LD, LD, (const uint16_t *)a.dout, i0, TB_COLS, a.n_q, a.n_heads, h, threads);
    if (threadIdx.x < TB_COLS) {
        const int64_t i = i0 + threadIdx.x;
        ls[threadIdx.x] = i < a.n_q ? a.lse[i * a.n_heads + h] : -INFINITY;
        ls[TB_COLS + threadIdx.x] = i < a.n_q ? D[i * a.n_heads + h] : 0.0f;
        if (DOC) dc[threadIdx.x] = i < a.n_q ? a.q_doc_start[i] : INT32_MAX;
    }
}

/* The smallest document start of the 32 query rows from i0 (INT32_MAX past n_q), to every lane of the warp. */
static __device__ __forceinline__ int tb_tile_doc_min(const lcx_attn_args &a, int64_t i0) {
    const int64_t i = i0 + threadIdx.x % 32;
    return att_warp_min_i(i < a.n_q ? a.q_doc_start[i] : INT32_MAX);
}

/* With a document mask, the first tile from n on of a dK/dV block's walk (tb_tile) that has a row whose document
 * starts before key jend (ntiles if none): uniform over the block, as every warp reads the same starts. */
template <bool FUSED>
static __device__ __forceinline__ int64_t tb_next_seen(const lcx_attn_args &a, int64_t n, int64_t ntiles, int64_t rep,
                                                       int64_t per_head, int64_t ib, int64_t kvh, int64_t jend) {
    for (int64_t h, i0; n < ntiles; n++) {
        tb_tile<FUSED>(n, rep, per_head, ib, kvh, &h, &i0);
        if (att_doc_key(a, tb_tile_doc_min(a, i0)) < jend) break;
    }
    return n;
}

/* FUSED: dQ too, added in key-block order (order: a counter per (head, query tile), zeroed); else dQ is
 * attn_bwd_dq_tc's. NW warps, 16 keys each: a block owns 16 NW keys. DOC: a document mask (q_doc_start); without
 * it the kernel is the same code as before there was one. */
template <int HD, bool SPLIT, bool FUSED, int NW, bool DOC>
static __global__ void __launch_bounds__(NW * 32) attn_bwd_dkv_tc(lcx_attn_args a, const float *D, int *order) {
    extern __shared__ float sm[];
    constexpr int LD = HD + TB_PAD, KS = HD / 16, ND = HD / 8, TILE = 2 * TB_COLS * LD, KEYS = 16 * NW;
    uint16_t *ks = (uint16_t *)sm, *vs = ks + KEYS * LD, *qbuf = vs + KEYS * LD; /* buffer b: Q, dO */
    float *lbuf = (float *)(qbuf + 2 * TILE);                                         /* buffer b: LSE, D */
    uint16_t *dsb = (uint16_t *)(lbuf + 4 * TB_COLS);                                 /* FUSED: dS */
    int *dcb = (int *)(dsb + (FUSED ? (SPLIT ? 2 : 1) * TB_COLS * (KEYS + TB_PAD) : 0)); /* DOC: buffer b's starts */
    const int64_t nqt = (a.n_q + TB_COLS - 1) / TB_COLS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, wr = warp * 16;
    const int64_t H = a.n_heads, G = a.n_kv_heads, rep = H / G, kvh = blockIdx.y, j0 = (int64_t)blockIdx.x * KEYS;

    /* the query tiles that see key j0: visibility grows with the row, so they run from ib to the end */
    int64_t ib = att_row_begin(a, j0) / TB_COLS * TB_COLS;
    while (ib < a.n_q && att_key_end(a, (ib + TB_COLS < a.n_q ? ib + TB_COLS : a.n_q) - 1) <= j0) ib += TB_COLS;
    int64_t per_head = ib < a.n_q ? (a.n_q - ib + TB_COLS - 1) / TB_COLS : 0, ntiles = rep * per_head;

    att_tc_load_kv<HD>(ks, LD, a, j0, KEYS, kvh, NW * 32);
    /* document mask: of those, only the tiles whose earliest document starts before the block's last key: the
     * walk runs from the first to the last of them (a pass over the tiles' starts, while K and V load) and, only
     * where some between do not (starts out of order), checks each tile before loading it */
    bool holes = false;
    if constexpr (DOC) {
        int tf = INT32_MAX, tl = -1, cnt = 0; /* the first and last tile that sees the keys, and how many do */
        for (int t = (int)(ib / TB_COLS) + warp; t < nqt; t += 4 * NW) {
            int d[4]; /* four tiles' loads in flight */
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int64_t i = (int64_t)(t + u * NW) * TB_COLS + lane;
                d[u] = i < a.n_q ? a.q_doc_start[i] : INT32_MAX;
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int tu = t + u * NW;
                if (tu < nqt && att_doc_key(a, att_warp_min_i(d[u])) < j0 + KEYS) {
                    tf = tf < tu ? tf : tu;
                    tl = tu;
                    cnt++;
                }
            }
        }
        int *red = dcb + 2 * TB_COLS; /* the warps' tf, tl, cnt */
        if (lane == 0) red[warp] = tf, red[NW + warp] = tl, red[2 * NW + warp] = cnt;
        __syncthreads();
        cnt = 0;
        for (int w = 0; w < NW; w++) {
            tf = red[w] < tf ? red[w] : tf;
            tl = red[NW + w] > tl ? red[NW + w] : tl;
            cnt += red[2 * NW + w];
        }
        ib = (int64_t)tf * TB_COLS;
        per_head = cnt > 0 ? tl - tf + 1 : 0;
        ntiles = rep * per_head;
        holes = cnt != per_head;
    }
    if (ntiles > 0) { /* the walk's first tile sees the keys (tile tf, or tl when fused: both do) */
        int64_t h, i0;
        tb_tile<FUSED>(0, rep, per_head, ib, kvh, &h, &i0);
        tb_dkv_tile<HD, DOC>(a, D, h, i0, qbuf, lbuf, dcb, NW * 32);
    }
    lcx_cp_async_commit();
    float dk[ND][4], dv[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
#pragma unroll
        for (int c = 0; c < 4; c++) dk[nd][c] = dv[nd][c] = 0.0f;
    const int64_t jl[2] = {j0 + wr + g, j0 + wr + g + 8}; /* this lane's two keys */
    /* tile n: head h, rows i0.. (tb_tile), in buffer wb: how many tiles were walked before it, mod 2 (n & 1 without
     * skips) */
    int wb = 0;
    for (int64_t n = 0; n < ntiles; wb ^= 1) {
        const int64_t nn = DOC && holes ? tb_next_seen<FUSED>(a, n + 1, ntiles, rep, per_head, ib, kvh, j0 + KEYS)
                                        : n + 1; /* the next tile walked */
        const int64_t par = DOC ? wb : n;
        const bool next = nn < ntiles; /* into the other buffer, free since the barrier ending the last tile */
        const int b = (int)((par + 1) & 1);
        int64_t h, i0;
        if (next) {
            tb_tile<FUSED>(nn, rep, per_head, ib, kvh, &h, &i0);
            tb_dkv_tile<HD, DOC>(a, D, h, i0, qbuf + b * TILE, lbuf + 2 * b * TB_COLS, dcb + b * TB_COLS, NW * 32);
        }
        att_tc_wait_current(next);
        __syncthreads();
        tb_tile<FUSED>(n, rep, per_head, ib, kvh, &h, &i0);
        const uint16_t *qs = qbuf + (par & 1) * TILE, *gs = qs + TB_COLS * LD;
        const float *ls = lbuf + 2 * (par & 1) * TB_COLS, *dsh = ls + TB_COLS;
        const int *dc = dcb + (par & 1) * TB_COLS;
        /* S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys x 32 queries */
        float s[4][4], dp[4][4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            uint32_t kf[4], vf[4];
            lcx_mma_frag_a(kf, ks, LD, wr, kk * 16);
            lcx_mma_frag_a(vf, vs, LD, wr, kk * 16);
            tb_dot32(s, kf, qs, LD, kk);
            tb_dot32(dp, vf, gs, LD, kk);
        }
        /* element c of tile nt: key jl[c / 2], query i0 + 8 nt + 2 t + (c & 1); P^T in s, dS^T in dp */
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int col = nt * 8 + 2 * t + (c & 1);
                const int64_t i = i0 + col;
                const int vis = i < a.n_q && jl[c / 2] < att_key_end(a, i) &&
                                (!DOC || a.k_offset + jl[c / 2] >= dc[col]); /* at or after the row's document */
                float p, ds;
                att_p_ds(vis, a.scale, s[nt][c], dp[nt][c], ls[col], dsh[col], &p, &ds);
                s[nt][c] = p, dp[nt][c] = ds;
            }
        if (FUSED) tb_store_ds<SPLIT, KEYS>(dsb, dp, wr);
        tb_acc<ND, SPLIT>(dv, s, gs, LD);  /* dV += P^T dO */
        tb_acc<ND, SPLIT>(dk, dp, qs, LD); /* dK += dS^T Q */
        if (FUSED) {
            __syncthreads(); /* dS whole */
            /* this tile's dQ sum: the key blocks from the one holding its earliest document's first key on (the
             * ones before skip it), so this block's rank among them is its distance from that one */
            int rank = (int)blockIdx.x;
            if constexpr (DOC) rank -= (int)(att_doc_key(a, att_warp_min_i(dc[lane])) / KEYS);
            tb_dq_ordered<HD, SPLIT, NW>(a, dsb, ks, LD, h, i0, order + h * nqt + i0 / TB_COLS, rank);
        }
        __syncthreads(); /* every warp is done with this buffer (and dS) before the next iteration refills it */
        n = nn;
    }
    lcx_cp_async_wait<0>(); /* no tile at all: K's and V's copies are still in flight */
    tb_add<ND>(a.dk, dk, j0 + wr, a.n_k, G, kvh, a.scale);
    tb_add<ND>(a.dv, dv, j0 + wr, a.n_k, G, kvh, 1.0f);
}

/* Q, dO, two buffers of K, V; with a document mask 8 ints for the block's smallest and largest document start */
static size_t tb_dq_smem(int hd, bool doc) {
    return sizeof(uint16_t) * (size_t)(2 * TB_ROWS + 4 * TB_COLS) * (size_t)(hd + TB_PAD) +
           (doc ? sizeof(int) * 2 * (TB_THREADS / 32) : 0);
}

/* DOC: a document mask (q_doc_start); without it the kernel is the same code as before there was one. */
template <int HD, bool SPLIT, bool DOC>
static __global__ void __launch_bounds__(TB_THREADS) attn_bwd_dq_tc(lcx_attn_args a, const float *D) {
    extern __shared__ float sm[];
    constexpr int LD = HD + TB_PAD, KS = HD / 16, ND = HD / 8, TILE = 2 * TB_COLS * LD;
    uint16_t *qs = (uint16_t *)sm, *gs = qs + TB_ROWS * LD, *kbuf = gs + TB_ROWS * LD; /* buffer b: K, V */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, wr = warp * 16;
    const int64_t H = a.n_heads, G = a.n_kv_heads, h = blockIdx.y, kvh = h / (H / G);
    const int64_t i0 = (int64_t)(gridDim.x - 1 - blockIdx.x) * TB_ROWS; /* the longest causal tiles first */
    const int64_t i1 = i0 + TB_ROWS < a.n_q ? i0 + TB_ROWS : a.n_q;
    const int ntiles = (int)((att_key_end(a, i1 - 1) + TB_COLS - 1) / TB_COLS);

    att_tc_load_rows<HD>(qs, LD, (const uint16_t *)a.q, i0, TB_ROWS, a.n_q, H, h, TB_THREADS);
    att_tc_load_rows<HD>(gs, LD, (const uint16_t *)a.dout, i0, TB_ROWS, a.n_q, H, h, TB_THREADS);
    /* document mask: the first key of this lane's rows; the walk starts at the tile of the block's earliest */
    int it0 = 0;
    int64_t kbeg[2];
    if constexpr (DOC) {
        int lo = INT32_MAX, hi = INT32_MIN;
#pragma unroll
        for (int x = 0; x < 2; x++) {
            const int64_t i = i0 + wr + g + 8 * x;
            const int d = i < a.n_q ? a.q_doc_start[i] : INT32_MAX; /* rows past n_q: none */
            kbeg[x] = att_doc_key(a, d);
            lo = d < lo ? d : lo;
        }
        att_block_min_max(&lo, &hi, (int *)(kbuf + 2 * TILE), TB_THREADS / 32);
        it0 = (int)(att_doc_key(a, lo) / TB_COLS);
    }
    if (ntiles > it0)
        att_tc_load_kv<HD>(kbuf + (it0 & 1) * TILE, LD, a, (int64_t)it0 * TB_COLS, TB_COLS, kvh, TB_THREADS);
    lcx_cp_async_commit();
    uint32_t qf[KS][4], gf[KS][4];
    float L[2], Dx[2], acc[ND][4];
    int64_t kend[2];
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int64_t i = i0 + wr + g + 8 * x;
        L[x] = i < a.n_q ? a.lse[i * H + h] : -INFINITY;
        Dx[x] = i < a.n_q ? D[i * H + h] : 0.0f;
        kend[x] = i < a.n_q ? att_key_end(a, i) : 0;
    }
#pragma unroll
    for (int nd = 0; nd < ND; nd++) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.0f;
    for (int it = it0; it < ntiles; it++) {
        const int64_t j0 = (int64_t)it * TB_COLS;
        const bool next = it + 1 < ntiles; /* into the other buffer, free since the barrier ending it - 1 */
        if (next) att_tc_load_kv<HD>(kbuf + ((it + 1) & 1) * TILE, LD, a, j0 + TB_COLS, TB_COLS, kvh, TB_THREADS);
        att_tc_wait_current(next);
        __syncthreads();
        if (it == it0)
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                lcx_mma_frag_a(qf[kk], qs, LD, wr, kk * 16);
                lcx_mma_frag_a(gf[kk], gs, LD, wr, kk * 16);
            }
        const uint16_t *ks = kbuf + (it & 1) * TILE, *vs = ks + TB_COLS * LD;
        float s[4][4], dp[4][4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            tb_dot32(s, qf[kk], ks, LD, kk);
            tb_dot32(dp, gf[kk], vs, LD, kk);
        }
        /* element c of tile nt: row g + 8 (c / 2), key j0 + 8 nt + 2 t + (c & 1); dS kept in dp */
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int x = c / 2;
                const int64_t j = j0 + nt * 8 + 2 * t + (c & 1);
                float p, ds;
                att_p_ds(j < kend[x] && (!DOC || j >= kbeg[x]), a.scale, s[nt][c], dp[nt][c], L[x], Dx[x], &p, &ds);
                dp[nt][c] = ds;
            }
        tb_acc<ND, SPLIT>(acc, dp, ks, LD); /* dQ += dS K */
        __syncthreads(); /* every warp is done with this buffer before the next iteration refills it */
    }
    lcx_cp_async_wait<0>(); /* no tile at all: Q's and dO's copies are still in flight */
    tb_add<ND>(a.dq, acc, i0 + wr, a.n_q, H, h, a.scale);
}

template <int HD, bool SPLIT, bool FUSED, int NW, bool DOC>
static cudaError_t bwd_tc_launch_nw(cudaStream_t s, const lcx_attn_args *a, const float *D, int *order) {
    constexpr int KEYS = 16 * NW;
    const dim3 kv_grid((unsigned)((a->n_k + KEYS - 1) / KEYS), (unsigned)a->n_kv_heads);
    const size_t smem = tb_dkv_smem(HD, FUSED ? (SPLIT ? 2 : 1) : 0, KEYS, DOC);
    cudaError_t e =
        att_launch_n(attn_bwd_dkv_tc<HD, SPLIT, FUSED, NW, DOC>, kv_grid, NW * 32, smem, s, *a, D, order);
    if (e != cudaSuccess || FUSED) return e;
    const dim3 q_grid((unsigned)((a->n_q + TB_ROWS - 1) / TB_ROWS), (unsigned)a->n_heads);
    return att_launch_n(attn_bwd_dq_tc<HD, SPLIT, DOC>, q_grid, TB_THREADS, tb_dq_smem(HD, DOC), s, *a, D);
}

/* dK/dV blocks of 128 keys (8 warps) at head_dim 64 and 128, as FlashAttention 2's backward; else, or with
 * LCX_CUDA_ATTN_BWD_KEYS64=1, of 64 (4 warps). */
template <int HD, bool SPLIT, bool FUSED, bool DOC>
static cudaError_t bwd_tc_launch(cudaStream_t s, const lcx_attn_args *a, const float *D, int *order) {
    if constexpr (HD == 64 || HD == 128)
        if (!att_bwd_keys64()) return bwd_tc_launch_nw<HD, SPLIT, FUSED, 8, DOC>(s, a, D, order);
    return bwd_tc_launch_nw<HD, SPLIT, FUSED, 4, DOC>(s, a, D, order);
}

template <int HD, bool DOC>
static cudaError_t bwd_tc_launch_doc(cudaStream_t s, const lcx_attn_args *a, const float *D, int *order) {
    const bool split = !att_bwd_bf16_ps();
    if (att_bwd_fused())
        return split ? bwd_tc_launch<HD, true, true, DOC>(s, a, D, order)
                     : bwd_tc_launch<HD, false, true, DOC>(s, a, D, order);
    return split ? bwd_tc_launch<HD, true, false, DOC>(s, a, D, order)
                 : bwd_tc_launch<HD, false, false, DOC>(s, a, D, order);
}

template <int HD>
static cudaError_t bwd_tc_launch_hd(cudaStream_t s, const lcx_attn_args *a, const float *D, int *order) {
    return a->q_doc_start ? bwd_tc_launch_doc<HD, true>(s, a, D, order) : bwd_tc_launch_doc<HD, false>(s, a, D, order);
}

/* Whether the tensor-core backward takes this call: bf16 storage, head_dim 32/64/96/128, q, k, v, dO at 16-byte
 * alignment (cp.async moves 16 bytes). */
extern "C" int lcx_cuda_attention_bwd_tc_takes(const lcx_attn_args *a) {
    const int hd = (int)a->head_dim;
    const uintptr_t al = (uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v | (uintptr_t)a->dout;
    return a->dt == LCX_BF16 && (hd == 32 || hd == 64 || hd == 96 || hd == 128) && (al & 15u) == 0;
}

/* dK, dV, dQ for a call with work, D = rowsum(dO * O) already in D and the fused backward's counters zeroed in
 * order (cuda_attention_bwd.cu). */
extern "C" cudaError_t lcx_cuda_attention_bwd_tc_launch(cudaStream_t s, const lcx_attn_args *a, const float *D,
                                                        int *order) {
    switch (a->head_dim) {
    case 32: return bwd_tc_launch_hd<32>(s, a, D, order);
    case 64: return bwd_tc_launch_hd<64>(s, a, D, order);
    case 96: return bwd_tc_launch_hd<96>(s, a, D, order);
    case 128: return bwd_tc_launch_hd<128>(s, a, D, order);
    default: return cudaErrorInvalidValue;
    }
}
