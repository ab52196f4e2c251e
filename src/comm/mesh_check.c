/* mesh_check: the layout rules of src/core/layout.h applied to one mesh, model and sequence length. */
#include "src/comm/mesh_check.h"

lcx_status lcx_comm_check_mesh(const lcx_mesh *m, const lcx_tp_dims *dims, int64_t seq_len) {
    LCX_FAIL_IF(!m || !dims, LCX_ERR_INVALID, "mesh check: missing mesh or model dims");
    LCX_TRY(lcx_tp_check(dims, m->tp));
    int64_t vp;
    LCX_TRY(lcx_vocab_padded(dims->V, m->tp, &vp));
    LCX_FAIL_IF(vp % m->tp != 0, LCX_ERR_INVALID, "tp=%d does not divide the padded vocabulary %lld", m->tp,
                (long long)vp);
    lcx_cp_split split;
    return lcx_cp_split_of(seq_len, m->cp, 0, &split);
}
