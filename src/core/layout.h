/* layout: pure shard math for TP x CP x DP meshes — which ranks form which groups, which box of a global tensor
 * a TP rank holds, which sequence chunks a CP rank holds, and the strided box-intersection copy every
 * checkpoint reader uses. No I/O, no communication.
 *
 * Spec: docs/formats.md "Tensor-parallel slicing", docs/parallel.md "Mesh" and "Context parallelism". */
#ifndef LCX_LAYOUT_H
#define LCX_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

/* ---- mesh ------------------------------------------------------------------------------------------------ */

/* World = tp * cp * dp ranks; rank = t + tp * (c + cp * d) (TP innermost, then CP, then DP). */
typedef struct lcx_mesh {
    int tp, cp, dp;
    int world;
} lcx_mesh;

typedef struct lcx_mesh_coord {
    int t, c, d;
} lcx_mesh_coord;

typedef enum lcx_group_kind {
    LCX_GROUP_TP = 0, /* same (c, d): tp ranks */
    LCX_GROUP_CP,     /* same (t, d): cp ranks */
    LCX_GROUP_DP,     /* same (t, c): dp ranks */
    LCX_GROUP_GRAD,   /* same t (all ranks holding the same weight shard): cp * dp ranks */
    LCX_GROUP_COUNT
} lcx_group_kind;

/* Sizes >= 1 whose product fits an int; fails with LCX_ERR_INVALID naming the numbers. */
lcx_status lcx_mesh_init(lcx_mesh *m, int tp, int cp, int dp);
/* Coordinates of a rank in [0, world). */
lcx_status lcx_mesh_coord_of(const lcx_mesh *m, int rank, lcx_mesh_coord *out);
/* Rank of coordinates (each in range; internal invariant otherwise). */
int lcx_mesh_rank_of(const lcx_mesh *m, lcx_mesh_coord c);
/* Size of a group kind (tp, cp, dp or cp*dp). */
int lcx_mesh_group_size(const lcx_mesh *m, lcx_group_kind kind);
/* Members of `rank`'s group of the given kind, ascending world ranks, into members[0..cap); *n = group size and
 * *index = position of `rank` in the list (either may be NULL). For the gradient group the position is
 * c + cp * d. Fails if cap is too small. */
lcx_status lcx_mesh_group(const lcx_mesh *m, int rank, lcx_group_kind kind, int *members, int cap, int *n,
                          int *index);

/* ---- boxes ----------------------------------------------------------------------------------------------- */

#define LCX_BOX_MAX_DIMS 4

/* An axis-aligned box of a global tensor: elements start[i] <= x[i] < start[i] + shape[i]. ndim 0 = the single
 * element of a scalar tensor. Shape entries may be 0 (empty box). */
typedef struct lcx_box {
    int ndim;
    uint64_t start[LCX_BOX_MAX_DIMS];
    uint64_t shape[LCX_BOX_MAX_DIMS];
} lcx_box;

/* The whole tensor of the given dims (ndim <= LCX_BOX_MAX_DIMS, internal invariant). */
lcx_box lcx_box_full(int ndim, const uint64_t *dims);
/* Number of elements; fails (LCX_ERR_INVALID) on overflow of uint64 or start + shape. */
lcx_status lcx_box_volume(const lcx_box *b, uint64_t *volume);
/* 1 and *out = a ∩ b when the intersection is non-empty, else 0 (out zero-shaped). Different ndim -> 0. A 0-dim
 * box intersects another 0-dim box (the scalar). */
int lcx_box_intersect(const lcx_box *a, const lcx_box *b, lcx_box *out);
/* 1 if b lies inside a tensor of the given dims (overflow-safe). */
int lcx_box_inside(const lcx_box *b, int ndim, const uint64_t *dims);
/* "[0:4, 8:16]" (start:end per dim) into buf, always NUL-terminated. Returns buf. */
char *lcx_box_str(const lcx_box *b, char *buf, size_t cap);

/* Copy the intersection of two boxes. src holds src_box's elements contiguous row-major (element size es
 * bytes); dst holds dst_box's elements likewise. Elements of dst outside src_box are untouched. *copied (may be
 * NULL) = elements copied. Fails (LCX_ERR_INVALID) if the ndims differ or es == 0. */
lcx_status lcx_box_copy(const lcx_box *src_box, const void *src, const lcx_box *dst_box, void *dst, size_t es,
                        uint64_t *copied);

/* 1 when `inner` (inside `outer`) is one contiguous run of outer's row-major elements: every dim after some dim j
 * is whole and every dim before j has extent 1. *offset = its first element's index in outer (elements). Empty
 * boxes give 0. */
int lcx_box_contiguous_in(const lcx_box *outer, const lcx_box *inner, uint64_t *offset);

/* ---- tensor-parallel slicing ----------------------------------------------------------------------------- */

/* What a model tensor is, by its HF name (docs/formats.md "Hugging Face model directory"). */
typedef enum lcx_weight_kind {
    LCX_W_UNKNOWN = 0,
    LCX_W_Q_PROJ, LCX_W_Q_BIAS,       /* [nh*d, H], [nh*d] */
    LCX_W_K_PROJ, LCX_W_K_BIAS,       /* [ng*d, H], [ng*d] */
    LCX_W_V_PROJ, LCX_W_V_BIAS,       /* [ng*d, H], [ng*d] */
    LCX_W_O_PROJ, LCX_W_O_BIAS,       /* [H, nh*d], [H] (bias replicated: added after the all-reduce) */
    LCX_W_GATE_PROJ, LCX_W_GATE_BIAS, /* [F, H], [F] */
    LCX_W_UP_PROJ, LCX_W_UP_BIAS,     /* [F, H], [F] */
    LCX_W_DOWN_PROJ, LCX_W_DOWN_BIAS, /* [H, F], [H] (bias replicated) */
    LCX_W_EMBED, LCX_W_LM_HEAD,       /* [V, H] */
    LCX_W_NORM,                       /* input/post_attention layernorm, model.norm: [H] */
    LCX_W_Q_NORM, LCX_W_K_NORM,       /* Qwen3 per-head RMSNorm: [d] */
    LCX_W_COUNT
} lcx_weight_kind;

/* Classify an HF tensor name ("model.layers.3.self_attn.k_proj.bias"); LCX_W_UNKNOWN if not recognised. */
lcx_weight_kind lcx_weight_kind_of_name(const char *name);
/* Short stable name ("q_proj", "k_bias", "embed", ...). */
const char *lcx_weight_kind_name(lcx_weight_kind k);

/* Model dimensions the slicing depends on. */
typedef struct lcx_tp_dims {
    int64_t nh; /* attention heads */
    int64_t ng; /* kv heads */
    int64_t d;  /* head_dim */
    int64_t H;  /* hidden */
    int64_t F;  /* intermediate */
    int64_t V;  /* vocab (true size, not padded) */
} lcx_tp_dims;

/* Check the dims (all > 0, nh % ng == 0) against TP size T: nh % T, F % T, and for kv heads: ng >= T needs
 * ng % T == 0, ng < T needs T % ng == 0. The error names the numbers. */
lcx_status lcx_tp_check(const lcx_tp_dims *m, int T);

/* 1 when kv heads are replicated across TP ranks (ng < T). */
int lcx_tp_kv_replicated(const lcx_tp_dims *m, int T);

/* V padded up to a multiple of T (overflow-checked). */
lcx_status lcx_vocab_padded(int64_t V, int T, int64_t *Vp);

/* What TP rank r of T holds of one tensor. */
typedef struct lcx_tp_slice {
    lcx_box global;     /* the tensor's global shape as a box at 0 */
    lcx_box box;        /* the part of the global tensor this rank holds (stored in checkpoints) */
    int ndim;           /* = global.ndim */
    uint64_t local[LCX_BOX_MAX_DIMS]; /* this rank's buffer shape: box shape, except vocab rows padded to Vp/T
                                         (the padding rows follow the stored rows and are zero) */
    int replicas;       /* ranks holding this same box: 1 (split), T / ng (replicated kv) or T (norms, ...) */
    int replica_index;  /* this rank's index among them; 0 is the one that writes it to a checkpoint */
} lcx_tp_slice;

/* The slice of tensor kind `k` held by TP rank r of T. Fails with LCX_ERR_INVALID for impossible layouts
 * (see lcx_tp_check) or an unknown kind / rank out of range. */
lcx_status lcx_tp_slice_of(lcx_weight_kind k, const lcx_tp_dims *m, int T, int r, lcx_tp_slice *out);

/* ---- context-parallel sequence split --------------------------------------------------------------------- */

/* Load-balanced causal split: the sequence is cut into 2*CP chunks of len/(2*CP) tokens; CP rank c holds chunk c
 * then chunk 2*CP-1-c, so it has 2*chunk_len tokens. */
typedef struct lcx_cp_split {
    int64_t chunk_len;  /* tokens per chunk */
    int64_t chunk[2];   /* the rank's chunk indices, in local order */
    int64_t start[2];   /* global position of each chunk's first token */
} lcx_cp_split;

/* Fails (LCX_ERR_INVALID) unless cp >= 1, 0 <= c < cp and seq_len > 0 divisible by 2*cp, naming the numbers. */
lcx_status lcx_cp_split_of(int64_t seq_len, int cp, int c, lcx_cp_split *out);
/* Global positions of rank c's 2*chunk_len tokens in local order, into pos[0 .. seq_len/cp). */
lcx_status lcx_cp_positions(int64_t seq_len, int cp, int c, int64_t *pos);

#endif /* LCX_LAYOUT_H */
