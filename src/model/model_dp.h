/* model_dp: the data-parallel half of a training step (docs/parallel.md "Data parallelism"): the gradient
 * group's reductions in a fixed order, so every rank gets the same bits and a rerun repeats them. */
#ifndef LCX_MODEL_DP_H
#define LCX_MODEL_DP_H

#include <stdint.h>

#include "kernels/backend.h"
#include "src/comm/comm.h"
#include "src/core/status.h"

/* buf[0..n) (dtype dt, F32 or BF16, device memory of be on exec x) = the sum of the buf of the ranks of g in
 * `members` (bit r: rank r; ~0: every rank), added in rank order ((b_0 + b_1) + b_2) + ... with the backend's
 * copy and add after one all-gather into scratch (g->size * n elements, the caller's): the same bits on every rank
 * that sums the same members. Every rank of g must call it (the all-gather), whatever its members. */
lcx_status lcx_group_sum(lcx_comm *g, const lcx_backend *be, lcx_exec *x, lcx_dtype dt, void *buf, int64_t n,
                         uint64_t members, void *scratch);

/* Piece q of a buffer of n elements cut in pieces of p: elements [q p, min((q + 1) p, n)); its length, maybe 0. */
static inline int64_t lcx_piece_len(int64_t n, int64_t p, int q) {
    int64_t k = n - (int64_t)q * p;
    return k < 0 ? 0 : k < p ? k : p;
}

/* The reduce-scatter half of a sum in rank order: out[0..p) = piece g->rank of the sum over the ranks of g of their
 * src[0..n) (cut in pieces of p elements), added in rank order. Each rank sends every other rank that rank's piece
 * of src point to point (tag `tag` on g) and receives its own from each into recv ([g->size][p], rank q's at q; its
 * own piece is read in src); out's elements past the piece's end are zeroed. The same additions as
 * lcx_group_sum's for those elements, so the same bits. dt F32 or BF16; every rank of g calls it. */
lcx_status lcx_group_reduce_piece(lcx_comm *g, const lcx_backend *be, lcx_exec *x, lcx_dtype dt, const void *src,
                                  int64_t n, int64_t p, void *recv, void *out, int tag);

/* buf[0..n) = the sum over every rank of g of their buf in rank order, as lcx_group_sum gives it (the same bits),
 * by a reduce-scatter (lcx_group_reduce_piece, pieces of p = ceil(n / g->size)) and an all-gather of the pieces:
 * scratch (g->size + 1) p elements (the caller's), 2 (size - 1) p sent per rank instead of (size - 1) n. */
lcx_status lcx_group_sum_all(lcx_comm *g, const lcx_backend *be, lcx_exec *x, lcx_dtype dt, void *buf, int64_t n,
                             void *scratch, int tag);
/* Its scratch in elements. */
static inline int64_t lcx_group_sum_all_scratch(int size, int64_t n) { return (size + 1) * ((n + size - 1) / size); }

/* buf[0..n) (f32, device memory of be on exec x) = the sum over the ranks of g of every rank's buf, added in
 * rank order ((b_0 + b_1) + b_2) + ... on every rank: chunks of at most chunk elements are summed by
 * lcx_group_sum_all with the backend's add, so the result is bit-identical on every rank and from run to run
 * whatever the communicator's own reduction order. Scratch: lcx_group_sum_all_scratch(g->size, min(n, chunk))
 * floats on the device, the caller's (a model keeps one for its steps) or, scratch NULL, allocated here. */
lcx_status lcx_dp_sum_f32(lcx_comm *g, const lcx_backend *be, lcx_exec *x, float *buf, int64_t n, int64_t chunk,
                          float *scratch);

/* Host doubles: every rank's v[0..k) gathered (rank order) and summed in rank order into out[0..k) (same bits
 * on every rank). fail: this rank's failure flag; *any_failed gets the lowest failing rank, or -1. */
lcx_status lcx_dp_sum_f64(lcx_comm *g, const double *v, int k, int fail, double *out, int *any_failed);

#endif
