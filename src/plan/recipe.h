/* recipe: staged context-extension recipes in YAML (recipes/README.md documents every key).
 *
 *   name: yarn-x2
 *   description: ...
 *   defaults: {method: yarn, lr: {peak: 2e-5, warmup_steps: 20}, ...}   # any stage key except seq_len
 *   stages:
 *     - {seq_len: auto, steps: 200}                                      # or 32k, "128k", target
 *
 * A stage's value comes from the stage, else from `defaults`, else from the built-in default
 * (lcx_recipe_stage_resolve). Parsing checks everything that does not depend on the model or on --to: unknown
 * keys (with a "did you mean"), duplicate keys, types, ranges, increasing stage lengths, divisibility of explicit
 * lengths. Every error is one line: "FILE:LINE: key 'x': problem" (LINE is 1-based, from libyaml's marks).
 * What depends on the model/target (auto lengths, per-layer lists, longrope list lengths, warm-up vs steps
 * derived from tokens) is checked by the planner (src/plan/plan.h). */
#ifndef LCX_FORMATS_RECIPE_H
#define LCX_FORMATS_RECIPE_H

#include "src/model/act_policy.h"
#include <stddef.h>
#include <stdint.h>

#include "src/train/lr_schedule.h"
#include "src/rope/rope.h"
#include "src/core/status.h"

/* lcx_act_policy (keep, recompute, offload, recompute+offload, auto) is in src/model/act_policy.h. */

/* Fields a stage (or the defaults block) may set; bit (1u << field) of lcx_recipe_stage.set. */
typedef enum lcx_recipe_field {
    LCX_RF_SEQ_LEN = 0, LCX_RF_METHOD, LCX_RF_FACTOR, LCX_RF_THETA, LCX_RF_LOW_FREQ, LCX_RF_HIGH_FREQ,
    LCX_RF_SHORT_FACTOR, LCX_RF_LONG_FACTOR, LCX_RF_STEPS, LCX_RF_TOKENS, LCX_RF_LR_PEAK, LCX_RF_LR_WARMUP,
    LCX_RF_LR_SCHEDULE, LCX_RF_LR_MIN, LCX_RF_TOKENS_PER_BATCH, LCX_RF_GRAD_ACCUM, LCX_RF_EVAL_LENGTHS,
    LCX_RF_EVAL_STRIDE, LCX_RF_SAVE_INTERVAL, LCX_RF_ACTIVATION, LCX_RF_CLIP_NORM, LCX_RF_WEIGHT_DECAY,
    LCX_RF_SEED, LCX_RF_ATTENTION_MASK, LCX_RF_MIN_DOC_TOKENS, LCX_RF_LONG_DOC_TOKENS, LCX_RF_LONG_DOC_REPEAT,
    LCX_RF_LR_DECAY_FRACTION, LCX_RF_LR_DECAY_TYPE, LCX_RF_COUNT
} lcx_recipe_field;

/* Key name of a field as written in a recipe ("steps", "lr.peak", ...); "?" out of range. */
const char *lcx_recipe_field_name(lcx_recipe_field f);

typedef enum lcx_seq_kind { LCX_SEQ_VALUE = 0, LCX_SEQ_AUTO, LCX_SEQ_TARGET } lcx_seq_kind;
typedef enum lcx_theta_kind { LCX_THETA_AUTO = 0, LCX_THETA_VALUE, LCX_THETA_PER_DOUBLING } lcx_theta_kind;

#define LCX_RECIPE_MAX_EVAL 32
#define LCX_RECIPE_MAX_STAGES 64
#define LCX_RECIPE_MAX_LAYERS 4096
/* Parser bounds (docs/reliability.md "Parsers and validation"): a recipe is a few levels deep and a mapping
 * has a few dozen keys; libyaml's scanner costs O(depth) per token, the duplicate-key check O(keys^2). */
#define LCX_RECIPE_MAX_DEPTH 16
#define LCX_RECIPE_MAX_KEYS 64
#define LCX_RECIPE_MAX_NODES (1 << 19)

typedef struct lcx_recipe_stage {
    uint32_t set;                 /* which fields this block gives (resolved stage: all) */
    int line[LCX_RF_COUNT];       /* 1-based line of each given field (resolved: where it came from; 0 = built-in) */
    int line_start;               /* line of the stage's mapping (0 for built-in defaults) */
    lcx_seq_kind seq_kind;        /* auto: geometric x2 from the current context to --to; target: --to */
    int64_t seq_len;              /* tokens, when seq_kind == LCX_SEQ_VALUE */
    lcx_rope_method method;       /* yarn (default), pi, abf, ntk, llama3, longrope */
    int factor_auto;              /* 1: factor = stage length / original length */
    double factor;                /* >= 1 when !factor_auto */
    lcx_theta_kind theta_kind;    /* abf: auto = NTK-aware base for the stage length; value; per_doubling */
    double theta;                 /* VALUE: new rope_theta; PER_DOUBLING: multiplier per doubling of the context */
    double low_freq_factor, high_freq_factor;   /* llama3; 0 = keep the model's (or 1 and 4) */
    int n_short_factor, n_long_factor;          /* longrope lists (owned by the recipe) */
    double *short_factor, *long_factor;
    int64_t steps;                /* optimizer steps (0 = derived from tokens) */
    int64_t tokens;               /* training tokens (0 = derived from steps) */
    lcx_lr_kind lr_schedule;
    double lr_peak, lr_min;
    double lr_decay_fraction;     /* wsd: the share of the stage's steps that decay (0, 1]; default 0.2 */
    lcx_lr_decay lr_decay_type;   /* wsd: the decay's shape (default cosine, as HF's get_wsd_schedule) */
    int64_t lr_warmup;            /* steps; the built-in 20 shrinks to a shorter stage, a written value must fit */
    int64_t tokens_per_batch;     /* per optimizer step, all ranks; 0 = one sequence */
    int64_t grad_accum;           /* micro-batches per optimizer step, >= 1; 0 = auto (one sequence per micro-batch) */
    int eval_auto;                /* 1: original length x 2^i up to the stage length, plus the stage length */
    int n_eval;
    int64_t eval_lengths[LCX_RECIPE_MAX_EVAL];
    int64_t eval_stride;          /* tokens; 0 = non-overlapping windows (stride = window) */
    int64_t save_interval;        /* steps between checkpoints inside the stage; 0 = only at the end */
    lcx_act_policy activation;    /* when n_activation == 0 */
    int n_activation;             /* > 0: one policy per decoder layer (owned by the recipe) */
    lcx_act_policy *activation_list;
    double clip_norm;             /* global grad-norm clip; 0 = off */
    double weight_decay;
    uint64_t seed;
    int doc_mask;                 /* attention_mask: document (1: attention stays inside each packed document) or
                                     causal (0, the default) */
    int64_t min_doc_tokens;       /* documents shorter than this are not drawn (0: all; src/train/sampler.h) */
    int64_t long_doc_tokens;      /* documents at least this long ... (0: no upsampling) */
    int64_t long_doc_repeat;      /* ... are drawn this many times per epoch (0 = unset: 1) */
} lcx_recipe_stage;

typedef struct lcx_recipe {
    char *label;                  /* file path or "builtin:<name>", used in messages */
    char *name;                   /* `name:`, else the file's stem */
    char *description;            /* "" when absent */
    int64_t divisor;              /* explicit stage lengths are multiples of it (>= 1) */
    lcx_recipe_stage defaults;    /* the `defaults:` block as written */
    size_t n_stages;
    lcx_recipe_stage *stages;     /* as written (unset fields not yet filled) */
} lcx_recipe;

/* Parse a recipe from memory. label names it in errors. divisor (>= 1; 0 means 1): what the parallel layout needs
 * sequence lengths to be a multiple of (2*CP for load-balanced ring attention, docs/parallel.md "Context
 * parallelism"); explicit
 * seq_len values that are not multiples fail. Errors: LCX_ERR_FORMAT (syntax, types, keys, values), one line. */
lcx_status lcx_recipe_parse(const char *label, const char *text, size_t len, int64_t divisor, lcx_recipe **out);
/* Read and parse a file (errors name the path). */
lcx_status lcx_recipe_load(const char *path, int64_t divisor, lcx_recipe **out);
/* A built-in recipe by name ("yarn-x2"), else a file: a spec containing '/' or ending in .yaml/.yml is always a
 * file; a bare name that is neither built in nor an existing file fails listing the built-in names. */
lcx_status lcx_recipe_open(const char *spec, int64_t divisor, lcx_recipe **out);
void lcx_recipe_free(lcx_recipe *r); /* NULL ok */

/* Stage i with every field filled: stage value, else defaults, else built-in default. Arrays are borrowed
 * from r (valid while r lives). */
void lcx_recipe_stage_resolve(const lcx_recipe *r, size_t i, lcx_recipe_stage *out);
/* The built-in defaults (what an empty `defaults:` block means). */
void lcx_recipe_builtin_defaults(lcx_recipe_stage *out);

/* Recipes embedded in the binary from recipes/<name>.yaml at build time (recipes/CMakeLists.txt). */
size_t lcx_recipe_builtin_count(void);
const char *lcx_recipe_builtin_name(size_t i);                  /* file stem, e.g. "yarn-x2" */
const char *lcx_recipe_builtin_text(size_t i, size_t *len);     /* the YAML text */

#endif
