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

/* buf[0..n) (f32, device memory of be on exec x) = the sum over the ranks of g of every rank's buf, added in
 * rank order ((b_0 + b_1) + b_2) + ... on every rank: chunks of at most chunk elements are all-gathered and
 * summed with the backend's add, so the result is bit-identical on every rank and from run to run whatever the
 * communicator's own reduction order. Scratch: g->size * min(n, chunk) floats on the device, allocated here. */
lcx_status lcx_dp_sum_f32(lcx_comm *g, const lcx_backend *be, lcx_exec *x, float *buf, int64_t n, int64_t chunk);

/* Host doubles: every rank's v[0..k) gathered (rank order) and summed in rank order into out[0..k) (same bits
 * on every rank). fail: this rank's failure flag; *any_failed gets the lowest failing rank, or -1. */
lcx_status lcx_dp_sum_f64(lcx_comm *g, const double *v, int k, int fail, double *out, int *any_failed);

#endif
