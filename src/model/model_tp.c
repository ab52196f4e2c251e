/* model_tp: tensor parallelism inside the model (Megatron-style, docs/parallel.md "Tensor parallelism"). Each
 * rank of the TP group (opts.tp_comm) holds its heads of q/k/v/o, its part of the MLP's intermediate size and its
 * rows of the (padded) vocabulary; the layer code runs on those local sizes and meets the other ranks at four
 * kinds of points, all here:
 *   - the sum of partial results: the row-parallel o_proj and down_proj outputs and the vocab-parallel embedding
 *     in the forward, the column-parallel layers' input gradients (before each RMSNorm backward) and the
 *     vocab-parallel loss's dX in the backward;
 *   - the vocab-parallel cross-entropy's row statistics (max, sum of exponentials, target logit), gathered;
 *   - once per optimizer step, the gradients of parameters every rank holds but sees only part of (Qwen3's
 *     q_norm/k_norm, kv heads replicated when TP exceeds them), summed over the ranks that share them;
 *   - the global gradient norm: each rank's own slices plus the replicated parameters once.
 * Every sum adds the ranks' values in rank order ((x_0 + x_1) + x_2 ...), so every TP rank holds the same bits
 * (replicated norms stay identical without being synchronised) and a rerun repeats them. A sum over the whole
 * group is a reduce-scatter then an all-gather: rank q adds up piece q of every rank's buffer (received point to
 * point) and the pieces are all-gathered, 1 + 1/TP times the buffer of scratch and 2 (TP - 1)/TP of it sent; a
 * sum over some of the ranks (a replicated kv head's sharers) all-gathers the whole buffers (lcx_group_sum). */
#include <stdlib.h>
#include <string.h>

#include "src/core/clock.h"
#include "src/model/model_dp.h"
#include "src/model/model_internal.h"

lcx_status lcx_tp_init(lcx_model *m, lcx_comm *tp) {
    m->tp_size = 1, m->tp_rank = 0;
    if (!tp) return LCX_OK;
    LCX_FAIL_IF(tp->size < 1 || tp->rank < 0 || tp->rank >= tp->size, LCX_ERR_INVALID,
                "model: TP communicator rank %d of %d", tp->rank, tp->size);
    m->tp = tp, m->tp_size = tp->size, m->tp_rank = tp->rank;
    return LCX_OK;
}

static uint64_t partial_sharers(const lcx_model *m, size_t i);

/* Every TP rank as a members mask (bit r: TP rank r). */
static uint64_t every_rank(const lcx_model *m) {
    return m->tp_size >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << m->tp_size) - 1;
}
/* members holds every TP rank: a sum over the whole group. */
static int whole_group(const lcx_model *m, uint64_t members) { return (members & every_rank(m)) == every_rank(m); }

/* Scratch bytes of a sum of n elements of es bytes over the ranks in members (sum_members). */
static size_t sum_scratch(const lcx_model *m, int64_t n, size_t es, uint64_t members) {
    if (!whole_group(m, members)) return (size_t)(m->tp_size * n) * es; /* the whole buffers gathered */
    return (size_t)lcx_group_sum_all_scratch(m->tp_size, n) * es; /* TP pieces received + this rank's */
}

lcx_status lcx_tp_alloc(lcx_model *m) {
    if (!m->tp || m->tp_size == 1) return LCX_OK;
    const int64_t T = m->max_tokens, C = m->loss_chunk_cap;
    size_t es = lcx_act_size(m->adt);
    /* the largest sum: [T, H] (act) over the group (under sequence parallelism none: its reduce-scatter receives
     * [ceil(T / TP), H] from each rank), or, in training, the gradient of a parameter partial on each rank over
     * its sharers (f32) */
    size_t big = m->sp ? (size_t)(m->tp_size * lcx_m_part_rows(m, T) * m->H) * es
                       : sum_scratch(m, T * m->H, es, ~(uint64_t)0);
    for (size_t i = 0; i < m->tab.n && m->training; i++) {
        uint64_t who = partial_sharers(m, i);
        size_t g = who ? sum_scratch(m, (int64_t)lcx_m_numel(m, i), 4, who) : 0;
        if (g > big) big = g;
    }
    lcx_cursor c = {0};
    for (int pass = 0; pass < 2; pass++) {
        m->tp_gather = lcx_cursor_take(&c, 1, big);
        m->tp_stats = lcx_cursor_take(&c, C * 3 * (m->tp_size + 1), sizeof(double)); /* mine, then the gathered */
        /* a forward-only model hands out whole logits rows (model_logits.c): every rank's slice of a chunk */
        m->tp_logits = m->training ? NULL : lcx_cursor_take(&c, C * m->tp_size * m->Vl, sizeof(float));
        if (pass) break;
        LCX_FAIL_IF(c.overflow, LCX_ERR_OOM, "model: TP scratch overflows for %lld tokens", (long long)T);
        LCX_TRY(m->be->alloc(c.used, &m->tp_mem));
        m->tp_bytes = c.used;
        c.base = m->tp_mem, c.used = 0;
    }
    return LCX_OK;
}

void lcx_tp_free(lcx_model *m) {
    if (m->be) m->be->free(m->tp_mem);
    m->tp_mem = NULL;
}

/* The tag of the sums' pieces on the TP group (nothing else sends point to point there). */
#define PIECE_TAG 11

/* buf[0..n) = the sum over the TP ranks in `members` (bit r: TP rank r) of their buf, in rank order: over every
 * rank a reduce-scatter then an all-gather of the pieces (lcx_group_sum_all); over some, the whole buffers gathered
 * (lcx_group_sum). Timed as TP communication. */
static lcx_status sum_members(lcx_model *m, void *buf, int64_t n, lcx_dtype dt, uint64_t members) {
    double t0 = lcx_clock_s();
    lcx_status st = whole_group(m, members)
                        ? lcx_group_sum_all(m->tp, m->be, m->x, dt, buf, n, m->tp_gather, PIECE_TAG)
                        : lcx_group_sum(m->tp, m->be, m->x, dt, buf, n, members, m->tp_gather);
    m->tp_comm_s += lcx_clock_s() - t0;
    return st;
}

lcx_status lcx_tp_sum(lcx_model *m, void *buf, int64_t n) {
    if (!m->tp || m->tp_size == 1) return LCX_OK;
    return sum_members(m, buf, n, m->adt, ~(uint64_t)0);
}

lcx_status lcx_tp_loss_chunk(lcx_model *m, int64_t c, float dscale, int backward, lcx_loss_slot *acc,
                             int64_t r0) {
    const lcx_backend *be = m->be;
    double *mine = m->tp_stats, *all = m->tp_stats + m->loss_chunk_cap * 3;
    int64_t nv = m->V - m->v0;
    nv = nv < 0 ? 0 : nv > m->Vl ? m->Vl : nv;
    lcx_xent_args xa = {.dt = LCX_F32, .n_rows = c, .vocab = m->Vl, .dscale = dscale, .logits = m->logit_chunk,
                        .targets = m->d_tgt + r0, .phase = LCX_XENT_STATS, .tp = m->tp_size,
                        .vocab_start = m->v0, .n_valid = nv, .stats = mine};
    LCX_TRY(be->cross_entropy(m->x, &xa));
    /* [tp][c][3]: the stats of each rank's shard in rank order (c rows of this chunk, not the capacity) */
    double t0 = lcx_clock_s();
    LCX_TRY(lcx_comm_all_gather(m->tp, m->x, mine, all, c * 3, LCX_F64));
    m->tp_comm_s += lcx_clock_s() - t0;
    xa.phase = LCX_XENT_FINISH, xa.stats = all;
    xa.dlogits = backward ? m->logit_chunk : NULL;
    xa.loss_sum = &acc->loss_sum, xa.count = &acc->count;
    return be->cross_entropy(m->x, &xa);
}

/* Ranks sharing parameter i's box that compute only part of its gradient: bit r set for each. 0: the gradient is
 * complete on every rank (its own slice, or a replica whose inputs and output gradient are the same on every rank:
 * the layer norms without sequence parallelism, o_proj's and down_proj's biases). */
static uint64_t partial_sharers(const lcx_model *m, size_t i) {
    const lcx_param_kind k = m->tab.params[i].kind;
    const uint64_t every = every_rank(m);
    if (k == LCX_PARAM_Q_NORM || k == LCX_PARAM_K_NORM) return every; /* per-head weights shared by all heads */
    /* sequence parallelism: each rank's norms see only its rows of the tokens */
    if (m->sp && (k == LCX_PARAM_ATTN_NORM || k == LCX_PARAM_MLP_NORM || k == LCX_PARAM_FINAL_NORM)) return every;
    const lcx_tp_slice *s = &m->slice[i];
    if (s->replicas <= 1 || !(k == LCX_PARAM_K || k == LCX_PARAM_V || k == LCX_PARAM_K_BIAS || k == LCX_PARAM_V_BIAS))
        return 0;
    /* replicated kv head: the replicas consecutive TP ranks, this one at replica_index among them */
    int first = m->tp_rank - s->replica_index;
    uint64_t bits = 0;
    for (int r = first; r < first + s->replicas; r++) bits |= (uint64_t)1 << r;
    return bits;
}

lcx_status lcx_tp_reduce_grads(lcx_model *m) {
    if (!m->tp || m->tp_size == 1) return LCX_OK;
    /* which parameters are partial depends on their kind and the layout only: the same list on every rank, so
     * every rank joins the same gathers in the same order */
    for (size_t i = 0; i < m->tab.n; i++) {
        uint64_t who = partial_sharers(m, i);
        if (who) LCX_TRY(sum_members(m, lcx_m_grad(m, (int64_t)i), (int64_t)lcx_m_numel(m, i), LCX_F32, who));
    }
    return LCX_OK;
}

lcx_status lcx_tp_sum_host(lcx_model *m, double *v) {
    if (!m->tp || m->tp_size == 1) return LCX_OK;
    double sum = 0, t0 = lcx_clock_s();
    int failed = -1;
    lcx_status st = lcx_dp_sum_f64(m->tp, v, 1, 0, &sum, &failed); /* rank order, the same bits on every rank */
    m->tp_comm_s += lcx_clock_s() - t0;
    if (st == LCX_OK) *v = sum;
    return st;
}

/* Distributed saved activations (docs/parallel.md "Distributed saved activations"): every TP rank holds the same
 * layer input, so a recomputed layer stores only its rank's rows of it and the ranks rebuild the whole by
 * all-gather before the rerun. The rows are copied, never computed, so the backward sees the same bits. */
lcx_status lcx_tp_keep_input(lcx_model *m, int l, int64_t T) {
    if (!lcx_m_distributes(m, l)) return LCX_OK;
    const lcx_layer_acts *a = &m->layer[l];
    const int64_t rows = lcx_m_part_rows(m, T), r0 = (int64_t)m->tp_rank * rows;
    const int64_t n = T - r0 < 0 ? 0 : T - r0 < rows ? T - r0 : rows;
    const size_t es = lcx_act_size(m->adt);
    if (n) LCX_TRY(m->be->copy_d2d(m->x, a->x_part, lcx_m_at(m, m->x_full, r0 * m->H), (size_t)(n * m->H) * es));
    /* rows past T (the last ranks' padding) are gathered past T, where nothing reads them: zeroed, not left as
     * whatever the buffer held, so every byte that is sent is defined */
    if (n < rows) LCX_TRY(m->be->zero(m->x, lcx_m_at(m, a->x_part, n * m->H), (size_t)((rows - n) * m->H) * es));
    return LCX_OK;
}

int lcx_model_distributes_saved(const lcx_model *m) { return m->x_full != NULL; }

int lcx_model_sequence_parallel(const lcx_model *m) { return m->sp; }

lcx_status lcx_tp_gather_input(lcx_model *m, int l, int64_t T) {
    if (!lcx_m_distributes(m, l)) return LCX_OK;
    double t0 = lcx_clock_s();
    lcx_status st = lcx_comm_all_gather(m->tp, m->x, m->layer[l].x_part, m->x_full, lcx_m_part_rows(m, T) * m->H,
                                        m->adt);
    m->tp_comm_s += lcx_clock_s() - t0;
    return st;
}

/* Sequence parallelism (docs/parallel.md "Sequence parallelism"): between the column-parallel input and the
 * row-parallel output of each block the ranks hold whole rows; elsewhere (the residual stream, the norms) each
 * holds ceil(T / TP) rows. The all-reduce of a row-parallel output becomes a reduce-scatter, and the input of a
 * column-parallel layer an all-gather: in the backward the other way round. */
lcx_status lcx_sp_gather(lcx_model *m, const void *local, void *full, int64_t T) {
    double t0 = lcx_clock_s();
    lcx_status st = lcx_comm_all_gather(m->tp, m->x, local, full, lcx_m_part_rows(m, T) * m->H, m->adt);
    m->tp_comm_s += lcx_clock_s() - t0;
    return st;
}

lcx_status lcx_sp_scatter_sum(lcx_model *m, void *full, void *local, int64_t T) {
    const int64_t rows = lcx_m_part_rows(m, T), pad = rows * m->tp_size - T;
    /* the padding rows are sent: zeros, so the last ranks' padding rows sum to zero */
    if (pad) LCX_TRY(m->be->zero(m->x, lcx_m_at(m, full, T * m->H), (size_t)(pad * m->H) * lcx_act_size(m->adt)));
    /* this rank's rows of every rank's partial sums, added in rank order: the bits lcx_tp_sum gives these rows */
    double t0 = lcx_clock_s();
    lcx_status st = lcx_group_reduce_piece(m->tp, m->be, m->x, m->adt, full, rows * m->tp_size * m->H, rows * m->H,
                                           m->tp_gather, local, PIECE_TAG);
    m->tp_comm_s += lcx_clock_s() - t0;
    return st;
}
