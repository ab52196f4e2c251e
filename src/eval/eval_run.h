/* eval_run: one evaluation (perplexity by length and passkey retrieval) as `lcextend eval` reports and stores it,
 * shared by `lcextend eval` and the before/after evaluation of `lcextend CKPT --to N`, so both give the same
 * numbers, tables and JSON for the same model. Nothing here writes to the terminal: tables and progress go to an
 * lcx_reporter (src/core/report.h). */
#ifndef LCX_EVAL_EVAL_RUN_H
#define LCX_EVAL_EVAL_RUN_H

#include <jansson.h>
#include <stdint.h>

#include "src/core/report.h"
#include "src/core/status.h"
#include "src/eval/eval.h"
#include "src/model/model.h"
#include "src/tokenizer/tokenizer.h"

/* Documents of a tokdata set PREFIX.bin/.idx, each its sequences concatenated, a leading BOS (bos >= 0)
 * dropped (the window adds its own); ids must be below vocab. *docs points into *store (free both). */
lcx_status lcx_eval_load_docs(const char *prefix, int32_t bos, int64_t vocab, lcx_ppl_doc **docs, int64_t *n,
                              int32_t **store);

/* BOS of the evaluation windows: the tokenizer's when there is one, else config.json's; -1 when none is inside
 * the vocabulary. */
int32_t lcx_eval_bos(const lcx_tokenizer *tok, const lcx_model_config *cfg);

typedef struct lcx_eval_spec {
    const char *label;       /* the model as reported and stored as "checkpoint" */
    const char *series;      /* the perplexity series name in the JSON */
    const char *data_name;   /* reported: where the documents came from */
    const lcx_ppl_doc *docs; /* NULL: no perplexity */
    int64_t n_docs;
    lcx_ppl_config ppl;      /* lengths, stride, bos_id, short_docs */
    lcx_passkey_config pk;   /* trials 0: no passkey (then tok may be NULL) */
    const char *haystack_name; /* pk.haystack's file, as reported and stored (NULL: the repeated filler) */
    int quiet;               /* no progress states */
    double progress_s;       /* the least seconds between two progress states (0: 2) */
    struct lcx_comm *tp, *cp; /* the model's TP and CP groups (opts.tp_comm, opts.cp_comm; NULL: none): stored in the
                                 JSON and deciding who writes (lcx_eval_writes) */
    struct lcx_comm *replicas; /* NULL (or only the CP group's ranks): this model does all the work. Else the ranks
                                  holding the same TP rank of copies of the model, a copy's CP ranks consecutive
                                  (rank = CP rank + CP x copy: the gradient group's order, or the DP group without
                                  CP): copy k of K scores shard k of the windows and trials (lcx_ppl_config /
                                  lcx_passkey_config .shard), the sums are gathered and added in copy order before
                                  anything is reported, so every rank reports and returns the same results */
} lcx_eval_spec;

/* Evaluate m, a forward-only model (training = 0) whose max_tokens covers the longest window and passkey prompt
 * + 16 (under CP: lcx_cp_local_len of it): report the perplexity table and the passkey tables as RESULT lines (the
 * text `lcextend eval` prints), progress as "perplexity" / "passkey" forward passes (at most one state every two
 * seconds), events
 *   "ppl":     checkpoint, length, ppl, window_mean, tokens, windows, docs (one per length)
 *   "passkey": checkpoint, mode ("greedy" | "loglik"), length, depth, accuracy in [0, 1] (one per mode x cell)
 * (ppl / accuracy null when nothing was scored), fill res[ppl.n_lengths] and *pk (lcx_passkey_result_free it) and
 * return the JSON of `lcextend eval --json` in *root: {"checkpoint", "perplexity"?, "passkey"?, "tp"?, "cp"?,
 * "replicas"?} (the layout, each when above 1). Perplexity windows run one forward pass each; the passkey runs
 * through a KV cache (src/eval/eval_model.h lcx_eval_lm; none under CP) so each prompt is computed once for the
 * key, its distractors and the greedy check. r may be NULL. */
lcx_status lcx_eval_run(const lcx_eval_spec *s, lcx_model *m, lcx_tokenizer *tok, lcx_ppl_result *res,
                        lcx_passkey_result *pk, json_t **root, const lcx_reporter *r);

/* The options of the forward-only model s evaluates (`lcextend eval` and the main command alike, so their numbers
 * are the same): *mo cleared, then max_tokens (a CP rank's share of lcx_eval_max_tokens), the evaluation's MLP
 * chunk (LCX_EVAL_MLP_CHUNK) and s's TP and CP groups; the caller adds the dtype, backend and logits chunk. */
void lcx_eval_model_opts(const lcx_eval_spec *s, lcx_model_opts *mo);

/* Where a rank may have failed alone (a file, memory) before the evaluation: st agreed over s's TP group, then its
 * CP group, then the replicas (lcx_comm_agree), so that no rank waits in the evaluation's collectives for one that
 * stopped. */
lcx_status lcx_eval_agree(const lcx_eval_spec *s, lcx_status st);

/* Whether this rank writes the evaluation's files: rank 0 of the TP group, the CP group and the replicas (every
 * rank holds the same results). */
int lcx_eval_writes(const lcx_eval_spec *s);

/* The shards of a perplexity evaluation added up (lcx_ppl_config.shard): res[n] on every rank of g becomes the sum
 * of the results of ranks 0, every, 2 every, ... (the others hold copies of those: e.g. the CP ranks of one
 * shard), tokens, windows and NLL sums, added in rank order, then finished (lcx_ppl_result_finish); docs and
 * docs_skipped stay as they are (every shard counts every document). g->size must be a multiple of every. */
lcx_status lcx_ppl_results_gather(struct lcx_comm *g, int every, lcx_ppl_result *res, int n);

/* The text of a --haystack file (at most 256 MiB, 50M+ tokens: a few times any prompt), for pk.haystack; errors
 * start with "--haystack: " and name the file. Caller frees *text. */
lcx_status lcx_eval_read_haystack(const char *path, char **text, size_t *len);

/* Fails, naming the length, when the passkey prompt (without filler) does not fit one of pk's lengths: lets a
 * command refuse such lengths before any work. */
lcx_status lcx_eval_check_passkey(const lcx_passkey_config *pk, lcx_tokenizer *tok, int32_t bos);

/* Largest window the spec needs (the model's max_tokens): perplexity lengths, passkey lengths + 16 (the answer). */
int64_t lcx_eval_max_tokens(const lcx_eval_spec *s);

#endif
