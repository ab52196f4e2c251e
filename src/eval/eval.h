/* eval: what users judge a context extension by -- perplexity by context length (sliding window) and passkey
 * retrieval -- written against small callbacks so any model (CPU, CUDA, a fake in tests) and any tokenizer
 * plug in. The exact protocol, with a worked example, is docs/evaluation-protocol.md.
 *
 * Token ids are int32_t; lengths and positions int64_t. "Window" always means the model's input sequence,
 * BOS included when one is used. NLLs are natural-log, in double. */
#ifndef LCX_EVAL_H
#define LCX_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

/* ---- callbacks ------------------------------------------------------------------------------------------ */

/* Score a window: tokens[0..n) is the model input at positions 0..n-1 (tokens[0] is BOS when BOS is used).
 * For every i in [first, n): nll[i - first] = -ln p(tokens[i] | tokens[0..i)). Always 1 <= first < n, so a
 * forward pass with a chunked loss needs logits only for positions first-1 .. n-2. */
typedef lcx_status (*lcx_eval_score_fn)(void *model, const int32_t *tokens, int64_t n, int64_t first,
                                        double *nll);

/* Teacher-forced argmax: for every i in [first, n): next[i - first] = argmax_v p(v | tokens[0..i)) (ties: the
 * smallest id). One forward pass; greedy decoding reproduces tokens[first..n) iff next[] equals them. */
typedef lcx_status (*lcx_eval_argmax_fn)(void *model, const int32_t *tokens, int64_t n, int64_t first,
                                         int32_t *next);

/* Tokenizer: encode text[0..len) WITHOUT special tokens (no BOS/EOS). Writes min(count, cap) ids into ids and
 * sets *n_out = count (snprintf convention: the caller retries with a bigger buffer when count > cap; ids may
 * be NULL when cap is 0, to count only). */
typedef lcx_status (*lcx_eval_encode_fn)(void *tokenizer, const char *text, size_t len, int32_t *ids,
                                         int64_t cap, int64_t *n_out);

typedef struct lcx_eval_tokenizer {
    lcx_eval_encode_fn encode;
    void *ctx;      /* passed to encode */
    int32_t bos_id; /* < 0: the tokenizer has no BOS */
} lcx_eval_tokenizer;

/* ---- perplexity by context length ----------------------------------------------------------------------- */

enum {
    LCX_PPL_SHORT_SKIP = 0,  /* a document with fewer text tokens than a full window is skipped (default) */
    LCX_PPL_SHORT_SCORE = 1, /* ... is scored as one shorter window (what the YaRN script does) */
};

typedef struct lcx_ppl_config {
    const int64_t *lengths; /* [n_lengths] window lengths Lw in model positions, BOS included; each >= 2 */
    int n_lengths;
    int64_t stride;  /* S >= 1; S >= Lw - (BOS ? 1 : 0) means non-overlapping windows; 0 means that too */
    int32_t bos_id;  /* < 0: no BOS; else every window starts with it and holds Lw - 1 document tokens */
    int short_docs;  /* LCX_PPL_SHORT_* */
    int truncate;    /* nonzero: score only the first window of each document (YaRN --truncate) */
    int one_pass;    /* with truncate: every length from one pass per document at the longest length (a causal
                        model's first L positions do not see later ones). Only for scorers whose results do not
                        depend on the pass length: not with dynamic NTK or longrope, whose tables do. */
    int shard, n_shards; /* n_shards > 1: score only the windows (with one_pass: the documents) whose index, counted
                            over the whole evaluation in its fixed order, is shard modulo n_shards. The others add
                            nothing to nll_sum, window_nll_sum, tokens and windows (docs and docs_skipped count
                            every document), so the n_shards results summed are the whole (lcx_ppl_result_finish
                            then gives the means). 0 or 1: every window */
} lcx_ppl_config;

typedef struct lcx_ppl_doc {
    const int32_t *tokens; /* [n] document tokens, no BOS */
    int64_t n;
} lcx_ppl_doc;

typedef struct lcx_ppl_result {
    int64_t length;       /* Lw */
    int64_t stride;       /* effective stride in document tokens */
    int64_t docs;         /* documents scored */
    int64_t docs_skipped; /* too short (or not scorable at all: 0 tokens, or 1 token without BOS) */
    int64_t windows;      /* forward passes that scored at least one token */
    int64_t tokens;       /* tokens scored (each document token at most once) */
    double nll_sum;
    double window_nll_sum;  /* sum over windows of each window's mean NLL */
    double mean_nll;        /* nll_sum / tokens: token-weighted (our headline number) */
    double ppl;             /* exp(mean_nll) */
    double window_mean_nll; /* mean over windows of each window's mean NLL (YaRN eval scripts) */
    double ppl_window_mean; /* exp(window_mean_nll) */
} lcx_ppl_result;

/* r's means and perplexities from its sums: mean_nll = nll_sum / tokens, window_mean_nll = window_nll_sum /
 * windows (NaN without tokens or windows), ppl and ppl_window_mean their exp. */
void lcx_ppl_result_finish(lcx_ppl_result *r);

/* The default lengths (docs/evaluation-protocol.md "The command: `lcextend eval`"): the original context, then
 * every power of two above it up to the
 * target, then the target itself if it is not one of those (ascending, no duplicates). E.g. (4096, 131072) ->
 * 4096 8192 ... 131072; (3000, 20000) -> 3000 4096 8192 16384 20000. Fails if 2 <= orig <= target does not
 * hold or more than cap lengths would result. */
lcx_status lcx_eval_default_lengths(int64_t orig, int64_t target, int64_t *out, int cap, int *n);

/* Evaluate every length of cfg on the documents; results[i] belongs to cfg->lengths[i]. A length where no
 * token was scored gets tokens = 0 and NaN means (not an error). Fails on bad config or a scorer failure
 * (its message gets "ppl length L, document d, window at token b: " in front). */
lcx_status lcx_ppl_eval(const lcx_ppl_config *cfg, const lcx_ppl_doc *docs, int64_t n_docs,
                        lcx_eval_score_fn score, void *model, lcx_ppl_result *results);

/* ---- passkey retrieval ---------------------------------------------------------------------------------- */

/* The standard sentences (landmark attention / YaRN passkey test). The prompt is the lines
 *   TASK \n PREFIX-FILLER \n KEY-LINE \n SUFFIX-FILLER \n QUESTION
 * where filler is FILLER repeated, joined by single spaces, and the key line is
 *   "The pass key is K. Remember it. K is the pass key."
 * With N > 1 needles (multi-key retrieval, as RULER's niah_multikey) every needle has a name and its own line
 *   "The pass key of the NAME is K. Remember it. K is the pass key of the NAME."
 * the question asks for one of them, "What is the pass key of the NAME? The pass key of the NAME is", and the
 * other needles' keys, present in the context, are the hardest wrong answers. */
extern const char LCX_PASSKEY_TASK[];
extern const char LCX_PASSKEY_FILLER[];
extern const char LCX_PASSKEY_QUESTION[];

typedef struct lcx_passkey_prompt {
    int32_t *tokens;      /* [n] BOS first when the tokenizer has one */
    int64_t n;            /* <= target, and target - n < tokens of one filler word (see docs) */
    int64_t key_pos;      /* token index where the key line starts */
    int64_t units_before; /* whole filler units before / after the key line */
    int64_t units_after;
    int64_t extra_words;  /* words of one more filler unit appended to the suffix filler to fill up */
    uint32_t key;         /* the queried needle's */
    int n_needles;
    char *text;           /* the prompt text (without BOS), NUL-terminated */
    size_t text_len;
} lcx_passkey_prompt;

/* Build the prompt for a target length in tokens (BOS included) with the key line after
 * round(depth * units) of the whole filler units (depth in [0, 1]). Fails with LCX_ERR_INVALID when even the
 * prompt without filler is longer than target. */
lcx_status lcx_passkey_prompt_build(const lcx_eval_tokenizer *tok, int64_t target, double depth, uint32_t key,
                                    lcx_passkey_prompt *out);
void lcx_passkey_prompt_free(lcx_passkey_prompt *p); /* NULL and zeroed are no-ops */

#define LCX_NEEDLE_NAMES 32 /* the most needles a prompt can have: one name each */
/* Needle i's name (i in [0, LCX_NEEDLE_NAMES)), else NULL. */
const char *lcx_needle_name(int i);
/* Depth of the j-th of n needles that is not asked for (j in [1, n)): (j - 1/2) / (n - 1), evenly spread and never
 * at 0 or 1, where the queried needle's depths are measured. */
double lcx_needle_depth(int j, int n_needles);
/* n distinct name indices for (seed, trial): names[0] the queried needle's. A prefix does not depend on n. */
void lcx_needle_names(uint64_t seed, int64_t trial, int n, int *names);

typedef struct lcx_passkey_prompt_spec {
    double depth;          /* the queried needle's, in [0, 1] */
    const uint32_t *keys;  /* [n_needles] distinct; keys[0] is asked for */
    const int *names;      /* [n_needles] distinct name indices (only read when n_needles > 1) */
    int n_needles;         /* 1 .. LCX_NEEDLE_NAMES; needle j >= 1 at lcx_needle_depth(j, n_needles) */
    const char *haystack;  /* NULL: the repeated filler; else a text whose words (runs of non-space bytes) are the
                              units, read from its start, joined by single spaces, wrapping around (no extra words) */
    size_t haystack_len;
} lcx_passkey_prompt_spec;
/* The same for any number of needles: needle i after round(depth_i * units) whole filler units, the lines in that
 * order (needle order when equal), key_pos / key / units_before the queried needle's; n falls short of target by
 * less than a filler word and a line break (one more unit may open a stretch of filler between two needles). One
 * needle gives lcx_passkey_prompt_build's prompt, byte for byte. */
lcx_status lcx_passkey_prompt_build_spec(const lcx_eval_tokenizer *tok, int64_t target,
                                         const lcx_passkey_prompt_spec *ps, lcx_passkey_prompt *out);

/* Tokens of the answer " K" as they follow the prompt: encode(text + " " + K) minus the prompt's tokens.
 * Fails (LCX_ERR_UNSUPPORTED) if the prompt's tokens are not a prefix of that encoding. Caller frees *ids. */
lcx_status lcx_passkey_answer_tokens(const lcx_eval_tokenizer *tok, const lcx_passkey_prompt *p, uint32_t key,
                                     int32_t **ids, int64_t *n);

/* Deterministic 5-digit keys (10000..99999) for (seed, trial), n <= 90000 of them, all different: keys[0] is
 * the trial's pass key, keys[1..n) its distractors. A prefix does not depend on n. */
void lcx_passkey_keys(uint64_t seed, int64_t trial, int n, uint32_t *keys);

enum {
    LCX_PASSKEY_LOGLIK = 1, /* rank-1 of the key's log-likelihood among the key, the other needles' keys and K
                               distractors */
    LCX_PASSKEY_GREEDY = 2, /* greedy decode of the key's tokens (teacher-forced argmax, one pass) */
};

typedef struct lcx_passkey_config {
    const int64_t *lengths; /* [n_lengths] prompt lengths in tokens, BOS included */
    int n_lengths;
    const double *depths;   /* [n_depths] in [0, 1] */
    int n_depths;
    int trials;             /* per (length, depth); trial t's key is the same in every cell */
    int distractors;        /* K >= 1 for LCX_PASSKEY_LOGLIK */
    int modes;              /* LCX_PASSKEY_* bits */
    uint64_t seed;
    int needles;            /* keys in each prompt, one asked for (0 or 1: the classic passkey test) */
    const char *haystack;   /* NULL: the repeated filler; else a text (lcx_passkey_prompt_spec) */
    size_t haystack_len;
    int shard, n_shards;    /* n_shards > 1: run only the trials whose index (l n_depths + d) trials + t is shard
                               modulo n_shards; the result's counts are then this shard's, and the n_shards results
                               summed cell by cell are the whole (prompt_tokens: the last trial's owner's). 0 or 1:
                               every trial */
} lcx_passkey_config;

typedef struct lcx_passkey_result {
    int n_lengths, n_depths, trials, distractors, modes;
    int64_t *lengths;       /* [n_lengths] copy */
    double *depths;         /* [n_depths] copy */
    int64_t *prompt_tokens; /* [n_lengths * n_depths] prompt length of the last trial (<= target); 0 in a shard
                               that did not run it */
    int *loglik_correct;    /* [n_lengths * n_depths], cell (l, d) at l * n_depths + d */
    int *greedy_correct;    /* [n_lengths * n_depths] */
    int needles;            /* keys in each prompt (>= 1; 0 read as 1) */
    int *loglik_confused;   /* [n_lengths * n_depths] loglik misses whose lowest NLL was another key of the prompt
                               (needles > 1; NULL or 0 otherwise) */
} lcx_passkey_result;

/* Run trials x depths x lengths. score is needed for LCX_PASSKEY_LOGLIK, argmax for LCX_PASSKEY_GREEDY. */
lcx_status lcx_passkey_eval(const lcx_passkey_config *cfg, const lcx_eval_tokenizer *tok,
                            lcx_eval_score_fn score, lcx_eval_argmax_fn argmax, void *model,
                            lcx_passkey_result *out);
void lcx_passkey_result_free(lcx_passkey_result *r); /* NULL and zeroed are no-ops */
/* Accuracy of one cell for one mode (correct / trials); NaN when that mode did not run. */
double lcx_passkey_accuracy(const lcx_passkey_result *r, int mode, int length_idx, int depth_idx);

/* ---- output: JSON (jansson) and standalone SVG pictures ------------------------------------------------- */

typedef struct json_t json_t;
/* {"protocol": {...}, "results": [{"length", "stride", "docs", ..., "ppl", "ppl_window_mean"}]}; a
 * non-finite number becomes null. New reference, NULL on OOM. */
json_t *lcx_ppl_to_json(const lcx_ppl_config *cfg, const lcx_ppl_result *results, const char *series);
/* Read back what lcx_ppl_to_json wrote (one file per stage, drawn together later). *results is a heap array
 * of *n entries (caller frees), *series a heap copy of "series" or NULL. `what` (a file name) starts every
 * error message, e.g. "stage2.json: results[3]: 'tokens' is missing or not a non-negative integer". */
lcx_status lcx_ppl_from_json(const json_t *root, const char *what, lcx_ppl_result **results, int *n,
                             char **series);
/* {"lengths", "depths", "trials", "distractors", "needles", "cells": [{"length", "depth", "prompt_tokens", ...}]} */
json_t *lcx_passkey_to_json(const lcx_passkey_result *r);
/* Atomically write a JSON value (indent 2, trailing newline). */
lcx_status lcx_eval_json_write(const char *path, const json_t *value);
/* The same, never replacing anything at path (a user's output: docs/reliability.md "Outputs"). */
lcx_status lcx_eval_json_write_new(const char *path, const json_t *value);

typedef struct lcx_plot_series {
    const char *name; /* legend text */
    const double *x;  /* [n] context lengths, > 0 */
    const double *y;  /* [n] perplexities; non-finite or <= 0 points are left out (the line breaks) */
    int n;
} lcx_plot_series;

/* Perplexity vs context length: log2 x axis, log10 y axis when max/min > 8 (linear otherwise), a line per
 * series, legend, axis labels and ticks. *svg is a heap string (caller frees). */
lcx_status lcx_svg_ppl_plot(const lcx_plot_series *series, int n_series, const char *title, char **svg);
/* Passkey heat map for one mode: columns = lengths, rows = depths, cell colour = accuracy (red 0 .. green 1)
 * with the percentage written in each cell, and a colour bar. */
lcx_status lcx_svg_passkey_heatmap(const lcx_passkey_result *r, int mode, const char *title, char **svg);
lcx_status lcx_svg_write(const char *path, const char *svg); /* atomic */

#endif /* LCX_EVAL_H */
