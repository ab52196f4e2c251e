/* model_arena: the exec arena a model needs, from its shape alone: the largest workspace the backend's queries
 * return over every call shape of the forward, the chunked loss and (training) the backward and the optimizer
 * step. Ops share one arena, so it is the largest workspace, not their sum. The model sizes its arena with it;
 * the planner's memory model counts the same bytes for a backend whose queries are host arithmetic (the CPU),
 * without building a model. */
#ifndef LCX_MODEL_ARENA_H
#define LCX_MODEL_ARENA_H

#include <stdint.h>

#include "kernels/backend.h"

/* What one rank computes with: sizes after tensor parallelism (its heads, intermediate and vocabulary rows). */
typedef struct lcx_arena_shape {
    int64_t tokens;                               /* rows of one pass (the model's capacity) */
    int64_t loss_chunk;                           /* rows of one chunk of the output projection + loss */
    int64_t hidden, ffn, vocab;                   /* H, this rank's F and V */
    int64_t heads, kv_heads, head_dim, rot_dim;   /* this rank's heads */
    int64_t n_elems;                              /* this rank's parameters (the gradient norm's sum) */
    int64_t tp;                                   /* TP size: the vocab-parallel loss's finish runs when > 1 */
    int training, ring;                           /* backward shapes; the CP ring's full-mask tasks and merge */
    lcx_dtype adt, pdt;                           /* activations, parameters */
} lcx_arena_shape;

/* Bytes of the largest workspace x's backend needs for any op call of a model of shape s (0 if none does). */
size_t lcx_model_arena(const lcx_exec *x, const lcx_arena_shape *s);

#endif /* LCX_MODEL_ARENA_H */
