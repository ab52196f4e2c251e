/* backend_check: the argument checks of every op, for every backend (backend_check.h). The messages name the op
 * and the bad value; sizes and NULL pointers are LCX_ERR_INVALID, dtypes a backend cannot run
 * LCX_ERR_UNSUPPORTED. The arena is checked last, against the backend's own workspace query for these arguments,
 * so the sizes it reads are already known to be valid. */
#include "kernels/backend_check.h"

#include <math.h>

/* A tensor's pointer must be set when the tensor is not empty. */
static lcx_status need(const void *p, int64_t count, const char *op, const char *name) {
    LCX_FAIL_IF(p == NULL && count > 0, LCX_ERR_INVALID, "%s: '%s' is NULL", op, name);
    return LCX_OK;
}

static lcx_status act_check(lcx_dtype dt, const char *op) {
    LCX_FAIL_IF(dt != LCX_F32 && dt != LCX_BF16, LCX_ERR_UNSUPPORTED, "%s: activation dtype %s (use F32 or BF16)",
                op, lcx_dtype_name(dt));
    return LCX_OK;
}

lcx_matmul_args lcx_matmul_resolved(const lcx_matmul_args *a) {
    lcx_matmul_args g = *a;
    if (g.c_dtype == LCX_DTYPE_INVALID) g.c_dtype = LCX_F32;
    const int64_t a_cols = g.trans_a ? g.m : g.k, b_cols = g.trans_b ? g.k : g.n;
    if (g.lda == 0) g.lda = a_cols > 1 ? a_cols : 1;
    if (g.ldb == 0) g.ldb = b_cols > 1 ? b_cols : 1;
    if (g.ldc == 0) g.ldc = g.n > 1 ? g.n : 1;
    return g;
}

static lcx_status matmul_check(const lcx_matmul_args *args) {
    const lcx_matmul_args g = lcx_matmul_resolved(args);
    LCX_FAIL_IF(g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 1, LCX_ERR_INVALID,
                "matmul: bad sizes m=%lld n=%lld k=%lld batch=%lld", (long long)g.m, (long long)g.n,
                (long long)g.k, (long long)g.batch);
    LCX_FAIL_IF((g.a_dtype != LCX_F32 && g.a_dtype != LCX_BF16) || (g.b_dtype != LCX_F32 && g.b_dtype != LCX_BF16) ||
                    (g.c_dtype != LCX_F32 && g.c_dtype != LCX_BF16),
                LCX_ERR_UNSUPPORTED, "matmul: operands must be F32 or BF16 (got A %s, B %s, C %s)",
                lcx_dtype_name(g.a_dtype), lcx_dtype_name(g.b_dtype), lcx_dtype_name(g.c_dtype));
    const int64_t a_cols = g.trans_a ? g.m : g.k, b_cols = g.trans_b ? g.k : g.n;
    LCX_FAIL_IF(g.lda < a_cols || g.ldb < b_cols || g.ldc < g.n || g.lda < 1 || g.ldb < 1 || g.ldc < 1,
                LCX_ERR_INVALID, "matmul: leading dimensions lda=%lld ldb=%lld ldc=%lld too small for m=%lld "
                "n=%lld k=%lld", (long long)g.lda, (long long)g.ldb, (long long)g.ldc, (long long)g.m,
                (long long)g.n, (long long)g.k);
    if (g.m == 0 || g.n == 0) return LCX_OK; /* nothing is read or written */
    LCX_FAIL_IF(g.c == NULL || (g.k > 0 && (g.a == NULL || g.b == NULL)), LCX_ERR_INVALID, "matmul: NULL operand");
    return LCX_OK;
}

static lcx_status embedding_check(const char *op, int bwd, const lcx_embedding_args *a) {
    LCX_FAIL_IF(a->n_tokens < 0 || a->n_rows < 0 || a->dim < 0 || a->vocab_start < 0 ||
                    a->vocab_start + a->n_rows > a->n_vocab,
                LCX_ERR_INVALID, "%s: bad sizes tokens=%lld rows=%lld dim=%lld vocab_start=%lld vocab=%lld", op,
                (long long)a->n_tokens, (long long)a->n_rows, (long long)a->dim, (long long)a->vocab_start,
                (long long)a->n_vocab);
    LCX_TRY(act_check(a->dt, op));
    const int64_t out_n = a->n_tokens * a->dim, w_n = a->n_rows * a->dim;
    if (!bwd) {
        LCX_FAIL_IF(a->w_dtype != LCX_F32 && a->w_dtype != LCX_BF16, LCX_ERR_UNSUPPORTED,
                    "%s: weight dtype %s (use F32 or BF16)", op, lcx_dtype_name(a->w_dtype));
        LCX_TRY(need(a->ids, a->n_tokens, op, "ids"));
        LCX_TRY(need(a->out, out_n, op, "out"));
        return need(a->weight, w_n, op, "weight");
    }
    LCX_TRY(need(a->ids, a->n_tokens, op, "ids"));
    LCX_TRY(need(a->dout, out_n, op, "dout"));
    return need(a->dweight, w_n, op, "dweight");
}

static lcx_status rmsnorm_check(const char *op, int bwd, const lcx_rmsnorm_args *a) {
    const int64_t n = a->n_rows;
    LCX_FAIL_IF(n < 0 || a->dim <= 0, LCX_ERR_INVALID, "%s: bad sizes rows=%lld dim=%lld", op, (long long)n,
                (long long)a->dim);
    LCX_TRY(act_check(a->dt, op));
    if (!bwd) {
        LCX_TRY(need(a->x, n, op, "x"));
        LCX_TRY(need(a->y, n, op, "y"));
        return need(a->w, n, op, "w");
    }
    LCX_TRY(need(a->dy, n, op, "dy"));
    LCX_TRY(need(a->x, n, op, "x"));
    LCX_TRY(need(a->w, n, op, "w"));
    LCX_TRY(need(a->rstd, n, op, "rstd"));
    LCX_TRY(need(a->dx, n, op, "dx"));
    return need(a->dw, n, op, "dw");
}

static lcx_status rope_check(const char *op, const lcx_rope_args *a) {
    const int64_t n_tokens = a->n_tokens, n_heads = a->n_heads, head_dim = a->head_dim, rot_dim = a->rot_dim;
    LCX_FAIL_IF(n_tokens < 0 || n_heads < 0 || head_dim <= 0 || rot_dim < 0 || rot_dim > head_dim ||
                    rot_dim % 2 != 0 || a->n_pos < 0,
                LCX_ERR_INVALID, "%s: bad sizes tokens=%lld heads=%lld head_dim=%lld rot_dim=%lld positions=%lld",
                op, (long long)n_tokens, (long long)n_heads, (long long)head_dim, (long long)rot_dim,
                (long long)a->n_pos);
    LCX_TRY(act_check(a->dt, op));
    LCX_TRY(need(a->x, n_tokens * n_heads, op, "x"));
    LCX_TRY(need(a->out, n_tokens * n_heads, op, "out"));
    LCX_TRY(need(a->pos, n_tokens, op, "pos"));
    LCX_TRY(need(a->cos, rot_dim, op, "cos"));
    return need(a->sin, rot_dim, op, "sin");
}

static lcx_status attention_check(const char *op, int bwd, const lcx_attn_args *a) {
    LCX_FAIL_IF(a->n_q < 0 || a->n_k < 0 || a->n_heads <= 0 || a->n_kv_heads <= 0 || a->head_dim <= 0 ||
                    a->n_heads % a->n_kv_heads != 0,
                LCX_ERR_INVALID, "%s: bad sizes q=%lld k=%lld heads=%lld kv_heads=%lld head_dim=%lld", op,
                (long long)a->n_q, (long long)a->n_k, (long long)a->n_heads, (long long)a->n_kv_heads,
                (long long)a->head_dim);
    LCX_FAIL_IF(a->mask != LCX_MASK_CAUSAL && a->mask != LCX_MASK_FULL && a->mask != LCX_MASK_NONE,
                LCX_ERR_INVALID, "%s: unknown mask mode %d", op, (int)a->mask);
    LCX_FAIL_IF(!isfinite(a->scale), LCX_ERR_INVALID, "%s: scale is not finite", op);
    LCX_TRY(act_check(a->dt, op));
    LCX_TRY(need(a->q, a->n_q, op, "q"));
    LCX_TRY(need(a->o, a->n_q, op, "o"));
    LCX_TRY(need(a->lse, a->n_q, op, "lse"));
    if (bwd) {
        LCX_TRY(need(a->dout, a->n_q, op, "dout"));
        LCX_TRY(need(a->dq, a->n_q, op, "dq"));
    }
    LCX_TRY(need(a->k, a->n_k, op, "k"));
    LCX_TRY(need(a->v, a->n_k, op, "v"));
    if (bwd) {
        LCX_TRY(need(a->dk, a->n_k, op, "dk"));
        LCX_TRY(need(a->dv, a->n_k, op, "dv"));
    }
    return LCX_OK;
}

static lcx_status merge_check(const lcx_attn_merge_args *a) {
    const char *op = "attention_merge";
    const int64_t n = a->n_rows;
    LCX_FAIL_IF(n < 0 || a->n_heads <= 0 || a->head_dim <= 0, LCX_ERR_INVALID,
                "attention_merge: bad sizes rows=%lld heads=%lld head_dim=%lld", (long long)n,
                (long long)a->n_heads, (long long)a->head_dim);
    LCX_TRY(act_check(a->dt, op));
    LCX_TRY(need(a->o_acc, n, op, "o_acc"));
    LCX_TRY(need(a->lse_acc, n, op, "lse_acc"));
    LCX_TRY(need(a->o_part, n, op, "o_part"));
    return need(a->lse_part, n, op, "lse_part");
}

static lcx_status swiglu_check(const char *op, int bwd, const lcx_swiglu_args *a) {
    const int64_t n = a->n;
    LCX_FAIL_IF(n < 0, LCX_ERR_INVALID, "%s: negative size %lld", op, (long long)n);
    LCX_TRY(act_check(a->dt, op));
    if (!bwd) {
        LCX_TRY(need(a->gate, n, op, "gate"));
        LCX_TRY(need(a->up, n, op, "up"));
        return need(a->h, n, op, "h");
    }
    LCX_TRY(need(a->dh, n, op, "dh"));
    LCX_TRY(need(a->gate, n, op, "gate"));
    LCX_TRY(need(a->up, n, op, "up"));
    LCX_TRY(need(a->dgate, n, op, "dgate"));
    return need(a->dup, n, op, "dup");
}

static lcx_status xent_check(const lcx_xent_args *a) {
    const char *op = "cross_entropy";
    const int64_t n_rows = a->n_rows, vocab = a->vocab;
    LCX_FAIL_IF(n_rows < 0 || vocab <= 0, LCX_ERR_INVALID, "cross_entropy: bad sizes rows=%lld vocab=%lld",
                (long long)n_rows, (long long)vocab);
    LCX_TRY(act_check(a->dt, op));
    LCX_TRY(need(a->logits, n_rows, op, "logits"));
    LCX_TRY(need(a->targets, n_rows, op, "targets"));
    if (a->phase != LCX_XENT_WHOLE) {
        LCX_FAIL_IF(a->dt != LCX_F32, LCX_ERR_UNSUPPORTED,
                    "cross_entropy: vocab-parallel phases take F32 logits, not %s", lcx_dtype_name(a->dt));
        LCX_FAIL_IF(a->phase != LCX_XENT_STATS && a->phase != LCX_XENT_FINISH, LCX_ERR_INVALID,
                    "cross_entropy: unknown phase %d", (int)a->phase);
        LCX_FAIL_IF(a->n_valid < 0 || a->n_valid > vocab || a->vocab_start < 0 || a->tp < 1, LCX_ERR_INVALID,
                    "cross_entropy: bad vocab shard (start %lld, %lld valid of %lld columns, tp %d)",
                    (long long)a->vocab_start, (long long)a->n_valid, (long long)vocab, a->tp);
        LCX_TRY(need(a->stats, n_rows, op, "stats"));
    }
    if (a->phase != LCX_XENT_STATS) /* STATS writes the stats only */
        LCX_FAIL_IF(a->loss_sum == NULL || a->count == NULL, LCX_ERR_INVALID,
                    "cross_entropy: NULL loss_sum or count");
    return LCX_OK;
}

static lcx_status adamw_check(const lcx_adamw_args *a) {
    const int64_t n = a->n;
    LCX_FAIL_IF(n < 0 || a->step < 1, LCX_ERR_INVALID, "adamw: bad size %lld or step %lld (steps count from 1)",
                (long long)n, (long long)a->step);
    LCX_FAIL_IF(!(a->beta1 >= 0.0 && a->beta1 < 1.0 && a->beta2 >= 0.0 && a->beta2 < 1.0 && a->eps >= 0.0),
                LCX_ERR_INVALID, "adamw: betas must be in [0, 1) and eps >= 0 (beta1=%g beta2=%g eps=%g)", a->beta1,
                a->beta2, a->eps);
    LCX_TRY(need(a->param, n, "adamw", "param"));
    LCX_TRY(need(a->grad, n, "adamw", "grad"));
    LCX_TRY(need(a->m, n, "adamw", "m"));
    return need(a->v, n, "adamw", "v");
}

static lcx_status sqnorm_check(const lcx_sqnorm_args *a) {
    LCX_FAIL_IF(a->n < 0, LCX_ERR_INVALID, "sqnorm: negative size %lld", (long long)a->n);
    LCX_FAIL_IF(a->out == NULL, LCX_ERR_INVALID, "sqnorm: NULL output");
    return need(a->x, a->n, "sqnorm", "x");
}

static lcx_status cast_check(const lcx_cast_args *a) {
    const int64_t n = a->n;
    LCX_FAIL_IF(n < 0, LCX_ERR_INVALID, "cast: negative size %lld", (long long)n);
    LCX_FAIL_IF((a->src_dt != LCX_F32 && a->src_dt != LCX_BF16) || (a->dst_dt != LCX_F32 && a->dst_dt != LCX_BF16),
                LCX_ERR_UNSUPPORTED, "cast: %s to %s (F32 and BF16 only)", lcx_dtype_name(a->src_dt),
                lcx_dtype_name(a->dst_dt));
    LCX_TRY(need(a->src, n, "cast", "src"));
    return need(a->dst, n, "cast", "dst");
}

/* add reads a and b; scale and axpy read a (and axpy reads out). */
static lcx_status elementwise_check(const char *op, int reads_b, const lcx_elementwise_args *a) {
    const int64_t n = a->n;
    LCX_FAIL_IF(n < 0, LCX_ERR_INVALID, "%s: negative size %lld", op, (long long)n);
    LCX_TRY(act_check(a->dt, op));
    LCX_TRY(need(a->a, n, op, "a"));
    if (reads_b) LCX_TRY(need(a->b, n, op, "b"));
    return need(a->out, n, op, "out");
}

static const char *const op_names[LCX_OP_COUNT] = {
    [LCX_OP_MATMUL] = "matmul",           [LCX_OP_EMBEDDING_FWD] = "embedding_fwd",
    [LCX_OP_EMBEDDING_BWD] = "embedding_bwd", [LCX_OP_RMSNORM_FWD] = "rmsnorm_fwd",
    [LCX_OP_RMSNORM_BWD] = "rmsnorm_bwd", [LCX_OP_ROPE_FWD] = "rope_fwd",
    [LCX_OP_ROPE_BWD] = "rope_bwd",       [LCX_OP_ATTENTION_FWD] = "attention_fwd",
    [LCX_OP_ATTENTION_BWD] = "attention_bwd", [LCX_OP_ATTENTION_MERGE] = "attention_merge",
    [LCX_OP_SWIGLU_FWD] = "swiglu_fwd",   [LCX_OP_SWIGLU_BWD] = "swiglu_bwd",
    [LCX_OP_CROSS_ENTROPY] = "cross_entropy", [LCX_OP_ADAMW] = "adamw",
    [LCX_OP_SQNORM] = "sqnorm",           [LCX_OP_CAST] = "cast",
    [LCX_OP_ADD] = "add",                 [LCX_OP_SCALE] = "scale",
    [LCX_OP_AXPY] = "axpy",
};

static lcx_status args_check(lcx_op op, const char *name, const void *args) {
    switch (op) {
    case LCX_OP_MATMUL: return matmul_check(args);
    case LCX_OP_EMBEDDING_FWD: return embedding_check(name, 0, args);
    case LCX_OP_EMBEDDING_BWD: return embedding_check(name, 1, args);
    case LCX_OP_RMSNORM_FWD: return rmsnorm_check(name, 0, args);
    case LCX_OP_RMSNORM_BWD: return rmsnorm_check(name, 1, args);
    case LCX_OP_ROPE_FWD:
    case LCX_OP_ROPE_BWD: return rope_check(name, args);
    case LCX_OP_ATTENTION_FWD: return attention_check(name, 0, args);
    case LCX_OP_ATTENTION_BWD: return attention_check(name, 1, args);
    case LCX_OP_ATTENTION_MERGE: return merge_check(args);
    case LCX_OP_SWIGLU_FWD: return swiglu_check(name, 0, args);
    case LCX_OP_SWIGLU_BWD: return swiglu_check(name, 1, args);
    case LCX_OP_CROSS_ENTROPY: return xent_check(args);
    case LCX_OP_ADAMW: return adamw_check(args);
    case LCX_OP_SQNORM: return sqnorm_check(args);
    case LCX_OP_CAST: return cast_check(args);
    case LCX_OP_ADD: return elementwise_check(name, 1, args);
    case LCX_OP_SCALE:
    case LCX_OP_AXPY: return elementwise_check(name, 0, args);
    default: return lcx_fail(LCX_ERR_INVALID, "unknown op %d", (int)op);
    }
}

lcx_status lcx_op_check(lcx_exec *x, lcx_op op, const void *args) {
    LCX_FAIL_IF((unsigned)op >= (unsigned)LCX_OP_COUNT, LCX_ERR_INVALID, "unknown op %d", (int)op);
    const char *name = op_names[op];
    LCX_FAIL_IF(x == NULL || args == NULL, LCX_ERR_INVALID, "%s: NULL %s", name, x == NULL ? "exec" : "arguments");
    LCX_TRY(args_check(op, name, args));
    return lcx_exec_need(x, x->be->workspace(x, op, args), name);
}
