/* plan_print: a plan as the table `lcextend plan` prints and as JSON (docs/plan.md "Output"). */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "src/plan/plan_internal.h"

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
    fprintf(f, "model:   %s, %" PRId64 " layers, hidden %" PRId64 ", heads %" PRId64 "/%" PRId64
               " kv, head_dim %" PRId64
               ", ffn %" PRId64 ", vocab %" PRId64 ", %s parameters\n",
            lcx_arch_name(p->arch), m->n_layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab,
            human_count((double)m->n_params, b1, sizeof b1));
    fprintf(f, "context: %s -> %s (rope %s, theta %.6g; original pretraining length %s)\n",
            lcx_format_length(p->current_context, b1, sizeof b1), lcx_format_length(p->target, b2, sizeof b2),
            p->rope_in.type, p->rope_in.theta, lcx_format_length(p->original_length, b3, sizeof b3));
    fprintf(f, "recipe:  %s (%s)\n", p->recipe_name, p->recipe_label);
    if (p->opts.has_method)
        fprintf(f, "method:  %s (--method, overrides the recipe)\n", lcx_rope_method_name(p->opts.method));
    lcx_plan_candidate knobs = {.loss_chunk = p->opts.loss_chunk, .mlp_tile = p->opts.mlp_tile,
                                .distribute = p->distributes, .sequence_parallel = p->seq_parallel,
                                .zero1 = p->zero1};
    char rsv[64] = "";
    if (p->opts.mem_budget > 0 && p->reserve > 0)
        snprintf(rsv, sizeof rsv, " (reserve %s)", lcx_format_bytes(p->reserve, b1, sizeof b1));
    fprintf(f, "layout:  TP %" PRId64 " x CP %" PRId64 " x DP %" PRId64 ", weights %s, activations %s; %s; "
               "budget %s%s; throughput %s\n",
            p->opts.tp, p->opts.cp, p->opts.dp, p->opts.weight_bytes == 2 ? "bf16 (+fp32 master)" : "fp32",
            p->opts.act_bytes == 2 ? "bf16" : "fp32", lcx_plan_knobs_str(&knobs, b6, sizeof b6),
            p->opts.mem_budget > 0 ? lcx_format_bytes(lcx_plan_budget(p), b4, sizeof b4) : "none", rsv,
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
                batch, lr, act_str(s, act, sizeof act), lcx_format_bytes(s->mem.total, mem, sizeof mem),
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
                s->attn_factor, lcx_format_bytes(s->mem.weights, b1, sizeof b1),
                lcx_format_bytes(s->mem.grads, b2, sizeof b2),
                lcx_format_bytes(s->mem.master, b3, sizeof b3), lcx_format_bytes(s->mem.optimizer, b4, sizeof b4), zs,
                lcx_format_bytes(s->mem.activations, b5, sizeof b5), lcx_format_bytes(s->mem.workspace, b6, sizeof b6),
                lcx_format_bytes(s->mem.logits, b7, sizeof b7));
        if (s->mem.cp_buffers > 0) fprintf(f, ", ring %s", lcx_format_bytes(s->mem.cp_buffers, b2, sizeof b2));
        if (s->mem.host > 0) fprintf(f, "; host (offload) %s", lcx_format_bytes(s->mem.host, b3, sizeof b3));
        fprintf(f, "\n");
        const lcx_plan_ring *g = &s->ring;
        if (p->opts.cp > 1)
            fprintf(f, "stage %d: ring per rank, per layer and sequence (%" PRId64 " tokens, %" PRId64
                       " kv heads): %" PRId64 " steps each way; forward sends %" PRId64 " x %" PRIu64
                       " B (K|V), backward %" PRId64 " x %" PRIu64 " B (K|V + fp32 dK|dV) + %" PRId64 " x %" PRIu64
                       " B (fp32 dK|dV); per optimizer step %s (%" PRId64 " layers x %" PRId64 " sequences)\n",
                    s->index, g->block_len, g->kv_heads, g->steps, g->fwd_sends, g->fwd_msg, g->bwd_sends, g->bwd_msg,
                    g->ret_sends, g->ret_msg, lcx_format_bytes((double)g->per_step, b1, sizeof b1), m->n_layers,
                    g->seqs_per_rank);
    }
    fprintf(f, "\ntotal: %d stage%s, %s tokens, %s FLOPs, time %s, peak memory %s per device\n", p->n_stages,
            p->n_stages == 1 ? "" : "s", human_count(p->total_tokens, b1, sizeof b1),
            sci(p->total_flops, b2, sizeof b2), human_time(p->total_time_s, b3, sizeof b3),
            lcx_format_bytes(p->peak_memory, b4, sizeof b4));
    if (p->eval.total > 0) {
        const lcx_mem_eval *e = &p->eval;
        char b5[32];
        const char *on = m->tp > 1 && m->cp > 1 ? "on the TP x CP group" : m->tp > 1 ? "on the TP group"
                         : m->cp > 1 ? "on the CP group" : "one device";
        fprintf(f, "evaluation (before/after, float32, %s): %s per device at %lld tokens: weights %s, working set %s",
                on, lcx_format_bytes(e->total, b1, sizeof b1), (long long)e->tokens,
                lcx_format_bytes(e->weights, b2, sizeof b2),
                lcx_format_bytes(e->working_set, b3, sizeof b3));
        if (e->kv_cache > 0) fprintf(f, ", passkey cache %s", lcx_format_bytes(e->kv_cache, b4, sizeof b4));
        if (e->tp_scratch > 0) fprintf(f, ", TP gathers %s", lcx_format_bytes(e->tp_scratch, b5, sizeof b5));
        if (e->cp_ring > 0) fprintf(f, ", ring %s", lcx_format_bytes(e->cp_ring, b5, sizeof b5));
        fprintf(f, "\n");
    }
    const lcx_plan_disk *d = &p->disk;
    fprintf(f, "disk: at most %s in the run directory before zstd: %lld of the %lld checkpoint%s it writes at once (%s "
               "each: %s parameters x %d bytes of weights%s and AdamW moments) and the HF export (%s)\n",
            lcx_format_bytes(d->total, b1, sizeof b1), (long long)d->held, (long long)d->saves,
            d->saves == 1 ? "" : "s",
            lcx_format_bytes(d->checkpoint, b2, sizeof b2), human_count((double)m->n_params, b3, sizeof b3),
            (int)(d->checkpoint / (double)m->n_params + 0.5), p->opts.weight_bytes < 4 ? ", fp32 master" : "",
            lcx_format_bytes(d->export_hf, b4, sizeof b4));
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
        put(tot, "disk", json_pack("{s:f, s:I, s:I, s:f, s:f}", "checkpoint", p->disk.checkpoint, "saves",
                                   (json_int_t)p->disk.saves, "held", (json_int_t)p->disk.held, "export_hf",
                                   p->disk.export_hf, "total", p->disk.total), &ok);
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
