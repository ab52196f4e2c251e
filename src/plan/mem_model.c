/* mem_model: the planner's memory model (per-layer bytes by policy, workspace, the exec arena, the before/after
 * evaluation, the reserve) and model FLOPs (docs/plan.md "Memory", "FLOPs", "Reserve"). */
#include <math.h>
#include <string.h>

#include "src/core/cp_perm.h"
#include "kernels/cuda/cuda_matmul.h"
#include "src/model/model.h"
#include "src/model/model_arena.h"
#include "src/model/model_dp.h"
#include "src/plan/plan_internal.h"

double lcx_mem_layer_keep(const lcx_mem_model *m) {
    double H = (double)m->hidden, d = (double)m->head_dim, s = row_share(m);
    double nh = per_tp(m->heads, m->tp), nkv = per_tp(m->kv_heads, m->tp), F = (double)m->ffn / (double)m->tp;
    /* x, attn-norm out, q, k, v, attention out, residual, mlp-norm out, gate, up, silu(gate)*up;
     * fp32: two rstd, one LSE per head (x, the norms' outputs, the residual and the rstd: rows share s) */
    return m->act_bytes * (4 * H * s + 2 * nh * d + 2 * nkv * d + 3 * F) + 4 * (2 * s + nh);
}


double lcx_mem_layer_recompute(const lcx_mem_model *m) {
    double nh = per_tp(m->heads, m->tp);
    double in = (double)m->hidden / (distributes(m) || seq_parallel(m) ? (double)m->tp : 1.0);
    /* layer input (this TP rank's rows when distributed) + attention output and its LSE (so the quadratic
     * attention is not rerun) */
    return m->act_bytes * (in + nh * (double)m->head_dim) + 4 * nh;
}

void lcx_mem_set_op_ws(lcx_mem_model *m, lcx_mem_backend b) {
    m->op_ws_fixed = b == LCX_MEM_CUDA ? (double)LCX_CUDA_MATMUL_WS_MAX : 0;
    m->op_ws_per_token = b == LCX_MEM_CUDA ? 4.0 * per_tp(m->heads, m->tp) : 0;
    m->arena_backend = b == LCX_MEM_CPU ? lcx_backend_cpu() : NULL;
}

int lcx_mem_nccl_comms(int64_t tp, int64_t cp, int64_t dp) {
    return (tp * cp * dp > 1) + (tp > 1) + (cp > 1) + (dp > 1) + (cp * dp > 1);
}

double lcx_mem_runtime(lcx_mem_backend b, int64_t tp, int64_t cp, int64_t dp) {
    if (b != LCX_MEM_CUDA) return 0;
    return LCX_MEM_CUDA_CONTEXT + LCX_MEM_NCCL_COMM * lcx_mem_nccl_comms(tp, cp, dp);
}

static int64_t ceil_tp(int64_t x, int64_t tp) { return x >= tp ? (x + tp - 1) / tp : 1; }

/* The exec arena at T tokens a rank (lcx_mem_set_op_ws). */
static double op_arena(const lcx_mem_model *m, double T) {
    if (m->arena_backend) {
        const lcx_exec x = {.be = m->arena_backend}; /* its queries are host arithmetic: no queue, no arena */
        const int64_t tokens = (int64_t)T, tp = m->tp > 0 ? m->tp : 1;
        lcx_arena_shape s = {.tokens = tokens, .loss_chunk = m->loss_chunk < tokens ? m->loss_chunk : tokens,
                             .hidden = m->hidden, .ffn = ceil_tp(m->ffn, tp), .vocab = ceil_tp(m->vocab, tp),
                             .heads = ceil_tp(m->heads, tp), .kv_heads = ceil_tp(m->kv_heads, tp),
                             .head_dim = m->head_dim, .rot_dim = m->head_dim, .n_elems = (int64_t)(m->n_params / tp),
                             .tp = tp, .training = 1, .ring = m->cp > 1,
                             .adt = m->act_bytes == 2 ? LCX_BF16 : LCX_F32,
                             .pdt = m->weight_bytes == 2 ? LCX_BF16 : LCX_F32};
        return (double)lcx_model_arena(&x, &s);
    }
    return T * m->op_ws_per_token > m->op_ws_fixed ? T * m->op_ws_per_token : m->op_ws_fixed;
}

/* Rows of one MLP tile at T tokens: the tile, or all rows without tiling (or with a tile of at least T). */
static double mlp_rows(const lcx_mem_model *m, double T) {
    return m->mlp_tile > 0 && (double)m->mlp_tile < T ? (double)m->mlp_tile : T;
}

/* The estimate from the number of layers of each concrete policy (counts[LCX_ACT_POLICY_COUNT]): every part of
 * the model depends on the counts only, not on which layer runs which policy. Each term is a buffer of the
 * model's activation layout (src/model/model_init.c layout_acts, model_offload.c). */
void lcx_mem_estimate_counts(const lcx_mem_model *m, int64_t seq_len, int64_t micro_seqs, const int *counts,
                                lcx_mem_estimate *e) {
    memset(e, 0, sizeof *e);
    double P = (double)m->n_params / (double)m->tp;
    double w = m->weight_bytes, a = m->act_bytes;
    e->weights = P * w;
    e->grads = P * 4;
    /* ZeRO-1: the moments, and with bf16 weights the fp32 master too, 1/Z on each rank of the gradient group */
    const double Z = m->zero_shards > 1 ? (double)m->zero_shards : 1;
    e->master = w < 4 ? P * 4 / Z : 0;
    e->optimizer = P * 8 / Z;
    double T = (double)seq_len * (double)micro_seqs / (double)m->cp; /* tokens per device per micro-batch */
    double H = (double)m->hidden, F = (double)m->ffn / (double)m->tp, C = mlp_rows(m, T);
    double Q = per_tp(m->heads, m->tp) * (double)m->head_dim, KV = per_tp(m->kv_heads, m->tp) * (double)m->head_dim;
    double keep = lcx_mem_layer_keep(m), rec = lcx_mem_layer_recompute(m);
    const double n_ro = counts[LCX_ACT_RECOMPUTE_OFFLOAD];
    int any_rec = counts[LCX_ACT_RECOMPUTE] > 0 || n_ro > 0;
    double stored = counts[LCX_ACT_KEEP] * keep + counts[LCX_ACT_RECOMPUTE] * rec;
    e->host = counts[LCX_ACT_OFFLOAD] * T * keep + n_ro * T * rec;
    /* the largest offloaded layer's stored bytes per token (an offload slot) */
    double slot = counts[LCX_ACT_OFFLOAD] > 0 ? keep : n_ro > 0 ? rec : 0;
    /* the last layer's output and the final-norm output (+ its rstd), ones, ids, targets, positions, document
     * starts */
    const double s = row_share(m);
    e->activations = T * stored + T * (s * (2.0 * a * H + 4) + 5 * 4);
    /* the backward's dres, dxn, dout (act dtype), dq, dk, dv (fp32) and the MLP tile's dgate, dup, dact */
    e->workspace = T * (a * (2 * H * s + Q) + 4 * (Q + 2 * KV)) + 3 * a * C * F;
    /* sequence parallelism: whole rows of a norm's output, of a row-parallel partial sum, of the residual's
     * gradient */
    if (seq_parallel(m)) e->workspace += 3 * T * a * H;
    /* the recompute scratch: one layer's tensors without its input, o and LSE; gate/up/act for one MLP tile */
    if (any_rec) e->workspace += T * (a * (3 * H * s + Q + 2 * KV) + 8 * s) + 3 * a * C * F;
    /* distributed: the recomputed layers' whole input, shared (rebuilt by all-gather before each rerun) */
    if (any_rec && distributes(m)) e->workspace += T * a * H;
    /* the offload device pool: prefetch depth + 2 = 3 slots (docs/model.md "Activation policy (per layer)") */
    e->workspace += 3 * T * slot;
    e->workspace += op_arena(m, T);
    /* ZeRO-1's exchanges: a batch packed per destination and D x this rank's rows of it (src/model/model_zero.c),
     * a batch being at most LCX_ZERO_CHUNK elements or the whole (small) model */
    if (m->zero_shards > 1) e->workspace += 2.0 * 4 * fmin((double)LCX_ZERO_CHUNK, P);
    /* without it the gradient group's sum: its chunk's pieces received and gathered (src/model/model_dp.h) */
    else if (m->grad_ranks > 1)
        e->workspace += 4.0 * (double)lcx_group_sum_all_scratch((int)m->grad_ranks,
                                                                (int64_t)fmin((double)LCX_DP_CHUNK, ceil(P)));
    double chunk = (double)(m->loss_chunk < T ? m->loss_chunk : (int64_t)T);
    e->logits = chunk * per_tp(m->vocab, m->tp) * 4;
    if (m->cp > 1) e->cp_buffers = 8.0 * T * per_tp(m->kv_heads, m->tp) * (double)m->head_dim * m->act_bytes;
    e->total = e->weights + e->grads + e->master + e->optimizer + e->activations + e->workspace + e->logits +
               e->cp_buffers;
}

void lcx_mem_policy_counts(const lcx_act_policy *policy, int64_t n_layers, int *counts) {
    for (int i = 0; i < LCX_ACT_POLICY_COUNT; i++) counts[i] = 0;
    for (int64_t l = 0; l < n_layers; l++) {
        lcx_act_policy a = policy[l] == LCX_ACT_RECOMPUTE || policy[l] == LCX_ACT_OFFLOAD ||
                                   policy[l] == LCX_ACT_RECOMPUTE_OFFLOAD
                               ? policy[l]
                               : LCX_ACT_KEEP;
        counts[a]++;
    }
}

void lcx_mem_estimate_compute(const lcx_mem_model *m, int64_t seq_len, int64_t micro_seqs,
                              const lcx_act_policy *policy, lcx_mem_estimate *e) {
    int counts[LCX_ACT_POLICY_COUNT];
    lcx_mem_policy_counts(policy, m->n_layers, counts);
    lcx_mem_estimate_counts(m, seq_len, micro_seqs, counts, e);
}

double lcx_matmul_params(const lcx_mem_model *m) {
    double H = (double)m->hidden, d = (double)m->head_dim, F = (double)m->ffn;
    double per_layer = H * (double)m->heads * d * 2 + H * (double)m->kv_heads * d * 2 + 3 * H * F;
    return (double)m->n_layers * per_layer + (double)m->vocab * H;
}

double lcx_flops_per_token(const lcx_mem_model *m, int64_t seq_len) {
    return 6.0 * lcx_matmul_params(m) +
           6.0 * (double)m->n_layers * (double)m->heads * (double)m->head_dim * ((double)seq_len + 1.0);
}

/* n elements of elem bytes rounded up to 64 bytes, as the model lays out each buffer */
static double piece(double n, double elem) { return ceil(n * elem / 64.0) * 64.0; }

void lcx_mem_eval_compute(const lcx_model_config *cfg, uint64_t n_params, int64_t tp, int64_t cp, int64_t tokens,
                          int64_t chunk, lcx_mem_eval *e) {
    memset(e, 0, sizeof *e);
    if (tp < 1 || cp < 1 || cp > INT32_MAX || tokens < 1 || chunk < 1) return;
    const int64_t N = tokens + 16, T = lcx_cp_local_len(N, (int)cp), H = cfg->hidden_size, d = cfg->head_dim;
    const int64_t V = cfg->vocab_size, kv = cfg->num_key_value_heads >= tp ? cfg->num_key_value_heads / tp : 1;
    lcx_model_opts mo;
    memset(&mo, 0, sizeof mo);
    mo.max_tokens = T, mo.loss_chunk = chunk, mo.act_dtype = LCX_F32, mo.mlp_chunk = LCX_EVAL_MLP_CHUNK;
    e->tokens = N;
    e->local_tokens = T;
    e->weights = (double)n_params / (double)tp * 4;
    e->working_set = (double)lcx_model_forward_bytes_tp(cfg, &mo, (int)tp);
    if (cp == 1) e->kv_cache = 2 * piece((double)cfg->num_hidden_layers * (double)T * (double)(kv * d), 4);
    if (tp > 1) { /* src/model/model_tp.c lcx_tp_alloc for a forward-only model */
        const double C = (double)(chunk < T ? chunk : T), Vl = (double)((V + tp - 1) / tp);
        /* a [T, H] sum's TP received pieces and this rank's sum, the loss statistics, the gathered logits */
        e->tp_scratch = piece((double)(tp + 1) * (double)((T * H + tp - 1) / tp), 4) +
                        piece(C * 3 * (double)(tp + 1), 8) + piece(C * (double)tp * Vl, 4);
    }
    if (cp > 1) /* src/model/model_ring.c lcx_ring_init, forward-only */
        e->cp_ring = 2 * piece(2.0 * (double)T * (double)(kv * d), 4) +
                     piece((double)T * (double)(cfg->num_attention_heads / tp * d), 4) +
                     piece((double)T * (double)(cfg->num_attention_heads / tp), 4);
    e->total = e->weights + e->working_set + e->kv_cache + e->tp_scratch + e->cp_ring;
}

lcx_mem_model lcx_mem_model_of(const lcx_model_config *cfg, uint64_t n_params) {
    return (lcx_mem_model){.n_layers = cfg->num_hidden_layers, .hidden = cfg->hidden_size,
                           .ffn = cfg->intermediate_size, .heads = cfg->num_attention_heads,
                           .kv_heads = cfg->num_key_value_heads, .head_dim = cfg->head_dim,
                           .vocab = cfg->vocab_size, .n_params = n_params, .tp = 1, .cp = 1};
}

double lcx_config_flops_per_token(const lcx_model_config *cfg, int64_t seq_len) {
    const lcx_mem_model m = lcx_mem_model_of(cfg, 0);
    return lcx_flops_per_token(&m, seq_len);
}
