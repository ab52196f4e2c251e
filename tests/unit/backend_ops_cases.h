/* backend_ops_cases.h: the op cases of test_backend_ops.c (included by it, after its tensor helpers).
 *
 * A maker per op declares the case's tensors with ten() -- name, role (IN, OUT overwritten, ACC updated), kind
 * (r->act for activations, a fixed dtype otherwise), size and how the values are drawn -- and fills the op's
 * argument struct with the device pointers it returns and the storage dtypes st() gives for this run. Makers run
 * twice per case (reference, then the backend under test) and must declare the same tensors in the same order;
 * values are drawn in the first run only, and fresh() hands a maker the values to fill in by hand.
 *
 * Shapes are small but odd, and straddle the tile sizes (attention 127/128/129 rows, vocab and norm rows
 * longer than a vector block); inputs are uniform in ranges that keep the math away from overflow but make
 * softmaxes peaky. Aliased cases pass one buffer for two arguments (declared once, as ACC). */

/* ---- tolerances: |got - ref| <= atol + rtol |ref|, rtol = eps(output storage) * factor ----------------------
 * eps: f32 (and the f64 loss/norm results) 2^-23, bf16 2^-8. A bf16 output is the RNE rounding of a float32
 * result, within half a bf16 ulp <= 2^-8 |ref| of it: factor 2 leaves room for a float32 result that differs in
 * the last bits (another summation order) to round the other way. f32 factors and atol allow another backend's
 * summation order (k-long dot products, row reductions, online softmax) and its exp; atol covers results that
 * cancel to near zero, for inputs of magnitude ~1 as drawn below. Casts, embedding rows and integer results
 * are exact. */
typedef struct op_tol {
    double f32, bf16, atol;
} op_tol;
static const op_tol tols[LCX_OP_COUNT] = {
    [LCX_OP_MATMUL] = {16, 2, 3e-5},        /* k <= 257 products of values <= 1 (alpha up to 2) */
    [LCX_OP_EMBEDDING_FWD] = {0, 2, 0},     /* a row copy (bf16: one rounding) */
    [LCX_OP_EMBEDDING_BWD] = {4, 2, 1e-6},  /* sums of a few rows, order may differ (atomics) */
    [LCX_OP_RMSNORM_FWD] = {16, 2, 1e-6},   /* one dim-long sum of squares per row */
    [LCX_OP_RMSNORM_BWD] = {16, 2, 1e-5},   /* a row dot product and a column sum over rows (cancel) */
    [LCX_OP_ROPE_FWD] = {4, 2, 1e-6},       /* two products and a sum (fma or not) */
    [LCX_OP_ROPE_BWD] = {4, 2, 1e-6},
    [LCX_OP_ATTENTION_FWD] = {64, 2, 1e-5}, /* online softmax over up to 257 keys, exp */
    [LCX_OP_ATTENTION_BWD] = {64, 2, 5e-5}, /* sums over keys and queries of products that cancel */
    [LCX_OP_ATTENTION_MERGE] = {8, 2, 1e-6},
    [LCX_OP_SWIGLU_FWD] = {8, 2, 1e-6},     /* exp, a division */
    [LCX_OP_SWIGLU_BWD] = {8, 2, 4e-6},     /* 1 + g (1 - sigmoid g) cancels near g = -1.28 */
    [LCX_OP_CROSS_ENTROPY] = {64, 2, 1e-8}, /* logsumexp over up to 32003 logits; dlogits are ~dscale/vocab */
    [LCX_OP_ADAMW] = {2, 2, 1e-9},          /* 1 ulp of the parameter; its bf16 copy may round the other way */
    [LCX_OP_SQNORM] = {1, 2, 0},            /* a sum in double: far below one f32 eps */
    [LCX_OP_CAST] = {0, 0, 0},              /* exact: RNE to bf16, exact to f32 */
    [LCX_OP_ADD] = {1, 2, 0},               /* one rounding */
    [LCX_OP_SCALE] = {1, 2, 0},
    [LCX_OP_AXPY] = {2, 2, 1e-7},           /* fma or not */
};

/* Ops whose activations take a storage dtype `dt`: they run in f32 and in bf16. */
static int op_has_dt(lcx_op op) {
    return op != LCX_OP_MATMUL && op != LCX_OP_ADAMW && op != LCX_OP_SQNORM && op != LCX_OP_CAST;
}

/* ---- per-op case parameters ------------------------------------------------------------------------------- */
typedef struct mm_p {
    int ta, tb;
    int64_t m, n, k, batch;
    int64_t pad_a, pad_b, pad_c; /* elements of row padding (ld = row length + pad; no pad: ld 0, dense) */
    int64_t gap_a, gap_c;        /* elements between batch entries of A and C */
    int shared_b;                /* stride_b 0: one B for every batch entry */
    float alpha, beta;
    lcx_dtype a_dt, b_dt, c_dt;  /* 0: f32 (c_dt 0 is passed as 0, which the contract reads as f32) */
} mm_p;
typedef struct emb_p {
    int64_t tokens, rows, dim, start, vocab; /* this shard holds ids start .. start + rows - 1 of vocab */
    lcx_dtype w_dt;
    int invalid; /* some ids outside [0, vocab): they read and write nothing */
} emb_p;
typedef struct rms_p {
    int64_t rows, dim;
    int alias;   /* fwd: y = x; bwd: dx = dy */
    int no_rstd; /* fwd: rstd NULL */
} rms_p;
typedef struct rope_p {
    int64_t tokens, heads, hd, rot, n_pos, pos0; /* positions pos0 + t (mod n_pos) */
    int alias;   /* out = x */
    int invalid; /* some positions outside [0, n_pos): passed through */
} rope_p;
typedef struct attn_p {
    int64_t nq, nk, heads, kv_heads, hd, q_off, k_off;
    lcx_attn_mask mask;
    float scale; /* 0: 1/sqrt(hd) */
    int64_t ctx; /* bwd: o and lse are final over keys at positions [0, ctx), of which this block is one slice;
                    0: over this block alone */
    int64_t doc; /* > 0: document mask, documents of doc tokens (the first one shorter, shifted by 3) */
} attn_p;
typedef struct merge_p {
    int64_t rows, heads, hd;
} merge_p;
typedef struct swiglu_p {
    int64_t n;
    int alias; /* fwd: 1 h = gate, 2 h = up; bwd: 1 dgate = gate and dup = up */
} swiglu_p;
typedef struct xent_p {
    int64_t rows, vocab;
    int alias;       /* dlogits = logits */
    int loss_only;   /* dlogits NULL */
    int invalid;     /* some targets outside [0, vocab): treated as ignored */
    int all_ignored; /* every target is the ignore index */
} xent_p;
typedef struct adamw_p {
    int64_t n, step;
    double wd, grad_scale;
    int bf16_copy; /* param_bf16 */
} adamw_p;
typedef struct cast_p {
    int64_t n;
    lcx_dtype src, dst; /* LCX_F32 or KEEP_BF16 */
} cast_p;
typedef struct ew_p {
    int64_t n;
    int alias; /* add: 1 out = a, 2 out = b; scale: 1 out = a */
    float alpha;
} ew_p;

typedef struct op_case {
    const char *name;
    lcx_op op;
    union {
        mm_p mm;
        emb_p emb;
        rms_p rms;
        rope_p rope;
        attn_p attn;
        merge_p merge;
        swiglu_p sw;
        xent_p xent;
        adamw_p adamw;
        int64_t n; /* sqnorm */
        cast_p cast;
        ew_p ew;
    };
} op_case;

/* ---- makers ----------------------------------------------------------------------------------------------- */

static void mk_matmul(const op_case *c, run *r, op_args *u) {
    const mm_p *p = &c->mm;
    lcx_matmul_args *a = &u->mm;
    lcx_dtype adt = p->a_dt ? p->a_dt : LCX_F32, bdt = p->b_dt ? p->b_dt : LCX_F32, cdt = p->c_dt ? p->c_dt : LCX_F32;
    int64_t ar = p->ta ? p->k : p->m, ac = p->ta ? p->m : p->k; /* A as stored: ar rows of ac */
    int64_t br = p->tb ? p->n : p->k, bc = p->tb ? p->k : p->n;
    int64_t lda = ac + p->pad_a, ldb = bc + p->pad_b, ldc = p->n + p->pad_c;
    *a = (lcx_matmul_args){.trans_a = p->ta, .trans_b = p->tb, .m = p->m, .n = p->n, .k = p->k,
                           .batch = p->batch, .alpha = p->alpha, .beta = p->beta,
                           .lda = p->pad_a ? lda : 0, .ldb = p->pad_b ? ldb : 0, .ldc = p->pad_c ? ldc : 0,
                           .stride_a = ar * lda + p->gap_a, .stride_b = p->shared_b ? 0 : br * ldb,
                           .stride_c = p->m * ldc + p->gap_c};
    a->a_dtype = st(r, adt);
    a->b_dtype = st(r, bdt);
    a->c_dtype = p->c_dt ? st(r, cdt) : (lcx_dtype)0;
    a->a = ten_l(r, "a", IN, adt, strided(p->batch, a->stride_a, ar, lda, ac), UNI(-1, 1));
    a->b = ten_l(r, "b", IN, bdt, strided(p->shared_b ? 1 : p->batch, br * ldb, br, ldb, bc), UNI(-1, 1));
    a->c = ten_l(r, "c", p->beta != 0 ? ACC : OUT, cdt, strided(p->batch, a->stride_c, p->m, ldc, p->n), UNI(-1, 1));
}

static void emb_ids(run *r, const emb_p *p) {
    int32_t *ids = fresh(r);
    static const int32_t bad[] = {-1, -100, INT32_MIN, INT32_MAX};
    for (int64_t t = 0; ids && t < p->tokens; t++) {
        ids[t] = (int32_t)irand(0, p->vocab - 1);
        if (p->invalid && t % 5 == 2) ids[t] = t % 2 ? bad[(t / 5) % 4] : (int32_t)(p->vocab + t);
    }
}

static void mk_embedding(const op_case *c, run *r, op_args *u) {
    const emb_p *p = &c->emb;
    lcx_embedding_args *a = &u->emb;
    *a = (lcx_embedding_args){.dt = act_st(r), .n_tokens = p->tokens, .n_rows = p->rows, .dim = p->dim,
                              .vocab_start = p->start, .n_vocab = p->vocab};
    a->ids = ten(r, "ids", IN, LCX_I32, p->tokens, CUSTOM);
    emb_ids(r, p);
    if (c->op == LCX_OP_EMBEDDING_FWD) {
        lcx_dtype w = p->w_dt ? p->w_dt : LCX_F32;
        a->w_dtype = st(r, w);
        a->weight = ten(r, "weight", IN, w, p->rows * p->dim, UNI(-1, 1));
        a->out = ten(r, "out", OUT, r->act, p->tokens * p->dim, ZERO);
    } else {
        a->dout = ten(r, "dout", IN, r->act, p->tokens * p->dim, UNI(-1, 1));
        a->dweight = ten(r, "dweight", ACC, LCX_F32, p->rows * p->dim, UNI(-1, 1));
    }
}

static void mk_rmsnorm(const op_case *c, run *r, op_args *u) {
    const rms_p *p = &c->rms;
    lcx_rmsnorm_args *a = &u->rms;
    int64_t R = p->rows, D = p->dim;
    *a = (lcx_rmsnorm_args){.dt = act_st(r), .n_rows = R, .dim = D, .eps = 1e-5f};
    int fwd = c->op == LCX_OP_RMSNORM_FWD;
    a->x = ten(r, "x", fwd && p->alias ? ACC : IN, r->act, R * D, UNI(-2, 2));
    a->w = ten(r, "w", IN, LCX_F32, D, UNI(0.5, 1.5));
    if (fwd) {
        a->y = p->alias ? (void *)a->x : ten(r, "y", OUT, r->act, R * D, ZERO);
        a->rstd = p->no_rstd ? NULL : ten(r, "rstd", OUT, LCX_F32, R, ZERO);
        return;
    }
    a->rstd = ten(r, "rstd", IN, LCX_F32, R, CUSTOM); /* the forward's, from x as stored */
    float *rs = fresh(r);
    const float *x = host_of(r, "x");
    for (int64_t i = 0; rs && i < R; i++) {
        double ss = 0;
        for (int64_t j = 0; j < D; j++) ss += (double)x[i * D + j] * x[i * D + j];
        rs[i] = (float)(1.0 / sqrt(ss / (double)D + 1e-5));
    }
    a->dy = ten(r, "dy", p->alias ? ACC : IN, r->act, R * D, UNI(-1, 1));
    a->dx = p->alias ? (void *)a->dy : ten(r, "dx", OUT, r->act, R * D, ZERO);
    a->dw = ten(r, "dw", ACC, LCX_F32, D, UNI(-1, 1));
}

static void mk_rope(const op_case *c, run *r, op_args *u) {
    const rope_p *p = &c->rope;
    lcx_rope_args *a = &u->rope;
    int64_t n = p->tokens * p->heads * p->hd, half = p->rot / 2;
    *a = (lcx_rope_args){.dt = act_st(r), .n_tokens = p->tokens, .n_heads = p->heads, .head_dim = p->hd,
                         .rot_dim = p->rot, .n_pos = p->n_pos};
    a->x = ten(r, "x", p->alias ? ACC : IN, r->act, n, UNI(-2, 2));
    a->out = p->alias ? (void *)a->x : ten(r, "out", OUT, r->act, n, ZERO);
    a->pos = ten(r, "pos", IN, LCX_I32, p->tokens, CUSTOM);
    int32_t *pos = fresh(r);
    static const int32_t bad[] = {-1, INT32_MIN, INT32_MAX};
    for (int64_t t = 0; pos && t < p->tokens; t++) {
        pos[t] = (int32_t)((p->pos0 + t) % p->n_pos);
        if (p->invalid && t % 4 == 1) pos[t] = t % 8 == 1 ? (int32_t)(p->n_pos + t / 8) : bad[(t / 8) % 3];
    }
    a->cos = ten(r, "cos", IN, LCX_F32, p->n_pos * half, CUSTOM);
    float *cs = fresh(r);
    a->sin = ten(r, "sin", IN, LCX_F32, p->n_pos * half, CUSTOM);
    float *sn = fresh(r);
    for (int64_t q = 0; cs && q < p->n_pos; q++)
        for (int64_t i = 0; i < half; i++) {
            double ang = (double)q * pow(10000.0, -2.0 * (double)i / (double)p->rot);
            cs[q * half + i] = (float)cos(ang);
            sn[q * half + i] = (float)sin(ang);
        }
}

/* Softmax attention in double over n_k keys at global positions k_off.., for the final o/lse of the backward. */
static void naive_attention(const attn_p *p, lcx_attn_mask mask, float scale, const float *q, const float *k,
                            const float *v, int64_t n_k, int64_t k_off, const int32_t *doc, float *o, float *lse) {
    int64_t H = p->heads, G = p->kv_heads, hd = p->hd, rep = H / G;
    double *s = xmalloc(sizeof(double) * (size_t)(n_k + 1)), *acc = xmalloc(sizeof(double) * (size_t)hd);
    for (int64_t i = 0; i < p->nq; i++)
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / rep;
            double mx = -INFINITY;
            for (int64_t j = 0; j < n_k; j++) {
                int vis = mask == LCX_MASK_FULL || (mask == LCX_MASK_CAUSAL && k_off + j <= p->q_off + i);
                if (doc && k_off + j < doc[i]) vis = 0; /* an earlier document */
                double d = 0;
                for (int64_t e = 0; e < hd; e++) d += (double)q[(i * H + h) * hd + e] * k[(j * G + g) * hd + e];
                s[j] = vis ? d * scale : -INFINITY;
                mx = fmax(mx, s[j]);
            }
            double z = 0;
            for (int64_t e = 0; e < hd; e++) acc[e] = 0;
            for (int64_t j = 0; mx > -INFINITY && j < n_k; j++) {
                double w = exp(s[j] - mx);
                z += w;
                for (int64_t e = 0; e < hd; e++) acc[e] += w * v[(j * G + g) * hd + e];
            }
            for (int64_t e = 0; e < hd; e++) o[(i * H + h) * hd + e] = z > 0 ? (float)(acc[e] / z) : 0.0f;
            lse[i * H + h] = z > 0 ? (float)(mx + log(z)) : -INFINITY;
        }
    free(s);
    free(acc);
}

/* The case's softmax scale: its own, or 1 / sqrt(head_dim). */
static float attn_scale(const attn_p *p) { return p->scale ? p->scale : (float)(1.0 / sqrt((double)p->hd)); }

static void mk_attention(const op_case *c, run *r, op_args *u) {
    const attn_p *p = &c->attn;
    lcx_attn_args *a = &u->attn;
    int64_t H = p->heads, G = p->kv_heads, hd = p->hd, nq = p->nq * H * hd, nk = p->nk * G * hd;
    float scale = attn_scale(p);
    *a = (lcx_attn_args){.dt = act_st(r), .n_q = p->nq, .n_k = p->nk, .n_heads = H, .n_kv_heads = G,
                         .head_dim = hd, .q_offset = p->q_off, .k_offset = p->k_off, .mask = p->mask,
                         .scale = scale};
    a->q = ten(r, "q", IN, r->act, nq, UNI(-2, 2));
    int32_t *doc = NULL;
    if (p->doc) { /* each query row's document start: documents of p->doc positions, boundaries at 3 mod p->doc */
        a->q_doc_start = ten(r, "doc", IN, LCX_I32, p->nq, CUSTOM);
        doc = fresh(r);
        for (int64_t i = 0; doc && i < p->nq; i++) {
            int64_t pos = p->q_off + i, start = pos - (pos + p->doc - 3) % p->doc;
            doc[i] = (int32_t)(start < 0 ? 0 : start);
        }
    }
    if (c->op == LCX_OP_ATTENTION_FWD) {
        a->k = ten(r, "k", IN, r->act, nk, UNI(-2, 2));
        a->v = ten(r, "v", IN, r->act, nk, UNI(-1, 1));
        a->o = ten(r, "o", OUT, r->act, nq, ZERO);
        a->lse = ten(r, "lse", OUT, LCX_F32, p->nq * H, ZERO);
        return;
    }
    /* backward: this key block is the slice [k_off, k_off + nk) of the context whose final o/lse it gets */
    a->k = ten(r, "k", IN, r->act, nk, CUSTOM);
    float *k = fresh(r);
    a->v = ten(r, "v", IN, r->act, nk, CUSTOM);
    float *v = fresh(r);
    a->o = ten(r, "o", IN, r->act, nq, CUSTOM);
    float *o = fresh(r);
    a->lse = ten(r, "lse", IN, LCX_F32, p->nq * H, CUSTOM);
    float *lse = fresh(r);
    if (k) {
        int64_t n_all = p->ctx ? p->ctx : p->nk, off_all = p->ctx ? 0 : p->k_off, row = G * hd;
        int64_t first = p->k_off - off_all; /* the block's first row in the context */
        size_t bytes = sizeof(float) * (size_t)(n_all * row);
        float *kall = xmalloc(bytes), *vall = xmalloc(bytes);
        for (int64_t i = 0; i < n_all * row; i++) {
            kall[i] = (float)uni(-2, 2);
            vall[i] = (float)uni(-1, 1);
            if (r->act == LCX_BF16) kall[i] = bf16_round(kall[i]), vall[i] = bf16_round(vall[i]);
        }
        memcpy(k, kall + first * row, sizeof(float) * (size_t)nk);
        memcpy(v, vall + first * row, sizeof(float) * (size_t)nk);
        /* a block that sees no key still gets a finite final: from the whole context, every key visible */
        lcx_attn_mask fm = p->mask == LCX_MASK_NONE ? LCX_MASK_FULL : p->mask;
        naive_attention(p, fm, scale, host_of(r, "q"), kall, vall, n_all, off_all, doc, o, lse);
        free(kall);
        free(vall);
    }
    a->dout = ten(r, "dout", IN, r->act, nq, UNI(-1, 1));
    a->dq = ten(r, "dq", ACC, LCX_F32, nq, UNI(-1, 1));
    a->dk = ten(r, "dk", ACC, LCX_F32, nk, UNI(-1, 1));
    a->dv = ten(r, "dv", ACC, LCX_F32, nk, UNI(-1, 1));
}

static void mk_merge(const op_case *c, run *r, op_args *u) {
    const merge_p *p = &c->merge;
    lcx_attn_merge_args *a = &u->merge;
    int64_t R = p->rows * p->heads, n = R * p->hd;
    *a = (lcx_attn_merge_args){.dt = act_st(r), .n_rows = p->rows, .n_heads = p->heads, .head_dim = p->hd};
    a->o_acc = ten(r, "o_acc", ACC, r->act, n, UNI(-1, 1));
    float *oa = fresh(r);
    a->lse_acc = ten(r, "lse_acc", ACC, LCX_F32, R, CUSTOM);
    float *la = fresh(r);
    a->o_part = ten(r, "o_part", IN, r->act, n, UNI(-1, 1));
    float *op = fresh(r);
    a->lse_part = ten(r, "lse_part", IN, LCX_F32, R, CUSTOM);
    float *lp = fresh(r);
    for (int64_t i = 0; la && i < R; i++) { /* a row with LSE -inf has O = 0, as the forward leaves it */
        la[i] = (float)uni(-3, 3);
        lp[i] = (float)uni(-3, 3);
        switch (i % 6) {
        case 1: la[i] = -INFINITY; break;                  /* nothing accumulated yet */
        case 2: lp[i] = -INFINITY; break;                  /* the part saw no key */
        case 3: la[i] = lp[i] = -INFINITY; break;          /* neither */
        case 4: lp[i] = la[i] + 80.0f; break;              /* exp(acc - lse) underflows */
        case 5: lp[i] = la[i]; break;                      /* equal weights */
        }
        for (int64_t e = 0; e < p->hd; e++) {
            if (la[i] == -INFINITY) oa[i * p->hd + e] = 0;
            if (lp[i] == -INFINITY) op[i * p->hd + e] = 0;
        }
    }
}

static void mk_swiglu(const op_case *c, run *r, op_args *u) {
    const swiglu_p *p = &c->sw;
    lcx_swiglu_args *a = &u->sw;
    *a = (lcx_swiglu_args){.dt = act_st(r), .n = p->n};
    int fwd = c->op == LCX_OP_SWIGLU_FWD;
    a->gate = ten(r, "gate", p->alias == 1 ? ACC : IN, r->act, p->n, UNI(-8, 8));
    a->up = ten(r, "up", (p->alias == 2 || (!fwd && p->alias)) ? ACC : IN, r->act, p->n, UNI(-2, 2));
    if (fwd) {
        a->h = p->alias == 1 ? (void *)a->gate : p->alias == 2 ? (void *)a->up : ten(r, "h", OUT, r->act, p->n, ZERO);
        return;
    }
    a->dh = ten(r, "dh", IN, r->act, p->n, UNI(-1, 1));
    a->dgate = p->alias ? (void *)a->gate : ten(r, "dgate", OUT, r->act, p->n, ZERO);
    a->dup = p->alias ? (void *)a->up : ten(r, "dup", OUT, r->act, p->n, ZERO);
}

static void mk_xent(const op_case *c, run *r, op_args *u) {
    const xent_p *p = &c->xent;
    lcx_xent_args *a = &u->xent;
    int64_t n = p->rows * p->vocab;
    *a = (lcx_xent_args){.dt = act_st(r), .n_rows = p->rows, .vocab = p->vocab, .dscale = 1.0f / 29.0f};
    a->logits = ten(r, "logits", p->alias ? ACC : IN, r->act, n, UNI(-8, 8));
    a->targets = ten(r, "targets", IN, LCX_I32, p->rows, CUSTOM);
    int32_t *tg = fresh(r);
    static const int32_t bad[] = {-1, INT32_MIN, INT32_MAX};
    for (int64_t i = 0; tg && i < p->rows; i++) {
        tg[i] = (int32_t)irand(0, p->vocab - 1);
        if (p->all_ignored || i % 4 == 3) tg[i] = LCX_IGNORE_INDEX;
        else if (p->invalid && i % 4 == 1) tg[i] = i % 8 == 1 ? (int32_t)(p->vocab + i / 8) : bad[(i / 8) % 3];
    }
    if (p->alias) a->dlogits = (void *)a->logits;
    else if (!p->loss_only) a->dlogits = ten(r, "dlogits", OUT, r->act, n, ZERO);
    a->loss_sum = ten(r, "loss_sum", ACC, LCX_F64, 1, UNI(1, 2)); /* accumulated onto */
    a->count = ten(r, "count", ACC, LCX_I64, 1, INTS(1, 9));
}

static void mk_adamw(const op_case *c, run *r, op_args *u) {
    const adamw_p *p = &c->adamw;
    lcx_adamw_args *a = &u->adamw;
    *a = (lcx_adamw_args){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = p->wd,
                          .step = p->step, .grad_scale = p->grad_scale, .n = p->n};
    a->param = ten(r, "param", ACC, LCX_F32, p->n, UNI(-1, 1));
    a->grad = ten(r, "grad", IN, LCX_F32, p->n, UNI(-1, 1));
    a->m = ten(r, "m", ACC, LCX_F32, p->n, p->step == 1 ? ZERO : UNI(-0.1, 0.1));
    a->v = ten(r, "v", ACC, LCX_F32, p->n, p->step == 1 ? ZERO : UNI(0, 0.01));
    if (p->bf16_copy) a->param_bf16 = ten(r, "param_bf16", OUT, KEEP_BF16, p->n, ZERO);
}

static void mk_sqnorm(const op_case *c, run *r, op_args *u) {
    lcx_sqnorm_args *a = &u->sqnorm;
    *a = (lcx_sqnorm_args){.n = c->n};
    a->x = ten(r, "x", IN, LCX_F32, c->n, UNI(-1, 1));
    a->out = ten(r, "out", ACC, LCX_F64, 1, UNI(1, 3)); /* accumulated onto */
}

/* Cast sources: the rounding corner cases, then values over the whole exponent range. */
static void mk_cast(const op_case *c, run *r, op_args *u) {
    const cast_p *p = &c->cast;
    lcx_cast_args *a = &u->cast;
    *a = (lcx_cast_args){.n = p->n, .src_dt = st(r, p->src), .dst_dt = st(r, p->dst)};
    a->src = ten(r, "src", IN, p->src, p->n, CUSTOM);
    float *s = fresh(r);
    static const uint32_t corner[] = {
        0x3f808000u, /* 1 + 2^-8: a tie, to even (down) */
        0x3f818000u, /* a tie, to even (up) */
        0x3f808001u, /* just above a tie: up */
        0x3f807fffu, /* just below: down */
        0x7f7fffffu, /* the largest float: rounds to inf */
        0x7f800000u, 0xff800000u, /* +-inf */
        0x80000000u, 0x00000000u, /* -0, +0 */
        0x00000001u, 0x807fffffu, 0x00408000u, /* subnormals */
        0x00800000u, 0x3f7fffffu, 0xbf7fffffu, 0x477fe000u,
    };
    for (int64_t i = 0; s && i < p->n; i++) {
        if (i < (int64_t)(sizeof corner / sizeof corner[0])) memcpy(&s[i], &corner[i], 4);
        else s[i] = (float)ldexp(uni(-1, 1), (int)irand(-140, 127));
    }
    a->dst = ten(r, "dst", OUT, p->dst, p->n, ZERO);
}

static void mk_elementwise(const op_case *c, run *r, op_args *u) {
    const ew_p *p = &c->ew;
    lcx_elementwise_args *a = &u->ew;
    *a = (lcx_elementwise_args){.dt = act_st(r), .n = p->n, .alpha = p->alpha};
    if (c->op == LCX_OP_ADD) {
        a->a = ten(r, "a", p->alias == 1 ? ACC : IN, r->act, p->n, UNI(-2, 2));
        a->b = ten(r, "b", p->alias == 2 ? ACC : IN, r->act, p->n, UNI(-2, 2));
        a->out = p->alias == 1 ? (void *)a->a : p->alias == 2 ? (void *)a->b : ten(r, "out", OUT, r->act, p->n, ZERO);
    } else if (c->op == LCX_OP_SCALE) { /* out = alpha a (alias 1: in place) */
        a->a = ten(r, "a", p->alias == 1 ? ACC : IN, r->act, p->n, UNI(-2, 2));
        a->out = p->alias == 1 ? (void *)a->a : ten(r, "out", OUT, r->act, p->n, ZERO);
    } else { /* axpy: y += alpha x, x = a, y = out */
        a->a = ten(r, "x", IN, r->act, p->n, UNI(-2, 2));
        a->out = ten(r, "y", ACC, r->act, p->n, UNI(-2, 2));
    }
}

typedef void (*maker)(const op_case *c, run *r, op_args *a);
static const maker makers[LCX_OP_COUNT] = {
    [LCX_OP_MATMUL] = mk_matmul,
    [LCX_OP_EMBEDDING_FWD] = mk_embedding,
    [LCX_OP_EMBEDDING_BWD] = mk_embedding,
    [LCX_OP_RMSNORM_FWD] = mk_rmsnorm,
    [LCX_OP_RMSNORM_BWD] = mk_rmsnorm,
    [LCX_OP_ROPE_FWD] = mk_rope,
    [LCX_OP_ROPE_BWD] = mk_rope,
    [LCX_OP_ATTENTION_FWD] = mk_attention,
    [LCX_OP_ATTENTION_BWD] = mk_attention,
    [LCX_OP_ATTENTION_MERGE] = mk_merge,
    [LCX_OP_SWIGLU_FWD] = mk_swiglu,
    [LCX_OP_SWIGLU_BWD] = mk_swiglu,
    [LCX_OP_CROSS_ENTROPY] = mk_xent,
    [LCX_OP_ADAMW] = mk_adamw,
    [LCX_OP_SQNORM] = mk_sqnorm,
    [LCX_OP_CAST] = mk_cast,
    [LCX_OP_ADD] = mk_elementwise,
    [LCX_OP_SCALE] = mk_elementwise,
    [LCX_OP_AXPY] = mk_elementwise,
};

/* ---- the case table ------------------------------------------------------------------------------------------ */
#define BF LCX_BF16
#define CAUSAL LCX_MASK_CAUSAL
#define FULL LCX_MASK_FULL
#define NONE LCX_MASK_NONE
static const op_case cases[] = {
    /* matmul: C = alpha op(A) op(B) + beta C (no `dt`: operand dtypes per case) */
    {"matmul nn 127x129x65", LCX_OP_MATMUL, .mm = {.m = 127, .n = 129, .k = 65, .batch = 1, .alpha = 1}},
    {"matmul nt 128x96x129 (x W^T)", LCX_OP_MATMUL,
     .mm = {.tb = 1, .m = 128, .n = 96, .k = 129, .batch = 1, .alpha = 1}},
    {"matmul tn 65x33x127", LCX_OP_MATMUL, .mm = {.ta = 1, .m = 65, .n = 33, .k = 127, .batch = 1, .alpha = 1}},
    {"matmul tt 33x65x17 alpha 0.5", LCX_OP_MATMUL,
     .mm = {.ta = 1, .tb = 1, .m = 33, .n = 65, .k = 17, .batch = 1, .alpha = 0.5f}},
    {"matmul nt 1x257x129 (one row)", LCX_OP_MATMUL,
     .mm = {.tb = 1, .m = 1, .n = 257, .k = 129, .batch = 1, .alpha = 1}},
    {"matmul nn 1x1x1", LCX_OP_MATMUL, .mm = {.m = 1, .n = 1, .k = 1, .batch = 1, .alpha = 1}},
    {"matmul nt 37x29x31 ld +3/+5/+7", LCX_OP_MATMUL,
     .mm = {.tb = 1, .m = 37, .n = 29, .k = 31, .batch = 1, .pad_a = 3, .pad_b = 5, .pad_c = 7, .alpha = 1}},
    {"matmul tn batch 3, gaps, B shared", LCX_OP_MATMUL,
     .mm = {.ta = 1, .m = 19, .n = 23, .k = 45, .batch = 3, .pad_c = 2, .gap_a = 11, .gap_c = 5, .shared_b = 1,
            .alpha = 1}},
    {"matmul nn batch 2 beta 1 (C +=)", LCX_OP_MATMUL,
     .mm = {.m = 31, .n = 17, .k = 64, .batch = 2, .alpha = 1, .beta = 1}},
    {"matmul nt A bf16 B bf16", LCX_OP_MATMUL,
     .mm = {.tb = 1, .m = 67, .n = 130, .k = 257, .batch = 1, .alpha = 1, .a_dt = BF, .b_dt = BF}},
    {"matmul nt B bf16 (bf16 weights)", LCX_OP_MATMUL,
     .mm = {.tb = 1, .m = 45, .n = 77, .k = 96, .batch = 1, .alpha = 1, .b_dt = BF}},
    {"matmul tn A bf16 (bf16 activations)", LCX_OP_MATMUL,
     .mm = {.ta = 1, .m = 45, .n = 77, .k = 96, .batch = 1, .alpha = 1, .a_dt = BF}},
    {"matmul nt C bf16, alpha -2 beta 0.5", LCX_OP_MATMUL,
     .mm = {.tb = 1, .m = 33, .n = 40, .k = 50, .batch = 1, .alpha = -2, .beta = 0.5f, .c_dt = BF}},
    {"matmul nn all bf16 batch 2 ld pads", LCX_OP_MATMUL,
     .mm = {.m = 21, .n = 35, .k = 19, .batch = 2, .pad_a = 1, .pad_b = 2, .pad_c = 3, .alpha = 1, .a_dt = BF,
            .b_dt = BF, .c_dt = BF}},
    {"matmul nn C f32 given as c_dtype F32", LCX_OP_MATMUL,
     .mm = {.m = 9, .n = 10, .k = 11, .batch = 1, .alpha = 1, .c_dt = LCX_F32}},
    /* shapes cuBLASLt takes on the CUDA backend (bf16 A and B, or f32 throughout; dims multiples of 8), the
     * others above mostly its tiled fallback (dtype mixes, odd leading dimensions) */
    {"matmul nt bf16 A B 128x256x64 (aligned)", LCX_OP_MATMUL,
     .mm = {.tb = 1, .m = 128, .n = 256, .k = 64, .batch = 1, .alpha = 1, .a_dt = BF, .b_dt = BF}},
    {"matmul tn all bf16 64x96x128 beta 1", LCX_OP_MATMUL,
     .mm = {.ta = 1, .m = 64, .n = 96, .k = 128, .batch = 1, .alpha = 1, .beta = 1, .a_dt = BF, .b_dt = BF,
            .c_dt = BF}},
    /* f32 x bf16 (the loss chunk's GEMMs: float32 dlogits against bf16 weights / activations); k 4500 spans
     * several of the CUDA split path's 2048-wide reduction blocks */
    {"matmul nn A f32 B bf16 C bf16 beta 1 k 4500 (loss dX)", LCX_OP_MATMUL,
     .mm = {.m = 33, .n = 40, .k = 4500, .batch = 1, .alpha = 1, .beta = 1, .b_dt = BF, .c_dt = BF}},
    {"matmul tn A f32 B bf16 beta 1 k 4500 (loss dW)", LCX_OP_MATMUL,
     .mm = {.ta = 1, .m = 40, .n = 24, .k = 4500, .batch = 1, .alpha = 1, .beta = 1, .b_dt = BF}},
    {"matmul nt A bf16 B f32 batch 2 alpha 0.5", LCX_OP_MATMUL,
     .mm = {.tb = 1, .m = 17, .n = 33, .k = 70, .batch = 2, .alpha = 0.5f, .a_dt = BF}},
    {"matmul tt f32 64x32x48 (aligned)", LCX_OP_MATMUL,
     .mm = {.ta = 1, .tb = 1, .m = 64, .n = 32, .k = 48, .batch = 1, .alpha = 1}},
    {"matmul tt bf16 A B batch 2 33x17x29", LCX_OP_MATMUL,
     .mm = {.ta = 1, .tb = 1, .m = 33, .n = 17, .k = 29, .batch = 2, .alpha = 1, .a_dt = BF, .b_dt = BF}},
    {"matmul nn k 0 (C = beta C)", LCX_OP_MATMUL, .mm = {.m = 5, .n = 7, .k = 0, .batch = 1, .alpha = 1, .beta = 0.5f}},

    /* embedding: vocabulary shards, repeated ids, invalid ids */
    {"embedding_fwd 37 tokens dim 67, whole vocab 50", LCX_OP_EMBEDDING_FWD,
     .emb = {.tokens = 37, .rows = 50, .dim = 67, .start = 0, .vocab = 50}},
    {"embedding_fwd shard [17,33) of 50", LCX_OP_EMBEDDING_FWD,
     .emb = {.tokens = 37, .rows = 16, .dim = 67, .start = 17, .vocab = 50}},
    {"embedding_fwd shard [40,50) of 50, bf16 weight", LCX_OP_EMBEDDING_FWD,
     .emb = {.tokens = 37, .rows = 10, .dim = 67, .start = 40, .vocab = 50, .w_dt = BF}},
    {"embedding_fwd invalid ids give 0", LCX_OP_EMBEDDING_FWD,
     .emb = {.tokens = 41, .rows = 20, .dim = 33, .start = 10, .vocab = 30, .invalid = 1}},
    {"embedding_bwd 61 tokens, vocab 23 (repeats)", LCX_OP_EMBEDDING_BWD,
     .emb = {.tokens = 61, .rows = 23, .dim = 67, .start = 0, .vocab = 23}},
    {"embedding_bwd shard [10,23) of 40", LCX_OP_EMBEDDING_BWD,
     .emb = {.tokens = 61, .rows = 13, .dim = 67, .start = 10, .vocab = 40}},
    {"embedding_bwd invalid ids add nothing", LCX_OP_EMBEDDING_BWD,
     .emb = {.tokens = 41, .rows = 20, .dim = 33, .start = 10, .vocab = 30, .invalid = 1}},

    /* rmsnorm */
    {"rmsnorm_fwd 37x129", LCX_OP_RMSNORM_FWD, .rms = {.rows = 37, .dim = 129}},
    {"rmsnorm_fwd 3x4097 y = x", LCX_OP_RMSNORM_FWD, .rms = {.rows = 3, .dim = 4097, .alias = 1}},
    {"rmsnorm_fwd 1x1, rstd NULL", LCX_OP_RMSNORM_FWD, .rms = {.rows = 1, .dim = 1, .no_rstd = 1}},
    {"rmsnorm_bwd 37x129", LCX_OP_RMSNORM_BWD, .rms = {.rows = 37, .dim = 129}},
    {"rmsnorm_bwd 5x4097 dx = dy", LCX_OP_RMSNORM_BWD, .rms = {.rows = 5, .dim = 4097, .alias = 1}},

    /* rope: full and partial rotary, offsets, in place, invalid positions */
    {"rope_fwd 19x3x64 full rotary", LCX_OP_ROPE_FWD,
     .rope = {.tokens = 19, .heads = 3, .hd = 64, .rot = 64, .n_pos = 64, .pos0 = 0}},
    {"rope_fwd 23x5x40 rot 24 at 150..", LCX_OP_ROPE_FWD,
     .rope = {.tokens = 23, .heads = 5, .hd = 40, .rot = 24, .n_pos = 200, .pos0 = 150}},
    {"rope_fwd 7x2x128 in place at 4090..", LCX_OP_ROPE_FWD,
     .rope = {.tokens = 7, .heads = 2, .hd = 128, .rot = 128, .n_pos = 4096, .pos0 = 4090, .alias = 1}},
    {"rope_fwd invalid positions pass through", LCX_OP_ROPE_FWD,
     .rope = {.tokens = 33, .heads = 2, .hd = 40, .rot = 24, .n_pos = 64, .pos0 = 10, .invalid = 1}},
    {"rope_bwd 23x5x40 rot 24 at 150..", LCX_OP_ROPE_BWD,
     .rope = {.tokens = 23, .heads = 5, .hd = 40, .rot = 24, .n_pos = 200, .pos0 = 150}},
    {"rope_bwd 9x4x64 rot 32 in place", LCX_OP_ROPE_BWD,
     .rope = {.tokens = 9, .heads = 4, .hd = 64, .rot = 32, .n_pos = 16, .pos0 = 3, .alias = 1}},

    /* attention forward: tile edges, GQA/MQA, offsets, masks, empty blocks */
    {"attention_fwd causal 127x127 h2/1 d32", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 127, .nk = 127, .heads = 2, .kv_heads = 1, .hd = 32, .mask = CAUSAL}},
    {"attention_fwd causal 128x128 h2/1 d32", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 128, .nk = 128, .heads = 2, .kv_heads = 1, .hd = 32, .mask = CAUSAL}},
    {"attention_fwd causal 129x129 h4/2 d64", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 129, .nk = 129, .heads = 4, .kv_heads = 2, .hd = 64, .mask = CAUSAL}},
    {"attention_fwd full 33x129 h4/4 d80", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 33, .nk = 129, .heads = 4, .kv_heads = 4, .hd = 80, .mask = FULL}},
    {"attention_fwd causal q@192 65x257 h4/1 d32 (cache)", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 65, .nk = 257, .heads = 4, .kv_heads = 1, .hd = 32, .q_off = 192, .mask = CAUSAL}},
    {"attention_fwd causal q@299 1x300 h2/2 d64 (decode)", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 1, .nk = 300, .heads = 2, .kv_heads = 2, .hd = 64, .q_off = 299, .mask = CAUSAL}},
    {"attention_fwd causal q@0 k@100 129x129 (masked rows)", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 129, .nk = 129, .heads = 2, .kv_heads = 1, .hd = 32, .k_off = 100, .mask = CAUSAL}},
    {"attention_fwd full 20x70 h8/1 d128 scale 0.3", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 20, .nk = 70, .heads = 8, .kv_heads = 1, .hd = 128, .mask = FULL, .scale = 0.3f}},
    {"attention_fwd none 17x23 (O 0, LSE -inf)", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 17, .nk = 23, .heads = 2, .kv_heads = 1, .hd = 32, .mask = NONE}},
    {"attention_fwd causal 161x161 h8/2 d128 (GQA 4)", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 161, .nk = 161, .heads = 8, .kv_heads = 2, .hd = 128, .mask = CAUSAL}},
    {"attention_fwd full 40x45 h3/1 d256", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 40, .nk = 45, .heads = 3, .kv_heads = 1, .hd = 256, .mask = FULL}},
    {"attention_fwd causal 200x200 h4/2 d64 docs of 70", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 200, .nk = 200, .heads = 4, .kv_heads = 2, .hd = 64, .mask = CAUSAL, .doc = 70}},
    {"attention_fwd causal 129x129 d128 1-token docs", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 129, .nk = 129, .heads = 2, .kv_heads = 1, .hd = 128, .mask = CAUSAL, .doc = 1}},
    {"attention_fwd full q@200 150x200 d32 docs of 90", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 150, .nk = 200, .heads = 2, .kv_heads = 1, .hd = 32, .q_off = 200, .mask = FULL, .doc = 90}},
    {"attention_fwd n_q = 0", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 0, .nk = 40, .heads = 2, .kv_heads = 1, .hd = 32, .mask = CAUSAL}},
    {"attention_fwd n_k = 0 (O 0, LSE -inf)", LCX_OP_ATTENTION_FWD,
     .attn = {.nq = 40, .nk = 0, .heads = 2, .kv_heads = 1, .hd = 32, .mask = CAUSAL}},

    /* attention backward: o/lse are the final ones over a context of which the key block is a slice */
    {"attention_bwd causal 129x129 h4/2 d64", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 129, .nk = 129, .heads = 4, .kv_heads = 2, .hd = 64, .mask = CAUSAL}},
    {"attention_bwd causal q@1 127x128 h2/1 d32", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 127, .nk = 128, .heads = 2, .kv_heads = 1, .hd = 32, .q_off = 1, .mask = CAUSAL}},
    {"attention_bwd full 33x65 h4/4 d80", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 33, .nk = 65, .heads = 4, .kv_heads = 4, .hd = 80, .mask = FULL}},
    {"attention_bwd ring q@128 k@0 128x129 of 256", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 128, .nk = 129, .heads = 2, .kv_heads = 1, .hd = 32, .q_off = 128, .mask = CAUSAL, .ctx = 256}},
    {"attention_bwd ring q@128 k@129 128x127 of 256", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 128, .nk = 127, .heads = 2, .kv_heads = 1, .hd = 32, .q_off = 128, .k_off = 129,
              .mask = CAUSAL, .ctx = 256}},
    {"attention_bwd q@0 k@100 129x129 of 229 (masked rows)", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 129, .nk = 129, .heads = 2, .kv_heads = 1, .hd = 32, .k_off = 100, .mask = CAUSAL,
              .ctx = 229}},
    {"attention_bwd full 20x70 h8/1 d128 scale 0.3", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 20, .nk = 70, .heads = 8, .kv_heads = 1, .hd = 128, .mask = FULL, .scale = 0.3f}},
    {"attention_bwd causal 161x161 h8/2 d128 (GQA 4)", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 161, .nk = 161, .heads = 8, .kv_heads = 2, .hd = 128, .mask = CAUSAL}},
    {"attention_bwd full 40x45 h3/1 d256", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 40, .nk = 45, .heads = 3, .kv_heads = 1, .hd = 256, .mask = FULL}},
    {"attention_bwd causal 65x200 h2/1 d64 (keys no query sees)", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 65, .nk = 200, .heads = 2, .kv_heads = 1, .hd = 64, .mask = CAUSAL}},
    {"attention_bwd causal 200x200 h4/2 d64 docs of 70", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 200, .nk = 200, .heads = 4, .kv_heads = 2, .hd = 64, .mask = CAUSAL, .doc = 70}},
    {"attention_bwd causal 129x129 d128 1-token docs", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 129, .nk = 129, .heads = 2, .kv_heads = 1, .hd = 128, .mask = CAUSAL, .doc = 1}},
    {"attention_bwd q@200 150x200 of 350 docs of 90", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 150, .nk = 200, .heads = 2, .kv_heads = 1, .hd = 32, .q_off = 200, .mask = FULL, .ctx = 350,
              .doc = 90}},
    {"attention_bwd none 17x23 adds nothing", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 17, .nk = 23, .heads = 2, .kv_heads = 1, .hd = 32, .mask = NONE}},
    {"attention_bwd n_q = 0", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 0, .nk = 40, .heads = 2, .kv_heads = 1, .hd = 32, .mask = CAUSAL}},
    {"attention_bwd n_k = 0 of 40", LCX_OP_ATTENTION_BWD,
     .attn = {.nq = 40, .nk = 0, .heads = 2, .kv_heads = 1, .hd = 32, .mask = CAUSAL, .ctx = 40}},
    {"attention_merge 129x3x40 (-inf rows, far LSE)", LCX_OP_ATTENTION_MERGE,
     .merge = {.rows = 129, .heads = 3, .hd = 40}},
    {"attention_merge 1x1x1", LCX_OP_ATTENTION_MERGE, .merge = {.rows = 1, .heads = 1, .hd = 1}},

    /* swiglu */
    {"swiglu_fwd n 4099", LCX_OP_SWIGLU_FWD, .sw = {.n = 4099}},
    {"swiglu_fwd n 1001 h = gate", LCX_OP_SWIGLU_FWD, .sw = {.n = 1001, .alias = 1}},
    {"swiglu_fwd n 1001 h = up", LCX_OP_SWIGLU_FWD, .sw = {.n = 1001, .alias = 2}},
    {"swiglu_fwd n 1", LCX_OP_SWIGLU_FWD, .sw = {.n = 1}},
    {"swiglu_bwd n 4099", LCX_OP_SWIGLU_BWD, .sw = {.n = 4099}},
    {"swiglu_bwd n 1001 dgate = gate, dup = up", LCX_OP_SWIGLU_BWD, .sw = {.n = 1001, .alias = 1}},

    /* cross-entropy: every 4th row ignored; loss and count accumulate onto what is there */
    {"cross_entropy 37x1001", LCX_OP_CROSS_ENTROPY, .xent = {.rows = 37, .vocab = 1001}},
    {"cross_entropy 37x1001 dlogits = logits", LCX_OP_CROSS_ENTROPY, .xent = {.rows = 37, .vocab = 1001, .alias = 1}},
    {"cross_entropy 13x32003 loss only", LCX_OP_CROSS_ENTROPY, .xent = {.rows = 13, .vocab = 32003, .loss_only = 1}},
    {"cross_entropy 29x257 invalid targets ignored", LCX_OP_CROSS_ENTROPY,
     .xent = {.rows = 29, .vocab = 257, .invalid = 1}},
    {"cross_entropy 8x100 all ignored", LCX_OP_CROSS_ENTROPY, .xent = {.rows = 8, .vocab = 100, .all_ignored = 1}},
    {"cross_entropy 1x1", LCX_OP_CROSS_ENTROPY, .xent = {.rows = 1, .vocab = 1}},

    /* optimizer and norms (f32 state, no `dt`) */
    {"adamw step 1 n 1027 wd 0.1", LCX_OP_ADAMW, .adamw = {.n = 1027, .step = 1, .wd = 0.1, .grad_scale = 1}},
    {"adamw step 1000 n 4099 grad_scale 0.37, bf16 copy", LCX_OP_ADAMW,
     .adamw = {.n = 4099, .step = 1000, .wd = 0.1, .grad_scale = 0.37, .bf16_copy = 1}},
    {"adamw step 3 n 1 no decay", LCX_OP_ADAMW, .adamw = {.n = 1, .step = 3, .wd = 0, .grad_scale = 1, .bf16_copy = 1}},
    {"sqnorm n 100003 (+=)", LCX_OP_SQNORM, .n = 100003},
    {"sqnorm n 1", LCX_OP_SQNORM, .n = 1},
    {"sqnorm n 0 adds nothing", LCX_OP_SQNORM, .n = 0},

    /* casts (exact) and elementwise */
    {"cast f32 -> bf16 n 4099 (ties, inf, subnormals)", LCX_OP_CAST,
     .cast = {.n = 4099, .src = LCX_F32, .dst = KEEP_BF16}},
    {"cast bf16 -> f32 n 4099", LCX_OP_CAST, .cast = {.n = 4099, .src = KEEP_BF16, .dst = LCX_F32}},
    {"cast f32 -> f32 n 1001", LCX_OP_CAST, .cast = {.n = 1001, .src = LCX_F32, .dst = LCX_F32}},
    {"cast bf16 -> bf16 n 1001", LCX_OP_CAST, .cast = {.n = 1001, .src = KEEP_BF16, .dst = KEEP_BF16}},
    {"add n 1001", LCX_OP_ADD, .ew = {.n = 1001}},
    {"add n 1001 out = a", LCX_OP_ADD, .ew = {.n = 1001, .alias = 1}},
    {"add n 1001 out = b", LCX_OP_ADD, .ew = {.n = 1001, .alias = 2}},
    {"scale n 1001 by -0.37", LCX_OP_SCALE, .ew = {.n = 1001, .alpha = -0.37f}},
    {"scale n 1001 by 3 in place", LCX_OP_SCALE, .ew = {.n = 1001, .alias = 1, .alpha = 3.0f}},
    {"axpy n 1001 alpha 0.61", LCX_OP_AXPY, .ew = {.n = 1001, .alpha = 0.61f}},
    {"add n 0", LCX_OP_ADD, .ew = {.n = 0}},
};
#undef BF
#undef CAUSAL
#undef FULL
#undef NONE
