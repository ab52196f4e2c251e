/* convert: the streaming .lcx writer (thread pool over tensors), HF import and resharding. GGUF is in
 * convert_gguf.c, HF export in convert_export.c. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/convert/convert_internal.h"
#include "src/checkpoint/catalog.h"
#include "src/checkpoint/source.h" /* lcx_hf_side_files */
#include "src/core/fileio.h"
#include "src/core/outpath.h"
#include "src/core/units.h"

void lcx_convert_opts_default(lcx_convert_opts *o) {
    memset(o, 0, sizeof *o);
    o->tp = o->cp = o->dp = 1;
    lcx_ckpt_write_opts_default(&o->write);
    o->dtype = LCX_DTYPE_INVALID;
}

/* ---- small helpers ---------------------------------------------------------------------------------------- */

lcx_status cv_split_path(const char *path, char **parent, char **base) {
    *parent = *base = NULL;
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--; /* "out.lcx/" names out.lcx */
    size_t slash = n;
    while (slash > 0 && path[slash - 1] != '/') slash--;
    LCX_FAIL_IF(slash == n, LCX_ERR_INVALID, "'%s': no file name", path);
    *base = strndup(path + slash, n - slash);
    *parent = slash == 0 ? strdup(".") : slash == 1 ? strdup("/") : strndup(path, slash - 1);
    if (!*base || !*parent) {
        free(*base), free(*parent);
        *base = *parent = NULL;
        return lcx_fail(LCX_ERR_OOM, "out of memory");
    }
    return LCX_OK;
}

void cv_items_free(cv_item *items, size_t n) {
    if (!items) return;
    for (size_t i = 0; i < n; i++) free(items[i].name);
    free(items);
}

lcx_status cv_config_from_json(const json_t *j, const char *label, lcx_model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char *text = json_dumps(j, JSON_COMPACT);
    LCX_FAIL_IF(!text, LCX_ERR_OOM, "%s: cannot serialise the model config", label);
    lcx_status st = lcx_config_parse(label, text, strlen(text), cfg);
    free(text);
    return st;
}

void cv_tp_dims(const lcx_model_config *c, lcx_tp_dims *d) {
    d->nh = c->num_attention_heads;
    d->ng = c->num_key_value_heads;
    d->d = c->head_dim;
    d->H = c->hidden_size;
    d->F = c->intermediate_size;
    d->V = c->vocab_size;
}

lcx_status lcx_parse_size(const char *s, uint64_t *out) {
    return lcx_parse_bytes(s, LCX_BYTES_DECIMAL, out); /* one strict size parser: src/core/units.h */
}

/* ---- the streaming writer --------------------------------------------------------------------------------- */

typedef struct cv_pool {
    const cv_source *src;
    cv_item *items;
    size_t n;
    const lcx_convert_opts *o;
    int have_dims;
    lcx_tp_dims dims;
    const char *tmp;
    uint64_t chunk_bytes; /* 0: whole boxes */
    pthread_mutex_t mu;
    size_t next, done;
    uint64_t bytes_done, bytes_total;
    int failed;
    lcx_status st;
    char msg[1024];
    json_t **rank_json;
} cv_pool;

typedef struct cv_worker {
    cv_pool *p;
    int rank;
} cv_worker;

static void pool_fail(cv_pool *p, lcx_status st) {
    pthread_mutex_lock(&p->mu);
    if (!p->failed) {
        p->failed = 1;
        p->st = st;
        snprintf(p->msg, sizeof p->msg, "%s", lcx_last_error());
    }
    pthread_mutex_unlock(&p->mu);
}

/* The target boxes of one item: one per distinct TP box (replica 0 writes it). */
static lcx_status item_boxes(const cv_pool *p, const cv_item *it, lcx_box *boxes, int *n) {
    lcx_weight_kind k = p->have_dims ? lcx_weight_kind_of_name(it->name) : LCX_W_UNKNOWN;
    *n = 0;
    if (k == LCX_W_UNKNOWN || p->o->tp == 1) {
        boxes[(*n)++] = lcx_box_full(it->ndim, it->shape);
        return LCX_OK;
    }
    for (int r = 0; r < p->o->tp; r++) {
        lcx_tp_slice s;
        LCX_TRY(lcx_tp_slice_of(k, &p->dims, p->o->tp, r, &s));
        if (r == 0) {
            int same = s.global.ndim == it->ndim;
            for (int d = 0; same && d < it->ndim; d++) same = s.global.shape[d] == it->shape[d];
            if (!same) {
                char a[96], b[96];
                lcx_box g = lcx_box_full(it->ndim, it->shape);
                return lcx_fail(LCX_ERR_INVALID, "tensor '%s' (%s): shape %s does not match %s implied by the config",
                                it->name, it->role, lcx_box_str(&g, a, sizeof a), lcx_box_str(&s.global, b, sizeof b));
            }
        }
        if (s.replica_index == 0) boxes[(*n)++] = s.box;
    }
    return LCX_OK;
}

static lcx_status put_item(cv_pool *p, lcx_ckpt_writer *w, void *ts, const cv_item *it, uint8_t **buf,
                           size_t *cap) {
    lcx_box boxes[64];
    int nb = 0;
    LCX_FAIL_IF(p->o->tp > 64, LCX_ERR_INVALID, "--tp %d: at most 64 supported", p->o->tp);
    LCX_TRY(item_boxes(p, it, boxes, &nb));
    size_t es = lcx_dtype_bits(it->dtype) / 8;
    for (int b = 0; b < nb; b++) {
        lcx_box box = boxes[b];
        uint64_t vol;
        LCX_TRY(lcx_box_volume(&box, &vol));
        if (vol == 0) {
            LCX_TRY(lcx_ckpt_writer_put(w, it->name, it->role, it->dtype, it->ndim, it->shape, &box, NULL));
            continue;
        }
        /* Rows per chunk under the memory bound (whole box without one). */
        uint64_t rows = box.ndim ? box.shape[0] : 1, row_bytes = vol / rows * es, step = rows;
        if (p->chunk_bytes && box.ndim) {
            step = p->chunk_bytes / row_bytes;
            if (step == 0) step = 1;
            if (step > rows) step = rows;
        }
        for (uint64_t r0 = 0; r0 < rows; r0 += step) {
            lcx_box part = box;
            if (box.ndim) {
                part.start[0] = box.start[0] + r0;
                part.shape[0] = r0 + step > rows ? rows - r0 : step;
            }
            const void *view = NULL;
            if (p->src->view) LCX_TRY(p->src->view(p->src->ctx, ts, it, &part, &view));
            if (view) { /* zero-copy: straight from the source mapping into the data file */
                LCX_TRY(lcx_ckpt_writer_put(w, it->name, it->role, it->dtype, it->ndim, it->shape, &part, view));
                continue;
            }
            size_t need = (size_t)((box.ndim ? part.shape[0] : 1) * row_bytes);
            if (need > *cap) {
                uint8_t *nb2 = realloc(*buf, need);
                LCX_FAIL_IF(!nb2, LCX_ERR_OOM, "tensor '%s': out of memory for %zu bytes", it->name, need);
                *buf = nb2;
                *cap = need;
            }
            LCX_TRY(p->src->read(p->src->ctx, ts, it, &part, *buf));
            LCX_TRY(lcx_ckpt_writer_put(w, it->name, it->role, it->dtype, it->ndim, it->shape, &part, *buf));
        }
    }
    return LCX_OK;
}

static void *worker_main(void *arg) {
    cv_worker *wk = arg;
    cv_pool *p = wk->p;
    lcx_ckpt_writer *w = NULL;
    void *ts = NULL;
    uint8_t *buf = NULL;
    size_t cap = 0;
    lcx_status st = lcx_ckpt_writer_open(p->tmp, wk->rank, &p->o->write, &w);
    if (st == LCX_OK && p->src->thread_init) st = p->src->thread_init(p->src->ctx, &ts);
    while (st == LCX_OK) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->failed ? p->n : p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n) break;
        st = put_item(p, w, ts, &p->items[i], &buf, &cap);
        if (st != LCX_OK) break;
        if (p->src->item_done) p->src->item_done(p->src->ctx, ts, &p->items[i]);
        pthread_mutex_lock(&p->mu);
        p->done++;
        p->bytes_done += p->items[i].bytes;
        if (p->o->progress) p->o->progress(p->o->progress_user, p->done, p->n, p->bytes_done, p->bytes_total);
        pthread_mutex_unlock(&p->mu);
    }
    if (st == LCX_OK) st = lcx_ckpt_writer_close(w, &p->rank_json[wk->rank]);
    if (st != LCX_OK) pool_fail(p, st);
    free(buf);
    if (ts && p->src->thread_free) p->src->thread_free(ts);
    lcx_ckpt_writer_free(w);
    return NULL;
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

lcx_status cv_write_lcx(const cv_source *src, cv_item *items, size_t n, const cv_target *t,
                        const lcx_convert_opts *o) {
    lcx_status st = LCX_OK;
    lcx_mesh mesh;
    LCX_TRY(lcx_mesh_init(&mesh, o->tp, o->cp, o->dp));
    cv_pool p = {.src = src, .items = items, .n = n, .o = o};
    lcx_model_config cfg = {0};
    int have_cfg = 0;
    char *parent = NULL, *base = NULL, *tmp = NULL;
    cv_worker *workers = NULL;
    pthread_t *tids = NULL;
    int nthreads = 0, started = 0;
    const char *kv_layout = "split";

    if (t->config && json_is_object(t->config)) {
        LCX_TRY_GOTO(cv_config_from_json(t->config, "model config", &cfg), done);
        have_cfg = 1;
        cv_tp_dims(&cfg, &p.dims);
        p.have_dims = 1;
        LCX_TRY_GOTO(lcx_tp_check(&p.dims, o->tp), done);
        if (lcx_tp_kv_replicated(&p.dims, o->tp)) kv_layout = "replicated";
    } else {
        LCX_FAIL_GOTO(o->tp != 1, LCX_ERR_INVALID, done, "--tp %d: the checkpoint has no model config to split by", o->tp);
    }
    uint64_t largest = 0;
    for (size_t i = 0; i < n; i++) {
        LCX_FAIL_GOTO(lcx_dtype_bits(items[i].dtype) % 8 != 0 || lcx_dtype_bits(items[i].dtype) == 0,
                      LCX_ERR_UNSUPPORTED, done, "tensor '%s': dtype %s cannot be stored in an .lcx", items[i].name,
                      lcx_dtype_name(items[i].dtype));
        p.bytes_total += items[i].bytes;
        if (items[i].bytes > largest) largest = items[i].bytes;
    }
    nthreads = o->threads > 0 ? o->threads : default_threads();
    if ((size_t)nthreads > n) nthreads = n ? (int)n : 1;
    if (o->max_memory) {
        /* Each worker holds a target buffer and (for compressed or converted sources) one source tensor/piece. */
        uint64_t per = 2 * largest;
        uint64_t fit = per ? o->max_memory / per : (uint64_t)nthreads;
        if (fit < (uint64_t)nthreads) nthreads = fit ? (int)fit : 1;
        if (fit == 0) p.chunk_bytes = o->max_memory / 2 ? o->max_memory / 2 : 1;
    }

    LCX_TRY_GOTO(lcx_out_absent(t->out), done);
    LCX_TRY_GOTO(cv_split_path(t->out, &parent, &base), done);
    LCX_TRY_GOTO(lcx_ckpt_tmpdir_create(parent, base, &tmp), done);
    p.tmp = tmp;
    p.rank_json = calloc((size_t)nthreads, sizeof *p.rank_json);
    workers = calloc((size_t)nthreads, sizeof *workers);
    tids = calloc((size_t)nthreads, sizeof *tids);
    LCX_FAIL_GOTO(!p.rank_json || !workers || !tids, LCX_ERR_OOM, done, "out of memory");
    pthread_mutex_init(&p.mu, NULL);
    for (int i = 0; i < nthreads; i++) {
        workers[i] = (cv_worker){.p = &p, .rank = i};
        if (pthread_create(&tids[i], NULL, worker_main, &workers[i]) != 0) {
            pool_fail(&p, lcx_fail(LCX_ERR_OOM, "cannot start worker thread %d", i));
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&p.mu);
    if (p.failed) {
        st = lcx_fail(p.st, "%s", p.msg);
        goto done;
    }
    for (int i = 0; i < t->n_files; i++) LCX_TRY_GOTO(lcx_ckpt_copy_file(tmp, t->src_paths[i], t->src_flags, t->names[i]), done);
    lcx_ckpt_meta meta = {.model_config = t->config, .training_state = t->training_state, .tp = o->tp,
                          .cp = o->cp, .dp = o->dp, .kv_layout = kv_layout,
                          .tokenizer_files = (const char *const *)t->names, .n_tokenizer_files = t->n_files};
    LCX_TRY_GOTO(lcx_ckpt_finalize(tmp, &meta, p.rank_json, nthreads), done);
    LCX_TRY_GOTO(lcx_ckpt_publish(tmp, parent, base), done);
    free(tmp);
    tmp = NULL;
done:
    if (tmp) lcx_out_remove_temp(tmp); /* nothing under the output name on failure */
    if (p.rank_json)
        for (int i = 0; i < nthreads; i++) json_decref(p.rank_json[i]);
    free(p.rank_json);
    free(workers);
    free(tids);
    free(tmp);
    free(parent);
    free(base);
    if (have_cfg) lcx_config_free(&cfg);
    return st;
}

/* ---- HF import -------------------------------------------------------------------------------------------- */

typedef struct hf_src {
    lcx_catalog *cat;
    const lcx_st_tensor **tensor_of; /* per item */
} hf_src;

static lcx_status hf_read(void *ctx, void *ts, const cv_item *it, const lcx_box *box, void *dst) {
    (void)ts;
    const hf_src *h = ctx;
    const lcx_st_tensor *t = h->tensor_of[it->src];
    lcx_box full = lcx_box_full(it->ndim, it->shape);
    return lcx_box_copy(&full, t->data, box, dst, lcx_dtype_bits(it->dtype) / 8, NULL);
}

static lcx_status hf_view(void *ctx, void *ts, const cv_item *it, const lcx_box *box, const void **view) {
    (void)ts;
    const hf_src *h = ctx;
    lcx_box full = lcx_box_full(it->ndim, it->shape);
    uint64_t off;
    *view = lcx_box_contiguous_in(&full, box, &off) ? h->tensor_of[it->src]->data + off * (lcx_dtype_bits(it->dtype) / 8)
                                                   : NULL;
    return LCX_OK;
}

/* Drop the source tensor's pages from this process once written (they stay in the page cache). */
void cv_release_range(const void *p, uint64_t n);
void cv_release_range(const void *p, uint64_t n) {
    if (!p || !n) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, b = a + (uintptr_t)n;
    a = (a + page - 1) / page * page; /* whole pages only: neighbours may still be in use */
    b = b / page * page;
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

static void hf_done(void *ctx, void *ts, const cv_item *it) {
    (void)ts;
    const hf_src *h = ctx;
    cv_release_range(h->tensor_of[it->src]->data, it->bytes);
}

static lcx_status import_hf(const char *src, const char *out, const lcx_convert_opts *o) {
    lcx_catalog *cat = NULL;
    LCX_TRY(lcx_catalog_open(src, &cat));
    lcx_status st = LCX_OK;
    hf_src h = {.cat = cat};
    cv_item *items = NULL;
    size_t n = 0;
    cv_target t = {.out = out};
    char *dir = NULL, *base = NULL;
    LCX_FAIL_GOTO(!cat->has_config, LCX_ERR_NOT_FOUND, done, "%s: no config.json beside the tensors", src);
    items = calloc(cat->params.n + 1, sizeof *items);
    h.tensor_of = calloc(cat->params.n + 1, sizeof *h.tensor_of);
    LCX_FAIL_GOTO(!items || !h.tensor_of, LCX_ERR_OOM, done, "out of memory");
    for (size_t i = 0; i < cat->params.n; i++) {
        const lcx_st_tensor *s = cat->tensor_of[i];
        cv_item *it = &items[n];
        LCX_FAIL_GOTO(s->shape.ndim > LCX_BOX_MAX_DIMS, LCX_ERR_UNSUPPORTED, done, "tensor '%s': more than %d dims",
                      s->name, LCX_BOX_MAX_DIMS);
        it->name = strdup(s->name);
        LCX_FAIL_GOTO(!it->name, LCX_ERR_OOM, done, "out of memory");
        n++;
        strcpy(it->role, "param");
        it->dtype = s->dtype;
        it->ndim = s->shape.ndim;
        for (int d = 0; d < it->ndim; d++) it->shape[d] = s->shape.dims[d];
        it->bytes = s->end - s->begin;
        it->src = i;
        h.tensor_of[i] = s;
    }
    /* Side files live next to config.json. */
    const char *cfg_path = cat->config_path;
    LCX_TRY_GOTO(cv_split_path(cfg_path, &dir, &base), done);
    size_t nside = lcx_hf_n_side_files;
    t.src_paths = calloc(nside, sizeof *t.src_paths);
    t.names = calloc(nside, sizeof *t.names);
    LCX_FAIL_GOTO(!t.src_paths || !t.names, LCX_ERR_OOM, done, "out of memory");
    for (size_t i = 0; i < nside; i++) {
        char *p = lcx_path_join(dir, lcx_hf_side_files[i]);
        LCX_FAIL_GOTO(!p, LCX_ERR_OOM, done, "out of memory");
        int present = 0;
        st = lcx_optional_input(p, 0, &present); /* a FIFO or directory there is refused, not skipped */
        if (st != LCX_OK || !present) free(p);
        if (st != LCX_OK) goto done;
        if (!present) continue;
        t.src_paths[t.n_files] = p;
        t.names[t.n_files] = strdup(lcx_hf_side_files[i]);
        LCX_FAIL_GOTO(!t.names[t.n_files], LCX_ERR_OOM, done, "out of memory");
        t.n_files++;
    }
    t.config = cat->cfg.json;
    cv_source s = {.ctx = &h, .read = hf_read, .view = hf_view, .item_done = hf_done};
    st = cv_write_lcx(&s, items, n, &t, o);
done:
    for (int i = 0; i < t.n_files; i++) free(t.src_paths[i]), free(t.names[i]);
    free(t.src_paths);
    free(t.names);
    free(dir);
    free(base);
    cv_items_free(items, n);
    free(h.tensor_of);
    lcx_catalog_close(cat);
    return st;
}

lcx_status lcx_import_gguf_file(const char *src, const char *out, const lcx_convert_opts *o); /* convert_gguf.c */

lcx_status lcx_import(const char *src, const char *out, const lcx_convert_opts *o) {
    lcx_source_form form;
    LCX_TRY(lcx_source_detect(src, &form)); /* the loader's forms, its one-line errors */
    LCX_FAIL_IF(form == LCX_SOURCE_LCX, LCX_ERR_INVALID, "%s: already an .lcx checkpoint (lcextend reshard changes "
                                                          "its layout)", src);
    if (form == LCX_SOURCE_GGUF) return lcx_import_gguf_file(src, out, o);
    return import_hf(src, out, o);
}

/* ---- reshard ---------------------------------------------------------------------------------------------- */

typedef struct rs_src {
    const char *dir;
} rs_src;

static lcx_status rs_init(void *ctx, void **ts) {
    lcx_ckpt *ck = NULL;
    LCX_TRY(lcx_ckpt_open(((rs_src *)ctx)->dir, &ck));
    *ts = ck;
    return LCX_OK;
}
static void rs_free(void *ts) { lcx_ckpt_free(ts); }
static lcx_status rs_read(void *ctx, void *ts, const cv_item *it, const lcx_box *box, void *dst) {
    (void)ctx;
    return lcx_ckpt_read_box(ts, it->name, it->role, box, dst);
}

static lcx_status rs_view(void *ctx, void *ts, const cv_item *it, const lcx_box *box, const void **view) {
    (void)ctx;
    return lcx_ckpt_box_view(ts, it->name, it->role, box, view);
}
static void rs_done(void *ctx, void *ts, const cv_item *it) {
    (void)ctx, (void)it;
    lcx_ckpt_release(ts);
}

lcx_status lcx_reshard(const char *src, const char *out, const lcx_convert_opts *o) {
    lcx_ckpt *ck = NULL;
    LCX_TRY(lcx_ckpt_open(src, &ck));
    lcx_status chk = lcx_source_check_lcx(src); /* a copy of an unloadable checkpoint is no use to anyone */
    if (chk != LCX_OK) {
        lcx_ckpt_free(ck);
        return chk;
    }
    lcx_status st = LCX_OK;
    int n = lcx_ckpt_tensor_count(ck), nf = lcx_ckpt_tokenizer_file_count(ck);
    cv_item *items = calloc((size_t)n + 1, sizeof *items);
    cv_target t = {.out = out, .config = lcx_ckpt_model_config(ck), .training_state = lcx_ckpt_training_state(ck),
                   .src_flags = LCX_IN_OWN};
    t.src_paths = calloc((size_t)nf + 1, sizeof *t.src_paths);
    t.names = calloc((size_t)nf + 1, sizeof *t.names);
    size_t ni = 0;
    LCX_FAIL_GOTO(!items || !t.src_paths || !t.names, LCX_ERR_OOM, done, "out of memory");
    for (int i = 0; i < nf; i++) {
        t.src_paths[i] = lcx_path_join(src, lcx_ckpt_tokenizer_file(ck, i));
        t.names[i] = strdup(lcx_ckpt_tokenizer_file(ck, i));
        t.n_files++;
        LCX_FAIL_GOTO(!t.src_paths[i] || !t.names[i], LCX_ERR_OOM, done, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        const lcx_ckpt_tensor *ct = lcx_ckpt_tensor_at(ck, i);
        cv_item *it = &items[ni];
        it->name = strdup(ct->name);
        LCX_FAIL_GOTO(!it->name, LCX_ERR_OOM, done, "out of memory");
        ni++;
        snprintf(it->role, sizeof it->role, "%s", ct->role);
        it->dtype = ct->dtype;
        it->ndim = ct->ndim;
        uint64_t vol = 1;
        for (int d = 0; d < ct->ndim; d++) it->shape[d] = ct->shape[d], vol *= ct->shape[d];
        it->bytes = vol * ct->es; /* the manifest reader checked it fits */
        it->src = (size_t)i;
    }
    rs_src r = {.dir = src};
    cv_source s = {.ctx = &r, .thread_init = rs_init, .thread_free = rs_free, .read = rs_read, .view = rs_view,
                   .item_done = rs_done};
    st = cv_write_lcx(&s, items, ni, &t, o);
done:
    for (int i = 0; i < t.n_files; i++) free(t.src_paths[i]), free(t.names[i]);
    free(t.src_paths);
    free(t.names);
    cv_items_free(items, ni);
    lcx_ckpt_free(ck);
    return st;
}
