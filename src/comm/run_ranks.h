/* run_ranks: one rank's place in a training job's TP x CP x DP mesh (docs/parallel.md), as both training runs
 * take it (`lcextend train`: src/pipeline/train_run.h; the main command: src/pipeline/extend.h), and the checks
 * they make of it on every rank before any work. */
#ifndef LCX_COMM_RUN_RANKS_H
#define LCX_COMM_RUN_RANKS_H

#include "src/core/status.h"

typedef struct lcx_comm lcx_comm; /* src/comm/comm.h */

/* Every rank of the job calls the run with the same options but these. All zero: one rank.
 * - world: the whole job (NULL or one rank: the job is grad). Rank 0 of the job is the lead.
 * - grad: the gradient group, the CP x DP ranks of this rank's TP coordinate, whose rank is cp_rank + cp_size x
 *   dp_rank (NULL or one rank: no reduction). dp_rank, dp_size: this rank's data slice.
 * - cp_comm: the CP group (NULL or cp_size 0/1: none); each rank holds seq_len / cp_size tokens of a sequence.
 * - tp_comm: the TP group (NULL or tp_size 0/1: none); each rank holds its TP slice of every parameter; the world
 *   is then tp_size x grad's ranks.
 * - zero1: the AdamW moments sharded over grad (docs/parallel.md "Data parallelism"); every number the run
 *   computes is the same as without it; no effect on one rank. */
typedef struct lcx_run_ranks {
    lcx_comm *world, *grad, *cp_comm, *tp_comm;
    int dp_rank, dp_size;
    int cp_rank, cp_size;
    int tp_rank, tp_size;
    int zero1;
} lcx_run_ranks;

/* The groups a run talks over, a group of one rank made NULL. */
typedef struct lcx_run_groups {
    lcx_comm *g;         /* grad when it has more than one rank */
    lcx_comm *all;       /* every rank of the job: world when it has more than one rank, else g */
    int lead;            /* rank 0 of all (or no all): checks, creates, reports, exports */
    lcx_comm *cpc;       /* the CP group when CP > 1 */
    int cp, cp_rank;     /* its size (1: none) and this rank's place in it */
    lcx_comm *tpc;       /* the TP group when TP > 1 */
    int tp;              /* its size (1: none) */
    int dp_rank, dp_size; /* 0 and 1 without g */
} lcx_run_groups;

/* Fills *out from rk (always, also when it fails), then checks that the sizes and ranks rk says are the groups'
 * own: the CP rank and size against cp_comm, CP only with a gradient group, the TP rank and size against tp_comm
 * and a world of TP x grad's ranks, and CP x DP against grad. Fails with LCX_ERR_INVALID and one line starting
 * with who ("train: TP rank 1 of 2 does not match ..."). */
lcx_status lcx_run_ranks_resolve(const lcx_run_ranks *rk, const char *who, lcx_run_groups *out);

#endif /* LCX_COMM_RUN_RANKS_H */
