/* plan: stage expansion, rope per stage, batch/step arithmetic, analytic estimates (docs/plan.md). */
#include "src/plan/plan.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint/catalog.h"
#include "src/checkpoint/model_params.h"
#include "src/comm/mesh_check.h"
#include "src/core/cp_perm.h"
#include "src/core/cp_ring.h"
#include "src/core/units.h"
#include "kernels/cuda/cuda_matmul.h"
#include "src/model/model.h"
#include "src/model/model_arena.h"
#include "src/model/model_dp.h"

/* ---- estimates ---------------------------------------------------------------------------------------------- */
static double per_tp(int64_t x, int64_t tp) { return x >= tp ? (double)x / (double)tp : 1.0; }

/* Sequence parallelism in effect: the residual stream and the norms hold 1/TP of the rows. */
static int seq_parallel(const lcx_mem_model *m) { return m->sequence_parallel && m->tp > 1; }
/* The share of the rows of the residual stream (and the norms) a rank holds. */
static double row_share(const lcx_mem_model *m) { return seq_parallel(m) ? 1.0 / (double)m->tp : 1.0; }

double lcx_mem_layer_keep(const lcx_mem_model *m) {
    double H = (double)m->hidden, d = (double)m->head_dim, s = row_share(m);
    double nh = per_tp(m->heads, m->tp), nkv = per_tp(m->kv_heads, m->tp), F = (double)m->ffn / (double)m->tp;
    /* x, attn-norm out, q, k, v, attention out, residual, mlp-norm out, gate, up, silu(gate)*up;
     * fp32: two rstd, one LSE per head (x, the norms' outputs, the residual and the rstd: rows share s) */
    return m->act_bytes * (4 * H * s + 2 * nh * d + 2 * nkv * d + 3 * F) + 4 * (2 * s + nh);
}

/* Distributed saved activations in effect: TP ranks keep their rows of a recomputed layer's input. */
static int distributes(const lcx_mem_model *m) { return m->distribute && m->tp > 1 && !seq_parallel(m); }

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
static void mem_estimate_counts(const lcx_mem_model *m, int64_t seq_len, int64_t micro_seqs, const int *counts,
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

static void policy_counts(const lcx_act_policy *policy, int64_t n_layers, int *counts) {
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
    policy_counts(policy, m->n_layers, counts);
    mem_estimate_counts(m, seq_len, micro_seqs, counts, e);
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

/* ---- options ------------------------------------------------------------------------------------------------ */
/* plan.h; distribute_saved, sequence_parallel -1: decided by the planner where it can (a search, or a budget with
 * TP); zero1 -1: on with a budget */
void lcx_plan_opts_default(lcx_plan_opts *o) {
    memset(o, 0, sizeof *o);
    o->tp = o->cp = o->dp = 1;
    o->weight_bytes = 2;
    o->act_bytes = 2;
    o->loss_chunk = 4096;
    o->dev_flops = 400e12;
    o->link_bytes_s = 150e9;
    o->host_bytes_s = 25e9;
    o->distribute_saved = -1;
    o->sequence_parallel = -1;
    o->zero1 = -1;
    o->reserve = -1;
}

/* ---- throughput model (docs/plan.md "Throughput model") ---------------------------------------------------- */
double lcx_plan_step_time(const lcx_plan_opts *o, const lcx_mem_model *m, int64_t dp, int64_t seq_len,
                          int64_t seqs_per_rank, uint64_t ring_per_step, const int *counts, lcx_plan_cost *out) {
    lcx_plan_cost c;
    memset(&c, 0, sizeof c);
    double R = o->dev_flops > 0 ? o->dev_flops : 400e12;
    double B = o->link_bytes_s > 0 ? o->link_bytes_s : 150e9;
    double Bh = o->host_bytes_s > 0 ? o->host_bytes_s : 25e9;
    double L = (double)m->n_layers, tp = (double)m->tp;
    /* recompute+offload layers rerun their forward like recompute ones and move the recompute bytes */
    double n_ro = counts[LCX_ACT_RECOMPUTE_OFFLOAD];
    double n_rec = counts[LCX_ACT_RECOMPUTE] + n_ro, n_off = counts[LCX_ACT_OFFLOAD];
    double tokens = (double)seqs_per_rank * (double)seq_len / (double)m->cp; /* per device per step */
    double layer_mm = (lcx_matmul_params(m) - (double)m->vocab * (double)m->hidden) / L;
    /* model FLOPs + the recomputed layers' extra forward (matmuls only: the attention is not rerun), over TP */
    c.compute = tokens * (lcx_flops_per_token(m, seq_len) + 2.0 * layer_mm * n_rec) / tp / R;
    /* two all-reduces of [tokens x H] per layer forward, two backward, two more per recomputed layer (ring), and
     * with distributed saved activations an all-gather of the input (half an all-reduce) per recomputed layer */
    double gathers = distributes(m) ? 0.5 * n_rec : 0;
    /* sequence parallelism: the reduce-scatters and all-gathers move what the all-reduces did, and the backward
     * all-gathers each norm's output again (two all-gathers a layer: one all-reduce) */
    if (seq_parallel(m)) gathers += L;
    if (m->tp > 1)
        c.tp = (4 * L + 2 * n_rec + gathers) * 2.0 * (tp - 1) / tp * tokens * (double)m->hidden * m->act_bytes / B;
    c.cp = (double)ring_per_step / B;
    double G = (double)(m->cp * dp); /* the gradient group: every rank holding the same shard */
    /* a reduce-scatter and an all-gather of fp32 gradients; ZeRO-1 all-gathers the stored weights instead */
    double gather_bytes = m->zero_shards > 1 ? m->weight_bytes : 4;
    if (G > 1) c.grad = (G - 1) / G * (double)m->n_params / tp * (4 + gather_bytes) / B;
    /* offload: each layer's kept activations go to the host and back; only what a layer's compute cannot hide */
    double xfer = 2.0 * tokens * lcx_mem_layer_keep(m) / Bh, layer_s = c.compute / L;
    if (xfer > layer_s) c.offload = n_off * (xfer - layer_s);
    double xfer_ro = 2.0 * tokens * lcx_mem_layer_recompute(m) / Bh;
    if (xfer_ro > layer_s) c.offload += n_ro * (xfer_ro - layer_s);
    c.total = c.compute + c.tp + c.cp + c.grad + c.offload;
    if (out) *out = c;
    return c.total;
}

void lcx_plan_free(lcx_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_stages; i++) free(p->stages[i].activation);
    free(p->stages);
    free(p->recipe_name);
    free(p->recipe_label);
    free(p->search);
    free(p);
}

static void note(lcx_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(lcx_plan *p, const char *fmt, ...) {
    if (p->n_notes >= LCX_PLAN_MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->notes[p->n_notes++], sizeof p->notes[0], fmt, ap);
    va_end(ap);
}

typedef struct warn_ctx {
    lcx_plan *p;
    int64_t len;
} warn_ctx;

static void on_rope_warn(void *user, const char *msg) {
    warn_ctx *w = user;
    char len[32];
    note(w->p, "stage %s: %s", lcx_format_length(w->len, len, sizeof len), msg);
}

/* ---- stage list -------------------------------------------------------------------------------------------- */
typedef struct pending {
    size_t rs;     /* recipe stage */
    int64_t len;
} pending;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static lcx_status expand_stages(lcx_plan *p, const lcx_recipe *r, int64_t divisor, pending *out, int *n_out) {
    int n = 0;
    int64_t last = p->current_context, target = p->target;
    char b1[32], b2[32], b3[32];
    int64_t dropped_len = 0, last_explicit = 0;
    int last_explicit_line = 0;
    for (size_t i = 0; i < r->n_stages; i++) {
        lcx_recipe_stage s;
        lcx_recipe_stage_resolve(r, i, &s);
        if (s.seq_kind == LCX_SEQ_VALUE) {
            last_explicit = s.seq_len, last_explicit_line = s.line[LCX_RF_SEQ_LEN];
            if (s.seq_len <= p->current_context) {
                p->n_skipped++;
                note(p, "%s:%d: stage %s skipped: the model already handles %s", r->label, s.line[LCX_RF_SEQ_LEN],
                     lcx_format_length(s.seq_len, b1, sizeof b1), lcx_format_length(p->current_context, b2, sizeof b2));
                continue;
            }
            if (s.seq_len > target) {
                if (!dropped_len) dropped_len = s.seq_len;
                continue;
            }
            out[n++] = (pending){i, s.seq_len};
            last = s.seq_len;
        } else if (last >= target) { /* auto or target after an explicit stage at --to: nothing to add */
            continue;
        } else if (s.seq_kind == LCX_SEQ_TARGET) {
            out[n++] = (pending){i, target}, last = target;
        } else { /* auto: x2 while the target is at least 1.5x ahead */
            int64_t len = last;
            while (n < LCX_RECIPE_MAX_STAGES + 40) {
                int64_t next = round_up(len * 2, divisor);
                if (next >= target || (double)target < 1.5 * (double)next) break;
                out[n++] = (pending){i, next};
                len = next;
            }
            out[n++] = (pending){i, target};
            last = target;
        }
    }
    if (last != target) {
        if (dropped_len && n == 0)
            return lcx_fail(LCX_ERR_INVALID, "%s: --to %s is below the first stage of recipe '%s' (%s)", r->label,
                            lcx_format_length(target, b1, sizeof b1), r->name,
                            lcx_format_length(dropped_len, b3, sizeof b3));
        if (dropped_len)
            return lcx_fail(LCX_ERR_INVALID, "%s: --to %s falls between the recipe's stage lengths %s and %s: the last "
                                             "stage must end at the target (use one of the recipe's lengths or a "
                                             "recipe with seq_len: auto)",
                            r->label, lcx_format_length(target, b1, sizeof b1),
                            lcx_format_length(last, b2, sizeof b2), lcx_format_length(dropped_len, b3, sizeof b3));
        return lcx_fail(LCX_ERR_INVALID, "%s:%d: target %s is not reachable by recipe '%s': its last stage is %s (add "
                                         "a stage, or use a recipe with seq_len: auto or target)",
                        r->label, last_explicit_line, lcx_format_length(target, b1, sizeof b1), r->name,
                        lcx_format_length(last_explicit, b2, sizeof b2));
    }
    *n_out = n;
    return LCX_OK;
}

/* ---- one stage -------------------------------------------------------------------------------------------- */
static lcx_status plan_rope(lcx_plan *p, const lcx_model_config *cfg, const lcx_recipe *r, const lcx_recipe_stage *s,
                            lcx_plan_stage *ps) {
    char b1[32];
    const char *lab = r->label;
    /* A --method other than the stage's own drops the stage's method-specific values (they were meant for it). */
    int own = !p->opts.has_method || p->opts.method == s->method;
    ps->method = p->opts.has_method ? p->opts.method : s->method;
    lcx_rope_extend req;
    memset(&req, 0, sizeof req);
    req.method = ps->method;
    req.target = ps->seq_len;
    lcx_rope_plan in;
    LCX_TRY(lcx_rope_plan_init(&in, &cfg->rope, cfg->head_dim, cfg->max_position_embeddings, NULL, NULL));
    if (ps->method == LCX_EXTEND_ABF) {
        lcx_theta_kind tk = own ? s->theta_kind : LCX_THETA_AUTO;
        double ratio = (double)ps->seq_len / (double)p->current_context;
        if (tk == LCX_THETA_VALUE) req.theta = s->theta;
        else if (tk == LCX_THETA_PER_DOUBLING) req.theta = cfg->rope.theta * pow(s->theta, log2(ratio));
        else {
            LCX_FAIL_IF(in.rot_dim <= 2, LCX_ERR_INVALID, "abf with theta auto needs a rotary dim > 2");
            req.theta = cfg->rope.theta * pow(ratio, (double)in.rot_dim / (double)(in.rot_dim - 2));
        }
    }
    if (ps->method == LCX_EXTEND_LLAMA3 && own) {
        req.low_freq_factor = s->low_freq_factor;
        req.high_freq_factor = s->high_freq_factor;
    }
    if (ps->method == LCX_EXTEND_LONGROPE) {
        LCX_FAIL_IF(!own || !s->n_short_factor, LCX_ERR_INVALID,
                    "%s:%d: method longrope needs short_factor and long_factor lists in the recipe stage", lab,
                    s->line_start);
        LCX_FAIL_IF(s->n_short_factor != in.n_pairs || s->n_long_factor != in.n_pairs, LCX_ERR_INVALID,
                    "%s:%d: key 'short_factor': longrope lists need %lld entries (rotary dim / 2) for this model, got "
                    "%d and %d",
                    lab, s->line[LCX_RF_SHORT_FACTOR], (long long)in.n_pairs, s->n_short_factor, s->n_long_factor);
        req.short_factor = s->short_factor, req.n_short_factor = s->n_short_factor;
        req.long_factor = s->long_factor, req.n_long_factor = s->n_long_factor;
    }
    warn_ctx wc = {p, ps->seq_len};
    lcx_status st = lcx_rope_plan_extension(&cfg->rope, cfg->head_dim, cfg->max_position_embeddings, &req, &ps->rope,
                                            &ps->max_pos, on_rope_warn, &wc);
    if (st != LCX_OK)
        return lcx_fail_context(st, "%s:%d: stage %s: ", lab, s->line_start,
                                lcx_format_length(ps->seq_len, b1, sizeof b1));
    /* An explicit factor replaces N/L0 (Llama 3.1 trains every stage with factor 8, YaRN trains 64k with s=32). */
    int factor_method = ps->method == LCX_EXTEND_YARN || ps->method == LCX_EXTEND_PI ||
                        ps->method == LCX_EXTEND_LLAMA3 || ps->method == LCX_EXTEND_LONGROPE;
    if (own && factor_method && !s->factor_auto) {
        ps->rope.factor = s->factor;
        double L = ps->method == LCX_EXTEND_PI ? (double)p->original_length
                                                : (double)ps->rope.original_max_position_embeddings;
        double designed = L * s->factor;
        LCX_FAIL_IF(!(designed > (double)p->original_length), LCX_ERR_INVALID,
                    "%s:%d: key 'factor': %g does not extend the original length %lld", lab, s->line[LCX_RF_FACTOR],
                    s->factor, (long long)p->original_length);
        if (designed > (double)ps->max_pos) ps->max_pos = (int64_t)llround(designed);
        if (designed < (double)ps->seq_len) {
            char b2[32];
            note(p, "stage %s: factor %g is designed for %s tokens (L x factor); the stage trains longer sequences",
                 lcx_format_length(ps->seq_len, b1, sizeof b1), s->factor,
                 lcx_format_length((int64_t)llround(designed), b2, sizeof b2));
        }
    }
    lcx_rope_plan check;
    st = lcx_rope_plan_init(&check, &ps->rope, cfg->head_dim, ps->max_pos, NULL, NULL);
    if (st != LCX_OK) return lcx_fail_context(st, "%s:%d: stage %s: ", lab, s->line_start,
                                             lcx_format_length(ps->seq_len, b1, sizeof b1));
    ps->attn_factor = check.attn;
    return LCX_OK;
}

static lcx_status plan_batch(lcx_plan *p, const lcx_recipe *r, const lcx_recipe_stage *s, lcx_plan_stage *ps) {
    const char *lab = r->label;
    int64_t S = ps->seq_len;
    int64_t tpb = s->tokens_per_batch ? s->tokens_per_batch : S;
    int64_t unit = (s->grad_accum ? s->grad_accum : 1) * p->opts.dp;
    /* whole sequences per step, nearest to tokens_per_batch, a multiple of dp x grad_accum */
    int64_t seqs = (tpb + S / 2) / S;
    seqs = (seqs + unit / 2) / unit * unit;
    if (seqs < unit) seqs = unit;
    LCX_FAIL_IF(seqs > (INT64_C(1) << 40) / S, LCX_ERR_INVALID, "%s:%d: key 'tokens_per_batch': too large", lab,
                s->line[LCX_RF_TOKENS_PER_BATCH]);
    ps->seqs_per_step = seqs;
    /* grad_accum auto: one sequence per device per micro-batch (the least activation memory, same FLOPs) */
    ps->grad_accum = s->grad_accum ? s->grad_accum : seqs / p->opts.dp;
    ps->micro_seqs = seqs / (ps->grad_accum * p->opts.dp);
    ps->tokens_per_step = seqs * S;
    if (s->steps) {
        ps->steps = s->steps;
    } else {
        ps->steps = (s->tokens + ps->tokens_per_step - 1) / ps->tokens_per_step;
    }
    LCX_FAIL_IF(ps->steps > (INT64_C(1) << 40) / ps->tokens_per_step, LCX_ERR_INVALID,
                "%s:%d: stage budget too large", lab, s->line_start);
    ps->tokens = ps->steps * ps->tokens_per_step;
    int64_t warmup = s->lr_warmup;
    if (!s->line[LCX_RF_LR_WARMUP] && warmup > ps->steps) warmup = ps->steps; /* built-in default: shrink */
    LCX_FAIL_IF(warmup > ps->steps, LCX_ERR_INVALID,
                "%s:%d: key 'lr.warmup_steps': %lld warm-up steps exceed the stage's %lld steps (%lld tokens / %lld "
                "per step)",
                lab, s->line[LCX_RF_LR_WARMUP], (long long)warmup,
                (long long)ps->steps, (long long)s->tokens, (long long)ps->tokens_per_step);
    ps->lr = (lcx_lr_schedule){s->lr_schedule, s->lr_peak, s->lr_min, warmup, ps->steps, 0, s->lr_decay_type};
    if (s->lr_schedule == LCX_LR_WSD) ps->lr.decay_steps = lcx_lr_decay_steps(s->lr_decay_fraction, ps->steps, warmup);
    ps->save_interval = s->save_interval;
    return LCX_OK;
}

/* ---- per-layer policies of an `activation: auto` stage in a layout search ----------------------------------- */
static const lcx_act_policy SEARCH_POLICIES[] = LCX_PLAN_SEARCH_POLICIES;
enum { N_SEARCH_POLICIES = (int)(sizeof SEARCH_POLICIES / sizeof SEARCH_POLICIES[0]) };

typedef struct comp_search {
    const lcx_plan *p;
    const lcx_plan_stage *ps;
    int cnt[N_SEARCH_POLICIES];          /* layers per SEARCH_POLICIES entry, in layer order */
    int best[N_SEARCH_POLICIES], least[N_SEARCH_POLICIES];
    double best_s, least_total, least_s;
    int have_best, have_least;
} comp_search;

static void comp_eval(comp_search *c) {
    int counts[LCX_ACT_POLICY_COUNT] = {0};
    for (int i = 0; i < N_SEARCH_POLICIES; i++) counts[SEARCH_POLICIES[i]] += c->cnt[i];
    lcx_mem_estimate e;
    mem_estimate_counts(&c->p->model, c->ps->seq_len, c->ps->micro_seqs, counts, &e);
    double t = lcx_plan_step_time(&c->p->opts, &c->p->model, c->p->opts.dp, c->ps->seq_len,
                                  c->ps->micro_seqs * c->ps->grad_accum, c->ps->ring.per_step, counts, NULL);
    int fits = e.total <= c->p->opts.mem_budget && (c->p->opts.host_budget <= 0 || e.host <= c->p->opts.host_budget);
    /* strict comparisons: the first composition in enumeration order wins a tie (deterministic) */
    if (fits && (!c->have_best || t < c->best_s)) {
        memcpy(c->best, c->cnt, sizeof c->best);
        c->best_s = t, c->have_best = 1;
    }
    if (!c->have_least || e.total < c->least_total || (e.total == c->least_total && t < c->least_s)) {
        memcpy(c->least, c->cnt, sizeof c->least);
        c->least_total = e.total, c->least_s = t, c->have_least = 1;
    }
}

static void comp_visit(comp_search *c, int i, int left) {
    if (i == N_SEARCH_POLICIES - 1) {
        c->cnt[i] = left;
        comp_eval(c);
        return;
    }
    for (int k = 0; k <= left; k++) {
        c->cnt[i] = k;
        comp_visit(c, i + 1, left - k);
    }
}

/* Every split of the layers over SEARCH_POLICIES (the memory and the time depend on the counts only): the
 * fastest that fits, else the one needing the least memory (the search then reports the layout as not fitting). */
static void search_policies(const lcx_plan *p, lcx_plan_stage *ps) {
    comp_search c;
    memset(&c, 0, sizeof c);
    c.p = p, c.ps = ps;
    comp_visit(&c, 0, (int)p->model.n_layers);
    const int *pick = c.have_best ? c.best : c.least;
    int64_t l = 0;
    for (int i = 0; i < N_SEARCH_POLICIES; i++)
        for (int k = 0; k < pick[i]; k++) ps->activation[l++] = SEARCH_POLICIES[i];
    lcx_mem_estimate_compute(&p->model, ps->seq_len, ps->micro_seqs, ps->activation, &ps->mem);
}

static const char *human_bytes(double x, char *buf, size_t cap);

/* plan.h */
lcx_status lcx_plan_step_policies(const lcx_mem_model *m, const lcx_plan_opts *o, int64_t seq_len,
                                  lcx_act_policy *out, lcx_mem_estimate *e) {
    LCX_FAIL_IF(!m || !o || !out || !e || seq_len < 1 || m->n_layers < 1, LCX_ERR_INVALID,
                "step policies: bad arguments");
    LCX_FAIL_IF(!(o->mem_budget > 0), LCX_ERR_INVALID, "step policies: no memory budget to fit");
    lcx_plan p;
    lcx_plan_stage ps;
    memset(&p, 0, sizeof p);
    memset(&ps, 0, sizeof ps);
    p.model = *m, p.opts = *o;
    ps.seq_len = seq_len, ps.micro_seqs = 1, ps.grad_accum = 1, ps.activation = out;
    search_policies(&p, &ps); /* CP 1 here: no ring traffic to weigh */
    *e = ps.mem;
    if (e->total <= o->mem_budget && (o->host_budget <= 0 || e->host <= o->host_budget)) return LCX_OK;
    char b1[32], b2[32], b3[32], b4[32];
    return lcx_fail(LCX_ERR_INVALID,
                    "no split of the %lld layers over recompute+offload, recompute, offload and keep fits %lld "
                    "tokens: the least needs %s per device and %s of host pool (budget %s per device, host %s)",
                    (long long)m->n_layers, (long long)seq_len, human_bytes(e->total, b1, sizeof b1),
                    human_bytes(e->host, b2, sizeof b2), human_bytes(o->mem_budget, b3, sizeof b3),
                    o->host_budget > 0 ? human_bytes(o->host_budget, b4, sizeof b4) : "not limited");
}

static lcx_status plan_memory(lcx_plan *p, const lcx_recipe *r, const lcx_recipe_stage *s, lcx_plan_stage *ps) {
    const lcx_mem_model *m = &p->model;
    int64_t L = m->n_layers;
    char b1[32];
    ps->activation = malloc((size_t)L * sizeof *ps->activation);
    LCX_FAIL_IF(!ps->activation, LCX_ERR_OOM, "out of memory");
    if (s->n_activation) {
        LCX_FAIL_IF(s->n_activation != L, LCX_ERR_INVALID,
                    "%s:%d: key 'activation': %d policies for a model with %lld layers", r->label,
                    s->line[LCX_RF_ACTIVATION], s->n_activation, (long long)L);
        memcpy(ps->activation, s->activation_list, (size_t)L * sizeof *ps->activation);
        lcx_mem_estimate_compute(m, ps->seq_len, ps->micro_seqs, ps->activation, &ps->mem);
    } else if (s->activation != LCX_ACT_AUTO) {
        for (int64_t l = 0; l < L; l++) ps->activation[l] = s->activation;
        lcx_mem_estimate_compute(m, ps->seq_len, ps->micro_seqs, ps->activation, &ps->mem);
    } else if (p->searching) {
        search_policies(p, ps);
    } else if (p->opts.mem_budget > 0) {
        /* fewest recomputed layers (from the first) that fit */
        for (int64_t k = 0; k <= L; k++) {
            for (int64_t l = 0; l < L; l++) ps->activation[l] = l < k ? LCX_ACT_RECOMPUTE : LCX_ACT_KEEP;
            lcx_mem_estimate_compute(m, ps->seq_len, ps->micro_seqs, ps->activation, &ps->mem);
            if (ps->mem.total <= p->opts.mem_budget) break;
        }
    } else {
        for (int64_t l = 0; l < L; l++) ps->activation[l] = LCX_ACT_RECOMPUTE;
        lcx_mem_estimate_compute(m, ps->seq_len, ps->micro_seqs, ps->activation, &ps->mem);
    }
    for (int64_t l = 0; l < L; l++) {
        ps->n_keep += ps->activation[l] == LCX_ACT_KEEP;
        ps->n_recompute += ps->activation[l] == LCX_ACT_RECOMPUTE;
        ps->n_offload += ps->activation[l] == LCX_ACT_OFFLOAD;
        ps->n_rec_offload += ps->activation[l] == LCX_ACT_RECOMPUTE_OFFLOAD;
    }
    if (!p->searching && p->opts.mem_budget > 0 && ps->mem.total > p->opts.mem_budget)
        return lcx_fail(LCX_ERR_INVALID,
                        "%s:%d: stage %s needs %.2f GiB per device (%lld keep, %lld recompute, %lld offload, %lld "
                        "recompute+offload layers; micro-batch %lld x %lld tokens, CP %lld%s), above the budget "
                        "%.2f GiB%s: raise --cp, lower tokens_per_batch or use activation: recompute/offload",
                        r->label, s->line_start, lcx_format_length(ps->seq_len, b1, sizeof b1),
                        ps->mem.total / 1073741824.0, (long long)ps->n_keep, (long long)ps->n_recompute,
                        (long long)ps->n_offload, (long long)ps->n_rec_offload, (long long)ps->micro_seqs,
                        (long long)ps->seq_len,
                        (long long)p->opts.cp,
                        seq_parallel(m) ? ", sequence parallel"
                        : distributes(m) && ps->n_recompute + ps->n_rec_offload > 0
                            ? ", saved activations distributed over TP"
                            : "",
                        p->opts.mem_budget / 1073741824.0, p->reserve > 0 ? " (what the reserve leaves)" : "");
    return LCX_OK;
}

/* Ring traffic per rank (lcx_plan_ring): the sends of rank 0's schedule (every rank sends the same) sized by
 * lcx_cp_ring_msg_bytes. */
static lcx_status plan_ring(const lcx_plan *p, lcx_plan_stage *ps) {
    const lcx_mem_model *m = &p->model;
    lcx_plan_ring *g = &ps->ring;
    memset(g, 0, sizeof *g);
    if (m->cp <= 1) return LCX_OK;
    int cp = (int)m->cp;
    g->block_len = ps->seq_len / m->cp;
    g->kv_heads = m->kv_heads >= m->tp ? (m->kv_heads + m->tp - 1) / m->tp : 1;
    g->steps = m->cp;
    lcx_dtype dt = m->act_bytes == 4 ? LCX_F32 : LCX_BF16;
    LCX_TRY(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV, g->kv_heads, m->head_dim, g->block_len, dt, &g->fwd_msg));
    LCX_TRY(lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV_DKV, g->kv_heads, m->head_dim, g->block_len, dt, &g->bwd_msg));
    LCX_TRY(lcx_cp_ring_msg_bytes(LCX_CP_SEND_DKV, g->kv_heads, m->head_dim, g->block_len, dt, &g->ret_msg));
    for (int dir = 0; dir < 2; dir++) {
        for (int s = 0; s < cp; s++) {
            lcx_cp_step st;
            LCX_TRY(lcx_cp_ring_step(ps->seq_len, cp, 0, s, dir ? LCX_CP_BACKWARD : LCX_CP_FORWARD, &st));
            g->fwd_sends += st.send == LCX_CP_SEND_KV;
            g->bwd_sends += st.send == LCX_CP_SEND_KV_DKV;
            g->ret_sends += st.send == LCX_CP_SEND_DKV;
        }
    }
    g->seqs_per_rank = ps->micro_seqs * ps->grad_accum;
    uint64_t a, b, c, t = 0;
    int ovf = __builtin_mul_overflow((uint64_t)g->fwd_sends, g->fwd_msg, &a) ||
              __builtin_mul_overflow((uint64_t)g->bwd_sends, g->bwd_msg, &b) ||
              __builtin_mul_overflow((uint64_t)g->ret_sends, g->ret_msg, &c) || __builtin_add_overflow(a, b, &t) ||
              __builtin_add_overflow(t, c, &t);
    g->per_layer_seq = t;
    ovf = ovf || __builtin_mul_overflow(t, (uint64_t)m->n_layers, &t) ||
          __builtin_mul_overflow(t, (uint64_t)g->seqs_per_rank, &t);
    LCX_FAIL_IF(ovf, LCX_ERR_INVALID, "plan: ring traffic of stage %lld overflows 64 bits", (long long)ps->seq_len);
    g->per_step = t;
    return LCX_OK;
}

static void plan_eval(const lcx_plan *p, const lcx_recipe_stage *s, lcx_plan_stage *ps) {
    ps->eval_stride = s->eval_stride;
    if (!s->eval_auto) {
        ps->n_eval = s->n_eval;
        memcpy(ps->eval_lengths, s->eval_lengths, sizeof ps->eval_lengths);
        return;
    }
    int n = 0;
    for (int64_t len = p->original_length; len < ps->seq_len && n < LCX_RECIPE_MAX_EVAL - 1; len *= 2)
        ps->eval_lengths[n++] = len;
    ps->eval_lengths[n++] = ps->seq_len;
    ps->n_eval = n;
}

#define LCX_PLAN_EVAL_CHUNK 256 /* rows per logits chunk of the evaluation model (the model's default) */

/* The before/after evaluation at the last stage's longest eval length, on the TP x CP group (lcx_mem_eval); a note
 * when it needs more than the device budget. */
static void plan_eval_memory(lcx_plan *p, const lcx_model_config *cfg) {
    const lcx_plan_stage *last = p->n_stages > 0 ? &p->stages[p->n_stages - 1] : NULL;
    int64_t len = 0;
    for (int i = 0; last && i < last->n_eval; i++) len = last->eval_lengths[i] > len ? last->eval_lengths[i] : len;
    if (len == 0) return;
    lcx_mem_eval_compute(cfg, p->model.n_params, p->model.tp, p->model.cp, len, LCX_PLAN_EVAL_CHUNK, &p->eval);
    char b1[32], b2[32];
    if (!p->searching && p->opts.mem_budget > 0 && p->eval.total > p->opts.mem_budget)
        note(p, "the before/after evaluation at %lld tokens needs %s per device of the TP x CP group (f32), above "
             "the budget of %s: a larger --tp or --cp, or shorter eval_lengths", (long long)len,
             human_bytes(p->eval.total, b1, sizeof b1), human_bytes(p->opts.mem_budget, b2, sizeof b2));
}

static lcx_status build_one(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o, int searching,
                           lcx_plan **out) {
    *out = NULL;
    char b1[32], b2[32];
    LCX_FAIL_IF(o->tp < 1 || o->cp < 1 || o->dp < 1, LCX_ERR_INVALID, "plan: tp, cp and dp must be >= 1");
    LCX_FAIL_IF(o->weight_bytes != 2 && o->weight_bytes != 4, LCX_ERR_INVALID, "plan: weight bytes must be 2 or 4");
    LCX_FAIL_IF(o->act_bytes != 2 && o->act_bytes != 4, LCX_ERR_INVALID, "plan: activation bytes must be 2 or 4");
    LCX_FAIL_IF(o->loss_chunk < 1, LCX_ERR_INVALID, "plan: loss chunk must be >= 1");
    LCX_FAIL_IF(o->cp > 65536 || o->tp > 65536 || o->dp > 65536, LCX_ERR_INVALID, "plan: layout sizes above 65536");
    LCX_FAIL_IF(cfg->num_attention_heads % o->tp != 0, LCX_ERR_INVALID,
                "plan: --tp %lld does not divide num_attention_heads %lld", (long long)o->tp,
                (long long)cfg->num_attention_heads);
    lcx_plan *p = calloc(1, sizeof *p);
    LCX_FAIL_IF(!p, LCX_ERR_OOM, "out of memory");
    lcx_status st = LCX_OK;
    pending *pend = NULL;
    lcx_param_table table;
    memset(&table, 0, sizeof table);
    p->opts = *o;
    /* the plan fills what the reserve leaves of the budget (a reserve as large as the budget leaves 1 byte:
     * nothing fits, where 0 would mean no budget at all) */
    p->reserve = o->reserve >= 0 ? o->reserve : lcx_mem_runtime(o->backend, o->tp, o->cp, o->dp);
    if (o->mem_budget > 0) p->opts.mem_budget = fmax(o->mem_budget - p->reserve, 1);
    p->searching = searching;
    p->arch = cfg->arch;
    p->rope_in = cfg->rope;
    p->max_pos_in = cfg->max_position_embeddings;
    p->target = o->target;
    p->recipe_name = strdup(r->name);
    p->recipe_label = strdup(r->label);
    LCX_FAIL_GOTO(!p->recipe_name || !p->recipe_label, LCX_ERR_OOM, fail, "out of memory");
    LCX_TRY_GOTO(lcx_param_table_init(&table, cfg), fail);
    p->model = lcx_mem_model_of(cfg, table.total_numel);
    p->model.tp = o->tp, p->model.cp = o->cp, p->model.weight_bytes = o->weight_bytes;
    p->model.act_bytes = o->act_bytes, p->model.loss_chunk = o->loss_chunk, p->model.mlp_tile = o->mlp_tile;
    p->model.distribute = o->distribute_saved == 1;
    p->model.sequence_parallel = o->sequence_parallel == 1;
    p->seq_parallel = seq_parallel(&p->model);
    p->zero1 = o->zero1 == 1 && o->cp * o->dp > 1;
    p->model.zero_shards = p->zero1 ? o->cp * o->dp : 1;
    p->model.grad_ranks = o->cp * o->dp;
    lcx_mem_set_op_ws(&p->model, o->backend);
    p->current_context = lcx_rope_implied_context(cfg);
    {
        lcx_rope_plan in;
        LCX_TRY_GOTO(lcx_rope_plan_init(&in, &cfg->rope, cfg->head_dim, cfg->max_position_embeddings, NULL, NULL),
                     fail);
        p->original_length = (int64_t)llround(lcx_rope_original_length(&cfg->rope, cfg->max_position_embeddings));
    }
    int64_t divisor = 2 * o->cp;
    if (r->divisor > divisor && r->divisor % divisor == 0) divisor = r->divisor;
    LCX_FAIL_GOTO(o->target <= p->current_context, LCX_ERR_INVALID, fail,
                  "--to %s is not longer than the model's current context %s (nothing to extend)",
                  lcx_format_length(o->target, b1, sizeof b1), lcx_format_length(p->current_context, b2, sizeof b2));
    LCX_FAIL_GOTO(o->target > LCX_CONFIG_MAX_POSITIONS, LCX_ERR_INVALID, fail, "--to %lld is above the limit %lld",
                  (long long)o->target, (long long)LCX_CONFIG_MAX_POSITIONS);
    LCX_FAIL_GOTO(o->cp > 1 && o->target % divisor != 0, LCX_ERR_INVALID, fail,
                  "--to %lld is not a multiple of %lld (2 x CP: ring attention splits each sequence into 2*CP chunks)",
                  (long long)o->target, (long long)divisor);
    pend = calloc(LCX_RECIPE_MAX_STAGES + 48, sizeof *pend);
    LCX_FAIL_GOTO(!pend, LCX_ERR_OOM, fail, "out of memory");
    int n = 0;
    LCX_TRY_GOTO(expand_stages(p, r, divisor, pend, &n), fail);
    LCX_FAIL_GOTO(n == 0, LCX_ERR_INVALID, fail, "%s: no stage left to run", r->label);
    p->stages = calloc((size_t)n, sizeof *p->stages);
    LCX_FAIL_GOTO(!p->stages, LCX_ERR_OOM, fail, "out of memory");
    for (int i = 0; i < n; i++) {
        lcx_recipe_stage s;
        lcx_recipe_stage_resolve(r, pend[i].rs, &s);
        lcx_plan_stage *ps = &p->stages[i];
        p->n_stages = i + 1;
        ps->index = i + 1;
        ps->recipe_stage = pend[i].rs;
        ps->line = s.line_start;
        ps->seq_len = pend[i].len;
        LCX_FAIL_GOTO(o->cp > 1 && ps->seq_len % divisor != 0, LCX_ERR_INVALID, fail,
                      "%s:%d: stage %lld is not a multiple of %lld (2 x CP)", r->label, s.line_start,
                      (long long)ps->seq_len, (long long)divisor);
        ps->clip_norm = s.clip_norm;
        ps->weight_decay = s.weight_decay;
        ps->seed = s.seed;
        ps->doc_mask = s.doc_mask;
        ps->min_doc_tokens = s.min_doc_tokens;
        ps->long_doc_tokens = s.long_doc_tokens;
        ps->long_doc_repeat = s.long_doc_repeat > 0 ? s.long_doc_repeat : 1;
        LCX_FAIL_GOTO(ps->long_doc_repeat > 1 && !ps->long_doc_tokens, LCX_ERR_INVALID, fail,
                      "%s:%d: stage %lld: long_doc_repeat %lld needs long_doc_tokens (the length from which a "
                      "document counts as long)", r->label, s.line_start, (long long)ps->seq_len,
                      (long long)ps->long_doc_repeat);
        LCX_TRY_GOTO(plan_rope(p, cfg, r, &s, ps), fail);
        LCX_TRY_GOTO(plan_batch(p, r, &s, ps), fail);
        LCX_TRY_GOTO(plan_ring(p, ps), fail); /* before the policies: the search costs the ring */
        LCX_TRY_GOTO(plan_memory(p, r, &s, ps), fail);
        plan_eval(p, &s, ps);
        ps->flops = (double)ps->tokens * lcx_flops_per_token(&p->model, ps->seq_len);
        ps->time_s = o->tokens_per_s > 0 ? (double)ps->tokens / o->tokens_per_s : 0;
        p->total_tokens += (double)ps->tokens;
        p->total_flops += ps->flops;
        p->total_time_s += ps->time_s;
        if (ps->mem.total > p->peak_memory) p->peak_memory = ps->mem.total;
        p->distributes |= distributes(&p->model) && ps->n_recompute + ps->n_rec_offload > 0;
        if (ps->mem.host > p->host_peak) p->host_peak = ps->mem.host;
        int counts[LCX_ACT_POLICY_COUNT];
        policy_counts(ps->activation, p->model.n_layers, counts);
        ps->step_s = lcx_plan_step_time(o, &p->model, o->dp, ps->seq_len, ps->micro_seqs * ps->grad_accum,
                                        ps->ring.per_step, counts, &ps->step_cost);
        double k = (double)ps->steps;
        p->cost.compute += k * ps->step_cost.compute, p->cost.tp += k * ps->step_cost.tp;
        p->cost.cp += k * ps->step_cost.cp, p->cost.grad += k * ps->step_cost.grad;
        p->cost.offload += k * ps->step_cost.offload, p->cost.total += k * ps->step_cost.total;
    }
    p->predicted_tokens_per_s = p->cost.total > 0 ? p->total_tokens / p->cost.total : 0;
    plan_eval_memory(p, cfg);
    free(pend);
    lcx_param_table_free(&table);
    *out = p;
    return LCX_OK;
fail:
    free(pend);
    lcx_param_table_free(&table);
    lcx_plan_free(p);
    return st;
}

/* ---- layout search (docs/plan.md "Layout search") ---------------------------------------------------------- */
static const char *human_bytes(double x, char *buf, size_t cap);
static const char *human_count(double x, char *buf, size_t cap);

static const char *layout_str(const lcx_plan_candidate *c, char *buf, size_t cap) {
    snprintf(buf, cap, "TP %lld x CP %lld x DP %lld", (long long)c->tp, (long long)c->cp, (long long)c->dp);
    return buf;
}

/* "loss chunk C, MLP tile N[, saved activations distributed][, sequence parallel][, ZeRO-1]" (tile "none": the
 * whole micro-batch at once). */
static const char *knobs_str(const lcx_plan_candidate *c, char *buf, size_t cap) {
    if (c->mlp_tile > 0) snprintf(buf, cap, "loss chunk %lld, MLP tile %lld", (long long)c->loss_chunk, (long long)c->mlp_tile);
    else snprintf(buf, cap, "loss chunk %lld, MLP tile none", (long long)c->loss_chunk);
    if (c->distribute) snprintf(buf + strlen(buf), cap - strlen(buf), ", saved activations distributed");
    if (c->sequence_parallel) snprintf(buf + strlen(buf), cap - strlen(buf), ", sequence parallel");
    if (c->zero1) snprintf(buf + strlen(buf), cap - strlen(buf), ", ZeRO-1");
    return buf;
}

/* The per-layer policy of every stage as runs of layers: "policy: 128k: layers 0-9 recompute+offload, 10-31
 * offload" (stages separated by "; "; cut at the line's end). */
static void policy_line(const lcx_plan *p, char *line, size_t cap) {
    size_t n = (size_t)snprintf(line, cap, "policy:");
    char b1[32];
    for (int i = 0; i < p->n_stages && n < cap; i++) {
        const lcx_plan_stage *ps = &p->stages[i];
        n += (size_t)snprintf(line + n, cap - n, "%s %s: layers", i ? ";" : "",
                              lcx_format_length(ps->seq_len, b1, sizeof b1));
        if (n < cap) n += (size_t)lcx_act_layers_str(ps->activation, p->model.n_layers, line + n, cap - n);
    }
}

/* Better candidate: higher predicted throughput, then less peak memory; an exact tie keeps the earlier one. */
static int better(const lcx_plan_candidate *a, const lcx_plan_candidate *b) {
    if (a->tokens_per_s != b->tokens_per_s) return a->tokens_per_s > b->tokens_per_s;
    return a->peak < b->peak;
}

/* The loss chunks and MLP tiles the search tries, largest first (an MLP tile 0 = the whole micro-batch). */
static const int64_t SEARCH_CHUNKS[] = {4096, 1024, 256};
static const int64_t SEARCH_TILES[] = {0, 4096, 1024};

/* The (distribute_saved, sequence_parallel) pairs the planner tries for TP tp, into modes; returns their number:
 * with TP > 1 each one given as -1 both ways, never both on; with TP 1 neither. */
static int split_modes(const lcx_plan_opts *o, int64_t tp, int modes[3][2]) {
    int n = 0;
    for (int d = 0; d < 2; d++)
        for (int q = 0; q < 2; q++) {
            int dist_ok = o->distribute_saved < 0 ? 1 : d == (o->distribute_saved == 1);
            int sp_ok = o->sequence_parallel < 0 ? 1 : q == (o->sequence_parallel == 1);
            if (tp <= 1 ? d == 0 && q == 0 : dist_ok && sp_ok && !(d && q)) modes[n][0] = d, modes[n][1] = q, n++;
        }
    return n;
}

/* One layout: the layout rules (lcx_comm_check_mesh on every stage length), then for each loss chunk and MLP tile
 * (largest first) the plan with the searched policies; the candidate keeps the largest chunk and tile that fit
 * with the best throughput (a smaller one only when the memory it frees lets more layers keep their activations
 * or skip the transfer), else the pair needing the least memory. */
static void try_layout(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o, int64_t tp,
                       int64_t cp, int64_t dp, lcx_plan_candidate *c) {
    memset(c, 0, sizeof *c);
    c->tp = tp, c->cp = cp, c->dp = dp;
    const int n_chunks = o->loss_chunk > 0 ? 1 : (int)(sizeof SEARCH_CHUNKS / sizeof SEARCH_CHUNKS[0]);
    const int n_tiles = o->mlp_tile > 0 ? 1 : (int)(sizeof SEARCH_TILES / sizeof SEARCH_TILES[0]);
    /* how the TP ranks split the rows they would each hold whole: neither, distributed saved activations,
     * sequence parallelism (TP > 1 only; as given unless -1) */
    int modes[3][2], n_dist = split_modes(o, tp, modes);
    lcx_tp_dims dims = {cfg->num_attention_heads, cfg->num_key_value_heads, cfg->head_dim, cfg->hidden_size,
                        cfg->intermediate_size, cfg->vocab_size};
    for (int k = 0; k < n_chunks * n_tiles * n_dist; k++) {
        lcx_plan_opts oc = *o;
        oc.gpus = 0, oc.tp = tp, oc.cp = cp, oc.dp = dp;
        oc.loss_chunk = o->loss_chunk > 0 ? o->loss_chunk : SEARCH_CHUNKS[k / n_dist / n_tiles];
        oc.mlp_tile = o->mlp_tile > 0 ? o->mlp_tile : SEARCH_TILES[k / n_dist % n_tiles];
        oc.distribute_saved = modes[k % n_dist][0], oc.sequence_parallel = modes[k % n_dist][1];
        lcx_plan *p = NULL;
        lcx_status st = build_one(cfg, r, &oc, 1, &p);
        lcx_mesh mesh = {(int)tp, (int)cp, (int)dp, (int)(tp * cp * dp)};
        for (int i = 0; st == LCX_OK && i < p->n_stages; i++) st = lcx_comm_check_mesh(&mesh, &dims, p->stages[i].seq_len);
        if (st != LCX_OK) {
            snprintf(c->reason, sizeof c->reason, "%s", lcx_last_error());
            lcx_plan_free(p);
            return; /* the layout rules do not depend on the chunk */
        }
        lcx_plan_candidate t = *c;
        t.valid = 1;
        t.loss_chunk = oc.loss_chunk;
        t.mlp_tile = oc.mlp_tile;
        t.distribute = p->distributes; /* in effect: some layer recomputes */
        t.sequence_parallel = p->seq_parallel;
        t.zero1 = p->zero1;
        /* the run's peak per device: training, or the before/after evaluation on the TP x CP group where it needs
         * more (a long window in float32: it decides at small TP and CP) */
        t.peak = p->eval.total > p->peak_memory ? p->eval.total : p->peak_memory;
        t.host_peak = p->host_peak;
        t.reserve = p->reserve;
        t.fits = t.peak <= p->opts.mem_budget && (o->host_budget <= 0 || p->host_peak <= o->host_budget);
        t.tokens_per_s = t.fits ? p->predicted_tokens_per_s : 0;
        lcx_plan_free(p);
        int take = !c->valid || (t.fits && !c->fits) || (t.fits && c->fits && t.tokens_per_s > c->tokens_per_s) ||
                   (!t.fits && !c->fits && t.peak < c->peak);
        if (take) *c = t;
    }
}

static void explain(lcx_plan_search_info *s, const lcx_plan *p, const lcx_plan_opts *o) {
    const double budget = o->mem_budget, left = p->opts.mem_budget; /* the card's, and what the reserve leaves */
    char b1[48], b2[48], b3[48], b4[48], l1[64], l2[64], k1[96], k2[96];
    const lcx_plan_candidate *ch = &s->cand[s->chosen];
    snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
             "search: %d layout%s of %lld device%s (TP x CP x DP), %d meet%s the layout rules, %d fit%s %s per "
             "device%s; loss chunk %s; MLP tile %s; activations %s; saved activations %s; sequence parallelism %s; "
             "ZeRO-1 %s; per-layer policy of auto stages from recompute+offload/recompute/offload/keep",
             s->n_candidates, s->n_candidates == 1 ? "" : "s", (long long)s->gpus, s->gpus == 1 ? "" : "s", s->n_valid,
             s->n_valid == 1 ? "s" : "", s->n_fit, s->n_fit == 1 ? "s" : "", human_bytes(budget, b1, sizeof b1),
             p->reserve > 0 ? " less the reserve" : "", o->loss_chunk > 0 ? "as given" : "4096, 1024 or 256",
             o->mlp_tile > 0 ? "as given" : "none, 4096 or 1024",
             p->opts.act_bytes == 2 ? "bf16" : "fp32",
             o->distribute_saved < 0 ? "whole or distributed over TP"
             : o->distribute_saved  ? "distributed over TP (where TP > 1 and a layer recomputes)"
                                    : "whole",
             o->sequence_parallel < 0 ? "off or on" : o->sequence_parallel ? "on (where TP > 1)" : "off",
             o->zero1 ? "on (where CP x DP > 1)" : "off");
    const lcx_plan_cost *k = &p->cost;
    double tot = k->total > 0 ? k->total : 1;
    snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
             "chosen: %s, %s: predicted %s tokens/s, peak %s per device (%.0f%% of the %s%s); time "
             "split: compute %.0f%%, TP all-reduce %.0f%%, CP ring %.0f%%, gradient all-reduce %.0f%%, offload wait "
             "%.0f%%",
             layout_str(ch, l1, sizeof l1), knobs_str(ch, k1, sizeof k1), human_count(ch->tokens_per_s, b2, sizeof b2),
             human_bytes(ch->peak, b3, sizeof b3), 100 * ch->peak / left, human_bytes(left, b4, sizeof b4),
             p->reserve > 0 ? " the reserve leaves" : " budget", 100 * k->compute / tot,
             100 * k->tp / tot, 100 * k->cp / tot, 100 * k->grad / tot, 100 * k->offload / tot);
    if (s->runner_up >= 0) {
        const lcx_plan_candidate *ru = &s->cand[s->runner_up];
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
                 "runner-up: %s, %s: %s tokens/s (%.1f%% slower), peak %s per device",
                 layout_str(ru, l2, sizeof l2), knobs_str(ru, k2, sizeof k2), human_count(ru->tokens_per_s, b2, sizeof b2),
                 100 * (1 - ru->tokens_per_s / ch->tokens_per_s), human_bytes(ru->peak, b3, sizeof b3));
    } else {
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0], "runner-up: none (the only layout that fits)");
    }
    policy_line(p, s->lines[s->n_lines++], sizeof s->lines[0]);
    /* offload's pinned host memory is unbounded unless given: say how much the choice takes */
    if (ch->host_peak > 0)
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
                 "host: offload pins %s of host memory per device (%s for the %lld devices)%s",
                 human_bytes(ch->host_peak, b1, sizeof b1),
                 human_bytes(ch->host_peak * (double)s->gpus, b2, sizeof b2), (long long)s->gpus,
                 o->host_budget > 0 ? "" : "; --host-memory SIZE bounds it per device");
    /* what the memory model leaves out, and what it was given */
    const int comms = lcx_mem_nccl_comms(ch->tp, ch->cp, ch->dp);
    if (p->reserve > 0 && o->reserve < 0)
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0],
                 "reserve: %s of each device's %s for the CUDA context (%s) and %d NCCL communicator%s of more "
                 "than one rank (%s each); --reserve SIZE sets it",
                 human_bytes(p->reserve, b1, sizeof b1), human_bytes(budget, b2, sizeof b2),
                 human_bytes(LCX_MEM_CUDA_CONTEXT, b3, sizeof b3), comms, comms == 1 ? "" : "s",
                 human_bytes(LCX_MEM_NCCL_COMM, b4, sizeof b4));
    else if (p->reserve > 0)
        snprintf(s->lines[s->n_lines++], sizeof s->lines[0], "reserve: %s of each device's %s (--reserve)",
                 human_bytes(p->reserve, b1, sizeof b1), human_bytes(budget, b2, sizeof b2));
    /* the layouts that do not fit or break a rule, compactly */
    char *line = s->lines[s->n_lines];
    size_t cap = sizeof s->lines[0], n = 0;
    int any = 0;
    for (int i = 0; i < s->n_candidates && n + 1 < cap; i++) {
        const lcx_plan_candidate *c = &s->cand[i];
        if (c->fits) continue;
        int w = snprintf(line + n, cap - n, "%s%lldx%lldx%lld %s", any ? ", " : "rejected (TPxCPxDP): ",
                         (long long)c->tp, (long long)c->cp, (long long)c->dp,
                         c->valid ? human_bytes(c->peak, b1, sizeof b1) : "breaks a layout rule");
        if (w < 0 || (size_t)w >= cap - n) {
            line[n] = 0;
            break;
        }
        n += (size_t)w, any = 1;
    }
    if (any) s->n_lines++;
}

static lcx_status plan_search(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o,
                              lcx_plan **out) {
    char b1[48], b2[48], b3[48], l1[64], k1[96];
    LCX_FAIL_IF(o->mem_budget <= 0, LCX_ERR_INVALID,
                "plan: a layout search over %lld devices needs a memory budget per device", (long long)o->gpus);
    LCX_FAIL_IF(o->gpus > 65536, LCX_ERR_INVALID, "plan: %lld devices, above 65536", (long long)o->gpus);
    for (int64_t f = 0, v[3] = {o->tp, o->cp, o->dp}; f < 3; f++)
        LCX_FAIL_IF(v[f] < 0 || (v[f] > 0 && o->gpus % v[f] != 0), LCX_ERR_INVALID,
                    "plan: --%s %lld does not divide --gpus %lld", f == 0 ? "tp" : f == 1 ? "cp" : "dp",
                    (long long)v[f], (long long)o->gpus);
    lcx_plan_search_info *s = calloc(1, sizeof *s);
    LCX_FAIL_IF(!s, LCX_ERR_OOM, "out of memory");
    s->gpus = o->gpus;
    s->chosen = s->runner_up = -1;
    for (int64_t tp = 1; tp <= o->gpus; tp++) {
        if (o->gpus % tp || (o->tp && tp != o->tp)) continue;
        for (int64_t cp = 1; cp <= o->gpus / tp; cp++) {
            if ((o->gpus / tp) % cp || (o->cp && cp != o->cp)) continue;
            int64_t dp = o->gpus / tp / cp;
            if ((o->dp && dp != o->dp) || s->n_candidates >= LCX_PLAN_MAX_CANDIDATES) continue;
            lcx_plan_candidate *c = &s->cand[s->n_candidates];
            try_layout(cfg, r, o, tp, cp, dp, c);
            s->n_valid += c->valid, s->n_fit += c->fits;
            if (c->fits) {
                if (s->chosen < 0 || better(c, &s->cand[s->chosen])) s->runner_up = s->chosen, s->chosen = s->n_candidates;
                else if (s->runner_up < 0 || better(c, &s->cand[s->runner_up])) s->runner_up = s->n_candidates;
            }
            s->n_candidates++;
        }
    }
    if (s->n_candidates == 0) {
        free(s);
        return lcx_fail(LCX_ERR_INVALID, "plan: no layout of %lld devices has TP %lld x CP %lld x DP %lld (0 = any)",
                        (long long)o->gpus, (long long)o->tp, (long long)o->cp, (long long)o->dp);
    }
    if (s->n_valid == 0) {
        lcx_status st = lcx_fail(LCX_ERR_INVALID, "plan: none of the %d layouts of %lld devices meets the layout rules "
                                 "(TP %lld x CP %lld x DP %lld: %s)", s->n_candidates, (long long)o->gpus,
                                 (long long)s->cand[0].tp, (long long)s->cand[0].cp, (long long)s->cand[0].dp,
                                 s->cand[0].reason);
        free(s);
        return st;
    }
    if (s->chosen < 0) {
        int least = -1;
        for (int i = 0; i < s->n_candidates; i++)
            if (s->cand[i].valid && (least < 0 || s->cand[i].peak < s->cand[least].peak)) least = i;
        const lcx_plan_candidate *c = &s->cand[least];
        int host = o->host_budget > 0 && c->peak <= o->mem_budget - c->reserve;
        char rs[96] = "";
        if (c->reserve > 0)
            snprintf(rs, sizeof rs, " (%s kept as the reserve)", human_bytes(c->reserve, b3, sizeof b3));
        lcx_status st = lcx_fail(
            LCX_ERR_INVALID,
            "plan: nothing fits %lld device%s of %s: the smallest layout (%s, %s, least-memory "
            "policies) needs %s per device%s%s%s",
            (long long)o->gpus, o->gpus == 1 ? "" : "s", human_bytes(o->mem_budget, b1, sizeof b1),
            layout_str(c, l1, sizeof l1), knobs_str(c, k1, sizeof k1), human_bytes(c->peak, b2, sizeof b2), rs,
            host ? " and more pinned host memory than the host budget" : "",
            s->n_valid < s->n_candidates ? " (other layouts break the layout rules)" : "");
        free(s);
        return st;
    }
    const lcx_plan_candidate *ch = &s->cand[s->chosen];
    lcx_plan_opts oc = *o;
    oc.gpus = 0, oc.tp = ch->tp, oc.cp = ch->cp, oc.dp = ch->dp, oc.loss_chunk = ch->loss_chunk;
    oc.mlp_tile = ch->mlp_tile;
    oc.distribute_saved = ch->distribute;
    oc.sequence_parallel = ch->sequence_parallel;
    lcx_plan *p = NULL;
    lcx_status st = build_one(cfg, r, &oc, 1, &p);
    if (st != LCX_OK) {
        free(s);
        return st;
    }
    p->opts.gpus = o->gpus;
    explain(s, p, o);
    p->search = s;
    *out = p;
    return LCX_OK;
}

lcx_status lcx_plan_build(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *in,
                          lcx_plan **out) {
    /* both on leaves split_modes nothing to try, with or without a search */
    LCX_FAIL_IF(in->distribute_saved == 1 && in->sequence_parallel == 1, LCX_ERR_INVALID,
                "plan: sequence parallelism already splits every layer's input over TP: distributed saved "
                "activations are for TP without it");
    /* ZeRO-1 is not tried both ways: in the throughput model it costs nothing, and it only ever frees memory */
    lcx_plan_opts oz = *in;
    if (oz.zero1 < 0) oz.zero1 = in->mem_budget > 0;
    /* the reserve of a card's memory: by default only where the search plans whole GPUs */
    if (oz.reserve < 0 && (oz.gpus <= 0 || oz.backend != LCX_MEM_CUDA)) oz.reserve = 0;
    const lcx_plan_opts *o = &oz;
    if (o->gpus > 0) return plan_search(cfg, r, o, out);
    int modes[3][2], n = split_modes(o, o->tp, modes);
    if (n == 1 || !(o->mem_budget > 0)) { /* nothing to choose: as given, -1 off */
        lcx_plan_opts oc = *o;
        oc.distribute_saved = o->distribute_saved == 1 && o->tp > 1;
        oc.sequence_parallel = o->sequence_parallel == 1 && o->tp > 1;
        return build_one(cfg, r, &oc, 0, out);
    }
    /* a budget and TP, a split not given: the fastest of the plans that fit (with the rows split more layers may
     * keep theirs, or the plan fits at all), the earlier (whole first) on a tie */
    lcx_plan_opts oc = *o;
    lcx_plan *best = NULL;
    for (int k = 0; k < n; k++) {
        lcx_plan *q = NULL;
        oc.distribute_saved = modes[k][0], oc.sequence_parallel = modes[k][1];
        if (build_one(cfg, r, &oc, 0, &q) != LCX_OK) continue;
        if (!best || q->predicted_tokens_per_s > best->predicted_tokens_per_s) {
            lcx_plan_free(best);
            best = q;
        } else {
            lcx_plan_free(q);
        }
    }
    if (best) {
        *out = best;
        return LCX_OK;
    }
    /* none fits: the error of the one that needs least (their peaks planned without the budget, where auto
     * stages recompute every layer as the failed ones ended), the earlier on a tie */
    double least = INFINITY;
    int pick = 0;
    oc.mem_budget = 0;
    for (int k = 0; k < n; k++) {
        lcx_plan *q = NULL;
        oc.distribute_saved = modes[k][0], oc.sequence_parallel = modes[k][1];
        if (build_one(cfg, r, &oc, 0, &q) == LCX_OK && q->peak_memory < least) least = q->peak_memory, pick = k;
        lcx_plan_free(q);
    }
    oc = *o;
    oc.distribute_saved = modes[pick][0], oc.sequence_parallel = modes[pick][1];
    return build_one(cfg, r, &oc, 0, out);
}

double lcx_plan_budget(const lcx_plan *p) { return p->opts.mem_budget > 0 ? p->opts.mem_budget + p->reserve : 0; }

/* ---- output ----------------------------------------------------------------------------------------------- */
static const char *human_bytes(double x, char *buf, size_t cap) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (x >= 1024 && u < 4) x /= 1024, u++;
    snprintf(buf, cap, u ? "%.2f %s" : "%.0f %s", x, units[u]);
    return buf;
}

static const char *human_count(double x, char *buf, size_t cap) {
    static const char *units[] = {"", "K", "M", "G", "T", "P", "E"};
    int u = 0;
    while (x >= 1000 && u < 6) x /= 1000, u++;
    snprintf(buf, cap, u ? "%.3g%s" : "%.0f%s", x, units[u]);
    return buf;
}

static const char *sci(double x, char *buf, size_t cap) {
    snprintf(buf, cap, "%.3g", x);
    return buf;
}

static const char *human_time(double s, char *buf, size_t cap) {
    if (s <= 0) snprintf(buf, cap, "-");
    else if (s < 60) snprintf(buf, cap, "%.0fs", s);
    else if (s < 3600) snprintf(buf, cap, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
    else if (s < 86400 * 3) snprintf(buf, cap, "%.0fh%02.0fm", floor(s / 3600), floor(fmod(s, 3600) / 60));
    else snprintf(buf, cap, "%.1fd", s / 86400);
    return buf;
}

static const char *rope_str(const lcx_plan_stage *s, char *buf, size_t cap) {
    const lcx_rope_params *r = &s->rope;
    if (!strcmp(r->type, "default")) snprintf(buf, cap, "%s theta=%.6g", lcx_rope_method_name(s->method), r->theta);
    else if (!strcmp(r->type, "linear")) snprintf(buf, cap, "pi s=%.6g", r->factor);
    else if (r->has_original_max)
        snprintf(buf, cap, "%s s=%.6g L=%" PRId64, r->type, r->factor, r->original_max_position_embeddings);
    else snprintf(buf, cap, "%s s=%.6g", r->type, r->factor);
    return buf;
}

static const char *act_str(const lcx_plan_stage *s, char *buf, size_t cap) {
    int L = s->n_keep + s->n_recompute + s->n_offload + s->n_rec_offload;
    if (s->n_keep == L) snprintf(buf, cap, "keep");
    else if (s->n_recompute == L) snprintf(buf, cap, "recompute");
    else if (s->n_offload == L) snprintf(buf, cap, "offload");
    else if (s->n_rec_offload == L) snprintf(buf, cap, "rec+off");
    else if (s->n_rec_offload == 0) snprintf(buf, cap, "k%d/r%d/o%d", s->n_keep, s->n_recompute, s->n_offload);
    else snprintf(buf, cap, "k%d/r%d/o%d/ro%d", s->n_keep, s->n_recompute, s->n_offload, s->n_rec_offload);
    return buf;
}

static int any_wsd(const lcx_plan *p) {
    for (int i = 0; i < p->n_stages; i++)
        if (p->stages[i].lr.kind == LCX_LR_WSD) return 1;
    return 0;
}

void lcx_plan_print(const lcx_plan *p, FILE *f) {
    char b1[48], b2[48], b3[48], b4[48], b5[48], b6[96], b7[48];
    const lcx_mem_model *m = &p->model;
    fprintf(f, "model:   %s, %" PRId64 " layers, hidden %" PRId64 ", heads %" PRId64 "/%" PRId64 " kv, head_dim %" PRId64
               ", ffn %" PRId64 ", vocab %" PRId64 ", %s parameters\n",
            lcx_arch_name(p->arch), m->n_layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab,
            human_count((double)m->n_params, b1, sizeof b1));
    fprintf(f, "context: %s -> %s (rope %s, theta %.6g; original pretraining length %s)\n",
            lcx_format_length(p->current_context, b1, sizeof b1), lcx_format_length(p->target, b2, sizeof b2),
            p->rope_in.type, p->rope_in.theta, lcx_format_length(p->original_length, b3, sizeof b3));
    fprintf(f, "recipe:  %s (%s)\n", p->recipe_name, p->recipe_label);
    if (p->opts.has_method) fprintf(f, "method:  %s (--method, overrides the recipe)\n", lcx_rope_method_name(p->opts.method));
    lcx_plan_candidate knobs = {.loss_chunk = p->opts.loss_chunk, .mlp_tile = p->opts.mlp_tile,
                                .distribute = p->distributes, .sequence_parallel = p->seq_parallel,
                                .zero1 = p->zero1};
    char rsv[64] = "";
    if (p->opts.mem_budget > 0 && p->reserve > 0)
        snprintf(rsv, sizeof rsv, " (reserve %s)", human_bytes(p->reserve, b1, sizeof b1));
    fprintf(f, "layout:  TP %" PRId64 " x CP %" PRId64 " x DP %" PRId64 ", weights %s, activations %s; %s; "
               "budget %s%s; throughput %s\n",
            p->opts.tp, p->opts.cp, p->opts.dp, p->opts.weight_bytes == 2 ? "bf16 (+fp32 master)" : "fp32",
            p->opts.act_bytes == 2 ? "bf16" : "fp32", knobs_str(&knobs, b6, sizeof b6),
            p->opts.mem_budget > 0 ? human_bytes(lcx_plan_budget(p), b4, sizeof b4) : "none", rsv,
            p->opts.tokens_per_s > 0 ? human_count(p->opts.tokens_per_s, b5, sizeof b5) : "not given");
    for (int i = 0; p->search && i < p->search->n_lines; i++) fprintf(f, "%s\n", p->search->lines[i]);
    fprintf(f, "\n");
    fprintf(f, "%-5s %-7s %-26s %-8s %7s %9s %-9s %-28s %-10s %11s %9s %8s\n", "stage", "length", "rope", "max_pos",
            "steps", "tokens", "batch", "lr", "activation", "memory/dev", "FLOPs", "time");
    for (int i = 0; i < p->n_stages; i++) {
        const lcx_plan_stage *s = &p->stages[i];
        char rope[64], lr[64], batch[32], len[16], mp[16], tok[16], mem[24], fl[16], tm[16], act[24];
        snprintf(lr, sizeof lr, "%.3g w%" PRId64 " %s", s->lr.peak, s->lr.warmup_steps,
                 lcx_lr_kind_name(s->lr.kind));
        if (s->lr.kind == LCX_LR_WSD)
            snprintf(lr + strlen(lr), sizeof lr - strlen(lr), " d%" PRId64 " %s", s->lr.decay_steps,
                     lcx_lr_decay_name(s->lr.decay));
        if (s->lr.kind != LCX_LR_CONSTANT)
            snprintf(lr + strlen(lr), sizeof lr - strlen(lr), "->%.3g", s->lr.min_lr);
        snprintf(batch, sizeof batch, "%" PRId64 "x%" PRId64, s->seqs_per_step, s->grad_accum);
        fprintf(f, "%-5d %-7s %-26s %-8s %7" PRId64 " %9s %-9s %-28s %-10s %11s %9s %8s\n", s->index,
                lcx_format_length(s->seq_len, len, sizeof len), rope_str(s, rope, sizeof rope),
                lcx_format_length(s->max_pos, mp, sizeof mp), s->steps, human_count((double)s->tokens, tok, sizeof tok),
                batch, lr, act_str(s, act, sizeof act), human_bytes(s->mem.total, mem, sizeof mem),
                sci(s->flops, fl, sizeof fl), human_time(s->time_s, tm, sizeof tm));
    }
    fprintf(f, "\n(batch = sequences per optimizer step x gradient accumulation; lr = peak, warm-up steps, "
               "schedule%s)\n",
            any_wsd(p) ? "; wsd: decay steps, decay shape" : "");
    if (p->opts.cp > 1)
        fprintf(f, "(memory/dev and peak memory are per rank: each device runs one rank of TP x CP x DP and holds "
                   "1/CP of every sequence; ring = bytes each rank sends, recomputed layers rerun no attention)\n");
    for (int i = 0; i < p->n_stages; i++) {
        const lcx_plan_stage *s = &p->stages[i];
        fprintf(f, "stage %d: eval at", s->index);
        for (int j = 0; j < s->n_eval; j++) fprintf(f, " %s", lcx_format_length(s->eval_lengths[j], b1, sizeof b1));
        if (s->eval_stride) fprintf(f, " (stride %" PRId64 ")", s->eval_stride);
        else fprintf(f, " (non-overlapping windows)");
        fprintf(f, "; save %s", s->save_interval ? "" : "at the end");
        if (s->save_interval) fprintf(f, "every %" PRId64 " steps", s->save_interval);
        if (s->doc_mask) fprintf(f, "; document mask (attention inside each packed document)");
        if (s->min_doc_tokens)
            fprintf(f, "; documents from %s tokens", lcx_format_length(s->min_doc_tokens, b1, sizeof b1));
        if (s->long_doc_tokens && s->long_doc_repeat > 1)
            fprintf(f, "; documents of %s+ tokens drawn %" PRId64 "x",
                    lcx_format_length(s->long_doc_tokens, b1, sizeof b1), s->long_doc_repeat);
        char zs[32] = "";
        if (p->zero1) snprintf(zs, sizeof zs, " (1/%" PRId64 ", ZeRO-1)", m->zero_shards);
        fprintf(f, "; attention factor %.6g; memory: weights %s, grads %s, master %s, adam %s%s, activations %s, "
                   "workspace %s, logits %s",
                s->attn_factor, human_bytes(s->mem.weights, b1, sizeof b1), human_bytes(s->mem.grads, b2, sizeof b2),
                human_bytes(s->mem.master, b3, sizeof b3), human_bytes(s->mem.optimizer, b4, sizeof b4), zs,
                human_bytes(s->mem.activations, b5, sizeof b5), human_bytes(s->mem.workspace, b6, sizeof b6),
                human_bytes(s->mem.logits, b7, sizeof b7));
        if (s->mem.cp_buffers > 0) fprintf(f, ", ring %s", human_bytes(s->mem.cp_buffers, b2, sizeof b2));
        if (s->mem.host > 0) fprintf(f, "; host (offload) %s", human_bytes(s->mem.host, b3, sizeof b3));
        fprintf(f, "\n");
        const lcx_plan_ring *g = &s->ring;
        if (p->opts.cp > 1)
            fprintf(f, "stage %d: ring per rank, per layer and sequence (%" PRId64 " tokens, %" PRId64
                       " kv heads): %" PRId64 " steps each way; forward sends %" PRId64 " x %" PRIu64
                       " B (K|V), backward %" PRId64 " x %" PRIu64 " B (K|V + fp32 dK|dV) + %" PRId64 " x %" PRIu64
                       " B (fp32 dK|dV); per optimizer step %s (%" PRId64 " layers x %" PRId64 " sequences)\n",
                    s->index, g->block_len, g->kv_heads, g->steps, g->fwd_sends, g->fwd_msg, g->bwd_sends, g->bwd_msg,
                    g->ret_sends, g->ret_msg, human_bytes((double)g->per_step, b1, sizeof b1), m->n_layers,
                    g->seqs_per_rank);
    }
    fprintf(f, "\ntotal: %d stage%s, %s tokens, %s FLOPs, time %s, peak memory %s per device\n", p->n_stages,
            p->n_stages == 1 ? "" : "s", human_count(p->total_tokens, b1, sizeof b1),
            sci(p->total_flops, b2, sizeof b2), human_time(p->total_time_s, b3, sizeof b3),
            human_bytes(p->peak_memory, b4, sizeof b4));
    if (p->eval.total > 0) {
        const lcx_mem_eval *e = &p->eval;
        char b5[32];
        const char *on = m->tp > 1 && m->cp > 1 ? "on the TP x CP group" : m->tp > 1 ? "on the TP group"
                         : m->cp > 1 ? "on the CP group" : "one device";
        fprintf(f, "evaluation (before/after, float32, %s): %s per device at %lld tokens: weights %s, working set %s",
                on, human_bytes(e->total, b1, sizeof b1), (long long)e->tokens, human_bytes(e->weights, b2, sizeof b2),
                human_bytes(e->working_set, b3, sizeof b3));
        if (e->kv_cache > 0) fprintf(f, ", passkey cache %s", human_bytes(e->kv_cache, b4, sizeof b4));
        if (e->tp_scratch > 0) fprintf(f, ", TP gathers %s", human_bytes(e->tp_scratch, b5, sizeof b5));
        if (e->cp_ring > 0) fprintf(f, ", ring %s", human_bytes(e->cp_ring, b5, sizeof b5));
        fprintf(f, "\n");
    }
    for (int i = 0; i < p->n_notes; i++) fprintf(f, "note: %s\n", p->notes[i]);
}

static void put(json_t *o, const char *k, json_t *v, int *ok) {
    if (!v || json_object_set_new(o, k, v) != 0) *ok = 0;
}
static void push(json_t *a, json_t *v, int *ok) {
    if (!v || json_array_append_new(a, v) != 0) *ok = 0;
}

static json_t *candidate_json(const lcx_plan_candidate *c, int *ok) {
    json_t *j = json_object();
    if (!j) return NULL;
    put(j, "tp", json_integer(c->tp), ok);
    put(j, "cp", json_integer(c->cp), ok);
    put(j, "dp", json_integer(c->dp), ok);
    put(j, "valid", json_boolean(c->valid), ok);
    put(j, "fits", json_boolean(c->fits), ok);
    put(j, "loss_chunk", c->valid ? json_integer(c->loss_chunk) : json_null(), ok);
    put(j, "mlp_tile", c->valid && c->mlp_tile ? json_integer(c->mlp_tile) : json_null(), ok);
    put(j, "distribute_saved", c->valid ? json_boolean(c->distribute) : json_null(), ok);
    put(j, "sequence_parallel", c->valid ? json_boolean(c->sequence_parallel) : json_null(), ok);
    put(j, "zero1", c->valid ? json_boolean(c->zero1) : json_null(), ok);
    put(j, "peak_memory", c->valid ? json_real(c->peak) : json_null(), ok);
    put(j, "host_memory", c->valid ? json_real(c->host_peak) : json_null(), ok);
    put(j, "reserve", c->valid ? json_real(c->reserve) : json_null(), ok);
    put(j, "tokens_per_s", c->fits ? json_real(c->tokens_per_s) : json_null(), ok);
    put(j, "reason", c->valid ? json_null() : json_string(c->reason), ok);
    return j;
}

json_t *lcx_plan_json(const lcx_plan *p) {
    int ok = 1;
    json_t *o = json_object();
    if (!o) return NULL;
    const lcx_mem_model *m = &p->model;
    json_t *model = json_object();
    put(o, "model", model, &ok);
    if (model) {
        put(model, "arch", json_string(lcx_arch_name(p->arch)), &ok);
        put(model, "num_hidden_layers", json_integer(m->n_layers), &ok);
        put(model, "hidden_size", json_integer(m->hidden), &ok);
        put(model, "intermediate_size", json_integer(m->ffn), &ok);
        put(model, "num_attention_heads", json_integer(m->heads), &ok);
        put(model, "num_key_value_heads", json_integer(m->kv_heads), &ok);
        put(model, "head_dim", json_integer(m->head_dim), &ok);
        put(model, "vocab_size", json_integer(m->vocab), &ok);
        put(model, "num_parameters", json_integer((json_int_t)m->n_params), &ok);
        put(model, "matmul_parameters", json_real(lcx_matmul_params(m)), &ok);
        put(model, "rope_type", json_string(p->rope_in.type), &ok);
        put(model, "rope_theta", json_real(p->rope_in.theta), &ok);
        put(model, "max_position_embeddings", json_integer(p->max_pos_in), &ok);
    }
    put(o, "current_context", json_integer(p->current_context), &ok);
    put(o, "original_length", json_integer(p->original_length), &ok);
    put(o, "target", json_integer(p->target), &ok);
    put(o, "recipe", json_string(p->recipe_name), &ok);
    put(o, "recipe_source", json_string(p->recipe_label), &ok);
    put(o, "method_override", p->opts.has_method ? json_string(lcx_rope_method_name(p->opts.method)) : json_null(),
        &ok);
    json_t *lay = json_object();
    put(o, "layout", lay, &ok);
    if (lay) {
        put(lay, "tp", json_integer(p->opts.tp), &ok);
        put(lay, "cp", json_integer(p->opts.cp), &ok);
        put(lay, "dp", json_integer(p->opts.dp), &ok);
        put(lay, "weight_bytes", json_integer(p->opts.weight_bytes), &ok);
        put(lay, "activation_bytes", json_integer(p->opts.act_bytes), &ok);
        put(lay, "loss_chunk", json_integer(p->opts.loss_chunk), &ok);
        put(lay, "mlp_tile", p->opts.mlp_tile > 0 ? json_integer(p->opts.mlp_tile) : json_null(), &ok);
        put(lay, "distribute_saved", json_boolean(p->distributes), &ok);
        put(lay, "sequence_parallel", json_boolean(p->seq_parallel), &ok);
        put(lay, "zero1", json_boolean(p->zero1), &ok);
        put(lay, "memory_budget", p->opts.mem_budget > 0 ? json_real(lcx_plan_budget(p)) : json_null(), &ok);
        put(lay, "reserve", json_real(p->opts.mem_budget > 0 ? p->reserve : 0), &ok);
        put(lay, "tokens_per_s", p->opts.tokens_per_s > 0 ? json_real(p->opts.tokens_per_s) : json_null(), &ok);
    }
    if (p->search) {
        const lcx_plan_search_info *si = p->search;
        json_t *sj = json_object();
        put(o, "search", sj, &ok);
        if (sj) {
            put(sj, "gpus", json_integer(si->gpus), &ok);
            put(sj, "memory_budget", json_real(lcx_plan_budget(p)), &ok);
            put(sj, "host_budget", p->opts.host_budget > 0 ? json_real(p->opts.host_budget) : json_null(), &ok);
            json_t *cands = json_array();
            put(sj, "candidates", cands, &ok);
            for (int i = 0; cands && i < si->n_candidates; i++) push(cands, candidate_json(&si->cand[i], &ok), &ok);
            put(sj, "chosen", candidate_json(&si->cand[si->chosen], &ok), &ok);
            put(sj, "runner_up", si->runner_up >= 0 ? candidate_json(&si->cand[si->runner_up], &ok) : json_null(), &ok);
            put(sj, "predicted_tokens_per_s", json_real(p->predicted_tokens_per_s), &ok);
            json_t *cost = json_object();
            put(sj, "predicted_seconds", cost, &ok);
            if (cost) {
                put(cost, "compute", json_real(p->cost.compute), &ok);
                put(cost, "tp_allreduce", json_real(p->cost.tp), &ok);
                put(cost, "cp_ring", json_real(p->cost.cp), &ok);
                put(cost, "grad_allreduce", json_real(p->cost.grad), &ok);
                put(cost, "offload_wait", json_real(p->cost.offload), &ok);
                put(cost, "total", json_real(p->cost.total), &ok);
            }
            json_t *ex = json_array();
            put(sj, "explanation", ex, &ok);
            for (int i = 0; ex && i < si->n_lines; i++) push(ex, json_string(si->lines[i]), &ok);
        }
    }
    json_t *stages = json_array();
    put(o, "stages", stages, &ok);
    for (int i = 0; stages && i < p->n_stages; i++) {
        const lcx_plan_stage *s = &p->stages[i];
        json_t *j = json_object();
        push(stages, j, &ok);
        if (!j) break;
        put(j, "index", json_integer(s->index), &ok);
        put(j, "recipe_line", json_integer(s->line), &ok);
        put(j, "seq_len", json_integer(s->seq_len), &ok);
        put(j, "method", json_string(lcx_rope_method_name(s->method)), &ok);
        json_t *cfgj = json_object();
        put(j, "config", cfgj, &ok);
        if (cfgj && lcx_rope_export(&s->rope, m->head_dim, s->max_pos, cfgj, NULL, NULL) != LCX_OK) ok = 0;
        put(j, "max_position_embeddings", json_integer(s->max_pos), &ok);
        put(j, "attention_factor", json_real(s->attn_factor), &ok);
        put(j, "steps", json_integer(s->steps), &ok);
        put(j, "tokens", json_integer(s->tokens), &ok);
        put(j, "tokens_per_step", json_integer(s->tokens_per_step), &ok);
        put(j, "sequences_per_step", json_integer(s->seqs_per_step), &ok);
        put(j, "micro_batch_sequences", json_integer(s->micro_seqs), &ok);
        put(j, "grad_accum", json_integer(s->grad_accum), &ok);
        json_t *lr = json_object();
        put(j, "lr", lr, &ok);
        if (lr) {
            put(lr, "peak", json_real(s->lr.peak), &ok);
            put(lr, "warmup_steps", json_integer(s->lr.warmup_steps), &ok);
            put(lr, "schedule", json_string(lcx_lr_kind_name(s->lr.kind)), &ok);
            put(lr, "min_lr", json_real(s->lr.min_lr), &ok);
            if (s->lr.kind == LCX_LR_WSD) {
                put(lr, "decay_steps", json_integer(s->lr.decay_steps), &ok);
                put(lr, "decay_type", json_string(lcx_lr_decay_name(s->lr.decay)), &ok);
            }
        }
        json_t *ev = json_array();
        put(j, "eval_lengths", ev, &ok);
        for (int k = 0; ev && k < s->n_eval; k++) push(ev, json_integer(s->eval_lengths[k]), &ok);
        put(j, "eval_stride", s->eval_stride ? json_integer(s->eval_stride) : json_string("window"), &ok);
        put(j, "save_interval", json_integer(s->save_interval), &ok);
        int L = s->n_keep + s->n_recompute + s->n_offload + s->n_rec_offload;
        if (s->n_keep == L || s->n_recompute == L || s->n_offload == L || s->n_rec_offload == L) {
            put(j, "activation", json_string(lcx_act_policy_name(s->activation[0])), &ok);
        } else {
            json_t *a = json_array();
            put(j, "activation", a, &ok);
            for (int k = 0; a && k < L; k++) push(a, json_string(lcx_act_policy_name(s->activation[k])), &ok);
        }
        put(j, "clip_norm", json_real(s->clip_norm), &ok);
        put(j, "weight_decay", json_real(s->weight_decay), &ok);
        put(j, "seed", json_integer((json_int_t)s->seed), &ok);
        put(j, "attention_mask", json_string(s->doc_mask ? "document" : "causal"), &ok);
        put(j, "min_doc_tokens", json_integer((json_int_t)s->min_doc_tokens), &ok);
        put(j, "long_doc_tokens", json_integer((json_int_t)s->long_doc_tokens), &ok);
        put(j, "long_doc_repeat", json_integer((json_int_t)s->long_doc_repeat), &ok);
        put(j, "flops", json_real(s->flops), &ok);
        put(j, "time_s", s->time_s > 0 ? json_real(s->time_s) : json_null(), &ok);
        json_t *mem = json_object();
        put(j, "memory", mem, &ok);
        if (mem) {
            put(mem, "weights", json_real(s->mem.weights), &ok);
            put(mem, "grads", json_real(s->mem.grads), &ok);
            put(mem, "master", json_real(s->mem.master), &ok);
            put(mem, "optimizer", json_real(s->mem.optimizer), &ok);
            put(mem, "activations", json_real(s->mem.activations), &ok);
            put(mem, "workspace", json_real(s->mem.workspace), &ok);
            put(mem, "logits", json_real(s->mem.logits), &ok);
            put(mem, "cp_buffers", json_real(s->mem.cp_buffers), &ok);
            put(mem, "total", json_real(s->mem.total), &ok);
            put(mem, "host", json_real(s->mem.host), &ok);
        }
        if (p->opts.cp > 1) {
            const lcx_plan_ring *g = &s->ring;
            json_t *rj = json_object();
            put(j, "ring", rj, &ok);
            if (rj) {
                put(rj, "block_len", json_integer(g->block_len), &ok);
                put(rj, "kv_heads", json_integer(g->kv_heads), &ok);
                put(rj, "steps", json_integer(g->steps), &ok);
                put(rj, "forward_sends", json_integer(g->fwd_sends), &ok);
                put(rj, "forward_msg_bytes", json_integer((json_int_t)g->fwd_msg), &ok);
                put(rj, "backward_sends", json_integer(g->bwd_sends), &ok);
                put(rj, "backward_msg_bytes", json_integer((json_int_t)g->bwd_msg), &ok);
                put(rj, "return_sends", json_integer(g->ret_sends), &ok);
                put(rj, "return_msg_bytes", json_integer((json_int_t)g->ret_msg), &ok);
                put(rj, "bytes_per_layer_sequence", json_integer((json_int_t)g->per_layer_seq), &ok);
                put(rj, "sequences_per_rank", json_integer(g->seqs_per_rank), &ok);
                put(rj, "bytes_per_step", json_integer((json_int_t)g->per_step), &ok);
            }
        }
    }
    json_t *tot = json_object();
    put(o, "totals", tot, &ok);
    if (tot) {
        put(tot, "stages", json_integer(p->n_stages), &ok);
        put(tot, "skipped_recipe_stages", json_integer(p->n_skipped), &ok);
        put(tot, "tokens", json_real(p->total_tokens), &ok);
        put(tot, "flops", json_real(p->total_flops), &ok);
        put(tot, "time_s", p->total_time_s > 0 ? json_real(p->total_time_s) : json_null(), &ok);
        put(tot, "peak_memory", json_real(p->peak_memory), &ok);
        if (p->eval.total > 0)
            put(o, "evaluation",
                json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "tokens", (json_int_t)p->eval.tokens,
                          "local_tokens", (json_int_t)p->eval.local_tokens, "weights", p->eval.weights,
                          "working_set", p->eval.working_set, "kv_cache", p->eval.kv_cache, "tp_scratch",
                          p->eval.tp_scratch, "cp_ring", p->eval.cp_ring, "total", p->eval.total),
                &ok);
    }
    json_t *notes = json_array();
    put(o, "notes", notes, &ok);
    for (int i = 0; notes && i < p->n_notes; i++) push(notes, json_string(p->notes[i]), &ok);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
