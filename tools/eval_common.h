/* eval_common: one evaluation (perplexity by length and passkey retrieval) as `lcextend eval` prints and stores
 * it, shared by `lcextend eval` and the before/after evaluation of `lcextend CKPT --to N`, so both give the same
 * numbers, tables and JSON for the same model. */
#ifndef LCX_TOOLS_EVAL_COMMON_H
#define LCX_TOOLS_EVAL_COMMON_H

#include <jansson.h>
#include <stdint.h>

#include "src/eval/eval.h"
#include "src/model/model.h"
#include "src/core/status.h"
#include "src/tokenizer/tokenizer.h"

/* Documents of a tokdata set PREFIX.bin/.idx, each its sequences concatenated, a leading BOS (bos >= 0)
 * dropped (the window adds its own); ids must be below vocab. *docs points into *store (free both). */
lcx_status lcx_cli_eval_load_docs(const char *prefix, int32_t bos, int64_t vocab, lcx_ppl_doc **docs, int64_t *n,
                                  int32_t **store);

/* BOS of the evaluation windows: the tokenizer's when there is one, else config.json's; -1 when none is inside
 * the vocabulary. */
int32_t lcx_cli_eval_bos(const lcx_tokenizer *tok, const lcx_model_config *cfg);

typedef struct lcx_cli_eval_spec {
    const char *label;       /* the model as printed and stored as "checkpoint" */
    const char *series;      /* the perplexity series name in the JSON */
    const char *data_name;   /* printed: where the documents came from */
    const lcx_ppl_doc *docs; /* NULL: no perplexity */
    int64_t n_docs;
    lcx_ppl_config ppl;      /* lengths, stride, bos_id, short_docs */
    lcx_passkey_config pk;   /* trials 0: no passkey (then tok may be NULL) */
    int quiet;               /* no progress lines on stderr */
} lcx_cli_eval_spec;

/* Evaluate m, a forward-only model (training = 0) whose max_tokens covers the longest window and passkey prompt
 * + 16: print the perplexity table and the passkey tables on stdout, fill res[ppl.n_lengths] and *pk
 * (lcx_passkey_result_free it) and return the JSON of `lcextend eval --json` in *root: {"checkpoint",
 * "perplexity"?, "passkey"?}. Perplexity windows run one forward pass each; the passkey runs through a KV cache
 * (src/eval/eval_model.h lcx_eval_lm) so each prompt is computed once for the key, its distractors and the greedy
 * check. */
lcx_status lcx_cli_eval_run(const lcx_cli_eval_spec *s, lcx_model *m, lcx_tokenizer *tok, lcx_ppl_result *res,
                            lcx_passkey_result *pk, json_t **root);

/* Fails, naming the length, when the passkey prompt (without filler) does not fit one of pk's lengths: lets a
 * command refuse such lengths before any work. */
lcx_status lcx_cli_eval_check_passkey(const lcx_passkey_config *pk, lcx_tokenizer *tok, int32_t bos);

/* Largest window the spec needs (the model's max_tokens): perplexity lengths, passkey lengths + 16 (the answer). */
int64_t lcx_cli_eval_max_tokens(const lcx_cli_eval_spec *s);

#endif
