/* eval_model: the adapters that plug a real model and tokenizer into src/eval's callbacks.
 *   lcx_eval_model_score / lcx_eval_model_argmax: `model` is an lcx_model * (src/model.h) whose max_tokens
 *     covers the longest window; one forward pass per call, logits only for rows first-1 .. n-2, handed out
 *     one loss chunk at a time (lcx_model_forward_logits), so no window x vocab buffer exists.
 *   lcx_eval_tok_encode: `tokenizer` is an lcx_tokenizer * (src/tokenizer.h); encodes without special tokens. */
#ifndef LCX_EVAL_MODEL_H
#define LCX_EVAL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "src/status.h"

lcx_status lcx_eval_model_score(void *model, const int32_t *tokens, int64_t n, int64_t first, double *nll);
lcx_status lcx_eval_model_argmax(void *model, const int32_t *tokens, int64_t n, int64_t first, int32_t *next);
lcx_status lcx_eval_tok_encode(void *tokenizer, const char *text, size_t len, int32_t *ids, int64_t cap,
                               int64_t *n_out);

#endif
