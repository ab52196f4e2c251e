/* run_ranks: a training job's groups from one rank's options, checked (src/comm/run_ranks.h). */
#include "src/comm/run_ranks.h"

#include "src/comm/comm.h"

lcx_status lcx_run_ranks_resolve(const lcx_run_ranks *rk, const char *who, lcx_run_groups *out) {
    lcx_run_groups *o = out;
    o->g = rk->grad && rk->grad->size > 1 ? rk->grad : NULL;
    o->all = rk->world && rk->world->size > 1 ? rk->world : o->g;
    o->lead = !o->all || o->all->rank == 0;
    o->cpc = rk->cp_comm && rk->cp_size > 1 ? rk->cp_comm : NULL;
    o->cp = o->cpc ? rk->cp_size : 1;
    o->cp_rank = o->cpc ? rk->cp_rank : 0;
    o->tpc = rk->tp_comm && rk->tp_size > 1 ? rk->tp_comm : NULL;
    o->tp = o->tpc ? rk->tp_size : 1;
    o->dp_rank = o->g ? rk->dp_rank : 0;
    o->dp_size = o->g ? rk->dp_size : 1;
    if (o->cpc && (o->cpc->size != o->cp || o->cpc->rank != o->cp_rank))
        return lcx_fail(LCX_ERR_INVALID, "%s: CP rank %d of %d does not match the CP group's rank %d of %d", who,
                        o->cp_rank, o->cp, o->cpc->rank, o->cpc->size);
    if (o->cpc && !o->g)
        return lcx_fail(LCX_ERR_INVALID, "%s: context parallelism needs the gradient group (CP x DP)", who);
    const int g_size = o->g ? o->g->size : 1;
    if (o->tpc && (o->tpc->size != o->tp || o->tpc->rank != rk->tp_rank || !o->all || o->all->size != o->tp * g_size))
        return lcx_fail(LCX_ERR_INVALID,
                        "%s: TP rank %d of %d does not match the TP group's rank %d of %d and a world of %d ranks "
                        "(TP x the gradient group's %d)",
                        who, rk->tp_rank, o->tp, o->tpc->rank, o->tpc->size, o->all ? o->all->size : 1, g_size);
    if (o->g && (o->dp_size * o->cp != o->g->size || o->dp_rank * o->cp + o->cp_rank != o->g->rank))
        return lcx_fail(LCX_ERR_INVALID,
                        "%s: CP rank %d of %d, DP rank %d of %d do not match the gradient group's rank %d of %d", who,
                        o->cp_rank, o->cp, o->dp_rank, o->dp_size, o->g->rank, o->g->size);
    return LCX_OK;
}
