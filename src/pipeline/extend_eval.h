/* extend_eval: the before/after evaluation of `lcextend CKPT --to N` (docs/extend.md): the same perplexity +
 * passkey evaluation as `lcextend eval` (src/eval/eval_run.h) of a checkpoint under a given config, stored as
 * RUN/eval/before.json / after.json, and the before/after table reported at the end. */
#ifndef LCX_PIPELINE_EXTEND_EVAL_H
#define LCX_PIPELINE_EXTEND_EVAL_H

#include "src/core/report.h"
#include "src/eval/eval_run.h"

typedef struct lcx_comm lcx_comm; /* src/comm/comm.h */
/* Build a model for cfg on backend be (NULL: the CPU; f32, max_tokens from spec; forward-only), load the weights
 * of checkpoint dir `ckpt` (.lcx) into it, run spec (its tables go to r as RESULT lines), write the JSON of
 * `lcextend eval --json` to json_path and, when the passkey ran and pk_svg is not NULL, its heat map to pk_svg.
 * res[spec->ppl.n_lengths] receives the perplexities. tp (NULL: one rank): the TP group, every rank of it calling
 * with its slice of the weights loaded (src/eval/eval_checkpoint.h tp_comm). cp (NULL: none): the CP group, each
 * rank holding its part of every window (cp_comm there). replicas (NULL: none): the same TP rank of the other
 * copies, a copy's CP ranks consecutive (the gradient group), sharing out the work (src/eval/eval_run.h). Rank 0
 * of all three alone writes the files. The ranks agree once the model is loaded (a failure there returns on every
 * rank); a failure during the evaluation returns on its rank alone, while the others may wait in a collective:
 * the caller ends the job. */
lcx_status lcx_extend_eval_ckpt(const char *ckpt, const lcx_model_config *cfg, const lcx_backend *be, lcx_comm *tp,
                                lcx_comm *cp, lcx_comm *replicas, const lcx_eval_spec *spec, lcx_tokenizer *tok,
                                const char *json_path, const char *pk_svg, lcx_ppl_result *res,
                                const lcx_reporter *r);

/* The table "length | ppl before | ppl after | passkey before | passkey after" (passkey: accuracy over all depths
 * and trials of that length, greedy mode if it ran, else loglik) from two such JSON files, one row per length of
 * either; "-" where a file has no value. Handed to r as one lcx_table (fixed widths: the terminal shows the
 * text `lcextend CKPT --to N` always printed). */
lcx_status lcx_extend_eval_table(const char *before_json, const char *after_json, const lcx_reporter *r);

#endif
