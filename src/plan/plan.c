/* plan: the staged plan of one layout (stage expansion, rope per stage, batch and step arithmetic, memory per stage,
 * ring traffic, evaluation lengths) and lcx_plan_build, which searches the layout first when asked (plan_search.c;
 * docs/plan.md). */
#include "src/plan/plan.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint/catalog.h"
#include "src/checkpoint/model_params.h"
#include "src/core/cp_ring.h"
#include "src/core/units.h"
#include "src/plan/plan_internal.h"
#include "src/train/train.h"

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
    o->keep_checkpoints = 2;
}

/* The run directory at most: the checkpoints held at once and the export (the import of a non-.lcx input, which
 * keeps the input's own dtypes, and a GGUF export on request come on top). */
double lcx_plan_checkpoint_bytes(double n_params, int weight_bytes) {
    return n_params * (weight_bytes + (weight_bytes < 4 ? 4 : 0) + 8);
}

static void plan_disk(lcx_plan *p) {
    const double P = (double)p->model.n_params;
    lcx_plan_disk *d = &p->disk;
    d->checkpoint = lcx_plan_checkpoint_bytes(P, p->opts.weight_bytes);
    d->saves = 0;
    for (int i = 0; i < p->n_stages; i++)
        d->saves += lcx_train_saves(0, p->stages[i].steps, p->stages[i].save_interval);
    d->held = lcx_ckpt_held_new(0, d->saves, (int)p->opts.keep_checkpoints);
    d->export_hf = P * p->opts.weight_bytes;
    d->total = (double)d->held * d->checkpoint + d->export_hf;
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
        lcx_plan_search_policies(p, ps);
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
             lcx_format_bytes(p->eval.total, b1, sizeof b1), lcx_format_bytes(p->opts.mem_budget, b2, sizeof b2));
}

lcx_status lcx_plan_build_one(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o, int searching,
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
        lcx_mem_policy_counts(ps->activation, p->model.n_layers, counts);
        ps->step_s = lcx_plan_step_time(o, &p->model, o->dp, ps->seq_len, ps->micro_seqs * ps->grad_accum,
                                        ps->ring.per_step, counts, &ps->step_cost);
        double k = (double)ps->steps;
        p->cost.compute += k * ps->step_cost.compute, p->cost.tp += k * ps->step_cost.tp;
        p->cost.cp += k * ps->step_cost.cp, p->cost.grad += k * ps->step_cost.grad;
        p->cost.offload += k * ps->step_cost.offload, p->cost.total += k * ps->step_cost.total;
    }
    p->predicted_tokens_per_s = p->cost.total > 0 ? p->total_tokens / p->cost.total : 0;
    plan_eval_memory(p, cfg);
    plan_disk(p);
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
    if (o->gpus > 0) return lcx_plan_search_layouts(cfg, r, o, out);
    int modes[3][2], n = lcx_plan_split_modes(o, o->tp, modes);
    if (n == 1 || !(o->mem_budget > 0)) { /* nothing to choose: as given, -1 off */
        lcx_plan_opts oc = *o;
        oc.distribute_saved = o->distribute_saved == 1 && o->tp > 1;
        oc.sequence_parallel = o->sequence_parallel == 1 && o->tp > 1;
        return lcx_plan_build_one(cfg, r, &oc, 0, out);
    }
    /* a budget and TP, a split not given: the fastest of the plans that fit (with the rows split more layers may
     * keep theirs, or the plan fits at all), the earlier (whole first) on a tie */
    lcx_plan_opts oc = *o;
    lcx_plan *best = NULL;
    for (int k = 0; k < n; k++) {
        lcx_plan *q = NULL;
        oc.distribute_saved = modes[k][0], oc.sequence_parallel = modes[k][1];
        if (lcx_plan_build_one(cfg, r, &oc, 0, &q) != LCX_OK) continue;
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
        if (lcx_plan_build_one(cfg, r, &oc, 0, &q) == LCX_OK && q->peak_memory < least)
            least = q->peak_memory, pick = k;
        lcx_plan_free(q);
    }
    oc = *o;
    oc.distribute_saved = modes[pick][0], oc.sequence_parallel = modes[pick][1];
    return lcx_plan_build_one(cfg, r, &oc, 0, out);
}

double lcx_plan_budget(const lcx_plan *p) { return p->opts.mem_budget > 0 ? p->opts.mem_budget + p->reserve : 0; }
