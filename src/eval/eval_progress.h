/* eval_progress: the progress of an evaluation's forward passes, for the reporter (src/core/report.h): passes done
 * of those expected, tokens computed per second and the time left. The passes are counted before the work (the
 * perplexity's by a dry walk over the windows, the passkey's as trials x answers) and the ETA weighs each pass by
 * its model FLOPs (the matmuls per token, attention per token and key), so the long windows that come last are
 * not underestimated. Internal to src/eval (eval_run.c). */
#ifndef LCX_EVAL_EVAL_PROGRESS_H
#define LCX_EVAL_EVAL_PROGRESS_H

#include <stdint.h>

#include "src/core/report.h"
#include "src/core/status.h"
#include "src/eval/eval.h"
#include "src/eval/eval_model.h"

typedef struct lcx_eval_progress {
    lcx_eval_lm *lm;            /* the scorer the passes run on (its tokens_run counts what they compute) */
    int quiet;                  /* no states */
    const char *what;           /* "perplexity" / "passkey" */
    int64_t calls, total_calls; /* passes done, expected (0: unknown) */
    int64_t tokens;             /* tokens computed (a cached prefix is not) */
    double cost, total_cost;    /* FLOPs done, expected */
    double per_token, per_key;  /* FLOPs a token costs: 2 x the matmuls' parameters; 4 L nh hd per key it sees */
    double start, last, every;  /* seconds: the phase's start, the last state, the least between two */
    const lcx_reporter *r;
} lcx_eval_progress;

/* For passes of a model of config c through lm; every_s: the least seconds between two states (0: 2). */
void lcx_eval_progress_init(lcx_eval_progress *p, lcx_eval_lm *lm, const lcx_model_config *c, int quiet,
                            double every_s, const lcx_reporter *r);
/* A new phase: the perplexity evaluation of pc over docs (its passes counted by a walk that scores nothing), or
 * the passkey test of kc (its trials x answers; unknown in one-key loglik mode, which stops at the first
 * distractor that wins: then the cost of all of them). */
lcx_status lcx_eval_progress_ppl(lcx_eval_progress *p, const lcx_ppl_config *pc, const lcx_ppl_doc *docs,
                                 int64_t n_docs);
void lcx_eval_progress_passkey(lcx_eval_progress *p, const lcx_passkey_config *kc);
/* src/eval's scorer callbacks (model: the lcx_eval_progress): lm's, then a state when one is due. */
lcx_status lcx_eval_progress_score(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll);
lcx_status lcx_eval_progress_argmax(void *model, const int32_t *tokens, int64_t n, int64_t first, int32_t *next);

#endif
