/* plan: stage expansion (8k -> 128k = 16k/32k/64k/128k with yarn factors 2/4/8/16 over L = 8k), re-extension
 * of extended models, recipe-specific rope (llama3 factor 8, abf theta schedule, --method override), batch and
 * step arithmetic, errors, the memory model against a hand computation, ring traffic per rank against the
 * message sizes written out, FLOPs against a brute-force count, and lcx_lr_at against Hugging Face's schedule
 * formulas evaluated in double. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"
#include "src/plan/recipe.h"
#include "src/train/lr_schedule.h"
#include "src/checkpoint/catalog.h"
#include "src/model/model.h"
#include "src/plan/plan.h"
#include "src/train/train.h"
#include "src/core/layout.h"
#include "test_util.h"

/* Llama-3-8B-like dimensions; rope given by the caller as a JSON fragment. */
static int load_cfg(lcx_model_config *cfg, int64_t max_pos, const char *rope) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 128256,"
             " \"hidden_size\": 4096, \"intermediate_size\": 14336, \"num_hidden_layers\": 32,"
             " \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"max_position_embeddings\": %lld,"
             " \"rms_norm_eps\": 1e-5, %s}",
             (long long)max_pos, rope);
    lcx_status st = lcx_config_parse("cfg.json", text, strlen(text), cfg);
    CHECK_MSG(st == LCX_OK, "config: %s", lcx_last_error());
    return st == LCX_OK;
}

static lcx_recipe *recipe(const char *name) {
    lcx_recipe *r = NULL;
    lcx_status st = lcx_recipe_open(name, 1, &r);
    CHECK_MSG(st == LCX_OK, "recipe %s: %s", name, lcx_last_error());
    return r;
}

static lcx_recipe *recipe_text(const char *text) {
    lcx_recipe *r = NULL;
    lcx_status st = lcx_recipe_parse("r.yaml", text, strlen(text), 1, &r);
    CHECK_MSG(st == LCX_OK, "recipe: %s", lcx_last_error());
    return r;
}

/* The plan of cfg and r with options o, or NULL (a failed check naming the error). */
static lcx_plan *build_opts(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan_opts *o) {
    lcx_plan *p = NULL;
    lcx_status st = r ? lcx_plan_build(cfg, r, o, &p) : LCX_OK;
    CHECK_MSG(st == LCX_OK, "plan: %s", lcx_last_error());
    return p;
}

static lcx_plan *build(const lcx_model_config *cfg, const lcx_recipe *r, int64_t target) {
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.target = target;
    return build_opts(cfg, r, &o);
}

static double yarn_mscale(double s) { return s <= 1 ? 1 : 0.1 * log(s) + 1; } /* yarn's default attention factor */

static void test_geometric_yarn(void) {
    lcx_model_config cfg;
    if (!load_cfg(&cfg, 8192, "\"rope_theta\": 500000.0")) return;
    lcx_recipe *r = recipe("yarn-x2");
    lcx_plan *p = r ? build(&cfg, r, 131072) : NULL;
    if (p) {
        CHECK(p->current_context == 8192 && p->original_length == 8192);
        CHECK(p->n_stages == 4);
        const int64_t len[4] = {16384, 32768, 65536, 131072};
        const double s[4] = {2, 4, 8, 16};
        for (int i = 0; i < 4 && i < p->n_stages; i++) {
            const lcx_plan_stage *st = &p->stages[i];
            CHECK(st->seq_len == len[i]);
            CHECK(!strcmp(st->rope.type, "yarn"));
            CHECK_NEAR(st->rope.factor, s[i], 1e-12);
            CHECK(st->rope.has_original_max && st->rope.original_max_position_embeddings == 8192);
            CHECK(st->rope.theta == 500000.0);
            CHECK(st->max_pos == len[i]);
            CHECK_NEAR(st->attn_factor, yarn_mscale(s[i]), 1e-12);
            /* recipe: 100 steps of 1m tokens = 2^20 / len sequences; grad_accum auto = 1 sequence per micro-batch */
            CHECK(st->steps == 100 && st->seqs_per_step == 1048576 / len[i] && st->tokens == 100 * 1048576);
            CHECK(st->micro_seqs == 1 && st->grad_accum == st->seqs_per_step);
            CHECK(st->lr.kind == LCX_LR_CONSTANT && st->lr.peak == 2e-5 && st->lr.warmup_steps == 20 &&
                  st->lr.total_steps == 100);
            /* eval auto: 8k, 16k, ... up to the stage length */
            CHECK(st->n_eval == i + 2);
            for (int k = 0; k < st->n_eval && k < i + 2; k++) CHECK(st->eval_lengths[k] == (INT64_C(8192) << k));
            CHECK(st->eval_stride == 0 && st->save_interval == 50);
            /* no budget: auto activation = recompute everywhere */
            CHECK(st->n_recompute == 32 && st->n_keep == 0);
        }
        CHECK_NEAR(p->total_tokens, 4.0 * 100 * 1048576, 0.5);
    }
    lcx_plan_free(p);
    /* other targets: x2 while the target is >= 1.5x ahead, then the target */
    struct { int64_t to; int n; int64_t last_before; } cases[] = {
        {133120, 4, 65536}, /* 130k: 16k 32k 64k 130k (128k would be 1.016x short of it) */
        {102400, 4, 65536}, /* 100k: 16k 32k 64k 100k (100k / 64k = 1.5625) */
        {20480, 1, 0},      /* 20k: one stage (20k / 16k = 1.25) */
        {16384, 1, 0},
        {24576, 2, 16384},  /* 24k: 16k (24k / 16k = 1.5 exactly), 24k */
    };
    for (size_t c = 0; r && c < sizeof cases / sizeof cases[0]; c++) {
        p = build(&cfg, r, cases[c].to);
        if (!p) continue;
        CHECK_MSG(p->n_stages == cases[c].n, "--to %lld: %d stages", (long long)cases[c].to, p->n_stages);
        CHECK(p->stages[p->n_stages - 1].seq_len == cases[c].to);
        if (cases[c].n >= 2) CHECK(p->stages[p->n_stages - 2].seq_len == cases[c].last_before);
        CHECK_NEAR(p->stages[p->n_stages - 1].rope.factor, (double)cases[c].to / 8192.0, 1e-12);
        lcx_plan_free(p);
    }
    lcx_recipe_free(r);
    lcx_config_free(&cfg);
}

static void test_reextension(void) {
    /* yarn s=4 over L=8192 (M = 32k) -> 128k: stages 64k, 128k with factors 8, 16 over the same L (not 2 and 4
     * over 32k) */
    lcx_model_config cfg;
    if (!load_cfg(&cfg, 32768,
                  "\"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0,"
                  " \"original_max_position_embeddings\": 8192}"))
        return;
    lcx_recipe *r = recipe("yarn-x2");
    lcx_plan *p = r ? build(&cfg, r, 131072) : NULL;
    if (p) {
        CHECK(p->current_context == 32768 && p->original_length == 8192);
        CHECK(p->n_stages == 2);
        if (p->n_stages == 2) {
            CHECK(p->stages[0].seq_len == 65536 && p->stages[1].seq_len == 131072);
            CHECK_NEAR(p->stages[0].rope.factor, 8.0, 1e-12);
            CHECK_NEAR(p->stages[1].rope.factor, 16.0, 1e-12);
            CHECK(p->stages[1].rope.original_max_position_embeddings == 8192);
            CHECK(p->stages[0].eval_lengths[0] == 8192); /* evaluation starts at the pretraining length */
        }
    }
    lcx_plan_free(p);
    /* the llama3 recipe on the 32k model: its 16k and 32k stages are skipped */
    lcx_recipe *l3 = recipe("llama3-8k-128k");
    p = l3 ? build(&cfg, l3, 131072) : NULL;
    if (p) {
        CHECK(p->n_skipped == 2 && p->n_stages == 4);
        CHECK(p->stages[0].seq_len == 49152);
        for (int i = 0; i < p->n_stages; i++) {
            /* Llama 3.1's published factor 8 over L = 8192 at every stage, M at least L x 8 */
            CHECK(!strcmp(p->stages[i].rope.type, "llama3") && p->stages[i].rope.factor == 8.0);
            CHECK(p->stages[i].rope.original_max_position_embeddings == 8192);
            CHECK(p->stages[i].rope.low_freq_factor == 1 && p->stages[i].rope.high_freq_factor == 4);
            CHECK(p->stages[i].max_pos == (p->stages[i].seq_len > 65536 ? p->stages[i].seq_len : 65536));
        }
        /* tokens -> steps: the 48k stage: 3 x 2.5e9 / ... 4m tokens per step = 85 sequences of 48k
         * (4194304 / 49152 = 85.33), steps = ceil(2.5e9 / (85 x 49152)) */
        CHECK(p->stages[0].seqs_per_step == 85);
        CHECK(p->stages[0].steps == (int64_t)ceil(2.5e9 / (85.0 * 49152.0)));
        CHECK(p->stages[0].tokens == p->stages[0].steps * 85 * 49152);
        CHECK(p->stages[0].lr.kind == LCX_LR_COSINE && p->stages[0].lr.min_lr == 2e-6);
    }
    lcx_plan_free(p);
    lcx_config_free(&cfg);
    /* pi over a linear model: linear s=2 at M=8192 means L0 = 4096; pi to 32k is factor 8 (they multiply) */
    if (load_cfg(&cfg, 8192, "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}")) {
        lcx_recipe *pr = recipe("pi");
        p = pr ? build(&cfg, pr, 32768) : NULL;
        if (p) {
            CHECK(p->original_length == 4096 && p->n_stages == 1);
            CHECK(!strcmp(p->stages[0].rope.type, "linear"));
            CHECK_NEAR(p->stages[0].rope.factor, 8.0, 1e-12);
            CHECK(p->stages[0].steps == 1000 && p->stages[0].seqs_per_step == 64); /* 2m / 32k */
        }
        lcx_plan_free(p);
        lcx_recipe_free(pr);
        lcx_config_free(&cfg);
    }
    lcx_recipe_free(r);
    lcx_recipe_free(l3);
}

static void test_abf_and_override(void) {
    lcx_model_config cfg;
    if (!load_cfg(&cfg, 8192, "\"rope_theta\": 500000.0")) return;
    lcx_recipe *r = recipe("abf");
    lcx_plan *p = r ? build(&cfg, r, 65536) : NULL;
    if (p) {
        CHECK(p->n_stages == 3);
        for (int i = 0; i < p->n_stages; i++) {
            CHECK(!strcmp(p->stages[i].rope.type, "default"));
            CHECK_NEAR(p->stages[i].rope.theta / (500000.0 * pow(4.0, i + 1)), 1.0, 1e-12); /* x4 per doubling */
            CHECK(p->stages[i].max_pos == (INT64_C(16384) << i));
        }
    }
    lcx_plan_free(p);
    lcx_recipe_free(r);
    /* --method override on yarn-x2 */
    r = recipe("yarn-x2");
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.target = 32768;
    o.has_method = 1;
    o.method = LCX_EXTEND_PI;
    p = build_opts(&cfg, r, &o);
    if (p) {
        CHECK(p->n_stages == 2 && !strcmp(p->stages[1].rope.type, "linear"));
        CHECK_NEAR(p->stages[0].rope.factor, 2.0, 1e-12);
        CHECK_NEAR(p->stages[1].rope.factor, 4.0, 1e-12);
    }
    lcx_plan_free(p);
    o.method = LCX_EXTEND_ABF; /* theta auto: NTK-aware base (L/M)^(d/(d-2)), d = 128 */
    p = build_opts(&cfg, r, &o);
    if (p) {
        CHECK(!strcmp(p->stages[1].rope.type, "default"));
        CHECK_NEAR(p->stages[0].rope.theta / (500000.0 * pow(2.0, 128.0 / 126.0)), 1.0, 1e-12);
        CHECK_NEAR(p->stages[1].rope.theta / (500000.0 * pow(4.0, 128.0 / 126.0)), 1.0, 1e-12);
    }
    lcx_plan_free(p);
    o.method = LCX_EXTEND_LLAMA3;
    p = build_opts(&cfg, r, &o);
    if (p) CHECK(!strcmp(p->stages[1].rope.type, "llama3") && p->stages[1].rope.factor == 4.0);
    lcx_plan_free(p);
    o.method = LCX_EXTEND_LONGROPE;
    CHECK_FAILS(lcx_plan_build(&cfg, r, &o, &p), LCX_ERR_INVALID, "longrope needs short_factor and long_factor");
    lcx_recipe_free(r);
    lcx_config_free(&cfg);
}

static void test_errors(void) {
    lcx_model_config cfg;
    if (!load_cfg(&cfg, 8192, "\"rope_theta\": 500000.0")) return;
    lcx_recipe *y = recipe("yarn-x2"), *l3 = recipe("llama3-8k-128k");
    lcx_plan *p = NULL;
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.target = 8192;
    CHECK_FAILS(lcx_plan_build(&cfg, y, &o, &p), LCX_ERR_INVALID, "--to 8k is not longer than the model's current "
                                                                  "context 8k");
    o.target = 4096;
    CHECK_FAILS(lcx_plan_build(&cfg, y, &o, &p), LCX_ERR_INVALID, "not longer");
    o.target = 262144;
    CHECK_FAILS(lcx_plan_build(&cfg, l3, &o, &p), LCX_ERR_INVALID,
                "builtin:llama3-8k-128k:37: target 256k is not reachable by recipe 'llama3-8k-128k': its last stage "
                "is 128k");
    o.target = 81920;
    CHECK_FAILS(lcx_plan_build(&cfg, l3, &o, &p), LCX_ERR_INVALID, "--to 80k falls between the recipe's stage "
                                                                   "lengths 64k and 96k");
    o.target = 65536 + 4;
    o.cp = 4;
    CHECK_FAILS(lcx_plan_build(&cfg, y, &o, &p), LCX_ERR_INVALID, "--to 65540 is not a multiple of 8");
    o.cp = 1;
    o.target = 65536;
    o.tp = 3;
    CHECK_FAILS(lcx_plan_build(&cfg, y, &o, &p), LCX_ERR_INVALID, "--tp 3 does not divide num_attention_heads 32");
    o.tp = 8;
    o.mem_budget = 10.0 * 1073741824.0; /* 8B at TP 8 holds 16.6 GiB of weights/grads/optimizer alone */
    CHECK_FAILS(lcx_plan_build(&cfg, y, &o, &p), LCX_ERR_INVALID, "builtin:yarn-x2:23: stage 16k needs");
    CHECK(p == NULL);
    lcx_plan_opts_default(&o);
    o.target = 32768;
    lcx_recipe *bad = recipe_text("stages:\n  - seq_len: auto\n    steps: 10\n    activation: [keep, keep]\n");
    CHECK_FAILS(lcx_plan_build(&cfg, bad, &o, &p), LCX_ERR_INVALID,
                "r.yaml:4: key 'activation': 2 policies for a model with 32 layers");
    lcx_recipe_free(bad);
    bad = recipe_text("defaults: {tokens: 1000, tokens_per_batch: 64k, lr: {warmup_steps: 5}}\n"
                      "stages:\n  - seq_len: auto\n");
    CHECK_FAILS(lcx_plan_build(&cfg, bad, &o, &p), LCX_ERR_INVALID,
                "r.yaml:1: key 'lr.warmup_steps': 5 warm-up steps exceed the stage's 1 steps");
    lcx_recipe_free(bad);
    bad = recipe_text("stages:\n  - {seq_len: 16k, steps: 3}\n  - {seq_len: 24k, steps: 3}\n");
    o.target = 16384 * 4;
    CHECK_FAILS(lcx_plan_build(&cfg, bad, &o, &p), LCX_ERR_INVALID, "r.yaml:3: target 64k is not reachable");
    lcx_recipe_free(bad);
    bad = recipe_text("stages:\n  - {seq_len: 16k, steps: 3, method: longrope, short_factor: [1, 1],"
                      " long_factor: [2, 2]}\n");
    o.target = 16384;
    CHECK_FAILS(lcx_plan_build(&cfg, bad, &o, &p), LCX_ERR_INVALID, "longrope lists need 64 entries");
    lcx_recipe_free(bad);
    bad = recipe_text("stages:\n  - {seq_len: 16k, steps: 3, factor: 1}\n");
    CHECK_FAILS(lcx_plan_build(&cfg, bad, &o, &p), LCX_ERR_INVALID, "r.yaml:2: key 'factor': 1 does not extend");
    lcx_recipe_free(bad);
    lcx_recipe_free(y);
    lcx_recipe_free(l3);
    lcx_config_free(&cfg);
}

/* Explicit stages followed by auto or target: the last stage is --to exactly once, even when an explicit stage
 * already ends there (the fuzzer found auto repeating it: 16k, 32k, 32k). */
static void test_auto_after_explicit(void) {
    lcx_model_config cfg;
    if (!load_cfg(&cfg, 8192, "\"rope_theta\": 500000.0")) return;
    static const char *tails[] = {"auto", "target"};
    static const struct {
        int64_t target;
        int n;
        int64_t lens[5];
    } want[] = {{16384, 1, {16384}},
                {32768, 2, {16384, 32768}},
                {49152, 3, {16384, 32768, 49152}},
                {131072, 4, {16384, 32768, 65536, 131072}}};
    for (int t = 0; t < 2; t++) {
        char text[256];
        snprintf(text, sizeof text,
                 "stages:\n  - {seq_len: 16k, steps: 3}\n  - {seq_len: 32k, steps: 3}\n  - {seq_len: %s, steps: 3}\n",
                 tails[t]);
        lcx_recipe *r = recipe_text(text);
        for (size_t w = 0; r && w < sizeof want / sizeof want[0]; w++) {
            if (t == 1 && want[w].target == 131072) continue; /* target is one stage: 32k -> 128k */
            lcx_plan *p = build(&cfg, r, want[w].target);
            if (!p) continue;
            CHECK_MSG(p->n_stages == want[w].n, "%s to %lld: %d stages", tails[t], (long long)want[w].target,
                      p->n_stages);
            for (int i = 0; i < p->n_stages && i < want[w].n; i++)
                CHECK_MSG(p->stages[i].seq_len == want[w].lens[i], "%s to %lld: stage %d is %lld", tails[t],
                          (long long)want[w].target, i, (long long)p->stages[i].seq_len);
            lcx_plan_free(p);
        }
        lcx_recipe_free(r);
    }
    lcx_config_free(&cfg);
}

/* The memory model of docs/plan.md, evaluated by hand for two small layouts. */
static void test_memory(void) {
    lcx_mem_model m = {.n_layers = 2, .hidden = 32, .ffn = 64, .heads = 4, .kv_heads = 2, .head_dim = 8,
                       .vocab = 256, .n_params = 1000, .tp = 1, .cp = 1, .weight_bytes = 2, .act_bytes = 2,
                       .loss_chunk = 4096};
    /* keep: 2 x (4H + 2 nh d + 2 nkv d + 3F) + 4 x (2 + nh) = 2 x (128 + 64 + 32 + 192) + 24 = 856 */
    CHECK(lcx_mem_layer_keep(&m) == 856);
    /* recompute: 2 x (H + nh d) + 4 nh = 2 x 64 + 16 = 144 */
    CHECK(lcx_mem_layer_recompute(&m) == 144);
    lcx_act_policy pol[2] = {LCX_ACT_KEEP, LCX_ACT_RECOMPUTE};
    lcx_mem_estimate e;
    lcx_mem_estimate_compute(&m, 128, 2, pol, &e); /* T = 256 tokens */
    CHECK(e.weights == 2000 && e.grads == 2 * 2000 && e.master == 2 * 2000 && e.optimizer == 4 * 2000);
    /* layers + last output, final norm (+ rstd), ones, ids, targets, positions, document starts:
     * 2 x 2H + 4 x 6 = 152 */
    CHECK(e.activations == 256.0 * (856 + 144) + 256.0 * 152);
    /* backward: 2 x (2H + nh d) + 4 x (nh d + 2 nkv d) = 448 a token + 3 x 2 x F per MLP row; the recompute
     * scratch 2 x (3H + nh d + 2 nkv d) + 8 = 328 + the same MLP rows */
    CHECK(e.workspace == 256.0 * 448 + 256.0 * 384 + 256.0 * 328 + 256.0 * 384);
    CHECK(e.logits == 256.0 * 256 * 4); /* chunk = min(4096, T), gradient in place */
    CHECK(e.cp_buffers == 0 && e.host == 0);
    CHECK(e.total == 18000 + 294912 + 395264 + 262144);
    /* an MLP tile of 64 rows: the [T, F] temporaries of backward and scratch become [64, F] */
    m.mlp_tile = 64;
    lcx_mem_estimate_compute(&m, 128, 2, pol, &e);
    CHECK(e.workspace == 256.0 * 448 + 64.0 * 384 + 256.0 * 328 + 64.0 * 384);
    m.mlp_tile = 256; /* a tile of T rows is no tiling */
    lcx_mem_estimate_compute(&m, 128, 2, pol, &e);
    CHECK(e.workspace == 395264);
    m.mlp_tile = 0;
    /* TP 2, CP 2, fp32 weights, offload one layer, chunk 100: nh' = 2, nkv' = 1, F' = 32, T = 128 */
    m.tp = 2, m.cp = 2, m.weight_bytes = 4, m.loss_chunk = 100;
    CHECK(lcx_mem_layer_keep(&m) == 2 * (128 + 32 + 16 + 96) + 4 * (2 + 2)); /* 560 */
    lcx_act_policy pol2[2] = {LCX_ACT_OFFLOAD, LCX_ACT_KEEP};
    lcx_mem_estimate_compute(&m, 128, 2, pol2, &e);
    CHECK(e.weights == 2000 && e.grads == 2000 && e.master == 0 && e.optimizer == 4000);
    CHECK(e.activations == 128.0 * 560 + 128.0 * 152);
    CHECK(e.host == 128.0 * 560);
    /* backward 2 x (64 + 16) + 4 x (16 + 16) = 288 a token + 3 x 2 x 32 per MLP row; 3 offload slots */
    CHECK(e.workspace == 128.0 * 288 + 128.0 * 192 + 3 * 128.0 * 560);
    CHECK(e.logits == 100.0 * 128 * 4); /* V/TP = 128 */
    CHECK(e.cp_buffers == 8.0 * 128 * 1 * 8 * 2);
    CHECK(e.total == 8000 + 91136 + 276480 + 51200 + 16384);
    /* recompute+offload: A_rec per token to the host, a 3-slot pool of A_rec, the recompute scratch */
    lcx_act_policy pol3[2] = {LCX_ACT_RECOMPUTE_OFFLOAD, LCX_ACT_KEEP};
    lcx_mem_estimate_compute(&m, 128, 2, pol3, &e);
    CHECK(lcx_mem_layer_recompute(&m) == 2 * (32 + 16) + 4 * 2); /* 104 */
    CHECK(e.activations == 128.0 * 560 + 128.0 * 152);
    CHECK(e.host == 128.0 * 104);
    /* scratch 2 x (96 + 16 + 16) + 8 = 264 a token + 3 x 2 x 32 per MLP row */
    CHECK(e.workspace == 128.0 * 288 + 128.0 * 192 + 128.0 * 264 + 128.0 * 192 + 3 * 128.0 * 104);
    /* distributed saved activations: the recomputed input H / TP, one shared [T, H] (2 x 32 a token); a recompute
     * layer on the device, then the recompute+offload one whose host bytes and slots shrink */
    m.distribute = 1;
    CHECK(lcx_mem_layer_recompute(&m) == 2 * (16 + 16) + 4 * 2); /* 72 */
    lcx_act_policy pol4[2] = {LCX_ACT_RECOMPUTE, LCX_ACT_KEEP};
    lcx_mem_estimate_compute(&m, 128, 2, pol4, &e);
    CHECK(e.activations == 128.0 * (560 + 72) + 128.0 * 152);
    CHECK(e.workspace == 128.0 * 288 + 128.0 * 192 + 128.0 * 264 + 128.0 * 192 + 128.0 * 64);
    lcx_mem_estimate_compute(&m, 128, 2, pol3, &e);
    CHECK(e.host == 128.0 * 72);
    CHECK(e.workspace == 128.0 * 288 + 128.0 * 192 + 128.0 * 264 + 128.0 * 192 + 128.0 * 64 + 3 * 128.0 * 72);
    m.tp = 1; /* no effect without TP */
    CHECK(lcx_mem_layer_recompute(&m) == 2 * (32 + 32) + 4 * 4);
    m.tp = 2, m.distribute = 0;
    lcx_mem_estimate_compute(&m, 128, 2, pol3, &e);
    /* the exec arena, the largest op workspace: on CUDA 80 MiB of matmul (cuBLASLt workspace, split, staging) until
     * the attention backward's row sums, 4 nh' a token, outgrow it; on the CPU 4 nh' (2d + 1) a token */
    const double no_arena = e.workspace;
    lcx_mem_set_op_ws(&m, LCX_MEM_CUDA);
    CHECK(m.op_ws_fixed == 80.0 * 1048576 + 1024 && m.op_ws_per_token == 4.0 * 2);
    lcx_mem_estimate_compute(&m, 128, 2, pol3, &e);
    CHECK(e.workspace == no_arena + m.op_ws_fixed);
    lcx_mem_estimate e_long;
    lcx_mem_estimate_compute(&m, 1 << 25, 2, pol3, &e_long); /* 2^25 tokens a rank: 256 MiB of row sums */
    lcx_mem_model m0 = m;
    m0.op_ws_fixed = m0.op_ws_per_token = 0;
    lcx_mem_estimate e0;
    lcx_mem_estimate_compute(&m0, 1 << 25, 2, pol3, &e0);
    CHECK(e_long.workspace == e0.workspace + 4.0 * 2 * (1 << 25));
    /* on the CPU, the CPU backend's queries over the model's calls, here with 3 threads (bf16 activations, head_dim
     * 8, 2 heads a rank): at 128 tokens each thread's attention forward tiles (scores 256 x 512, kt 512 x 8,
     * float32 q, o 2 x 256 x 8, k, v 2 x 512 x 8: 589824 bytes; every matmul's tiles are smaller here); at 64k the
     * backward's fp32 dK, dV and row sums, 4 nh' (2d + 1) = 136 bytes a token, beside its per-thread tiles (p, ds
     * 2 x 128 x 128, kt, vt, q, g, k, v 6 x 128 x 8: 155648 bytes) */
    const int threads = omp_get_max_threads();
    omp_set_num_threads(3);
    lcx_mem_set_op_ws(&m, LCX_MEM_CPU);
    CHECK(m.op_ws_fixed == 0 && m.op_ws_per_token == 0 && m.arena_backend == lcx_backend_cpu());
    lcx_mem_estimate_compute(&m, 128, 2, pol3, &e);
    CHECK(e.workspace == no_arena + 3 * 589824.0);
    lcx_mem_estimate_compute(&m0, 1 << 16, 2, pol3, &e0);
    lcx_mem_estimate_compute(&m, 1 << 16, 2, pol3, &e_long);
    CHECK(e_long.workspace == e0.workspace + 3 * 155648.0 + 136.0 * (1 << 16));
    m.act_bytes = m0.act_bytes = 4; /* float32: no bf16 tiles (scores and kt 540672 bytes a thread, backward 139264) */
    lcx_mem_estimate_compute(&m, 128, 2, pol3, &e);
    lcx_mem_estimate_compute(&m0, 128, 2, pol3, &e0);
    CHECK(e.workspace == e0.workspace + 3 * 540672.0);
    lcx_mem_estimate_compute(&m, 1 << 16, 2, pol3, &e);
    lcx_mem_estimate_compute(&m0, 1 << 16, 2, pol3, &e0);
    CHECK(e.workspace == e0.workspace + 3 * 139264.0 + 136.0 * (1 << 16));
    omp_set_num_threads(threads);
}

/* Ring traffic per rank against the sizes written out here: one message is 2 (K and V) x KV heads per rank x
 * head_dim x seq/CP rows x bytes (bf16 2, fp32 4; backward adds fp32 dK, dV), CP-1 forward and CP-1 backward
 * sends then one dK|dV return per layer and sequence. Llama-3-8B shape: 8 KV heads, head_dim 4096/32 = 128. */
static void test_ring(void) {
    lcx_model_config cfg;
    if (!load_cfg(&cfg, 8192, "\"rope_theta\": 500000.0")) return;
    lcx_recipe *r = recipe("yarn-x2");
    struct { int64_t tp, cp, dp; int act; int64_t kvh; } cases[] = {
        {1, 1, 1, 2, 0}, {2, 4, 2, 2, 4}, {1, 2, 1, 4, 8}, {16, 8, 1, 2, 1}, /* TP 16 > 8 KV heads: one each */
    };
    for (size_t c = 0; r && c < sizeof cases / sizeof cases[0]; c++) {
        lcx_plan_opts o;
        lcx_plan_opts_default(&o);
        o.target = 131072;
        o.tp = cases[c].tp, o.cp = cases[c].cp, o.dp = cases[c].dp;
        o.act_bytes = o.weight_bytes = cases[c].act;
        lcx_plan *p = build_opts(&cfg, r, &o);
        for (int i = 0; p && i < p->n_stages; i++) {
            const lcx_plan_stage *s = &p->stages[i];
            const lcx_plan_ring *g = &s->ring;
            if (o.cp == 1) {
                CHECK(g->block_len == 0 && g->steps == 0 && g->fwd_msg == 0 && g->per_step == 0);
                continue;
            }
            uint64_t blk = (uint64_t)(s->seq_len / o.cp), kvh = (uint64_t)cases[c].kvh, a = (uint64_t)o.act_bytes;
            uint64_t kv = 2 * kvh * 128 * blk * a, kvd = 2 * kvh * 128 * blk * (a + 4), dkv = 2 * kvh * 128 * blk * 4;
            CHECK_MSG(g->block_len == (int64_t)blk && g->kv_heads == cases[c].kvh && g->steps == o.cp,
                      "case %zu stage %d: block %lld kv heads %lld steps %lld", c, i, (long long)g->block_len,
                      (long long)g->kv_heads, (long long)g->steps);
            CHECK(g->fwd_msg == kv && g->bwd_msg == kvd && g->ret_msg == dkv);
            CHECK(g->fwd_sends == o.cp - 1 && g->bwd_sends == o.cp - 1 && g->ret_sends == 1);
            uint64_t per = (uint64_t)(o.cp - 1) * (kv + kvd) + dkv;
            CHECK(g->per_layer_seq == per);
            CHECK(g->seqs_per_rank == s->seqs_per_step / o.dp);
            CHECK(g->per_step == 32 * (uint64_t)(s->seqs_per_step / o.dp) * per);
        }
        if (p && o.cp == 4 && o.act_bytes == 2) /* 128k: 32k rows x 4 heads x 128 x 2 x 2 = 64 MiB per K|V message */
            CHECK(p->stages[p->n_stages - 1].ring.fwd_msg == UINT64_C(64) << 20);
        lcx_plan_free(p);
    }
    lcx_recipe_free(r);
    lcx_config_free(&cfg);
}

/* FLOPs per token against a brute-force count of the matmuls of one training step on one sequence. */
static void test_flops(void) {
    lcx_mem_model m = {.n_layers = 2, .hidden = 32, .ffn = 64, .heads = 4, .kv_heads = 2, .head_dim = 8,
                       .vocab = 256, .n_params = 0, .tp = 1, .cp = 1, .weight_bytes = 2, .act_bytes = 2,
                       .loss_chunk = 4096};
    const int64_t S = 128;
    double fwd = 0;
    for (int64_t l = 0; l < m.n_layers; l++) {
        double H = 32, q = 4 * 8, kv = 2 * 8, F = 64;
        fwd += 2 * S * H * q + 2 * 2 * S * H * kv + 2 * S * q * H; /* q, k, v, o projections */
        fwd += 3 * 2 * S * H * F;                                  /* gate, up, down */
        for (int64_t i = 0; i < S; i++) fwd += 2 * 2 * 8 * 4 * (double)(i + 1); /* QK^T, PV: 4 heads, d 8, causal */
    }
    fwd += 2 * S * 32 * 256; /* output projection */
    double ref = 3 * fwd / (double)S; /* backward = 2 x forward */
    CHECK_NEAR(lcx_flops_per_token(&m, S), ref, 1e-9 * ref);
    CHECK(lcx_matmul_params(&m) == 26624);
}

/* Hugging Face's LambdaLR multipliers (optimization.py docs), in double. */
static double hf_cosine(int64_t step, int64_t W, int64_t T, double min_rate) {
    if (step < W) return (double)step / (double)(W > 1 ? W : 1);
    double progress = (double)(step - W) / (double)((T - W) > 1 ? (T - W) : 1);
    double num_cycles = 0.5;
    double f = 0.5 * (1.0 + cos(M_PI * num_cycles * 2.0 * progress));
    if (f < 0) f = 0;
    return f * (1 - min_rate) + min_rate; /* get_cosine_with_min_lr_schedule_with_warmup; min_rate 0 = plain */
}
static double hf_constant(int64_t step, int64_t W) {
    return step < W ? (double)step / (double)(W > 1 ? W : 1) : 1.0;
}
/* _get_wsd_scheduler_lambda (warmup_type "linear", num_cycles 0.5, stable = T - W - D); decay 0 cosine, 1 linear,
 * 2 1-sqrt. */
static double hf_wsd(int64_t step, int64_t W, int64_t T, int64_t D, int decay, double min_lr_ratio) {
    int64_t S = T - W - D;
    double factor;
    if (step < W) {
        double progress = (double)step / (double)(W > 1 ? W : 1);
        factor = progress * (1.0 - min_lr_ratio) + min_lr_ratio;
        return factor > 0 ? factor : 0;
    }
    if (step < W + S) return 1.0;
    if (step < W + S + D) {
        double progress = (double)(step - W - S) / (double)(D > 1 ? D : 1);
        if (decay == 1) factor = 1.0 - progress;
        else if (decay == 2) factor = 1.0 - sqrt(progress);
        else factor = 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress));
        factor = factor * (1.0 - min_lr_ratio) + min_lr_ratio;
        return factor > 0 ? factor : 0;
    }
    return min_lr_ratio;
}

static void test_lr(void) {
    const int64_t Ws[] = {0, 1, 5, 20}, Ts[] = {1, 10, 100, 1000};
    int compared = 0;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            int64_t W = Ws[a], T = Ts[b];
            if (W > T) continue;
            for (int mr = 0; mr < 2; mr++) {
                double peak = 3e-4, min_lr = mr ? 3e-5 : 0;
                lcx_lr_schedule c = {LCX_LR_COSINE, peak, min_lr, W, T, 0, LCX_DECAY_COSINE};
                lcx_lr_schedule k = {LCX_LR_CONSTANT, peak, min_lr, W, T, 0, LCX_DECAY_COSINE};
                for (int64_t s = 0; s <= T; s++) {
                    double ref = peak * hf_cosine(s, W, T, min_lr / peak);
                    CHECK_MSG(fabs(lcx_lr_at(&c, s) - ref) <= 1e-15 * peak, "cosine W=%lld T=%lld step %lld: %.17g vs "
                              "%.17g", (long long)W, (long long)T, (long long)s, lcx_lr_at(&c, s), ref);
                    CHECK(fabs(lcx_lr_at(&k, s) - peak * hf_constant(s, W)) <= 1e-15 * peak);
                    compared += 2;
                }
                /* past the end: HF's cosine would rise again; ours stays at min_lr */
                CHECK(lcx_lr_at(&c, T + 5) == min_lr);
                for (int64_t D = 0; D <= T - W; D += (T - W) / 3 + 1)
                    for (int decay = 0; decay < LCX_DECAY_COUNT; decay++) {
                        lcx_lr_schedule w = {LCX_LR_WSD, peak, min_lr, W, T, D, (lcx_lr_decay)decay};
                        for (int64_t s = 0; s <= T + 2; s++) {
                            double ref = peak * hf_wsd(s, W, T, D, decay, min_lr / peak);
                            CHECK_MSG(fabs(lcx_lr_at(&w, s) - ref) <= 1e-15 * peak, "wsd %s W=%lld T=%lld D=%lld "
                                      "step %lld: %.17g vs %.17g", lcx_lr_decay_name(w.decay), (long long)W,
                                      (long long)T, (long long)D, (long long)s, lcx_lr_at(&w, s), ref);
                            compared++;
                        }
                    }
            }
        }
    /* WSD by hand: 10 warm-up, 60 stable, 30 linear decay steps to 0.1 */
    lcx_lr_schedule w = {LCX_LR_WSD, 1.0, 0.1, 10, 100, 30, LCX_DECAY_LINEAR};
    CHECK_NEAR(lcx_lr_at(&w, 0), 0.1, 1e-15); /* HF's WSD warm-up starts at min_lr */
    CHECK(lcx_lr_at(&w, 10) == 1.0 && lcx_lr_at(&w, 69) == 1.0);
    CHECK(lcx_lr_at(&w, 70) == 1.0); /* the decay's first step: progress 0 */
    CHECK_NEAR(lcx_lr_at(&w, 85), 0.55, 1e-15);
    CHECK(lcx_lr_at(&w, 100) == 0.1 && lcx_lr_at(&w, 1000) == 0.1);
    w.decay = LCX_DECAY_SQRT;
    CHECK_NEAR(lcx_lr_at(&w, 77), 0.1 + 0.9 * (1 - sqrt(7.0 / 30)), 1e-15);
    CHECK(lcx_lr_decay_steps(0.2, 100, 10) == 20 && lcx_lr_decay_steps(0.2, 100, 90) == 10);
    CHECK(lcx_lr_decay_steps(0.001, 100, 0) == 1 && lcx_lr_decay_steps(0.5, 10, 10) == 0);
    lcx_lr_decay dk;
    CHECK(lcx_lr_decay_parse("1-sqrt", &dk) == 0 && dk == LCX_DECAY_SQRT && lcx_lr_decay_parse("sqrt", &dk) != 0);
    lcx_lr_kind kk;
    CHECK(lcx_lr_kind_parse("wsd", &kk) == 0 && kk == LCX_LR_WSD && !strcmp(lcx_lr_kind_name(kk), "wsd"));
    lcx_lr_schedule c = {LCX_LR_COSINE, 1.0, 0.0, 10, 110, 0, LCX_DECAY_COSINE};
    CHECK(lcx_lr_at(&c, 0) == 0.0);              /* HF: the first update uses lr 0 */
    CHECK_NEAR(lcx_lr_at(&c, 5), 0.5, 1e-15);
    CHECK(lcx_lr_at(&c, 10) == 1.0);
    CHECK_NEAR(lcx_lr_at(&c, 60), 0.5, 1e-15);  /* half way: cos(pi/2) = 0 */
    CHECK_NEAR(lcx_lr_at(&c, 110), 0.0, 1e-15);
    CHECK(lcx_lr_at(&c, -3) == 0.0);
    printf("%d lr values compared with the HF formulas\n", compared);
}

/* --memory budget with activation auto: the fewest recomputed layers that fit. */
static void test_budget(void) {
    lcx_model_config cfg;
    if (!load_cfg(&cfg, 8192, "\"rope_theta\": 500000.0")) return;
    lcx_recipe *r = recipe("yarn-x2");
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.target = 131072;
    o.tp = 8;
    o.mem_budget = 80.0 * 1073741824.0;
    lcx_plan *p = build_opts(&cfg, r, &o);
    for (int i = 0; p && i < p->n_stages; i++) {
        const lcx_plan_stage *s = &p->stages[i];
        CHECK(s->mem.total <= o.mem_budget);
        CHECK(s->n_offload == 0 && s->n_keep + s->n_recompute == 32);
        if (s->n_recompute > 0) { /* one layer fewer recomputed would not fit */
            lcx_act_policy pol[32];
            for (int l = 0; l < 32; l++) pol[l] = l < s->n_recompute - 1 ? LCX_ACT_RECOMPUTE : LCX_ACT_KEEP;
            lcx_mem_estimate e;
            lcx_mem_estimate_compute(&p->model, s->seq_len, s->micro_seqs, pol, &e);
            CHECK(e.total > o.mem_budget);
        }
    }
    if (p) {
        CHECK(p->stages[0].n_keep == 32);     /* 16k fits with keep */
        CHECK(p->stages[3].n_recompute > 0);  /* 128k does not */
        json_t *j = lcx_plan_json(p);
        CHECK(j != NULL);
        json_t *st = json_array_get(json_object_get(j, "stages"), 3);
        json_t *rs = json_object_get(json_object_get(st, "config"), "rope_scaling");
        CHECK(json_is_object(rs) && json_real_value(json_object_get(rs, "factor")) == 16.0);
        CHECK(json_integer_value(json_object_get(json_object_get(st, "config"), "max_position_embeddings")) == 131072);
        CHECK(json_is_array(json_object_get(st, "activation"))); /* mixed policies: one per layer */
        /* each stage's "config" merged into the model's config.json parses back to that stage's rope and context */
        for (int i = 0; i < p->n_stages; i++) {
            json_t *base = json_deep_copy(cfg.json);
            json_object_update(base, json_object_get(json_array_get(json_object_get(j, "stages"), (size_t)i),
                                                     "config"));
            char *text = json_dumps(base, 0);
            lcx_model_config back;
            lcx_status pst = text ? lcx_config_parse("stage.json", text, strlen(text), &back) : LCX_ERR_OOM;
            CHECK_MSG(pst == LCX_OK, "stage %d config: %s", i + 1, lcx_last_error());
            if (pst == LCX_OK) {
                CHECK(!strcmp(back.rope.type, "yarn") && back.rope.factor == p->stages[i].rope.factor);
                CHECK(lcx_rope_implied_context(&back) == p->stages[i].seq_len);
                CHECK(back.max_position_embeddings == p->stages[i].max_pos);
                lcx_config_free(&back);
            }
            free(text);
            json_decref(base);
        }
        json_decref(j);
    }
    lcx_plan_free(p);
    /* distributed saved activations and sequence parallelism both on: refused, with a budget, a search or neither */
    o.distribute_saved = o.sequence_parallel = 1;
    for (int k = 0; k < 3; k++) {
        lcx_plan_opts ob = o;
        ob.mem_budget = k == 0 ? 0 : ob.mem_budget;
        ob.gpus = k == 2 ? 8 : 0;
        p = NULL;
        CHECK(lcx_plan_build(&cfg, r, &ob, &p) == LCX_ERR_INVALID && !p &&
              strstr(lcx_last_error(), "sequence parallelism already splits"));
    }
    lcx_recipe_free(r);
    lcx_config_free(&cfg);
}

/* The before/after evaluation's memory (docs/plan.md "Evaluation"): lcx_mem_eval_compute against the sizes written
 * out here for the Llama-3-8B shape at TP 8 and 1000 tokens (capacity 1016; float32; each buffer rounded up to 64
 * bytes as the model lays it out), the plan's line for it, and the note when it exceeds the budget.
 * test_model_logits_tp_mpi checks the same estimate against the buffers a TP model allocates. */
static double up64(double b) { return ceil(b / 64) * 64; }

static void test_eval_memory(void) {
    lcx_model_config cfg;
    if (!load_cfg(&cfg, 8192, "\"rope_theta\": 500000.0")) return;
    const double T = 1016, H = 4096, Q = 4 * 128, KV = 128, F = 14336 / 8, V = 128256, P = 8030261248.0;
    lcx_mem_eval e;
    lcx_mem_eval_compute(&cfg, (uint64_t)P, 8, 1, 1000, 256, &e);
    CHECK(e.tokens == 1016);
    CHECK(e.weights == P / 8 * 4);
    /* x, y, xn2 [T, H]; q, o [T, Q']; k, v [T, KV']; lse [T, nh']; gate, up [T, F']; ones; ids, targets,
     * positions; one logits chunk [256, V] (whole rows) */
    double ws = 3 * up64(T * H * 4) + 2 * up64(T * Q * 4) + 2 * up64(T * KV * 4) + up64(T * 4 * 4) +
                2 * up64(T * F * 4) + 4 * up64(T * 4) + up64(256 * V * 4);
    CHECK_MSG(e.working_set == ws, "working set %.0f, by hand %.0f", e.working_set, ws);
    CHECK(e.kv_cache == 2 * up64(32 * T * KV * 4));
    /* a [T, H] sum's 8 received pieces and this rank's sum (T H is a multiple of 8), the loss statistics, the
     * gathered logits chunk */
    double tp = up64(9 * (T * H / 8) * 4) + up64(256 * 3 * 9 * 8) + up64(256 * 8 * 16032 * 4.0);
    CHECK_MSG(e.tp_scratch == tp, "TP scratch %.0f, by hand %.0f", e.tp_scratch, tp);
    CHECK(e.total == e.weights + e.working_set + e.kv_cache + e.tp_scratch && e.cp_ring == 0);
    CHECK(e.local_tokens == 1016);
    /* CP 4: each rank 1016 / 4 = 254 tokens (1016 is a multiple of 8), no passkey cache, the ring's two K | V
     * blocks, a partial output [254, Q'] and its LSE [254, nh'] */
    const double Tc = 254;
    lcx_mem_eval_compute(&cfg, (uint64_t)P, 8, 4, 1000, 256, &e);
    double wsc = 3 * up64(Tc * H * 4) + 2 * up64(Tc * Q * 4) + 2 * up64(Tc * KV * 4) + up64(Tc * 4 * 4) +
                 2 * up64(Tc * F * 4) + 4 * up64(Tc * 4) + up64(254 * V * 4);
    double ring = 2 * up64(2 * Tc * KV * 4) + up64(Tc * Q * 4) + up64(Tc * 4 * 4);
    double tpc = up64(9 * (Tc * H / 8) * 4) + up64(254 * 3 * 9 * 8) + up64(254 * 8 * 16032 * 4.0);
    CHECK_MSG(e.tokens == 1016 && e.local_tokens == 254 && e.working_set == wsc && e.kv_cache == 0 &&
                  e.cp_ring == ring && e.tp_scratch == tpc,
              "CP 4: local %lld, working set %.0f (by hand %.0f), ring %.0f (%.0f), TP %.0f (%.0f)",
              (long long)e.local_tokens, e.working_set, wsc, e.cp_ring, ring, e.tp_scratch, tpc);
    CHECK(e.total == e.weights + e.working_set + e.tp_scratch + e.cp_ring);
    lcx_mem_eval_compute(&cfg, (uint64_t)P, 8, 4, 1001, 256, &e); /* 1017 pads to 1024 */
    CHECK(e.local_tokens == 256);
    lcx_mem_eval_compute(&cfg, (uint64_t)P, 1, 1, 1000, 256, &e);
    CHECK(e.tp_scratch == 0 && e.kv_cache == 2 * up64(32 * T * 1024 * 4));
    /* past LCX_EVAL_MLP_CHUNK (4096) tokens the MLP rows (norm output, gate, up) are 4096, the rest T */
    const double T2 = 10016, C = LCX_EVAL_MLP_CHUNK;
    lcx_mem_eval_compute(&cfg, (uint64_t)P, 8, 1, 10000, 256, &e);
    double ws2 = 2 * up64(T2 * H * 4) + up64(C * H * 4) + 2 * up64(T2 * Q * 4) + 2 * up64(T2 * KV * 4) +
                 up64(T2 * 4 * 4) + 2 * up64(C * F * 4) + 4 * up64(T2 * 4) + up64(256 * V * 4);
    CHECK_MSG(e.working_set == ws2, "working set at 10000 tokens %.0f, by hand %.0f", e.working_set, ws2);

    /* the plan: the last stage's longest eval length; over budget, a note */
    lcx_recipe *r = recipe_text("defaults: {steps: 2, tokens_per_batch: 32k}\n"
                                "stages:\n  - {seq_len: 16k, eval_lengths: [8k, 512k]}\n");
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.target = 16384;
    o.tp = 8;
    lcx_plan *p = build_opts(&cfg, r, &o);
    if (p) {
        lcx_mem_eval want;
        lcx_mem_eval_compute(&cfg, p->model.n_params, 8, 1, 524288, 256, &want);
        CHECK(p->eval.tokens == 524304 && p->eval.total == want.total);
        CHECK(p->n_notes == 0);
    }
    lcx_plan_free(p);
    o.mem_budget = 40.0 * 1073741824.0; /* training fits; the evaluation at 512k does not */
    p = build_opts(&cfg, r, &o);
    int noted = 0;
    for (int i = 0; p && i < p->n_notes; i++)
        noted |= strstr(p->notes[i], "the before/after evaluation at 524288 tokens needs") != NULL;
    CHECK_MSG(p && p->eval.total > o.mem_budget && noted, "no note for an evaluation of %.3g bytes",
              p ? p->eval.total : 0.0);
    lcx_plan_free(p);
    o.cp = 4, o.target = 16384; /* the evaluation splits its windows over CP as well: now it fits */
    p = build_opts(&cfg, r, &o);
    if (p) {
        lcx_mem_eval want;
        lcx_mem_eval_compute(&cfg, p->model.n_params, 8, 4, 524288, 256, &want);
        CHECK(p->eval.local_tokens == 131076 && p->eval.total == want.total && p->eval.total < o.mem_budget);
        for (int i = 0; i < p->n_notes; i++)
            CHECK_MSG(!strstr(p->notes[i], "before/after evaluation"), "CP 4: note %s", p->notes[i]);
    }
    lcx_plan_free(p);
    lcx_recipe_free(r);
    lcx_config_free(&cfg);
}

/* The layout search (docs/plan.md "Layout search"): Llama-3.1-8B (the shape above, rope llama3 factor 8 over 8k)
 * --to 128k on 8 x 80 GB picks a layout the memory model says fits, checked here from the rules and the memory
 * model directly; the choice is the fastest fitting candidate, deterministic, kept constraints; an impossible
 * target is refused with the numbers on one line. */
static lcx_status search_tile(const lcx_model_config *cfg, const lcx_recipe *r, int64_t target, int64_t gpus,
                              double budget, int64_t tp, int64_t mlp_tile, lcx_plan **p) {
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.target = target;
    o.gpus = gpus;
    o.mem_budget = budget;
    o.tp = tp, o.cp = 0, o.dp = 0, o.loss_chunk = 0, o.mlp_tile = mlp_tile;
    return lcx_plan_build(cfg, r, &o, p);
}

static lcx_status search(const lcx_model_config *cfg, const lcx_recipe *r, int64_t target, int64_t gpus,
                         double budget, int64_t tp, lcx_plan **p) {
    return search_tile(cfg, r, target, gpus, budget, tp, 0, p);
}

/* The chosen layout's loss chunk and MLP tile against every other pair, each planned on its own with the layout
 * kept (so the pair is given, not searched): none that fits is faster. */
static void check_knobs(const lcx_model_config *cfg, const lcx_recipe *r, const lcx_plan *p, double budget) {
    const int64_t chunks[] = {4096, 1024, 256}, tiles[] = {0, 4096, 1024, 256};
    for (int c = 0; c < 3; c++) {
        for (int t = 0; t < 4; t++) {
            lcx_plan_opts o = p->opts;
            o.gpus = p->opts.gpus, o.loss_chunk = chunks[c], o.mlp_tile = tiles[t];
            lcx_plan *q = NULL;
            lcx_status st = lcx_plan_build(cfg, r, &o, &q);
            if (st == LCX_OK && q->peak_memory <= budget)
                CHECK_MSG(q->predicted_tokens_per_s <= p->predicted_tokens_per_s * (1 + 1e-12),
                          "loss chunk %lld, MLP tile %lld: %.6g tokens/s beats the chosen %.6g", (long long)chunks[c],
                          (long long)tiles[t], q->predicted_tokens_per_s, p->predicted_tokens_per_s);
            if (tiles[t] && st == LCX_OK) CHECK(q->opts.mlp_tile == tiles[t] && q->model.mlp_tile == tiles[t]);
            lcx_plan_free(q);
        }
    }
}

/* Llama-3.1-8B's config (rope llama3 factor 8 over 8k) and the yarn-x2 recipe: 0 (checks failed) when either does
 * not load. */
static int load_8b(lcx_model_config *cfg, lcx_recipe **r) {
    if (!load_cfg(cfg, 131072,
                  "\"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                  "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}"))
        return 0;
    *r = recipe("yarn-x2");
    if (!*r) lcx_config_free(cfg);
    return *r != NULL;
}

/* The reserve (docs/plan.md "Reserve"): the CUDA context and one NCCL communicator per group of more than one rank,
 * kept out of each card's memory by the search; what --reserve gives instead, anywhere; 0 on the CPU. */
static void test_reserve(void) {
    const double GiB = 1073741824.0;
    /* world, TP, CP, DP and CP x DP groups of more than one rank */
    CHECK(lcx_mem_nccl_comms(1, 1, 1) == 0 && lcx_mem_nccl_comms(8, 1, 1) == 2 && lcx_mem_nccl_comms(1, 1, 8) == 3);
    CHECK(lcx_mem_nccl_comms(1, 4, 2) == 4 && lcx_mem_nccl_comms(8, 4, 1) == 4 && lcx_mem_nccl_comms(2, 2, 2) == 5);
    CHECK(lcx_mem_nccl_comms(1, 8, 1) == 3);
    CHECK(lcx_mem_runtime(LCX_MEM_CPU, 8, 4, 2) == 0);
    CHECK(lcx_mem_runtime(LCX_MEM_CUDA, 1, 1, 1) == 1 * GiB);
    CHECK(lcx_mem_runtime(LCX_MEM_CUDA, 8, 4, 1) == 3 * GiB && lcx_mem_runtime(LCX_MEM_CUDA, 2, 2, 2) == 3.5 * GiB);
    lcx_model_config cfg;
    lcx_recipe *r = NULL;
    if (!load_8b(&cfg, &r)) return;
    const double budget = 80 * GiB;
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.target = 131072, o.gpus = 8, o.mem_budget = budget;
    o.tp = o.cp = o.dp = o.loss_chunk = 0;
    /* the search's default: each candidate keeps its own layout's reserve, and fits what is left */
    lcx_plan *p = build_opts(&cfg, r, &o);
    if (p) {
        CHECK(p->reserve == lcx_mem_runtime(LCX_MEM_CUDA, p->opts.tp, p->opts.cp, p->opts.dp) && p->reserve >= GiB);
        CHECK(p->opts.mem_budget == budget - p->reserve && lcx_plan_budget(p) == budget);
        CHECK(p->peak_memory <= budget - p->reserve);
        const lcx_plan_search_info *s = p->search;
        CHECK(s && s->n_candidates > 1);
        for (int i = 0; s && i < s->n_candidates; i++) {
            const lcx_plan_candidate *c = &s->cand[i];
            CHECK(c->reserve == lcx_mem_runtime(LCX_MEM_CUDA, c->tp, c->cp, c->dp));
            if (c->valid) CHECK(c->fits == (c->peak <= budget - c->reserve));
        }
    }
    lcx_plan_free(p);
    /* --reserve 8G: every layout keeps 8 GiB */
    o.reserve = 8 * GiB;
    p = build_opts(&cfg, r, &o);
    if (p) {
        CHECK(p->reserve == 8 * GiB && p->peak_memory <= 72 * GiB && lcx_plan_budget(p) == budget);
        CHECK(p->search && p->search->n_candidates > 1);
        for (int i = 0; p->search && i < p->search->n_candidates; i++) CHECK(p->search->cand[i].reserve == 8 * GiB);
    }
    lcx_plan_free(p);
    /* on the CPU, and with --memory (no search), none unless given */
    o.reserve = -1, o.backend = LCX_MEM_CPU;
    p = build_opts(&cfg, r, &o);
    if (p) CHECK(p->reserve == 0 && p->opts.mem_budget == budget);
    lcx_plan_free(p);
    o.backend = LCX_MEM_CUDA, o.gpus = 0, o.tp = 8, o.cp = 4, o.dp = 1, o.loss_chunk = 4096;
    p = build_opts(&cfg, r, &o);
    if (p) CHECK(p->reserve == 0 && p->opts.mem_budget == budget);
    lcx_plan_free(p);
    o.reserve = 2 * GiB;
    p = build_opts(&cfg, r, &o);
    if (p) {
        CHECK(p->reserve == 2 * GiB && p->opts.mem_budget == 78 * GiB && lcx_plan_budget(p) == budget);
        for (int i = 0; i < p->n_stages; i++) CHECK(p->stages[i].mem.total <= 78 * GiB);
    }
    lcx_plan_free(p);
    lcx_recipe_free(r);
    lcx_config_free(&cfg);
}

/* The disk estimate (docs/plan.md "Disk"): saves every save_interval steps and at each stage's end, the ones held
 * at once by --keep, the bytes of a checkpoint and of the HF export, by hand. */
static void test_disk(void) {
    lcx_model_config cfg;
    lcx_recipe *r = NULL;
    if (!load_8b(&cfg, &r)) return;
    lcx_recipe_free(r);
    /* 7 steps saved every 3 (3, 6, 7) and 4 steps saved every 2 (2, 4): 5 saves */
    r = recipe_text("stages:\n  - {seq_len: 128k, steps: 7, save_interval: 3}\n"
                    "  - {seq_len: 256k, steps: 4, save_interval: 2}\n");
    const int64_t keeps[] = {2, 0, 9, 1};
    const int64_t held[] = {3, 5, 5, 2};
    for (int k = 0; r && k < 4; k++) {
        lcx_plan_opts o;
        lcx_plan_opts_default(&o);
        o.target = 262144, o.keep_checkpoints = keeps[k];
        lcx_plan *p = build_opts(&cfg, r, &o);
        if (!p) continue;
        const double P = (double)p->model.n_params;
        CHECK(p->disk.saves == 5 && p->disk.held == held[k]);
        CHECK(p->disk.checkpoint == P * 14 && p->disk.export_hf == P * 2); /* bf16 weights + fp32 master + moments */
        CHECK(p->disk.total == (double)held[k] * P * 14 + P * 2);
        lcx_plan_free(p);
    }
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    o.target = 262144, o.weight_bytes = o.act_bytes = 4; /* fp32: no master */
    lcx_plan *p = build_opts(&cfg, r, &o);
    if (p) CHECK(p->disk.checkpoint == (double)p->model.n_params * 12 && p->disk.export_hf == p->model.n_params * 4.0);
    lcx_plan_free(p);
    lcx_recipe_free(r);
    /* the count the planner uses (a closed form) against the training loop's rule, step by step, from every
     * resume point */
    for (int64_t steps = 0; steps <= 13; steps++)
        for (int64_t every = -1; every <= 5; every++)
            for (int64_t done = 0; done <= steps; done++) {
                int64_t n = 0;
                for (int64_t s = done + 1; s <= steps; s++) n += lcx_train_save_due(s, steps, every);
                CHECK(lcx_train_saves(done, steps, every) == n);
            }
    lcx_config_free(&cfg);
}

static void test_search(void) {
    lcx_model_config cfg;
    lcx_recipe *r = NULL;
    if (!load_8b(&cfg, &r)) return;
    const double GiB = 1073741824.0, budget = 80 * GiB;
    lcx_plan *p = NULL, *q = NULL;
    CHECK_OK(search(&cfg, r, 131072, 8, budget, 0, &p));
    if (p) {
        const lcx_plan_search_info *s = p->search;
        CHECK(s != NULL);
        CHECK(p->opts.tp * p->opts.cp * p->opts.dp == 8);
        CHECK(p->stages[p->n_stages - 1].seq_len == 131072);
        /* the layout rules, independently */
        lcx_tp_dims dims = {32, 8, 128, 4096, 14336, 128256};
        CHECK_OK(lcx_tp_check(&dims, (int)p->opts.tp));
        for (int i = 0; i < p->n_stages; i++) {
            const lcx_plan_stage *st = &p->stages[i];
            CHECK(st->seq_len % (2 * p->opts.cp) == 0);
            /* every stage fits: the memory model recomputed from the chosen policies */
            lcx_mem_estimate e;
            lcx_mem_estimate_compute(&p->model, st->seq_len, st->micro_seqs, st->activation, &e);
            CHECK_REL(e.total, st->mem.total, 1e-12);
            CHECK_MSG(e.total <= budget - p->reserve, "stage %d needs %.2f GiB", st->index, e.total / GiB);
        }
        CHECK(p->peak_memory <= budget - p->reserve);
        /* the plan's loss chunk and MLP tile are the chosen candidate's and its memory model's */
        if (s) CHECK(s->cand[s->chosen].loss_chunk == p->opts.loss_chunk && s->cand[s->chosen].mlp_tile == p->opts.mlp_tile);
        CHECK(p->model.loss_chunk == p->opts.loss_chunk && p->model.mlp_tile == p->opts.mlp_tile);
        check_knobs(&cfg, r, p, budget);
        /* the explanation's policy line: every run of layers of the last stage, in order */
        if (s) {
            const char *pl = NULL;
            for (int i = 0; i < s->n_lines; i++)
                if (!strncmp(s->lines[i], "policy: 128k: layers 0", 22)) pl = s->lines[i];
            CHECK(pl != NULL);
            const lcx_plan_stage *st = &p->stages[p->n_stages - 1];
            for (int l = 0; pl && l < 32; l++) {
                if (l > 0 && st->activation[l] == st->activation[l - 1]) continue;
                int e = l;
                while (e + 1 < 32 && st->activation[e + 1] == st->activation[l]) e++;
                char want[64];
                if (e > l) snprintf(want, sizeof want, " %d-%d %s", l, e, lcx_act_policy_name(st->activation[l]));
                else snprintf(want, sizeof want, " %d %s", l, lcx_act_policy_name(st->activation[l]));
                CHECK_MSG(strstr(pl, want) != NULL, "'%s' not in '%s'", want, pl);
            }
        }
        /* the chosen one is the fastest that fits; the runner-up is the next */
        if (s) {
            CHECK(s->n_candidates == 10); /* (tp, cp) pairs with tp x cp | 8 */
            CHECK(s->chosen >= 0 && s->cand[s->chosen].fits);
            CHECK(s->cand[s->chosen].tp == p->opts.tp && s->cand[s->chosen].cp == p->opts.cp);
            for (int i = 0; i < s->n_candidates; i++) {
                if (!s->cand[i].fits) CHECK(!s->cand[i].valid || s->cand[i].peak > budget - s->cand[i].reserve);
                else CHECK(s->cand[i].tokens_per_s <= s->cand[s->chosen].tokens_per_s);
            }
            CHECK(s->runner_up >= 0 && s->cand[s->runner_up].tokens_per_s <= s->cand[s->chosen].tokens_per_s);
            CHECK(s->n_lines >= 3 && !strncmp(s->lines[1], "chosen: TP ", 11) &&
                  !strncmp(s->lines[2], "runner-up: TP ", 14));
            CHECK_REL(p->predicted_tokens_per_s, s->cand[s->chosen].tokens_per_s, 1e-12);
        }
        /* TP 1 cannot hold 8B's weights, grads, master and Adam state whole (18 bytes x 8.03G > 80 GiB); ZeRO-1
         * over the 8 ranks of CP x DP makes them 2 + 4 + 12/8 bytes a parameter, and TP 1 fits */
        if (p->opts.tp == 1) CHECK(p->zero1 && p->opts.cp * p->opts.dp == 8 && p->model.zero_shards == 8);
        lcx_plan_opts wo;
        lcx_plan_opts_default(&wo);
        wo.target = 131072, wo.gpus = 8, wo.mem_budget = budget, wo.zero1 = 0;
        wo.tp = wo.cp = wo.dp = wo.loss_chunk = wo.mlp_tile = 0;
        lcx_plan *whole = build_opts(&cfg, r, &wo);
        CHECK(whole && whole->opts.tp >= 2 && !whole->zero1);
        if (whole) CHECK(whole->predicted_tokens_per_s <= p->predicted_tokens_per_s);
        lcx_plan_free(whole);
        /* JSON: the chosen layout and the explanation */
        json_t *j = lcx_plan_json(p);
        json_t *ch = j ? json_object_get(json_object_get(j, "search"), "chosen") : NULL;
        CHECK(ch && json_integer_value(json_object_get(ch, "tp")) == p->opts.tp &&
              json_integer_value(json_object_get(ch, "cp")) == p->opts.cp &&
              json_integer_value(json_object_get(ch, "dp")) == p->opts.dp);
        json_t *ex = j ? json_object_get(json_object_get(j, "search"), "explanation") : NULL;
        CHECK(ex && json_array_size(ex) >= 3);
        json_decref(j);
    }
    /* deterministic: the same search again gives the same layout, chunk, policies and figures */
    CHECK_OK(search(&cfg, r, 131072, 8, budget, 0, &q));
    if (p && q) {
        CHECK(q->opts.tp == p->opts.tp && q->opts.cp == p->opts.cp && q->opts.dp == p->opts.dp &&
              q->opts.loss_chunk == p->opts.loss_chunk && q->peak_memory == p->peak_memory);
        CHECK(q->predicted_tokens_per_s == p->predicted_tokens_per_s);
        for (int i = 0; i < p->n_stages && i < q->n_stages; i++)
            CHECK(!memcmp(p->stages[i].activation, q->stages[i].activation,
                          (size_t)p->model.n_layers * sizeof *p->stages[i].activation));
        CHECK(!memcmp(p->search->lines, q->search->lines, sizeof p->search->lines));
    }
    lcx_plan_free(q);
    q = NULL;
    /* a given --tp is kept */
    CHECK_OK(search(&cfg, r, 131072, 8, budget, 4, &q));
    if (q) CHECK(q->opts.tp == 4 && q->opts.cp * q->opts.dp == 2 && q->search->n_candidates == 2);
    lcx_plan_free(q);
    q = NULL;
    /* a given MLP tile is kept, and counted: 1024 rows free memory against no tiling */
    CHECK_OK(search_tile(&cfg, r, 131072, 8, budget, 0, 1024, &q));
    if (q) {
        CHECK(q->opts.mlp_tile == 1024 && q->search->cand[q->search->chosen].mlp_tile == 1024);
        const lcx_plan_stage *st = &q->stages[q->n_stages - 1];
        lcx_mem_model untiled = q->model;
        untiled.mlp_tile = 0;
        lcx_mem_estimate e;
        lcx_mem_estimate_compute(&untiled, st->seq_len, st->micro_seqs, st->activation, &e);
        CHECK(e.workspace > st->mem.workspace);
    }
    lcx_plan_free(q);
    q = NULL;
    CHECK_FAILS(search(&cfg, r, 131072, 8, budget, 3, &q), LCX_ERR_INVALID, "--tp 3 does not divide --gpus 8");
    /* impossible: 16m on one 24 GB device; one line naming the budget and the smallest need */
    CHECK_FAILS(search(&cfg, r, 16777216, 1, 24 * GiB, 0, &q), LCX_ERR_INVALID,
                "nothing fits 1 device of 24.00 GiB: the smallest layout (TP 1 x CP 1 x DP 1");
    CHECK(strstr(lcx_last_error(), " TiB per device") && !strchr(lcx_last_error(), '\n'));
    CHECK(q == NULL);
    /* a search needs a budget */
    CHECK_FAILS(search(&cfg, r, 131072, 8, 0, 0, &q), LCX_ERR_INVALID, "needs a memory budget");
    lcx_plan_free(p);
    lcx_recipe_free(r);
    lcx_config_free(&cfg);
}

/* The throughput model's terms against a hand computation (TP 2, CP 2, DP 2, bf16, 4 layers: 1 recompute,
 * 1 offload, 2 keep). */
static void test_step_time(void) {
    lcx_mem_model m = {4, 64, 128, 4, 2, 16, 1000, 100000, 2, 2, 2, 2, 4096, 0, 0, 0, NULL, 0, 0, 0, 0};
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    int counts[LCX_ACT_POLICY_COUNT] = {0};
    counts[LCX_ACT_KEEP] = 2, counts[LCX_ACT_RECOMPUTE] = 1, counts[LCX_ACT_OFFLOAD] = 1;
    int64_t S = 1024, seqs = 3;
    lcx_plan_cost c;
    double t = lcx_plan_step_time(&o, &m, 2, S, seqs, 1000000, counts, &c);
    double tokens = 3.0 * 1024 / 2;
    double layer_mm = 64.0 * 4 * 16 * 2 + 64.0 * 2 * 16 * 2 + 3 * 64.0 * 128;
    CHECK_REL(c.compute, tokens * (lcx_flops_per_token(&m, S) + 2 * layer_mm) / 2 / 400e12, 1e-12);
    CHECK_REL(c.tp, (4 * 4 + 2) * 2.0 * 0.5 * tokens * 64 * 2 / 150e9, 1e-12);
    CHECK_REL(c.cp, 1e6 / 150e9, 1e-12);
    CHECK_REL(c.grad, 2.0 * 3 / 4 * 100000 / 2 * 4 / 150e9, 1e-12);
    double xfer = 2 * tokens * lcx_mem_layer_keep(&m) / 25e9;
    CHECK_NEAR(c.offload, xfer > c.compute / 4 ? xfer - c.compute / 4 : 0, 1e-18);
    CHECK_REL(t, c.compute + c.tp + c.cp + c.grad + c.offload, 1e-12);
    /* distributed saved activations: one all-gather (half an all-reduce) more per recomputed layer */
    m.distribute = 1;
    lcx_plan_cost cd;
    lcx_plan_step_time(&o, &m, 2, S, seqs, 1000000, counts, &cd);
    CHECK_REL(cd.tp, (4 * 4 + 2 + 0.5) * 2.0 * 0.5 * tokens * 64 * 2 / 150e9, 1e-12);
    CHECK(cd.compute == c.compute && cd.cp == c.cp && cd.grad == c.grad);
}

int main(void) {
    test_geometric_yarn();
    test_reextension();
    test_abf_and_override();
    test_errors();
    test_auto_after_explicit();
    test_memory();
    test_ring();
    test_flops();
    test_lr();
    test_budget();
    test_eval_memory();
    test_search();
    test_reserve();
    test_disk();
    test_step_time();
    return test_summary("test_plan");
}
