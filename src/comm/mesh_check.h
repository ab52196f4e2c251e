/* mesh_check: does a TP x CP x DP mesh fit a model and a sequence length? Checked before any work, on every
 * rank alike, so a bad layout stops the job with one line naming the numbers (docs/parallel.md "Mesh"). */
#ifndef LCX_COMM_MESH_CHECK_H
#define LCX_COMM_MESH_CHECK_H

#include <stdint.h>

#include "src/core/layout.h"
#include "src/core/status.h"

/* tp divides the attention heads, the intermediate size and the kv heads (or, with fewer kv heads than tp, the
 * kv heads divide tp: they are replicated, lcx_tp_check); tp divides the padded vocabulary (lcx_vocab_padded);
 * 2*cp divides seq_len (lcx_cp_split_of). Fails with LCX_ERR_INVALID and the first rule broken. */
lcx_status lcx_comm_check_mesh(const lcx_mesh *m, const lcx_tp_dims *dims, int64_t seq_len);

#endif /* LCX_COMM_MESH_CHECK_H */
