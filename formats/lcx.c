/* lcx reader: manifest validation, box reads from any layout, verification. The writer is in lcx_write.c. */
#include "formats/lcx.h"

#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/lcx_internal.h"
#include "src/core/fileio.h"

struct lcx_ckpt {
    char *dir;
    char *mpath; /* dir/manifest.json, for messages */
    json_t *root;
    const json_t *model_config, *training_state;
    int tp, cp, dp;
    char kv_layout[16];
    int n_files;
    char **file_names;
    char **file_paths;
    struct file_key *files_sorted; /* the files by name, for file_index */
    uint64_t *file_sizes;
    lcx_mapping *maps;
    int *mapped;
    int n_tok;
    char **tok;
    int n_tensors;
    lcx_ckpt_tensor *tensors; /* sorted by (name, role) */
    lcx_codec_ctx codec;
    uint8_t *scratch;
    size_t scratch_cap;
    const lcx_ckpt_piece *cached; /* piece whose decoded bytes scratch holds (NULL: none) */
};

/* Bounds on what a manifest lists, each named in its error (far above any real checkpoint: a file per rank, a
 * piece per rank or row chunk). */
enum { MAX_FILES = 1000000, MAX_TENSORS = 10000000, MAX_PIECES = 1000000, MAX_TOKENIZER_FILES = 1000 };

int lcx_ckpt_safe_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 200 || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

int lcx_ckpt_valid_role(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > LCX_CKPT_ROLE_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return 0;
    return 1;
}

size_t lcx_ckpt_dtype_size(lcx_dtype dt) {
    if (dt <= LCX_DTYPE_INVALID || dt >= LCX_DTYPE_COUNT || dt == LCX_Q8_0 || dt == LCX_Q4_0 || dt == LCX_Q4_1)
        return 0;
    unsigned bits = lcx_dtype_bits(dt);
    return bits && bits % 8 == 0 ? bits / 8 : 0;
}

/* ---- small JSON accessors with messages ------------------------------------------------------------------ */

/* Non-negative JSON integer (jansson already rejects integers beyond int64 at parse time). */
static int json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static const char *json_str(const json_t *obj, const char *key) { return json_string_value(json_object_get(obj, key)); }

/* Integer array of up to LCX_BOX_MAX_DIMS entries. */
static int json_dims(const json_t *arr, int *ndim, uint64_t *dims) {
    if (!json_is_array(arr) || json_array_size(arr) > LCX_BOX_MAX_DIMS) return 0;
    *ndim = (int)json_array_size(arr);
    for (int i = 0; i < *ndim; i++)
        if (!json_u64(json_array_get(arr, (size_t)i), &dims[i])) return 0;
    return 1;
}

/* ---- open ------------------------------------------------------------------------------------------------ */

static int tensor_cmp(const void *a, const void *b) {
    const lcx_ckpt_tensor *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->role, y->role);
}

typedef struct file_key {
    const char *name;
    int idx;
} file_key;

static int file_key_cmp(const void *a, const void *b) {
    return strcmp(((const file_key *)a)->name, ((const file_key *)b)->name);
}

/* Index of the data file named name, -1 when none: a bsearch, since every piece looks its file up (a linear
 * search made a manifest of 20,000 files and pieces take 17 s). */
static int file_index(const lcx_ckpt *ck, const char *name) {
    if (!ck->files_sorted) return -1;
    file_key key = {name, -1};
    const file_key *hit = bsearch(&key, ck->files_sorted, (size_t)ck->n_files, sizeof key, file_key_cmp);
    return hit ? hit->idx : -1;
}

typedef struct span {
    int file;
    uint64_t offset, length;
    int tensor, piece;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

typedef struct piece_key {
    uint64_t start0; /* start along the sweep dimension (0 for scalars) */
    int idx;
} piece_key;

static int piece_key_cmp(const void *a, const void *b) {
    const piece_key *x = a, *y = b;
    return x->start0 < y->start0 ? -1 : x->start0 > y->start0;
}

/* Parse one piece object of tensor t. */
static lcx_status parse_piece(lcx_ckpt *ck, lcx_ckpt_tensor *t, int pi, const json_t *pj) {
    lcx_ckpt_piece *p = &t->pieces[pi];
#define PFAIL(...)                                                                                                \
    do {                                                                                                          \
        lcx_fail(LCX_ERR_FORMAT, __VA_ARGS__);                                                                    \
        return lcx_fail_context(LCX_ERR_FORMAT, "%s: tensor '%s' (role %s): piece %d: ", ck->mpath, t->name,      \
                                t->role, pi);                                                                     \
    } while (0)
    if (!json_is_object(pj)) PFAIL("not an object");
    const char *file = json_str(pj, "file"), *codec = json_str(pj, "codec"), *filter = json_str(pj, "filter"),
               *sum = json_str(pj, "xxh3");
    if (!file) PFAIL("missing string 'file'");
    p->file = file_index(ck, file);
    if (p->file < 0) PFAIL("file '%s' is not in the manifest's file list", file);
    if (!codec || !lcx_codec_parse(codec, &p->codec)) PFAIL("unknown codec '%s' (known: raw, zstd)", codec ? codec : "(missing)");
    if (!filter || !lcx_filter_parse(filter, &p->filter))
        PFAIL("unknown filter '%s' (known: none, shuffle)", filter ? filter : "(missing)");
    if (!sum || !lcx_xxh3_parse(sum, &p->checksum)) PFAIL("'xxh3' must be 16 lowercase hex digits");
    if (!json_u64(json_object_get(pj, "offset"), &p->offset)) PFAIL("'offset' must be a non-negative integer");
    if (!json_u64(json_object_get(pj, "length"), &p->length)) PFAIL("'length' must be a non-negative integer");
    if (!json_u64(json_object_get(pj, "raw_length"), &p->raw_length))
        PFAIL("'raw_length' must be a non-negative integer");
    int ns = -1, nb = -1;
    uint64_t start[LCX_BOX_MAX_DIMS] = {0}, shape[LCX_BOX_MAX_DIMS] = {0};
    if (!json_dims(json_object_get(pj, "start"), &ns, start) || !json_dims(json_object_get(pj, "box"), &nb, shape))
        PFAIL("'start' and 'box' must be arrays of at most %d non-negative integers", LCX_BOX_MAX_DIMS);
    if (ns != t->ndim || nb != t->ndim) PFAIL("box has %d/%d dims, tensor has %d", ns, nb, t->ndim);
    p->box.ndim = t->ndim;
    memcpy(p->box.start, start, sizeof start);
    memcpy(p->box.shape, shape, sizeof shape);
    char bs[160];
    if (!lcx_box_inside(&p->box, t->ndim, t->shape)) {
        lcx_shape sh = {.ndim = t->ndim};
        for (int i = 0; i < t->ndim; i++) sh.dims[i] = t->shape[i];
        char ss[96];
        PFAIL("box %s lies outside the tensor shape %s", lcx_box_str(&p->box, bs, sizeof bs),
              lcx_shape_str(&sh, ss, sizeof ss));
    }
    uint64_t vol, bytes;
    if (lcx_box_volume(&p->box, &vol) != LCX_OK || __builtin_mul_overflow(vol, (uint64_t)t->es, &bytes))
        PFAIL("box %s is too large", lcx_box_str(&p->box, bs, sizeof bs));
    if (bytes != p->raw_length)
        PFAIL("raw_length %llu does not match box %s x %s (%llu bytes)", (unsigned long long)p->raw_length,
              lcx_box_str(&p->box, bs, sizeof bs), lcx_dtype_name(t->dtype), (unsigned long long)bytes);
    if (p->codec == LCX_CODEC_RAW && p->length != p->raw_length)
        PFAIL("raw piece stores %llu bytes but raw_length is %llu", (unsigned long long)p->length,
              (unsigned long long)p->raw_length);
    uint64_t end;
    if (__builtin_add_overflow(p->offset, p->length, &end) || end > ck->file_sizes[p->file])
        PFAIL("bytes [%llu, +%llu) run past the end of %s (%llu bytes)", (unsigned long long)p->offset,
              (unsigned long long)p->length, file, (unsigned long long)ck->file_sizes[p->file]);
    if (p->raw_length > 0 && p->length == 0) PFAIL("stores no bytes for %llu raw bytes", (unsigned long long)p->raw_length);
    /* A decoded piece must fit memory; SIZE_MAX/2 keeps room for the arithmetic around it. */
    if (p->raw_length > SIZE_MAX / 2 || p->length > SIZE_MAX / 2) PFAIL("is too large for this machine");
    return LCX_OK;
#undef PFAIL
}

/* No two pieces of a tensor overlap; params are covered exactly once. */
static lcx_status check_cover(lcx_ckpt *ck, lcx_ckpt_tensor *t) {
    int n = t->n_pieces;
    /* Only pieces holding elements can overlap: empty boxes are left out of the sweep (many empty boxes on one
     * spot made it quadratic: 20,000 took 6 s). */
    piece_key *order = malloc(sizeof(piece_key) * (size_t)(n ? n : 1));
    LCX_FAIL_IF(!order, LCX_ERR_OOM, "out of memory");
    int m = 0;
    for (int i = 0; i < n; i++) {
        uint64_t v;
        if (lcx_box_volume(&t->pieces[i].box, &v) != LCX_OK || v > 0) order[m++] = (piece_key){0, i};
    }
    if (m > 1) {
        /* Sweep: after sorting by start along one dim, a piece can only meet later pieces that start before its end
         * there. Sweep the dim with the most distinct starts (rows for row splits, columns for column splits), so
         * real layouts cost O(n log n) rather than O(n^2). */
        int dim = 0;
        size_t best = 0;
        for (int d = 0; d < t->ndim; d++) {
            for (int i = 0; i < m; i++) order[i].start0 = t->pieces[order[i].idx].box.start[d];
            qsort(order, (size_t)m, sizeof *order, piece_key_cmp);
            size_t distinct = 1;
            for (int i = 1; i < m; i++) distinct += order[i].start0 != order[i - 1].start0;
            if (distinct > best) best = distinct, dim = d;
        }
        for (int i = 0; i < m; i++) order[i].start0 = t->ndim ? t->pieces[order[i].idx].box.start[dim] : 0;
        qsort(order, (size_t)m, sizeof *order, piece_key_cmp);
        for (int a = 0; a < m; a++) {
            const lcx_box *ba = &t->pieces[order[a].idx].box;
            uint64_t end = ba->ndim ? ba->start[dim] + ba->shape[dim] : 1;
            for (int b = a + 1; b < m; b++) {
                const lcx_box *bb = &t->pieces[order[b].idx].box;
                if (bb->ndim && bb->start[dim] >= end) break;
                lcx_box in;
                if (lcx_box_intersect(ba, bb, &in)) {
                    char s1[160], s2[160];
                    lcx_status st = lcx_fail(LCX_ERR_FORMAT, "%s: tensor '%s' (role %s): pieces %d %s and %d %s overlap",
                                             ck->mpath, t->name, t->role, order[a].idx, lcx_box_str(ba, s1, sizeof s1),
                                             order[b].idx, lcx_box_str(bb, s2, sizeof s2));
                    free(order);
                    return st;
                }
            }
        }
    }
    free(order);
    if (strcmp(t->role, "param") == 0) {
        lcx_box full = lcx_box_full(t->ndim, t->shape);
        uint64_t numel, sum = 0, v;
        LCX_TRY(lcx_box_volume(&full, &numel));
        for (int i = 0; i < n; i++) {
            LCX_TRY(lcx_box_volume(&t->pieces[i].box, &v));
            sum += v; /* each <= numel and non-overlapping, so the sum cannot exceed numel */
        }
        LCX_FAIL_IF(sum != numel, LCX_ERR_FORMAT,
                    "%s: tensor '%s' (role param): pieces cover %llu of its %llu elements (a param must be stored "
                    "exactly once)",
                    ck->mpath, t->name, (unsigned long long)sum, (unsigned long long)numel);
    }
    return LCX_OK;
}

static lcx_status parse_tensor(lcx_ckpt *ck, lcx_ckpt_tensor *t, const json_t *tj, size_t ti) {
    LCX_FAIL_IF(!json_is_object(tj), LCX_ERR_FORMAT, "%s: tensors[%zu] is not an object", ck->mpath, ti);
    const char *name = json_str(tj, "name"), *role = json_str(tj, "role"), *dtype = json_str(tj, "dtype");
    LCX_FAIL_IF(!name || !*name, LCX_ERR_FORMAT, "%s: tensors[%zu]: missing or empty 'name'", ck->mpath, ti);
    t->name = strdup(name);
    LCX_FAIL_IF(!t->name, LCX_ERR_OOM, "out of memory");
    LCX_FAIL_IF(!role || !lcx_ckpt_valid_role(role), LCX_ERR_FORMAT,
                "%s: tensor '%s': 'role' must be 1-%d characters [a-z0-9_]", ck->mpath, name, LCX_CKPT_ROLE_MAX);
    strcpy(t->role, role);
    t->dtype = dtype ? lcx_dtype_from_name(dtype) : LCX_DTYPE_INVALID;
    LCX_FAIL_IF(t->dtype == LCX_DTYPE_INVALID, LCX_ERR_FORMAT, "%s: tensor '%s' (role %s): unknown dtype '%s'",
                ck->mpath, name, role, dtype ? dtype : "(missing)");
    t->es = lcx_ckpt_dtype_size(t->dtype);
    LCX_FAIL_IF(t->es == 0, LCX_ERR_UNSUPPORTED,
                "%s: tensor '%s' (role %s): dtype %s has no whole-byte elements (unsupported in checkpoints)",
                ck->mpath, name, role, dtype);
    LCX_FAIL_IF(!json_dims(json_object_get(tj, "shape"), &t->ndim, t->shape), LCX_ERR_FORMAT,
                "%s: tensor '%s' (role %s): 'shape' must be an array of at most %d non-negative integers", ck->mpath,
                name, role, LCX_BOX_MAX_DIMS);
    lcx_box full = lcx_box_full(t->ndim, t->shape);
    uint64_t numel, bytes;
    LCX_FAIL_IF(lcx_box_volume(&full, &numel) != LCX_OK || __builtin_mul_overflow(numel, (uint64_t)t->es, &bytes) ||
                    bytes > (uint64_t)INT64_MAX,
                LCX_ERR_FORMAT, "%s: tensor '%s' (role %s): shape is too large", ck->mpath, name, role);
    const json_t *pieces = json_object_get(tj, "pieces");
    LCX_FAIL_IF(!json_is_array(pieces), LCX_ERR_FORMAT, "%s: tensor '%s' (role %s): 'pieces' must be an array",
                ck->mpath, name, role);
    size_t np = json_array_size(pieces);
    LCX_FAIL_IF(np > MAX_PIECES, LCX_ERR_FORMAT, "%s: tensor '%s' (role %s): %zu pieces, more than the limit of %d",
                ck->mpath, name, role, np, MAX_PIECES);
    t->pieces = calloc(np ? np : 1, sizeof *t->pieces);
    LCX_FAIL_IF(!t->pieces, LCX_ERR_OOM, "out of memory");
    t->n_pieces = (int)np;
    for (size_t i = 0; i < np; i++) LCX_TRY(parse_piece(ck, t, (int)i, json_array_get(pieces, i)));
    return check_cover(ck, t);
}

static lcx_status parse_manifest(lcx_ckpt *ck) {
    const json_t *root = ck->root;
    LCX_FAIL_IF(!json_is_object(root), LCX_ERR_FORMAT, "%s: not a JSON object", ck->mpath);
    const char *fmt = json_str(root, "format");
    LCX_FAIL_IF(!fmt || strcmp(fmt, LCX_CKPT_FORMAT) != 0, LCX_ERR_FORMAT, "%s: 'format' is '%s', expected '%s'",
                ck->mpath, fmt ? fmt : "(missing)", LCX_CKPT_FORMAT);
    uint64_t ver;
    LCX_FAIL_IF(!json_u64(json_object_get(root, "version"), &ver), LCX_ERR_FORMAT, "%s: 'version' must be an integer",
                ck->mpath);
    LCX_FAIL_IF(ver != LCX_CKPT_VERSION, LCX_ERR_UNSUPPORTED, "%s: format version %llu, this build reads version %d",
                ck->mpath, (unsigned long long)ver, LCX_CKPT_VERSION);

    const json_t *lay = json_object_get(root, "layout");
    uint64_t tp, cp, dp;
    const char *kv = json_str(lay, "kv_layout");
    LCX_FAIL_IF(!json_u64(json_object_get(lay, "tp"), &tp) || !json_u64(json_object_get(lay, "cp"), &cp) ||
                    !json_u64(json_object_get(lay, "dp"), &dp) || tp < 1 || cp < 1 || dp < 1 || tp > 1 << 20 ||
                    cp > 1 << 20 || dp > 1 << 20,
                LCX_ERR_FORMAT, "%s: 'layout' needs integers tp, cp, dp >= 1", ck->mpath);
    LCX_FAIL_IF(!kv || (strcmp(kv, "split") != 0 && strcmp(kv, "replicated") != 0), LCX_ERR_FORMAT,
                "%s: layout.kv_layout is '%s', expected 'split' or 'replicated'", ck->mpath, kv ? kv : "(missing)");
    ck->tp = (int)tp, ck->cp = (int)cp, ck->dp = (int)dp;
    snprintf(ck->kv_layout, sizeof ck->kv_layout, "%s", kv);

    ck->model_config = json_object_get(root, "model_config");
    ck->training_state = json_object_get(root, "training_state");
    LCX_FAIL_IF(!ck->model_config || !(json_is_object(ck->model_config) || json_is_null(ck->model_config)),
                LCX_ERR_FORMAT, "%s: 'model_config' must be an object or null", ck->mpath);
    LCX_FAIL_IF(!ck->training_state, LCX_ERR_FORMAT, "%s: 'training_state' is missing", ck->mpath);

    /* Data files: present, regular, exactly the recorded size (a truncated copy fails here, not mid-load). */
    const json_t *files = json_object_get(root, "files");
    LCX_FAIL_IF(!json_is_array(files), LCX_ERR_FORMAT, "%s: 'files' must be an array", ck->mpath);
    LCX_FAIL_IF(json_array_size(files) > MAX_FILES, LCX_ERR_FORMAT, "%s: %zu files, more than the limit of %d",
                ck->mpath, json_array_size(files), MAX_FILES);
    size_t nf = json_array_size(files);
    ck->file_names = calloc(nf + 1, sizeof(char *));
    ck->file_paths = calloc(nf + 1, sizeof(char *));
    ck->file_sizes = calloc(nf + 1, sizeof(uint64_t));
    ck->maps = calloc(nf + 1, sizeof(lcx_mapping));
    ck->mapped = calloc(nf + 1, sizeof(int));
    LCX_FAIL_IF(!ck->file_names || !ck->file_paths || !ck->file_sizes || !ck->maps || !ck->mapped, LCX_ERR_OOM,
                "out of memory");
    for (size_t i = 0; i < nf; i++) {
        const json_t *f = json_array_get(files, i);
        const char *fname = json_str(f, "name");
        uint64_t size;
        LCX_FAIL_IF(!fname || !lcx_ckpt_safe_name(fname) || strcmp(fname, LCX_CKPT_MANIFEST) == 0, LCX_ERR_FORMAT,
                    "%s: files[%zu]: 'name' must be a plain file name in the checkpoint directory", ck->mpath, i);
        LCX_FAIL_IF(!json_u64(json_object_get(f, "size"), &size), LCX_ERR_FORMAT,
                    "%s: file '%s': 'size' must be a non-negative integer", ck->mpath, fname);
        ck->file_names[i] = strdup(fname);
        ck->file_paths[i] = lcx_path_join(ck->dir, fname);
        ck->file_sizes[i] = size;
        ck->n_files = (int)i + 1;
        LCX_FAIL_IF(!ck->file_names[i] || !ck->file_paths[i], LCX_ERR_OOM, "out of memory");
        uint64_t have;
        lcx_status fst = lcx_check_input(ck->file_paths[i], LCX_IN_OWN, &have);
        LCX_FAIL_IF(fst == LCX_ERR_NOT_FOUND, fst, "%s: data file missing", ck->file_paths[i]);
        LCX_TRY(fst);
        LCX_FAIL_IF(have != size, LCX_ERR_FORMAT,
                    "%s: file is %llu bytes but the manifest says %llu (truncated or modified)", ck->file_paths[i],
                    (unsigned long long)have, (unsigned long long)size);
    }

    ck->files_sorted = malloc((nf + 1) * sizeof *ck->files_sorted);
    LCX_FAIL_IF(!ck->files_sorted, LCX_ERR_OOM, "out of memory");
    for (size_t i = 0; i < nf; i++) ck->files_sorted[i] = (file_key){ck->file_names[i], (int)i};
    qsort(ck->files_sorted, nf, sizeof *ck->files_sorted, file_key_cmp);
    for (size_t i = 1; i < nf; i++)
        LCX_FAIL_IF(strcmp(ck->files_sorted[i - 1].name, ck->files_sorted[i].name) == 0, LCX_ERR_FORMAT,
                    "%s: file '%s' listed twice", ck->mpath, ck->files_sorted[i].name);

    const json_t *tok = json_object_get(root, "tokenizer_files");
    LCX_FAIL_IF(!json_is_array(tok), LCX_ERR_FORMAT, "%s: 'tokenizer_files' must be an array", ck->mpath);
    LCX_FAIL_IF(json_array_size(tok) > MAX_TOKENIZER_FILES, LCX_ERR_FORMAT,
                "%s: %zu tokenizer_files, more than the limit of %d", ck->mpath, json_array_size(tok),
                MAX_TOKENIZER_FILES);
    ck->tok = calloc(json_array_size(tok) + 1, sizeof(char *));
    LCX_FAIL_IF(!ck->tok, LCX_ERR_OOM, "out of memory");
    for (size_t i = 0; i < json_array_size(tok); i++) {
        const char *name = json_string_value(json_array_get(tok, i));
        LCX_FAIL_IF(!name || !lcx_ckpt_safe_name(name), LCX_ERR_FORMAT,
                    "%s: tokenizer_files[%zu] must be a plain file name", ck->mpath, i);
        /* A side file is neither the manifest nor a data file, and is listed once: a copy (reshard, export)
         * would otherwise write one name twice. */
        LCX_FAIL_IF(strcmp(name, LCX_CKPT_MANIFEST) == 0 || file_index(ck, name) >= 0, LCX_ERR_FORMAT,
                    "%s: tokenizer_files[%zu] '%s' names the manifest or a data file", ck->mpath, i, name);
        for (int j = 0; j < ck->n_tok; j++)
            LCX_FAIL_IF(strcmp(ck->tok[j], name) == 0, LCX_ERR_FORMAT, "%s: tokenizer file '%s' listed twice",
                        ck->mpath, name);
        ck->tok[i] = strdup(name);
        LCX_FAIL_IF(!ck->tok[i], LCX_ERR_OOM, "out of memory");
        ck->n_tok = (int)i + 1;
        char *p = lcx_path_join(ck->dir, name);
        LCX_FAIL_IF(!p, LCX_ERR_OOM, "out of memory");
        lcx_status st = lcx_check_input(p, LCX_IN_OWN, NULL);
        free(p);
        if (st == LCX_ERR_NOT_FOUND)
            return lcx_fail(st, "%s: tokenizer file '%s' is missing from the checkpoint", ck->mpath, name);
        LCX_TRY(st);
    }

    const json_t *tensors = json_object_get(root, "tensors");
    LCX_FAIL_IF(!json_is_array(tensors), LCX_ERR_FORMAT, "%s: 'tensors' must be an array", ck->mpath);
    LCX_FAIL_IF(json_array_size(tensors) > MAX_TENSORS, LCX_ERR_FORMAT, "%s: %zu tensors, more than the limit of %d",
                ck->mpath, json_array_size(tensors), MAX_TENSORS);
    size_t nt = json_array_size(tensors);
    ck->tensors = calloc(nt + 1, sizeof *ck->tensors);
    LCX_FAIL_IF(!ck->tensors, LCX_ERR_OOM, "out of memory");
    for (size_t i = 0; i < nt; i++) {
        ck->n_tensors = (int)i + 1;
        LCX_TRY(parse_tensor(ck, &ck->tensors[i], json_array_get(tensors, i), i));
    }
    qsort(ck->tensors, nt, sizeof *ck->tensors, tensor_cmp);
    for (size_t i = 1; i < nt; i++)
        LCX_FAIL_IF(tensor_cmp(&ck->tensors[i - 1], &ck->tensors[i]) == 0, LCX_ERR_FORMAT,
                    "%s: tensor '%s' with role %s is listed twice", ck->mpath, ck->tensors[i].name, ck->tensors[i].role);

    /* Stored byte ranges of different pieces must not share bytes. */
    size_t ns = 0;
    for (int i = 0; i < ck->n_tensors; i++) ns += (size_t)ck->tensors[i].n_pieces;
    span *sp = malloc(sizeof(span) * (ns + 1));
    LCX_FAIL_IF(!sp, LCX_ERR_OOM, "out of memory");
    size_t k = 0;
    for (int i = 0; i < ck->n_tensors; i++)
        for (int j = 0; j < ck->tensors[i].n_pieces; j++) {
            const lcx_ckpt_piece *p = &ck->tensors[i].pieces[j];
            if (p->length) sp[k++] = (span){p->file, p->offset, p->length, i, j};
        }
    qsort(sp, k, sizeof(span), span_cmp);
    for (size_t i = 1; i < k; i++) {
        if (sp[i].file == sp[i - 1].file && sp[i].offset < sp[i - 1].offset + sp[i - 1].length) {
            lcx_status st = lcx_fail(LCX_ERR_FORMAT, "%s: %s: bytes of tensor '%s' (role %s) and tensor '%s' (role %s) "
                                     "overlap at offset %llu",
                                     ck->mpath, ck->file_names[sp[i].file], ck->tensors[sp[i - 1].tensor].name,
                                     ck->tensors[sp[i - 1].tensor].role, ck->tensors[sp[i].tensor].name,
                                     ck->tensors[sp[i].tensor].role, (unsigned long long)sp[i].offset);
            free(sp);
            return st;
        }
    }
    free(sp);
    return LCX_OK;
}

lcx_status lcx_ckpt_open(const char *dir, lcx_ckpt **out) {
    *out = NULL;
    lcx_ckpt *ck = calloc(1, sizeof *ck);
    LCX_FAIL_IF(!ck, LCX_ERR_OOM, "out of memory");
    lcx_codec_ctx_init(&ck->codec, 3, 0);
    lcx_status st = LCX_OK;
    ck->dir = strdup(dir);
    ck->mpath = lcx_path_join(dir, LCX_CKPT_MANIFEST);
    LCX_FAIL_GOTO(!ck->dir || !ck->mpath, LCX_ERR_OOM, fail, "out of memory");
    LCX_FAIL_GOTO(!lcx_is_dir(dir), LCX_ERR_NOT_FOUND, fail, "%s: no such checkpoint directory", dir);
    char *text = NULL;
    size_t len = 0;
    LCX_TRY_GOTO(lcx_read_input(ck->mpath, LCX_IN_OWN, (size_t)1 << 30, &text, &len), fail);
    json_error_t err;
    ck->root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    LCX_FAIL_GOTO(!ck->root, LCX_ERR_FORMAT, fail, "%s:%d:%d: %s", ck->mpath, err.line, err.column, err.text);
    LCX_TRY_GOTO(parse_manifest(ck), fail);
    *out = ck;
    return LCX_OK;
fail:
    lcx_ckpt_free(ck);
    return st;
}

void lcx_ckpt_free(lcx_ckpt *ck) {
    if (!ck) return;
    for (int i = 0; i < ck->n_files; i++) {
        if (ck->mapped && ck->mapped[i]) lcx_unmap(&ck->maps[i]);
        free(ck->file_names[i]);
        free(ck->file_paths[i]);
    }
    free(ck->file_names);
    free(ck->files_sorted);
    free(ck->file_paths);
    free(ck->file_sizes);
    free(ck->maps);
    free(ck->mapped);
    for (int i = 0; i < ck->n_tok; i++) free(ck->tok[i]);
    free(ck->tok);
    for (int i = 0; i < ck->n_tensors; i++) {
        free(ck->tensors[i].name);
        free(ck->tensors[i].pieces);
    }
    free(ck->tensors);
    json_decref(ck->root);
    lcx_codec_ctx_free(&ck->codec);
    free(ck->scratch);
    free(ck->dir);
    free(ck->mpath);
    free(ck);
}

/* ---- accessors ------------------------------------------------------------------------------------------- */

int lcx_ckpt_tensor_count(const lcx_ckpt *ck) { return ck->n_tensors; }
const lcx_ckpt_tensor *lcx_ckpt_tensor_at(const lcx_ckpt *ck, int i) {
    return i >= 0 && i < ck->n_tensors ? &ck->tensors[i] : NULL;
}

const lcx_ckpt_tensor *lcx_ckpt_find(const lcx_ckpt *ck, const char *name, const char *role) {
    if (strlen(role) > LCX_CKPT_ROLE_MAX) return NULL;
    lcx_ckpt_tensor key;
    memset(&key, 0, sizeof key);
    key.name = (char *)name;
    strcpy(key.role, role);
    return bsearch(&key, ck->tensors, (size_t)ck->n_tensors, sizeof key, tensor_cmp);
}

const json_t *lcx_ckpt_model_config(const lcx_ckpt *ck) { return ck->model_config; }
const json_t *lcx_ckpt_training_state(const lcx_ckpt *ck) { return ck->training_state; }
void lcx_ckpt_layout(const lcx_ckpt *ck, int *tp, int *cp, int *dp, const char **kv_layout) {
    if (tp) *tp = ck->tp;
    if (cp) *cp = ck->cp;
    if (dp) *dp = ck->dp;
    if (kv_layout) *kv_layout = ck->kv_layout;
}
int lcx_ckpt_tokenizer_file_count(const lcx_ckpt *ck) { return ck->n_tok; }
const char *lcx_ckpt_tokenizer_file(const lcx_ckpt *ck, int i) { return i >= 0 && i < ck->n_tok ? ck->tok[i] : NULL; }
const char *lcx_ckpt_dir(const lcx_ckpt *ck) { return ck->dir; }
int lcx_ckpt_file_count(const lcx_ckpt *ck) { return ck->n_files; }
const char *lcx_ckpt_file_name(const lcx_ckpt *ck, int i) {
    return i >= 0 && i < ck->n_files ? ck->file_names[i] : NULL;
}

/* ---- reading pieces -------------------------------------------------------------------------------------- */

static lcx_status map_file(lcx_ckpt *ck, int f) {
    if (ck->mapped[f]) return LCX_OK;
    LCX_TRY(lcx_map_input(ck->file_paths[f], LCX_IN_OWN, &ck->maps[f]));
    ck->mapped[f] = 1;
    if ((uint64_t)ck->maps[f].size != ck->file_sizes[f])
        return lcx_fail(LCX_ERR_FORMAT, "%s: file is %zu bytes but the manifest says %llu (modified since open)",
                        ck->file_paths[f], ck->maps[f].size, (unsigned long long)ck->file_sizes[f]);
    return LCX_OK;
}

/* Stored bytes of a piece, checksum verified (once per session unless force). */
static lcx_status piece_stored(lcx_ckpt *ck, const lcx_ckpt_tensor *t, lcx_ckpt_piece *p, int force,
                               const uint8_t **stored) {
    *stored = NULL;
    LCX_TRY(map_file(ck, p->file));
    const uint8_t *s = ck->maps[p->file].data ? ck->maps[p->file].data + p->offset : NULL;
    if (!p->verified || force) {
        uint64_t h = lcx_xxh3(s, (size_t)p->length);
        if (h != p->checksum) {
            char want[17], got[17];
            lcx_xxh3_hex(p->checksum, want);
            lcx_xxh3_hex(h, got);
            return lcx_fail(LCX_ERR_FORMAT,
                            "%s: tensor '%s' (role %s): piece at offset %llu (%llu bytes): checksum mismatch "
                            "(manifest %s, data %s): the file is corrupt",
                            ck->file_paths[p->file], t->name, t->role, (unsigned long long)p->offset,
                            (unsigned long long)p->length, want, got);
        }
        p->verified = 1;
    }
    *stored = s;
    return LCX_OK;
}

/* Decode a piece into dst (raw_length bytes). */
static lcx_status piece_decode(lcx_ckpt *ck, const lcx_ckpt_tensor *t, const lcx_ckpt_piece *p, const uint8_t *stored,
                               void *dst) {
    lcx_status st = lcx_codec_decode(&ck->codec, p->codec, p->filter, t->es, stored, (size_t)p->length, dst,
                                     (size_t)p->raw_length);
    if (st != LCX_OK)
        return lcx_fail_context(st, "%s: tensor '%s' (role %s): piece at offset %llu: ", ck->file_paths[p->file],
                                t->name, t->role, (unsigned long long)p->offset);
    return LCX_OK;
}

static lcx_status reserve_scratch(lcx_ckpt *ck, size_t n) {
    ck->cached = NULL; /* the caller is about to overwrite it */
    if (ck->scratch_cap >= n && ck->scratch) return LCX_OK;
    uint8_t *p = realloc(ck->scratch, n ? n : 1);
    LCX_FAIL_IF(!p, LCX_ERR_OOM, "cannot allocate %zu bytes to decode a checkpoint piece", n);
    ck->scratch = p;
    ck->scratch_cap = n;
    return LCX_OK;
}

static int box_equal(const lcx_box *a, const lcx_box *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->start[i] != b->start[i] || a->shape[i] != b->shape[i]) return 0;
    return 1;
}

lcx_status lcx_ckpt_read_box(lcx_ckpt *ck, const char *name, const char *role, const lcx_box *box, void *dst) {
    lcx_ckpt_tensor *t = (lcx_ckpt_tensor *)lcx_ckpt_find(ck, name, role);
    LCX_FAIL_IF(!t, LCX_ERR_NOT_FOUND, "%s: no tensor '%s' with role '%s'", ck->dir, name, role);
    char bs[160];
    LCX_FAIL_IF(!lcx_box_inside(box, t->ndim, t->shape), LCX_ERR_INVALID,
                "%s: tensor '%s' (role %s): requested box %s is outside its %d-dim shape", ck->dir, name, role,
                lcx_box_str(box, bs, sizeof bs), t->ndim);
    uint64_t want, covered = 0;
    LCX_TRY(lcx_box_volume(box, &want));
    if (want == 0) return LCX_OK;
    for (int i = 0; i < t->n_pieces; i++) {
        lcx_ckpt_piece *p = &t->pieces[i];
        lcx_box in;
        if (!lcx_box_intersect(&p->box, box, &in)) continue;
        const uint8_t *stored;
        LCX_TRY(piece_stored(ck, t, p, 0, &stored));
        const uint8_t *raw = stored;
        if (p->codec != LCX_CODEC_RAW || p->filter != LCX_FILTER_NONE) {
            if (box_equal(&p->box, box)) { /* whole request is this piece: decode straight into dst */
                LCX_TRY(piece_decode(ck, t, p, stored, dst));
                covered += want;
                continue;
            }
            /* Reshard readers ask for neighbouring boxes of one piece in turn: keep the last decoded piece. */
            if (ck->cached != p) {
                LCX_TRY(reserve_scratch(ck, (size_t)p->raw_length));
                LCX_TRY(piece_decode(ck, t, p, stored, ck->scratch));
                ck->cached = p;
            }
            raw = ck->scratch;
        }
        uint64_t n;
        LCX_TRY(lcx_box_copy(&p->box, raw, box, dst, t->es, &n));
        covered += n;
    }
    LCX_FAIL_IF(covered != want, LCX_ERR_FORMAT,
                "%s: tensor '%s' (role %s): the stored pieces cover %llu of the %llu elements of box %s", ck->dir, name,
                role, (unsigned long long)covered, (unsigned long long)want, lcx_box_str(box, bs, sizeof bs));
    return LCX_OK;
}

lcx_status lcx_ckpt_box_view(lcx_ckpt *ck, const char *name, const char *role, const lcx_box *box, const void **view) {
    *view = NULL;
    lcx_ckpt_tensor *t = (lcx_ckpt_tensor *)lcx_ckpt_find(ck, name, role);
    LCX_FAIL_IF(!t, LCX_ERR_NOT_FOUND, "%s: no tensor '%s' with role '%s'", ck->dir, name, role);
    for (int i = 0; i < t->n_pieces; i++) {
        lcx_ckpt_piece *p = &t->pieces[i];
        uint64_t off;
        if (p->codec != LCX_CODEC_RAW || p->filter != LCX_FILTER_NONE || !lcx_box_contiguous_in(&p->box, box, &off))
            continue;
        const uint8_t *stored;
        LCX_TRY(piece_stored(ck, t, p, 0, &stored));
        *view = stored + off * t->es;
        return LCX_OK;
    }
    return LCX_OK;
}

void lcx_ckpt_release(lcx_ckpt *ck) {
    if (!ck) return;
    for (int f = 0; f < ck->n_files; f++)
        if (ck->mapped[f] && ck->maps[f].data && ck->maps[f].size)
            (void)madvise((void *)ck->maps[f].data, ck->maps[f].size, MADV_DONTNEED); /* advisory: failure is harmless */
}

lcx_status lcx_ckpt_verify(lcx_ckpt *ck) {
    for (int i = 0; i < ck->n_tensors; i++) {
        lcx_ckpt_tensor *t = &ck->tensors[i];
        for (int j = 0; j < t->n_pieces; j++) {
            lcx_ckpt_piece *p = &t->pieces[j];
            const uint8_t *stored;
            LCX_TRY(piece_stored(ck, t, p, 1, &stored));
            if (p->codec == LCX_CODEC_RAW && p->filter == LCX_FILTER_NONE) continue; /* checksum covers it all */
            LCX_TRY(reserve_scratch(ck, (size_t)p->raw_length));
            LCX_TRY(piece_decode(ck, t, p, stored, ck->scratch));
        }
    }
    return LCX_OK;
}
