/* eval_model: the adapters that plug a real model and tokenizer into src/eval's callbacks.
 *   lcx_eval_model_score / lcx_eval_model_argmax: `model` is an lcx_model * (src/model/model.h) whose max_tokens
 *     covers the longest window; one forward pass per call, logits only for rows first-1 .. n-2, handed out
 *     one loss chunk at a time (lcx_model_forward_logits), so no window x vocab buffer exists. Under context
 *     parallelism (the model's opts.cp_comm of C > 1 ranks) every rank of the group calls with the same window:
 *     it is padded to a multiple of 2 C, each rank runs its two chunks through the ring and scores its rows, and
 *     the rows' results are all-gathered, so every rank gets the whole window's results, the same bits.
 *   lcx_eval_lm_score / lcx_eval_lm_argmax: `model` is an lcx_eval_lm * (below): the same scores, and with a KV
 *     cache, a prompt shared by consecutive calls (the passkey's key and distractor answers) is run once.
 *   lcx_eval_tok_encode: `tokenizer` is an lcx_tokenizer * (src/tokenizer/tokenizer.h); encodes without special tokens. */
#ifndef LCX_EVAL_MODEL_H
#define LCX_EVAL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "src/model/model.h"
#include "src/core/status.h"

lcx_status lcx_eval_model_score(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll);
lcx_status lcx_eval_model_argmax(void *model, const int32_t *tokens, int64_t n, int64_t first, int32_t *next);
/* A model behind the scorer callbacks, with or without a KV cache. With one, a call on tokens[0..n) with scored
 * tokens from `first` on reuses the cached keys of the longest common prefix of tokens[0..first-1) with the
 * tokens cached by earlier calls, runs the rest in one cached forward (lcx_model_forward_cached) and leaves
 * tokens[0..first-1) cached (the prompt minus its last token, whose logits the call needs). So the first answer
 * to a prompt costs one pass over the prompt, every further one a pass over its own few tokens. The numbers
 * equal the uncached adapter's up to the last bits (other attention tile shapes, docs/model.md "KV cache");
 * the argmax is the same teacher-forced argmax. Under CP the cache holds one whole prompt (tokens[0..first-1),
 * run through the ring) or none, and the rest of each call is a continuation on every rank alike (docs/model.md
 * "KV cache under CP"); a call it cannot serve runs uncached. Without a cache every call is one full forward (what the
 * perplexity windows want: they share no prefix, and memory stays at the forward-only bound). */
typedef struct lcx_eval_lm {
    lcx_model *model;
    lcx_kv_cache *cache;   /* NULL: no cache */
    int32_t *ids;          /* [capacity] ids of the cached tokens */
    int64_t tokens_run;    /* tokens computed by the calls so far */
    int64_t tokens_reused; /* tokens served from the cache */
} lcx_eval_lm;

/* cache_tokens 0: no cache; else a KV cache of that many tokens (the longest window scored with it; longer
 * windows run uncached). A cache needs a forward-only model (training = 0); under context parallelism there is
 * none (every call runs its window through the ring). */
lcx_status lcx_eval_lm_init(lcx_eval_lm *lm, lcx_model *m, int64_t cache_tokens);
void lcx_eval_lm_free(lcx_eval_lm *lm); /* the cache; not the model */
lcx_status lcx_eval_lm_score(void *lm, const int32_t *tokens, int64_t n, int64_t first, double *nll);
lcx_status lcx_eval_lm_argmax(void *lm, const int32_t *tokens, int64_t n, int64_t first, int32_t *next);

lcx_status lcx_eval_tok_encode(void *tokenizer, const char *text, size_t len, int32_t *ids, int64_t cap,
                               int64_t *n_out);

#endif
