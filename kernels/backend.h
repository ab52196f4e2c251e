/* backend: the compute contract. One table of function pointers, implemented by the CPU backend (kernels/cpu,
 * the reference: clear loops, float32 math) and later by CUDA (kernels/cuda). The model, the trainer and the
 * parallel algorithms are written once against this table.
 *
 * Conventions for every op below
 * - Pointers named "device" live in the backend's memory (host memory for CPU). Scalars and host outputs
 *   (loss sums, norms) are plain host values.
 * - Tensors are dense, row-major, outermost dimension first; each argument's comment gives its shape.
 *   Sizes are int64_t element counts. Activations and gradients are float32; where a weight may also be stored
 *   as bfloat16 the op takes its lcx_dtype (LCX_F32 or LCX_BF16).
 * - "accumulated" outputs are added to (+=): the caller zeroes them first. Every other output is overwritten.
 * - Every op returns LCX_OK or fails with LCX_ERR_INVALID (bad sizes, out-of-range ids/targets/positions: input
 *   data is never asserted) or LCX_ERR_UNSUPPORTED (a dtype or size the backend cannot handle) with a message.
 * - Determinism: on the CPU backend every op except matmul gives bit-identical results for any OpenMP thread
 *   count (fixed work partition, reductions in a fixed order, no float atomics). Matmul is bit-identical from
 *   run to run at a fixed thread count (OpenBLAS may block differently for other thread counts).
 * - Backends keep process-global state (one device per process, as with one MPI rank per GPU). Ops may run
 *   asynchronously on a device; `sync` waits for them. Host outputs (loss sum, norm) are complete on return.
 *
 * Llama conventions: linear layers hold HF weights W [out, in] and compute y = x W^T (matmul with trans_b = 1);
 * RoPE uses the HF "rotate_half" layout (dimension i pairs with i + rot_dim/2); attention q/k/v are
 * [tokens, heads, head_dim]; GQA maps query head h to key/value head h / (n_heads / n_kv_heads). */
#ifndef LCX_KERNELS_BACKEND_H
#define LCX_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "src/status.h"
#include "src/tensor.h"

/* Target id that contributes nothing to the loss (PyTorch's default ignore_index). */
#define LCX_IGNORE_INDEX (-100)

/* Which keys a query sees in one attention call (positions are global: q_offset + i, k_offset + j). */
typedef enum lcx_attn_mask {
    LCX_MASK_CAUSAL = 0, /* key visible iff k_offset + j <= q_offset + i */
    LCX_MASK_FULL,       /* every key visible */
    LCX_MASK_NONE,       /* no key visible: every row fully masked (O = 0, LSE = -inf) */
} lcx_attn_mask;

/* C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] for b in [0, batch), accumulation in float32.
 * op(A) is [m, k]: A is stored [m, k] (trans_a = 0) or [k, m] (trans_a = 1); op(B) is [k, n]: B is stored
 * [k, n] (trans_b = 0) or [n, k] (trans_b = 1). y = x W^T with W [out, in]: A = x [t, in], B = W, trans_b = 1.
 * Leading dimensions are in elements (row strides of the stored matrices); 0 means dense (the stored row length).
 * Batch strides are in elements; 0 means the operand is shared by every batch entry.
 * beta = 0 overwrites C (its old contents, even NaN, are ignored). */
typedef struct lcx_matmul_args {
    int trans_a, trans_b;
    int64_t m, n, k, batch;  /* batch >= 1 */
    float alpha, beta;
    lcx_dtype a_dtype;       /* LCX_F32 or LCX_BF16 */
    const void *a;           /* device [batch][m, k] or [batch][k, m] (trans_a), row stride lda */
    int64_t lda, stride_a;
    lcx_dtype b_dtype;       /* LCX_F32 or LCX_BF16 */
    const void *b;           /* device [batch][k, n] or [batch][n, k] (trans_b), row stride ldb */
    int64_t ldb, stride_b;
    float *c;                /* device [batch][m, n], row stride ldc */
    int64_t ldc, stride_c;
} lcx_matmul_args;

/* Attention over one query block and one key block (one ring step of context parallelism).
 * n_heads % n_kv_heads == 0; query head h reads key/value head h / (n_heads / n_kv_heads). */
typedef struct lcx_attn_args {
    int64_t n_q, n_k;          /* query and key rows in this block (either may be 0) */
    int64_t n_heads, n_kv_heads, head_dim;
    int64_t q_offset, k_offset; /* global position of query row 0 and key row 0 (used by LCX_MASK_CAUSAL) */
    lcx_attn_mask mask;
    float scale;               /* softmax scale, usually 1/sqrt(head_dim) */
} lcx_attn_args;

/* AdamW hyper-parameters for one step (PyTorch torch.optim.AdamW semantics, see `adamw`). */
typedef struct lcx_adamw_args {
    double lr, beta1, beta2, eps, weight_decay; /* host scalars in double, as PyTorch keeps them */
    int64_t step;      /* 1-based step count t used for bias correction */
    double grad_scale; /* gradient multiplier applied before the update (clipping coefficient; 1 = none) */
} lcx_adamw_args;

typedef struct lcx_backend {
    const char *name; /* "cpu", "cuda" */

    /* ---- memory ------------------------------------------------------------------------------------- */
    /* *out = device buffer of `bytes` bytes (64-byte aligned, contents undefined); bytes 0 gives a valid
     * pointer that can be freed. Fails with LCX_ERR_OOM naming the size. */
    lcx_status (*alloc)(size_t bytes, void **out);
    void (*free)(void *p); /* free(NULL) is a no-op */
    lcx_status (*copy_h2d)(void *dst_device, const void *src_host, size_t bytes);
    lcx_status (*copy_d2h)(void *dst_host, const void *src_device, size_t bytes);
    lcx_status (*copy_d2d)(void *dst_device, const void *src_device, size_t bytes); /* may not overlap */
    lcx_status (*zero)(void *p_device, size_t bytes);
    lcx_status (*sync)(void); /* wait for all queued work */

    /* ---- linear algebra ----------------------------------------------------------------------------- */
    lcx_status (*matmul)(const lcx_matmul_args *args);

    /* ---- embedding (vocab-parallel ready) ----------------------------------------------------------- */
    /* out[t, :] = weight[ids[t] - vocab_start, :] when vocab_start <= ids[t] < vocab_start + n_rows, else 0
     * (another TP rank owns that row). Every id must satisfy 0 <= id < n_vocab (the global vocabulary).
     *   ids    device int32 [n_tokens]
     *   weight device [n_rows, dim] of w_dtype (LCX_F32 or LCX_BF16): rows vocab_start .. vocab_start+n_rows-1
     *   out    device f32 [n_tokens, dim] */
    lcx_status (*embedding_fwd)(const int32_t *ids, const void *weight, lcx_dtype w_dtype, float *out,
                                int64_t n_tokens, int64_t n_rows, int64_t dim, int64_t vocab_start,
                                int64_t n_vocab);
    /* dweight[ids[t] - vocab_start, :] += dout[t, :] for the ids in this shard's range (scatter-add, in token
     * order per row). Same id checks as the forward.
     *   ids     device int32 [n_tokens]
     *   dout    device f32 [n_tokens, dim]
     *   dweight device f32 [n_rows, dim], accumulated */
    lcx_status (*embedding_bwd)(const int32_t *ids, const float *dout, float *dweight, int64_t n_tokens,
                                int64_t n_rows, int64_t dim, int64_t vocab_start, int64_t n_vocab);

    /* ---- RMSNorm: y = w * x / sqrt(mean(x^2) + eps), float32 math ---------------------------------- */
    /*   x    device f32 [n_rows, dim]
     *   w    device f32 [dim]
     *   y    device f32 [n_rows, dim] (may alias x)
     *   rstd device f32 [n_rows]: 1/sqrt(mean(x^2)+eps), saved for the backward (NULL: not saved) */
    lcx_status (*rmsnorm_fwd)(const float *x, const float *w, float *y, float *rstd, int64_t n_rows, int64_t dim,
                              float eps);
    /*   dy   device f32 [n_rows, dim]
     *   x    device f32 [n_rows, dim] (the forward input)
     *   w    device f32 [dim]
     *   rstd device f32 [n_rows] (from the forward)
     *   dx   device f32 [n_rows, dim], overwritten (may alias dy)
     *   dw   device f32 [dim], accumulated */
    lcx_status (*rmsnorm_bwd)(const float *dy, const float *x, const float *w, const float *rstd, float *dx,
                              float *dw, int64_t n_rows, int64_t dim);

    /* ---- RoPE (HF rotate_half layout, partial rotary) ----------------------------------------------- */
    /* For each token t, head h and i < rot_dim/2, with p = pos[t], c = cos[p, i], s = sin[p, i]:
     *   out[i] = x[i] c - x[i + rot_dim/2] s,  out[i + rot_dim/2] = x[i + rot_dim/2] c + x[i] s;
     * dims rot_dim .. head_dim-1 pass through. Tables come from src/rope (attention scaling folded in).
     *   x        device f32 [n_tokens, n_heads, head_dim]
     *   out      device f32 [n_tokens, n_heads, head_dim] (may alias x)
     *   pos      device int32 [n_tokens]: global positions, 0 <= pos < n_pos
     *   cos, sin device f32 [n_pos, rot_dim/2]
     * rot_dim is even and <= head_dim. */
    lcx_status (*rope_fwd)(const float *x, float *out, const int32_t *pos, const float *cos, const float *sin,
                           int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t n_pos);
    /* The transpose rotation (rotation by -angle) applied to dout: same shapes as rope_fwd; dx may alias dout. */
    lcx_status (*rope_bwd)(const float *dout, float *dx, const int32_t *pos, const float *cos, const float *sin,
                           int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t n_pos);

    /* ---- attention (flash-style: O(n) memory, online softmax, never an n x n matrix) ----------------- */
    /* O = softmax(scale * Q K^T + mask) V per head, and LSE = log(sum_j exp(scale * q.k_j)) over visible keys
     * (natural log, of the scaled scores). A row with no visible key gets O = 0 and LSE = -inf.
     *   q   device f32 [n_q, n_heads, head_dim]
     *   k,v device f32 [n_k, n_kv_heads, head_dim]
     *   o   device f32 [n_q, n_heads, head_dim]
     *   lse device f32 [n_q, n_heads] */
    lcx_status (*attention_fwd)(const lcx_attn_args *args, const float *q, const float *k, const float *v,
                                float *o, float *lse);
    /* Flash-attention-2 backward for one (query block, key block) pair: D = rowsum(dO * O),
     * P = exp(scale q.k - LSE), dV += P^T dO, dS = P (dO V^T - D), dQ += scale dS K, dK += scale dS^T Q.
     * o and lse are the FINAL output and log-sum-exp of the rows (after merging all key blocks), so calling this
     * once per key block and summing gives the gradient of the full attention.
     *   q, o, dout  device f32 [n_q, n_heads, head_dim]
     *   k, v        device f32 [n_k, n_kv_heads, head_dim]
     *   lse         device f32 [n_q, n_heads]
     *   dq          device f32 [n_q, n_heads, head_dim], accumulated
     *   dk, dv      device f32 [n_k, n_kv_heads, head_dim], accumulated */
    lcx_status (*attention_bwd)(const lcx_attn_args *args, const float *q, const float *k, const float *v,
                                const float *o, const float *lse, const float *dout, float *dq, float *dk,
                                float *dv);
    /* Combine a partial result into an accumulator, in float32 with the safe formula
     * lse = max + log(exp(a - max) + exp(b - max)), O = O_a exp(a - lse) + O_b exp(b - lse). Rows where both are
     * -inf stay O = 0, LSE = -inf.
     *   o_acc   device f32 [n_rows, n_heads, head_dim], updated
     *   lse_acc device f32 [n_rows, n_heads], updated
     *   o_part  device f32 [n_rows, n_heads, head_dim]
     *   lse_part device f32 [n_rows, n_heads] */
    lcx_status (*attention_merge)(float *o_acc, float *lse_acc, const float *o_part, const float *lse_part,
                                  int64_t n_rows, int64_t n_heads, int64_t head_dim);

    /* ---- SwiGLU MLP activation: h = silu(gate) * up, silu(g) = g / (1 + exp(-g)) ---------------------- */
    /*   gate, up, h device f32 [n] (any shape, n elements; h may alias gate or up) */
    lcx_status (*swiglu_fwd)(const float *gate, const float *up, float *h, int64_t n);
    /*   dh, gate, up device f32 [n]; dgate, dup device f32 [n], overwritten (dgate may alias gate, dup up) */
    lcx_status (*swiglu_bwd)(const float *dh, const float *gate, const float *up, float *dgate, float *dup,
                             int64_t n);

    /* ---- cross-entropy on a chunk of logits ----------------------------------------------------------- */
    /* For each row r with targets[r] != LCX_IGNORE_INDEX: loss_r = logsumexp(logits[r, :]) - logits[r, t_r] and
     * dlogits[r, :] = dscale * (softmax(logits[r, :]) - onehot(t_r)); ignored rows get dlogits 0 and no loss.
     * *loss_sum (host) = sum of loss_r in row order, *count (host) = number of rows not ignored. dscale lets the
     * caller divide by the global token count. Targets outside [0, vocab) other than the ignore index fail.
     *   logits  device f32 [n_rows, vocab]
     *   targets device int32 [n_rows]
     *   dlogits device f32 [n_rows, vocab] (may alias logits; NULL: loss only) */
    lcx_status (*cross_entropy)(const float *logits, const int32_t *targets, float *dlogits, int64_t n_rows,
                                int64_t vocab, float dscale, double *loss_sum, int64_t *count);

    /* ---- optimizer ------------------------------------------------------------------------------------ */
    /* One AdamW step, in this order (torch.optim.AdamW): g = grad_scale * grad; p -= lr * weight_decay * p;
     * m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; bc1 = 1 - beta1^t; bc2 = 1 - beta2^t;
     * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). Scalars are formed in double, element math is float32
     * in PyTorch's operation order (m = fma(1-beta1, g-m, m), v = fma((1-beta2) g, g, v*beta2),
     * p = p + ((-lr/bc1) m) / denom); against torch.optim.AdamW (CPU,
     * float32) the moments match bit for bit and the parameters to 1 ulp (tests/unit/test_ops_adamw.c).
     *   param    device f32 [n]: fp32 master weights, updated
     *   grad     device f32 [n]
     *   m, v     device f32 [n]: moments, updated (zero before step 1)
     *   param_bf16 device bf16 (uint16) [n]: RNE copy of the updated param, or NULL */
    lcx_status (*adamw)(const lcx_adamw_args *args, float *param, const float *grad, float *m, float *v,
                        uint16_t *param_bf16, int64_t n);
    /* *out (host) = sum of x[i]^2, accumulated in double in a fixed order. x device f32 [n]. */
    lcx_status (*sqnorm)(const float *x, int64_t n, double *out);

    /* ---- elementwise ---------------------------------------------------------------------------------- */
    /* src device f32 [n] -> dst device bf16 [n] (round to nearest even, as lcx_f32_to_bf16) */
    lcx_status (*cast_f32_to_bf16)(const float *src, uint16_t *dst, int64_t n);
    /* src device bf16 [n] -> dst device f32 [n] (exact) */
    lcx_status (*cast_bf16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    /* out = a + b; a, b, out device f32 [n] (out may alias a or b) */
    lcx_status (*add)(const float *a, const float *b, float *out, int64_t n);
    /* x *= s; x device f32 [n] */
    lcx_status (*scale)(float *x, float s, int64_t n);
    /* y += alpha * x; x, y device f32 [n] */
    lcx_status (*axpy)(float alpha, const float *x, float *y, int64_t n);
} lcx_backend;

/* The backend registered under `name` ("cpu"; "cuda" once the CUDA table exists). NULL, with a detail message
 * listing the available backends, if there is none. */
const lcx_backend *lcx_backend_get(const char *name);

/* The CPU backend (always available). */
const lcx_backend *lcx_backend_cpu(void);

#endif /* LCX_KERNELS_BACKEND_H */
