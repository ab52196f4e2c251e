#define _GNU_SOURCE /* sync_file_range */
/* lcx writer: per-rank data files, manifest, atomic commit, pruning. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "formats/lcx.h"
#include "formats/lcx_internal.h"
#include "src/core/fileio.h"
#include "src/core/outpath.h"

#define PIECE_ALIGN 64 /* stored pieces start 64-byte aligned so raw mmap views are aligned for any dtype */

void lcx_ckpt_write_opts_default(lcx_ckpt_write_opts *o) {
    o->codec = LCX_CODEC_ZSTD;
    o->filter = LCX_FILTER_SHUFFLE;
    o->level = 1; /* on bf16 weights level 1 + shuffle beat level 3 in ratio and speed (docs/benchmarks.md) */
    o->threads = 0;
    o->max_piece_bytes = (uint64_t)256 << 20;
}

static int valid_ckpt_name(const char *name) {
    return lcx_ckpt_safe_name(name) && strcmp(name, LCX_CKPT_LATEST) != 0 && !strstr(name, ".tmp-");
}

lcx_status lcx_ckpt_tmpdir_create(const char *parent, const char *name, char **tmp_dir) {
    *tmp_dir = NULL;
    LCX_FAIL_IF(!valid_ckpt_name(name), LCX_ERR_INVALID,
                "checkpoint name '%s': use letters, digits, '.', '_', '-' (not starting with '.', not 'latest', "
                "without '.tmp-')",
                name);
    LCX_FAIL_IF(!lcx_is_dir(parent), LCX_ERR_NOT_FOUND, "%s: checkpoint parent directory does not exist", parent);
    char *p = lcx_path_join(parent, name);
    LCX_FAIL_IF(!p, LCX_ERR_OOM, "out of memory");
    /* Refuse before any data is written rather than at commit time; the temporary removes stale ones first. */
    struct stat sb;
    lcx_status st = lstat(p, &sb) == 0 ? lcx_fail(LCX_ERR_INVALID, "%s: already exists (refusing to overwrite)", p)
                                       : lcx_out_temp_dir(p, tmp_dir);
    free(p);
    return st;
}

/* ---- per-rank writer ------------------------------------------------------------------------------------- */

struct lcx_ckpt_writer {
    char *path;
    char file_name[64];
    int fd;
    uint64_t off;
    uint64_t kicked; /* bytes handed to writeback so far */
    lcx_ckpt_write_opts o;
    lcx_codec_ctx codec;
    json_t *tensors; /* array of {name, role, dtype, shape, pieces} in put order */
};

static lcx_status write_all(int fd, const void *buf, size_t n, const char *path) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        LCX_FAIL_IF(w <= 0, LCX_ERR_IO, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return LCX_OK;
}

lcx_status lcx_ckpt_writer_open(const char *tmp_dir, int rank, const lcx_ckpt_write_opts *opts,
                                lcx_ckpt_writer **out) {
    *out = NULL;
    LCX_FAIL_IF(rank < 0, LCX_ERR_INVALID, "writer rank %d must be >= 0", rank);
    lcx_ckpt_writer *w = calloc(1, sizeof *w);
    LCX_FAIL_IF(!w, LCX_ERR_OOM, "out of memory");
    w->fd = -1;
    if (opts) w->o = *opts;
    else lcx_ckpt_write_opts_default(&w->o);
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO((unsigned)w->o.codec >= LCX_CODEC_COUNT || (unsigned)w->o.filter >= LCX_FILTER_COUNT,
                  LCX_ERR_INVALID, fail, "unknown codec %d / filter %d", (int)w->o.codec, (int)w->o.filter);
    lcx_codec_ctx_init(&w->codec, w->o.level, w->o.threads);
    snprintf(w->file_name, sizeof w->file_name, "data-%d.bin", rank);
    w->path = lcx_path_join(tmp_dir, w->file_name);
    w->tensors = json_array();
    LCX_FAIL_GOTO(!w->path || !w->tensors, LCX_ERR_OOM, fail, "out of memory");
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    LCX_FAIL_GOTO(w->fd < 0, LCX_ERR_IO, fail, "%s: cannot create: %s", w->path, strerror(errno));
    *out = w;
    return LCX_OK;
fail:
    lcx_ckpt_writer_free(w);
    return st;
}

void lcx_ckpt_writer_free(lcx_ckpt_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    lcx_codec_ctx_free(&w->codec);
    json_decref(w->tensors);
    free(w->path);
    free(w);
}

static json_t *dims_json(int ndim, const uint64_t *d) {
    json_t *a = json_array();
    for (int i = 0; a && i < ndim; i++) json_array_append_new(a, json_integer((json_int_t)d[i]));
    return a;
}

/* The tensor entry for (name, role), created on first use; dtype and shape must agree with earlier puts. */
static lcx_status tensor_entry(lcx_ckpt_writer *w, const char *name, const char *role, lcx_dtype dt, int ndim,
                               const uint64_t *shape, json_t **entry) {
    json_t *sj = dims_json(ndim, shape);
    LCX_FAIL_IF(!sj, LCX_ERR_OOM, "out of memory");
    size_t i;
    json_t *e;
    json_array_foreach(w->tensors, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) != 0 ||
            strcmp(json_string_value(json_object_get(e, "role")), role) != 0)
            continue;
        int same = json_equal(json_object_get(e, "shape"), sj) &&
                   strcmp(json_string_value(json_object_get(e, "dtype")), lcx_dtype_name(dt)) == 0;
        json_decref(sj);
        LCX_FAIL_IF(!same, LCX_ERR_INVALID, "tensor '%s' (role %s): put with a different dtype or shape than before",
                    name, role);
        *entry = e;
        return LCX_OK;
    }
    e = json_pack("{s:s, s:s, s:s, s:o, s:[]}", "name", name, "role", role, "dtype", lcx_dtype_name(dt), "shape", sj,
                  "pieces");
    LCX_FAIL_IF(!e || json_array_append_new(w->tensors, e) != 0, LCX_ERR_OOM, "out of memory");
    *entry = e;
    return LCX_OK;
}

static lcx_status put_one(lcx_ckpt_writer *w, json_t *entry, const char *name, size_t es, const lcx_box *box,
                          const uint8_t *data, size_t raw_len) {
    const uint8_t *stored;
    size_t stored_len;
    lcx_status st = lcx_codec_encode(&w->codec, w->o.codec, w->o.filter, es, data, raw_len, &stored, &stored_len);
    if (st != LCX_OK) return lcx_fail_context(st, "%s: tensor '%s': ", w->path, name);
    static const uint8_t zeros[PIECE_ALIGN];
    size_t pad = (size_t)((PIECE_ALIGN - w->off % PIECE_ALIGN) % PIECE_ALIGN);
    LCX_TRY(write_all(w->fd, zeros, pad, w->path));
    w->off += pad;
    uint64_t offset = w->off;
    LCX_TRY(write_all(w->fd, stored, stored_len, w->path));
    w->off += stored_len;
#ifdef SYNC_FILE_RANGE_WRITE
    /* Start writeback every 32 MiB so the disk works while the next pieces are produced and the fsync at close
     * has little left to do. Advisory: a failure here shows up at fsync. */
    if (w->off - w->kicked >= ((uint64_t)32 << 20)) {
        (void)sync_file_range(w->fd, (off_t)w->kicked, (off_t)(w->off - w->kicked), SYNC_FILE_RANGE_WRITE);
        w->kicked = w->off;
    }
#endif
    char hex[17];
    lcx_xxh3_hex(lcx_xxh3(stored, stored_len), hex);
    json_t *p = json_pack("{s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:o, s:s}", "file", w->file_name, "offset",
                          (json_int_t)offset, "length", (json_int_t)stored_len, "codec", lcx_codec_name(w->o.codec),
                          "filter", lcx_filter_name(w->o.filter), "raw_length", (json_int_t)raw_len, "start",
                          dims_json(box->ndim, box->start), "box", dims_json(box->ndim, box->shape), "xxh3", hex);
    LCX_FAIL_IF(!p || json_array_append_new(json_object_get(entry, "pieces"), p) != 0, LCX_ERR_OOM, "out of memory");
    return LCX_OK;
}

lcx_status lcx_ckpt_writer_put(lcx_ckpt_writer *w, const char *name, const char *role, lcx_dtype dtype, int ndim,
                               const uint64_t *shape, const lcx_box *box, const void *data) {
    LCX_FAIL_IF(w->fd < 0, LCX_ERR_INVALID, "%s: writer already closed", w->path);
    LCX_FAIL_IF(!name || !*name, LCX_ERR_INVALID, "tensor name must not be empty");
    LCX_FAIL_IF(!lcx_ckpt_valid_role(role), LCX_ERR_INVALID, "tensor '%s': role '%s' must be 1-%d characters [a-z0-9_]",
                name, role, LCX_CKPT_ROLE_MAX);
    size_t es = lcx_ckpt_dtype_size(dtype);
    LCX_FAIL_IF(es == 0, LCX_ERR_UNSUPPORTED, "tensor '%s': dtype %s cannot be stored in a checkpoint", name,
                lcx_dtype_name(dtype));
    LCX_FAIL_IF(ndim < 0 || ndim > LCX_BOX_MAX_DIMS, LCX_ERR_INVALID, "tensor '%s': %d dims (at most %d)", name, ndim,
                LCX_BOX_MAX_DIMS);
    char bs[160];
    LCX_FAIL_IF(!lcx_box_inside(box, ndim, shape), LCX_ERR_INVALID, "tensor '%s': box %s outside its shape", name,
                lcx_box_str(box, bs, sizeof bs));
    lcx_box full = lcx_box_full(ndim, shape);
    uint64_t numel, vol, bytes;
    LCX_TRY(lcx_box_volume(&full, &numel));
    LCX_FAIL_IF(__builtin_mul_overflow(numel, (uint64_t)es, &bytes) || bytes > (uint64_t)INT64_MAX, LCX_ERR_INVALID,
                "tensor '%s': too large", name);
    LCX_TRY(lcx_box_volume(box, &vol));
    json_t *entry = NULL;
    LCX_TRY(tensor_entry(w, name, role, dtype, ndim, shape, &entry));
    if (vol == 0) return LCX_OK;
    const uint8_t *src = data;
    uint64_t total = vol * es;
    if (ndim == 0 || w->o.max_piece_bytes == 0 || total <= w->o.max_piece_bytes)
        return put_one(w, entry, name, es, box, src, (size_t)total);
    /* Split along dim 0 so no piece (and no reader's decode buffer) exceeds max_piece_bytes (unless one row does). */
    uint64_t row = total / box->shape[0];
    uint64_t rows = w->o.max_piece_bytes / row;
    if (rows == 0) rows = 1;
    for (uint64_t r = 0; r < box->shape[0]; r += rows) {
        lcx_box sub = *box;
        sub.start[0] = box->start[0] + r;
        sub.shape[0] = box->shape[0] - r < rows ? box->shape[0] - r : rows;
        LCX_TRY(put_one(w, entry, name, es, &sub, src + r * row, (size_t)(sub.shape[0] * row)));
    }
    return LCX_OK;
}

lcx_status lcx_ckpt_writer_close(lcx_ckpt_writer *w, json_t **rank_json) {
    *rank_json = NULL;
    LCX_FAIL_IF(w->fd < 0, LCX_ERR_INVALID, "%s: writer already closed", w->path);
    int fd = w->fd;
    w->fd = -1;
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        return lcx_fail(LCX_ERR_IO, "%s: fsync failed: %s", w->path, strerror(e));
    }
    LCX_FAIL_IF(close(fd) != 0, LCX_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
    *rank_json = json_pack("{s:{s:s, s:I}, s:O}", "file", "name", w->file_name, "size", (json_int_t)w->off, "tensors",
                           w->tensors);
    LCX_FAIL_IF(!*rank_json, LCX_ERR_OOM, "out of memory");
    return LCX_OK;
}

/* ---- directory-level steps ------------------------------------------------------------------------------- */

lcx_status lcx_ckpt_copy_file(const char *tmp_dir, const char *src_path, int src_flags, const char *dst_name) {
    LCX_FAIL_IF(!lcx_ckpt_safe_name(dst_name) || strcmp(dst_name, LCX_CKPT_MANIFEST) == 0, LCX_ERR_INVALID,
                "'%s' is not a valid file name inside a checkpoint", dst_name);
    char *dst = lcx_path_join(tmp_dir, dst_name);
    LCX_FAIL_IF(!dst, LCX_ERR_OOM, "out of memory");
    lcx_status st = LCX_OK;
    int in = -1, out = -1;
    char *buf = NULL;
    uint64_t size;
    LCX_TRY_GOTO(lcx_open_input(src_path, src_flags, &in, &size), done);
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    LCX_FAIL_GOTO(out < 0, LCX_ERR_IO, done, "%s: cannot create: %s", dst, strerror(errno));
    buf = malloc(1 << 20);
    LCX_FAIL_GOTO(!buf, LCX_ERR_OOM, done, "out of memory");
    for (;;) {
        ssize_t r = read(in, buf, 1 << 20);
        if (r < 0 && errno == EINTR) continue;
        LCX_FAIL_GOTO(r < 0, LCX_ERR_IO, done, "%s: read failed: %s", src_path, strerror(errno));
        if (r == 0) break;
        LCX_TRY_GOTO(write_all(out, buf, (size_t)r, dst), done);
    }
    LCX_FAIL_GOTO(fsync(out) != 0, LCX_ERR_IO, done, "%s: fsync failed: %s", dst, strerror(errno));
done:
    if (in >= 0) close(in);
    if (out >= 0 && close(out) != 0 && st == LCX_OK) st = lcx_fail(LCX_ERR_IO, "%s: close failed", dst);
    free(buf);
    free(dst);
    return st;
}

typedef struct named_entry {
    const char *key; /* name \x1f role */
    json_t *tensor;
} named_entry;

static int json_tensor_cmp(const void *a, const void *b) {
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(json_string_value(json_object_get(x, "name")), json_string_value(json_object_get(y, "name")));
    return c ? c : strcmp(json_string_value(json_object_get(x, "role")), json_string_value(json_object_get(y, "role")));
}

/* Merge every rank's entries into one tensor list, sorted by (name, role) so the manifest does not depend on
 * rank order. */
static lcx_status merge_tensors(json_t *const *rank_json, int n_ranks, json_t **out) {
    *out = NULL;
    json_t *index = json_object(); /* "name\x1frole" -> merged entry */
    LCX_FAIL_IF(!index, LCX_ERR_OOM, "out of memory");
    lcx_status st = LCX_OK;
    char *key = NULL;
    size_t key_cap = 0;
    for (int r = 0; r < n_ranks; r++) {
        const json_t *ts = json_object_get(rank_json[r], "tensors");
        LCX_FAIL_GOTO(!json_is_array(ts), LCX_ERR_INVALID, done, "rank %d: piece list has no 'tensors' array", r);
        size_t i;
        json_t *e;
        json_array_foreach(ts, i, e) {
            const char *name = json_string_value(json_object_get(e, "name"));
            const char *role = json_string_value(json_object_get(e, "role"));
            LCX_FAIL_GOTO(!name || !role, LCX_ERR_INVALID, done, "rank %d: tensor entry %zu lacks name/role", r, i);
            size_t need = strlen(name) + strlen(role) + 2;
            if (need > key_cap) {
                char *k = realloc(key, need);
                LCX_FAIL_GOTO(!k, LCX_ERR_OOM, done, "out of memory");
                key = k;
                key_cap = need;
            }
            snprintf(key, need, "%s\x1f%s", name, role);
            json_t *m = json_object_get(index, key);
            if (!m) {
                m = json_deep_copy(e);
                LCX_FAIL_GOTO(!m || json_object_set_new(index, key, m) != 0, LCX_ERR_OOM, done, "out of memory");
                continue;
            }
            LCX_FAIL_GOTO(!json_equal(json_object_get(m, "dtype"), json_object_get(e, "dtype")) ||
                              !json_equal(json_object_get(m, "shape"), json_object_get(e, "shape")),
                          LCX_ERR_INVALID, done, "tensor '%s' (role %s): ranks disagree on its dtype or shape", name,
                          role);
            LCX_FAIL_GOTO(json_array_extend(json_object_get(m, "pieces"), json_object_get(e, "pieces")) != 0,
                          LCX_ERR_OOM, done, "out of memory");
        }
    }
    size_t n = json_object_size(index), k = 0;
    json_t **list = malloc(sizeof(json_t *) * (n + 1));
    LCX_FAIL_GOTO(!list, LCX_ERR_OOM, done, "out of memory");
    const char *kk;
    json_t *v;
    json_object_foreach(index, kk, v) list[k++] = v;
    qsort(list, n, sizeof(json_t *), json_tensor_cmp);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) json_array_append(arr, list[i]);
    free(list);
    LCX_FAIL_GOTO(!arr, LCX_ERR_OOM, done, "out of memory");
    *out = arr;
done:
    free(key);
    json_decref(index);
    return st;
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

lcx_status lcx_ckpt_finalize(const char *tmp_dir, const lcx_ckpt_meta *meta, json_t *const *rank_json,
                             int n_ranks) {
    LCX_FAIL_IF(meta->tp < 1 || meta->cp < 1 || meta->dp < 1, LCX_ERR_INVALID, "layout tp=%d cp=%d dp=%d: sizes must be >= 1",
                meta->tp, meta->cp, meta->dp);
    const char *kv = meta->kv_layout ? meta->kv_layout : "split";
    LCX_FAIL_IF(strcmp(kv, "split") != 0 && strcmp(kv, "replicated") != 0, LCX_ERR_INVALID,
                "kv_layout '%s': expected 'split' or 'replicated'", kv);
    LCX_FAIL_IF(n_ranks < 1, LCX_ERR_INVALID, "no writer ranks");
    LCX_FAIL_IF(meta->model_config && !json_is_object(meta->model_config), LCX_ERR_INVALID,
                "model config must be a JSON object");
    lcx_status st = LCX_OK;
    json_t *root = NULL, *files = json_array(), *tok = json_array(), *tensors = NULL;
    char *text = NULL, *mpath = NULL;
    LCX_FAIL_GOTO(!files || !tok, LCX_ERR_OOM, done, "out of memory");
    for (int r = 0; r < n_ranks; r++) {
        json_t *f = json_object_get(rank_json[r], "file");
        LCX_FAIL_GOTO(!json_is_object(f), LCX_ERR_INVALID, done, "rank %d: piece list has no 'file'", r);
        json_array_append(files, f);
    }
    for (int i = 0; i < meta->n_tokenizer_files; i++) {
        const char *name = meta->tokenizer_files[i];
        char *p = lcx_path_join(tmp_dir, name);
        int ok = p && lcx_ckpt_safe_name(name) && lcx_is_file(p);
        free(p);
        LCX_FAIL_GOTO(!ok, LCX_ERR_NOT_FOUND, done, "%s: tokenizer file '%s' was not copied in (lcx_ckpt_copy_file)",
                      tmp_dir, name);
        for (int j = 0; j < i; j++)
            LCX_FAIL_GOTO(strcmp(meta->tokenizer_files[j], name) == 0, LCX_ERR_INVALID, done,
                          "%s: tokenizer file '%s' listed twice", tmp_dir, name);
        json_array_append_new(tok, json_string(name));
    }
    LCX_TRY_GOTO(merge_tensors(rank_json, n_ranks, &tensors), done);
    json_t *mc = meta->model_config ? json_deep_copy(meta->model_config) : json_null();
    json_t *ts = meta->training_state ? json_deep_copy(meta->training_state) : json_null();
    root = json_pack("{s:s, s:i, s:I, s:{s:i, s:i, s:i, s:s}, s:o, s:O, s:O, s:O, s:o}", "format", LCX_CKPT_FORMAT,
                     "version", LCX_CKPT_VERSION, "saved_at_ns", (json_int_t)now_ns(), "layout", "tp", meta->tp, "cp",
                     meta->cp, "dp", meta->dp, "kv_layout", kv, "model_config", mc, "tokenizer_files", tok, "files",
                     files, "tensors", tensors, "training_state", ts);
    LCX_FAIL_GOTO(!root, LCX_ERR_OOM, done, "cannot build the manifest");
    text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    mpath = lcx_path_join(tmp_dir, LCX_CKPT_MANIFEST);
    LCX_FAIL_GOTO(!text || !mpath, LCX_ERR_OOM, done, "out of memory");
    LCX_TRY_GOTO(lcx_write_file_atomic(mpath, text, strlen(text)), done);
    /* Read it back with every reader check: a bad save fails now, not at resume time. */
    lcx_ckpt *ck = NULL;
    st = lcx_ckpt_open(tmp_dir, &ck);
    lcx_ckpt_free(ck);
    if (st != LCX_OK) st = lcx_fail_context(st, "checkpoint just written fails to load: ");
done:
    free(text);
    free(mpath);
    json_decref(root);
    json_decref(files);
    json_decref(tok);
    json_decref(tensors);
    return st;
}

/* ---- commit and prune ------------------------------------------------------------------------------------ */

/* Remove a directory holding only plain files. Renamed to NAME.tmp-del-* first so a crash midway leaves a tmp
 * directory (removed by the next prune), never a half-deleted checkpoint under its own name. Returns 0 if it
 * left the directory alone (it held a subdirectory or could not be renamed). */
static int only_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int ok = 1;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *f = lcx_path_join(dir, e->d_name);
        struct stat sb;
        ok = f && lstat(f, &sb) == 0 && !S_ISDIR(sb.st_mode);
        free(f);
    }
    closedir(d);
    return ok;
}

static int remove_flat_dir(const char *parent, const char *name) {
    char *path = lcx_path_join(parent, name);
    if (!path) return 0;
    if (!only_files(path)) return free(path), 0;
    char *victim = path;
    if (!strstr(name, ".tmp-")) {
        victim = lcx_out_temp_name(path); /* owned by us: removable by a later sweep if we die midway */
        if (!victim) return free(path), 0;
        if (rename(path, victim) != 0) return free(victim), free(path), 0;
        if (victim != path) free(path);
    }
    int ok = 0;
    DIR *d = opendir(victim);
    if (d) {
        struct dirent *e;
        ok = 1;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char *f = lcx_path_join(victim, e->d_name);
            struct stat sb;
            if (!f || lstat(f, &sb) != 0 || S_ISDIR(sb.st_mode) || unlink(f) != 0) ok = 0;
            free(f);
        }
        closedir(d);
        if (ok) ok = rmdir(victim) == 0;
    }
    free(victim);
    return ok;
}

typedef struct ckpt_age {
    char *name;
    long long saved_at;
} ckpt_age;

static int age_cmp(const void *a, const void *b) { /* newest first */
    const ckpt_age *x = a, *y = b;
    if (x->saved_at != y->saved_at) return x->saved_at > y->saved_at ? -1 : 1;
    return -strcmp(x->name, y->name);
}

/* Whether directory p is a checkpoint (a manifest of our format), and its save time. Anything else is simply not
 * ours: no error is left behind. */
static int is_ckpt_dir(const char *p, long long *saved_at) {
    if (!lcx_is_dir(p)) return 0;
    char *mp = lcx_path_join(p, LCX_CKPT_MANIFEST), *text = NULL;
    size_t len;
    int ours = 0;
    if (mp && lcx_read_file(mp, (size_t)1 << 30, &text, &len) == LCX_OK) {
        json_t *root = json_loadb(text, len, 0, NULL);
        const char *fmt = json_string_value(json_object_get(root, "format"));
        ours = fmt && strcmp(fmt, LCX_CKPT_FORMAT) == 0;
        *saved_at = (long long)json_integer_value(json_object_get(root, "saved_at_ns"));
        json_decref(root);
    }
    lcx_clear_error();
    free(text);
    free(mp);
    return ours;
}

static lcx_status prune(const char *parent, const char *keep_name, int keep_last) {
    DIR *d = opendir(parent);
    LCX_FAIL_IF(!d, LCX_ERR_IO, "%s: cannot list: %s", parent, strerror(errno));
    ckpt_age *list = NULL;
    size_t n = 0, cap = 0;
    char **stale = NULL;
    size_t ns = 0, scap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (nm[0] == '.' || strcmp(nm, keep_name) == 0) continue;
        char *p = lcx_path_join(parent, nm);
        if (!p) continue;
        if (strstr(nm, ".tmp-")) { /* leftovers of crashed saves, prunes or `latest` updates */
            if (!lcx_out_temp_stale(nm)) { /* its owner may still be writing it */
                free(p);
                continue;
            }
            if (ns == scap) {
                scap = scap ? 2 * scap : 8;
                char **s = realloc(stale, scap * sizeof *s);
                if (!s) { free(p); continue; }
                stale = s;
            }
            stale[ns++] = strdup(nm);
        } else {
            long long saved_at;
            if (is_ckpt_dir(p, &saved_at)) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 8;
                    ckpt_age *l = realloc(list, cap * sizeof *l);
                    if (l) list = l;
                }
                if (n < cap) list[n++] = (ckpt_age){strdup(nm), saved_at};
            }
        }
        free(p);
    }
    closedir(d);
    for (size_t i = 0; i < ns; i++) {
        if (!stale[i]) continue;
        char *p = lcx_path_join(parent, stale[i]);
        if (p && lcx_is_dir(p)) remove_flat_dir(parent, stale[i]);
        else if (p && strncmp(stale[i], LCX_CKPT_LATEST ".tmp-", strlen(LCX_CKPT_LATEST) + 5) == 0) unlink(p);
        free(p);
        free(stale[i]);
    }
    free(stale);
    if (keep_last > 0 && n > 0) {
        qsort(list, n, sizeof *list, age_cmp);
        for (size_t i = (size_t)(keep_last - 1); i < n; i++) remove_flat_dir(parent, list[i].name);
    }
    for (size_t i = 0; i < n; i++) free(list[i].name);
    free(list);
    return lcx_fsync_dir(parent);
}

lcx_status lcx_ckpt_commit(const char *tmp_dir, const char *parent, const char *name, int keep_last) {
    LCX_FAIL_IF(!valid_ckpt_name(name), LCX_ERR_INVALID, "checkpoint name '%s' is not a plain name", name);
    char *target = lcx_path_join(parent, name);
    LCX_FAIL_IF(!target, LCX_ERR_OOM, "out of memory");
    lcx_status st = LCX_OK;
    LCX_TRY_GOTO(lcx_out_claim(tmp_dir, target), done);
    /* From here the new checkpoint is complete and durable; `latest` moves to it atomically. */
    LCX_TRY_GOTO(lcx_ckpt_set_latest(parent, name), done);
    st = prune(parent, name, keep_last);
done:
    free(target);
    return st;
}

lcx_status lcx_ckpt_sweep(const char *parent) { return prune(parent, "", 0); }

int64_t lcx_ckpt_count(const char *parent) {
    DIR *d = opendir(parent);
    if (!d) return 0;
    int64_t n = 0;
    long long saved_at;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp-")) continue;
        char *p = lcx_path_join(parent, e->d_name);
        n += p && is_ckpt_dir(p, &saved_at);
        free(p);
    }
    closedir(d);
    return n;
}

int64_t lcx_ckpt_held_new(int64_t existing, int64_t saves, int keep_last) {
    if (saves <= 0) return 0;
    if (keep_last <= 0) return saves;
    /* the n-th commit finds min(existing + n - 1, keep_last) kept ones beside it (or all `existing` at the first) */
    int64_t peak = (existing + saves - 1 < keep_last ? existing + saves - 1 : keep_last) + 1;
    return peak - existing > 1 ? peak - existing : 1;
}

lcx_status lcx_ckpt_set_latest(const char *parent, const char *name) {
    LCX_FAIL_IF(!valid_ckpt_name(name), LCX_ERR_INVALID, "checkpoint name '%s' is not a plain name", name);
    char *latest = lcx_path_join(parent, LCX_CKPT_LATEST);
    size_t n = strlen(name);
    char *line = malloc(n + 2);
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!latest || !line, LCX_ERR_OOM, done, "out of memory");
    memcpy(line, name, n);
    line[n] = '\n';
    line[n + 1] = '\0';
    st = lcx_write_file_atomic(latest, line, n + 1);
done:
    free(latest);
    free(line);
    return st;
}

lcx_status lcx_ckpt_publish(const char *tmp_dir, const char *parent, const char *name) {
    LCX_FAIL_IF(!valid_ckpt_name(name), LCX_ERR_INVALID, "checkpoint name '%s' is not a plain name", name);
    char *target = lcx_path_join(parent, name);
    LCX_FAIL_IF(!target, LCX_ERR_OOM, "out of memory");
    lcx_status st = lcx_out_claim(tmp_dir, target);
    free(target);
    return st;
}

lcx_status lcx_ckpt_latest(const char *parent, char **dir) {
    *dir = NULL;
    char *path = lcx_path_join(parent, LCX_CKPT_LATEST), *text = NULL;
    LCX_FAIL_IF(!path, LCX_ERR_OOM, "out of memory");
    size_t len;
    lcx_status st = lcx_read_file(path, 4096, &text, &len);
    if (st == LCX_OK) {
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ')) text[--len] = '\0';
        if (!valid_ckpt_name(text) || strlen(text) != len)
            st = lcx_fail(LCX_ERR_FORMAT, "%s: does not hold a plain checkpoint name", path);
        else if (!(*dir = lcx_path_join(parent, text)))
            st = lcx_fail(LCX_ERR_OOM, "out of memory");
    }
    free(text);
    free(path);
    return st;
}
