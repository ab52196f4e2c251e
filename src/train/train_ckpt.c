/* train_ckpt: training checkpoints of a run directory (src/train/train.h): model weights, fp32 master, AdamW moments
 * and the training state in one .lcx directory. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/hf_config.h"
#include "formats/lcx.h"
#include "src/core/outpath.h"
#include "src/core/strbuf.h"
#include "src/model/model_state.h"
#include "src/train/train.h"

void lcx_train_state_init(lcx_train_state *s) {
    memset(s, 0, sizeof *s);
    s->cursor.n = 1;
    s->mix_weight[0] = 1;
    s->long_doc_repeat = 1;
    s->loss = NAN;
}

void lcx_train_state_free(lcx_train_state *s) {
    if (!s) return;
    free(s->saved);
    s->saved = NULL;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The training state's "mix" (absent: one source) into state->cursor and mix_weight. */
static lcx_status load_mix(const json_t *mix, const char *dir, lcx_train_state *state) {
    if (!mix) return LCX_OK;
    const json_t *w = json_object_get(mix, "weights"), *c = json_object_get(mix, "cursors");
    const size_t n = json_array_size(w);
    LCX_FAIL_IF(!json_is_array(w) || !json_is_array(c) || n < 2 || n > LCX_MIX_MAX || json_array_size(c) != n,
                LCX_ERR_FORMAT, "%s: training state: mix needs 2 to %d weights and as many cursors", dir,
                (int)LCX_MIX_MAX);
    state->cursor.n = (int)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *k = json_array_get(c, i);
        const double wi = json_number_value(json_array_get(w, i));
        int64_t v[4];
        for (size_t f = 0; f < 4; f++) {
            const json_t *x = json_array_get(k, f);
            v[f] = json_is_integer(x) ? (int64_t)json_integer_value(x) : -1;
        }
        LCX_FAIL_IF(!(wi > 0 && wi <= 1) || json_array_size(k) != 4 || v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0,
                    LCX_ERR_FORMAT, "%s: training state: mix source %zu: bad weight or cursor", dir, i + 1);
        state->mix_weight[i] = wi;
        state->cursor.src[i] = (lcx_sampler_cursor){(uint64_t)v[0], (uint64_t)v[1], (uint64_t)v[2], (uint64_t)v[3]};
    }
    return LCX_OK;
}

static json_t *state_json(const lcx_model *m, const lcx_train_ctx *ctx, const lcx_train_state *s,
                          const lcx_train_stage *st) {
    double next_lr = lcx_lr_at(&st->lr, s->step);
    json_t *j = json_pack("{s:s, s:i, s:I, s:I, s:b, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:f}",
                          "format", "lcextend-train", "stage", s->stage + 1, "step", (json_int_t)s->step,
                          "stage_steps", (json_int_t)st->steps, "stage_done", s->stage_done, "tokens",
                          (json_int_t)s->tokens, "optimizer_step", (json_int_t)lcx_model_step_count(m), "seq_len",
                          (json_int_t)st->seq_len, "sampler", "seed", (json_int_t)st->seed, "epoch",
                          (json_int_t)s->cursor.src[0].epoch, "pos", (json_int_t)s->cursor.src[0].pos, "offset",
                          (json_int_t)s->cursor.src[0].offset, "samples", (json_int_t)s->cursor.src[0].samples,
                          "next_lr", next_lr);
    if (!j) return NULL;
    if (s->min_doc_tokens || s->long_doc_tokens) { /* the sampler's filter and upsampling, which a resume must match */
        json_t *smp = json_object_get(j, "sampler");
        json_object_set_new(smp, "min_doc_tokens", json_integer((json_int_t)s->min_doc_tokens));
        json_object_set_new(smp, "long_doc_tokens", json_integer((json_int_t)s->long_doc_tokens));
        json_object_set_new(smp, "long_doc_repeat", json_integer((json_int_t)s->long_doc_repeat));
    }
    if (s->cursor.n > 1) { /* a data mix: every source's cursor, and the weights a resume must match */
        json_t *w = json_array(), *c = json_array();
        for (int i = 0; i < s->cursor.n; i++) {
            const lcx_sampler_cursor *k = &s->cursor.src[i];
            json_array_append_new(w, json_real(s->mix_weight[i]));
            json_array_append_new(c, json_pack("[I, I, I, I]", (json_int_t)k->epoch, (json_int_t)k->pos,
                                               (json_int_t)k->offset, (json_int_t)k->samples));
        }
        json_object_set_new(j, "mix", json_pack("{s:o, s:o}", "weights", w, "cursors", c));
    }
    json_object_set_new(j, "loss", isfinite(s->loss) ? json_real(s->loss) : json_null());
    json_t *lr = json_pack("{s:s, s:f, s:f, s:I}", "schedule", lcx_lr_kind_name(st->lr.kind), "peak", st->lr.peak,
                           "min_lr", st->lr.min_lr, "warmup_steps", (json_int_t)st->lr.warmup_steps);
    if (lr && st->lr.kind == LCX_LR_WSD) {
        json_object_set_new(lr, "decay_steps", json_integer((json_int_t)st->lr.decay_steps));
        json_object_set_new(lr, "decay_type", json_string(lcx_lr_decay_name(st->lr.decay)));
    }
    json_object_set_new(j, "lr", lr);
    json_object_set_new(j, "attention_mask", json_string(st->doc_mask ? "document" : "causal"));
    json_object_set(j, "run", ctx->run_info ? (json_t *)ctx->run_info : json_null());
    const json_t *rec = ctx->run_info ? json_object_get(ctx->run_info, "recipe") : NULL;
    if (json_is_string(rec)) json_object_set(j, "recipe", (json_t *)rec); /* shown by lcextend inspect */
    return j;
}

/* This rank's buffer of parameter i: its TP slice (box of the global tensor, buffer shape, replica), the rows of
 * its buffer (dim 0; a 1-D buffer's rows are its elements), the floats per row and the box's rows (the buffer's
 * first box_rows rows are stored; vocab padding rows follow). */
typedef struct param_part {
    lcx_tp_slice sl;
    uint64_t rows, row_len, box_rows, numel;
    uint64_t mrow0, mrows; /* the rows whose moments this rank holds */
} param_part;

static lcx_status part_of(const lcx_model *m, size_t i, param_part *p) {
    LCX_TRY(lcx_model_param_slice(m, i, &p->sl));
    p->numel = 1;
    for (int k = 0; k < p->sl.ndim; k++) p->numel *= p->sl.local[k];
    p->rows = p->sl.ndim >= 1 ? p->sl.local[0] : 1;
    p->row_len = p->rows ? p->numel / p->rows : 0;
    p->box_rows = p->sl.ndim >= 1 ? p->sl.box.shape[0] : 1;
    return lcx_model_moment_rows(m, i, &p->mrow0, &p->mrows);
}

/* The box of the stored rows among the moment rows of this rank (empty when they are all padding). */
static lcx_box moment_box(const param_part *p) {
    lcx_box b = p->sl.box;
    if (b.ndim >= 1) {
        uint64_t r1 = p->mrow0 + p->mrows < p->box_rows ? p->mrow0 + p->mrows : p->box_rows;
        b.start[0] += p->mrow0;
        b.shape[0] = r1 > p->mrow0 ? r1 - p->mrow0 : 0;
    }
    return b;
}

static uint64_t box_elems(const lcx_box *b) {
    uint64_t n = 1;
    for (int k = 0; k < b->ndim; k++) n *= b->shape[k];
    return n;
}

static lcx_status put_box(lcx_ckpt_writer *w, const lcx_param_spec *p, const char *role, lcx_dtype dt,
                          const lcx_box *box, const float *src, void *scratch) {
    uint64_t n = box_elems(box);
    if (n == 0) return LCX_OK;
    const void *data = src;
    if (dt != LCX_F32) {
        LCX_TRY(lcx_convert_from_f32(dt, src, scratch, (size_t)n));
        data = scratch;
    }
    return lcx_ckpt_writer_put(w, p->name, role, dt, p->shape.ndim, p->shape.dims, box, data);
}

/* The world of a save: ctx->world, else the gradient group when it has more than one rank, else none. */
static lcx_comm *save_world(const lcx_train_ctx *ctx) {
    if (ctx->world && ctx->world->size > 1) return ctx->world;
    return ctx->grad && ctx->grad->size > 1 ? ctx->grad : NULL;
}

/* This rank's pieces into data-<rank>.bin of tmp; *text = its piece list (JSON, heap). */
static lcx_status write_pieces(lcx_model *m, const lcx_train_ctx *ctx, const char *tmp, int rank, char **text) {
    const lcx_param_table *tab = lcx_model_params(m);
    const int first = !ctx->grad || ctx->grad->rank == 0; /* the first rank of its GRAD group */
    const int sharded = lcx_model_moment_shards(m) > 1;
    size_t mx = 0;
    for (size_t i = 0; i < tab->n; i++) {
        param_part pp;
        LCX_TRY(part_of(m, i, &pp));
        if ((size_t)pp.numel > mx) mx = (size_t)pp.numel;
    }
    float *a = malloc(mx * 4 + 4), *b = malloc(mx * 4 + 4), *c = malloc(mx * 4 + 4);
    lcx_ckpt_writer *w = NULL;
    json_t *rj = NULL;
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!a || !b || !c, LCX_ERR_OOM, done, "checkpoint save: out of memory");
    LCX_TRY_GOTO(lcx_ckpt_writer_open(tmp, rank, NULL, &w), done);
    const lcx_dtype pdt = lcx_model_param_dtype(m);
    const int master_rows = lcx_model_master_sharded(m); /* ZeRO-1 shards a bf16 model's master as the moments */
    for (size_t i = 0; i < tab->n; i++) {
        const lcx_param_spec *p = &tab->params[i];
        param_part pp;
        LCX_TRY_GOTO(part_of(m, i, &pp), done);
        const int params = first && pp.sl.replica_index == 0, moments = sharded ? pp.sl.replica_index == 0 : params;
        if (params) {
            /* the stored weights are the master rounded (bf16) or the master itself (f32) */
            LCX_TRY_GOTO(master_rows ? lcx_model_get_param(m, i, a) : lcx_model_get_master(m, i, a), done);
            LCX_TRY_GOTO(put_box(w, p, "param", pdt, &pp.sl.box, a, b), done);
            if (pdt != LCX_F32 && !master_rows)
                LCX_TRY_GOTO(put_box(w, p, "master", LCX_F32, &pp.sl.box, a, NULL), done);
        }
        if (moments) {
            lcx_box mb = moment_box(&pp);
            if (master_rows) {
                LCX_TRY_GOTO(lcx_model_get_master_rows(m, i, a), done);
                LCX_TRY_GOTO(put_box(w, p, "master", LCX_F32, &mb, a, NULL), done);
            }
            LCX_TRY_GOTO(lcx_model_get_moments(m, i, b, c), done);
            LCX_TRY_GOTO(put_box(w, p, "adam_m", LCX_F32, &mb, b, NULL), done);
            LCX_TRY_GOTO(put_box(w, p, "adam_v", LCX_F32, &mb, c, NULL), done);
        }
    }
    LCX_TRY_GOTO(lcx_ckpt_writer_close(w, &rj), done);
    *text = json_dumps(rj, JSON_COMPACT);
    LCX_FAIL_GOTO(!*text, LCX_ERR_OOM, done, "checkpoint save: out of memory for rank %d's piece list", rank);
done:
    lcx_ckpt_writer_free(w);
    json_decref(rj);
    free(a);
    free(b);
    free(c);
    return st;
}

#define LIST_TAG 4103

/* Every rank's piece list (texts, or a failure: len -1): the lengths all-gathered, so every rank knows *failed = the
 * lowest failing rank or -1; then, when none failed, the texts sent to rank 0, where all[r] = rank r's parsed list
 * (rank 0's own is mine). */
static lcx_status gather_lists(lcx_comm *w, const char *mine, json_t **all, int *failed) {
    const int W = w->size;
    int64_t len = mine ? (int64_t)strlen(mine) : -1, *lens = malloc((size_t)W * sizeof *lens);
    int64_t *buf = NULL, *got = NULL;
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!lens, LCX_ERR_OOM, done, "checkpoint save: out of memory");
    LCX_TRY_GOTO(lcx_comm_all_gather(w, NULL, &len, lens, 1, LCX_I64), done);
    int64_t mx = 0;
    *failed = -1;
    for (int r = 0; r < W; r++) {
        if (lens[r] < 0 && *failed < 0) *failed = r;
        if (lens[r] > mx) mx = lens[r];
    }
    if (*failed >= 0) goto done;
    /* the bytes go to rank 0 only (point to point: each list's own length, NUL-terminated, in 8-byte words) */
    if (w->rank != 0) {
        int64_t words = len / 8 + 1;
        buf = calloc((size_t)words, 8);
        LCX_FAIL_GOTO(!buf, LCX_ERR_OOM, done, "checkpoint save: out of memory for the piece list");
        memcpy(buf, mine, (size_t)len);
        lcx_comm_request *rq = NULL;
        LCX_TRY_GOTO(lcx_comm_isend(w, NULL, buf, words, LCX_I64, 0, LIST_TAG, &rq), done);
        LCX_TRY_GOTO(lcx_comm_wait(w, rq), done);
        goto done;
    }
    all[0] = json_loads(mine, 0, NULL);
    LCX_FAIL_GOTO(!all[0], LCX_ERR_OOM, done, "checkpoint save: out of memory for rank 0's piece list");
    got = malloc((size_t)(mx / 8 + 1) * 8);
    LCX_FAIL_GOTO(!got, LCX_ERR_OOM, done, "checkpoint save: out of memory for the piece lists");
    for (int r = 1; r < W; r++) { /* every sender's message is received, even after a bad one */
        lcx_comm_request *rq = NULL;
        lcx_status sr = lcx_comm_irecv(w, NULL, got, lens[r] / 8 + 1, LCX_I64, r, LIST_TAG, &rq);
        if (sr == LCX_OK) sr = lcx_comm_wait(w, rq);
        json_error_t e;
        if (sr == LCX_OK && !(all[r] = json_loadb((const char *)got, (size_t)lens[r], 0, &e)))
            sr = lcx_fail(LCX_ERR_FORMAT, "checkpoint save: rank %d's piece list: %s", r, e.text);
        if (st == LCX_OK) st = sr;
    }
done:
    free(lens);
    free(buf);
    free(got);
    return st;
}

lcx_status lcx_train_save(lcx_model *m, const lcx_train_ctx *ctx, const lcx_train_state *state,
                          const lcx_train_stage *stage) {
    lcx_train_state *s = (lcx_train_state *)state;
    lcx_comm *world = save_world(ctx);
    const int W = world ? world->size : 1, me = world ? world->rank : 0;
    char name[64];
    snprintf(name, sizeof name, "s%02d-step%06lld", state->stage + 1, (long long)state->step);
    char *parent = join(ctx->run_dir, "checkpoints");
    LCX_FAIL_IF(!parent, LCX_ERR_OOM, "out of memory");
    char *tmp = NULL, *final = NULL, *mine = NULL;
    json_t **lists = calloc((size_t)W, sizeof *lists), *tstate = NULL;
    const char **tok = NULL;
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!lists, LCX_ERR_OOM, done, "out of memory");
    final = join(parent, name);
    LCX_FAIL_GOTO(!final, LCX_ERR_OOM, done, "out of memory");
    /* rank 0 decides: already saved at this exact position (e.g. interval == stage end), or a new directory whose
     * path every rank gets. hdr: 0 new, 1 already saved, 2 rank 0 failed */
    int64_t share[1 + 4096 / 8];
    memset(share, 0, sizeof share);
    if (me == 0) {
        mkdir(parent, 0777);
        struct stat sb;
        if (stat(final, &sb) == 0) {
            /* Saved at this position already: by this run (interval == stage end), or by one killed after it
             * claimed the checkpoint and before it moved `latest` (the same bytes: training is deterministic).
             * `latest` names it either way. */
            share[0] = 1;
            if ((st = lcx_ckpt_set_latest(parent, name)) != LCX_OK) share[0] = 2;
        }
        else if ((st = lcx_ckpt_tmpdir_create(parent, name, &tmp)) != LCX_OK) share[0] = 2;
        else if (strlen(tmp) >= sizeof share - 8) {
            st = lcx_fail(LCX_ERR_INVALID, "checkpoint directory path too long: %s", tmp);
            share[0] = 2;
        } else memcpy(share + 1, tmp, strlen(tmp));
    }
    if (world) { /* not LCX_TRY_GOTO: that would overwrite rank 0's own failure with the broadcast's success */
        lcx_status sb = lcx_comm_broadcast(world, NULL, share, (int64_t)(sizeof share / 8), LCX_I64, 0);
        if (sb != LCX_OK) {
            st = sb;
            goto done;
        }
    }
    if (share[0] == 1) {
        free(s->saved);
        s->saved = final;
        final = NULL;
        goto done;
    }
    if (share[0] == 2) {
        if (me != 0) st = lcx_fail(LCX_ERR_IO, "rank 0 could not create the checkpoint directory");
        goto done;
    }
    if (me != 0) {
        tmp = strdup((const char *)(share + 1));
        LCX_FAIL_GOTO(!tmp, LCX_ERR_OOM, done, "out of memory");
    }
    st = write_pieces(m, ctx, tmp, me, &mine);
    if (st == LCX_OK && ctx->test_fail_save == me + 1)
        st = lcx_fail(LCX_ERR_IO, "rank %d: test_fail_save: this rank's part of the save fails", me);
    if (st != LCX_OK) {
        free(mine);
        mine = NULL;
    }
    if (world) { /* every rank goes on to the outcome's broadcast below, failed or not: no rank is left waiting */
        int failed = -1;
        lcx_status sg = gather_lists(world, mine, lists, &failed);
        if (st == LCX_OK) st = sg;
        if (st == LCX_OK && failed >= 0)
            st = lcx_fail(LCX_ERR_IO, "rank %d of %d failed to write its pieces (nothing committed)", failed, W);
    } else if (st == LCX_OK) {
        lists[0] = json_loads(mine, 0, NULL);
        if (!lists[0]) st = lcx_fail(LCX_ERR_OOM, "out of memory");
    }
    /* rank 0: tokenizer files, manifest, commit, only when every rank succeeded; then every rank learns the
     * outcome */
    int64_t ok = st == LCX_OK;
    if (me == 0 && st == LCX_OK) {
        tok = calloc((size_t)ctx->n_tokenizer + 1, sizeof *tok);
        if (!tok) st = lcx_fail(LCX_ERR_OOM, "out of memory");
        for (int i = 0; st == LCX_OK && i < ctx->n_tokenizer; i++) {
            tok[i] = base_name(ctx->tokenizer_paths[i]);
            /* The source may be gone: a resumed run's tokenizer files are those of the checkpoint it resumed
             * from, which keep_last prunes once newer saves exist. Then the copy in the last checkpoint this run
             * wrote or loaded (kept until this save commits; the same bytes) is the source. */
            struct stat tb;
            char *own = NULL;
            if (lstat(ctx->tokenizer_paths[i], &tb) != 0 && errno == ENOENT && s->saved) {
                own = join(s->saved, tok[i]);
                if (own && lstat(own, &tb) != 0) {
                    free(own);
                    own = NULL;
                }
            }
            st = own ? lcx_ckpt_copy_file(tmp, own, LCX_IN_OWN, tok[i])
                     : lcx_ckpt_copy_file(tmp, ctx->tokenizer_paths[i], 0, tok[i]);
            free(own);
        }
        if (st == LCX_OK) {
            tstate = state_json(m, ctx, state, stage);
            if (!tstate) st = lcx_fail(LCX_ERR_OOM, "out of memory for the training state");
        }
        if (st == LCX_OK) {
            lcx_ckpt_meta meta;
            memset(&meta, 0, sizeof meta);
            meta.model_config = ctx->model_config;
            meta.training_state = tstate;
            meta.tp = ctx->tp_size > 1 ? ctx->tp_size : 1;
            meta.kv_layout = lcx_model_config_of(m)->num_key_value_heads < meta.tp ? "replicated" : "split";
            meta.cp = ctx->cp_size > 1 ? ctx->cp_size : 1;
            meta.dp = ctx->dp_size > 1 ? ctx->dp_size : 1;
            meta.tokenizer_files = tok;
            meta.n_tokenizer_files = ctx->n_tokenizer;
            st = lcx_ckpt_finalize(tmp, &meta, lists, W);
        }
        if (st == LCX_OK) st = lcx_ckpt_commit(tmp, parent, name, ctx->keep_last);
        ok = st == LCX_OK;
    }
    if (world) {
        int64_t mine_ok = st == LCX_OK;
        lcx_status sb = lcx_comm_broadcast(world, NULL, &ok, 1, LCX_I64, 0);
        if (st == LCX_OK) st = sb;
        if (st == LCX_OK && mine_ok && !ok)
            st = lcx_fail(LCX_ERR_IO, "rank 0 could not finalize or commit the checkpoint (nothing committed)");
    }
    LCX_TRY_GOTO(st, done);
    free(s->saved);
    s->saved = final;
    final = NULL;
done:
    if (st != LCX_OK) lcx_fail_context(st, "saving checkpoint %s/%s (rank %d): ", parent, name, me);
    /* A failed save (a full disk) must not keep its space: rank 0 created the temporary and removes it once every
     * rank has passed the outcome (after a failed commit it may already be the checkpoint: then this does
     * nothing). */
    if (st != LCX_OK && tmp && me == 0) lcx_out_remove_temp(tmp);
    for (int r = 0; lists && r < W; r++) json_decref(lists[r]);
    free(lists);
    json_decref(tstate);
    free(tok);
    free(mine);
    free(tmp);
    free(final);
    free(parent);
    return st;
}

lcx_status lcx_train_latest(const char *run_dir, char **dir) {
    char *parent = join(run_dir, "checkpoints");
    LCX_FAIL_IF(!parent, LCX_ERR_OOM, "out of memory");
    lcx_status st = lcx_ckpt_latest(parent, dir);
    free(parent);
    return st;
}

lcx_status lcx_train_ckpt_config(const char *dir, lcx_model_config *cfg) {
    lcx_ckpt *ck = NULL;
    LCX_TRY(lcx_ckpt_open(dir, &ck));
    lcx_status st = LCX_OK;
    const json_t *j = lcx_ckpt_model_config(ck);
    char *text = NULL;
    LCX_FAIL_GOTO(!json_is_object(j), LCX_ERR_FORMAT, done, "%s: manifest has no model config", dir);
    text = json_dumps(j, JSON_COMPACT);
    LCX_FAIL_GOTO(!text, LCX_ERR_OOM, done, "out of memory");
    char label[4096];
    snprintf(label, sizeof label, "%s/manifest.json model_config", dir);
    st = lcx_config_parse(label, text, strlen(text), cfg);
done:
    free(text);
    lcx_ckpt_free(ck);
    return st;
}

/* Read the box of tensor (name, role) as float32 into dst (the box's elements); *found = 0 when absent. */
static lcx_status read_f32(lcx_ckpt *ck, const lcx_param_spec *p, const char *role, const lcx_box *box, float *dst,
                           void *scratch, int *found) {
    const lcx_ckpt_tensor *t = lcx_ckpt_find(ck, p->name, role);
    *found = t != NULL;
    if (!t) return LCX_OK;
    int same = t->ndim == p->shape.ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == p->shape.dims[d];
    LCX_FAIL_IF(!same, LCX_ERR_INVALID, "%s: tensor '%s' (%s): shape does not match the model", lcx_ckpt_dir(ck),
                p->name, role);
    LCX_FAIL_IF(!lcx_dtype_is_float_loadable(t->dtype), LCX_ERR_UNSUPPORTED, "%s: tensor '%s' (%s): dtype %s",
                lcx_ckpt_dir(ck), p->name, role, lcx_dtype_name(t->dtype));
    uint64_t n = box_elems(box);
    if (n == 0) return LCX_OK;
    if (t->dtype == LCX_F32) return lcx_ckpt_read_box(ck, p->name, role, box, dst);
    LCX_TRY(lcx_ckpt_read_box(ck, p->name, role, box, scratch));
    return lcx_convert_to_f32(t->dtype, scratch, dst, (size_t)n);
}

static int64_t jint(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

/* The saved stage's learning-rate schedule ("lr"; absent in checkpoints from before it: peak 0, unknown). */
static lcx_status load_lr(const json_t *lr, const char *dir, lcx_train_state *state) {
    if (!lr) return LCX_OK;
    const json_t *peak = json_object_get(lr, "peak"), *min = json_object_get(lr, "min_lr");
    const char *kind = json_string_value(json_object_get(lr, "schedule"));
    lcx_lr_schedule *s = &state->lr;
    s->total_steps = state->stage_steps;
    s->warmup_steps = jint(lr, "warmup_steps");
    int bad = !json_is_object(lr) || !kind || lcx_lr_kind_parse(kind, &s->kind) != 0 || !json_is_number(peak) ||
              !json_is_number(min) || s->warmup_steps < 0;
    if (!bad && s->kind == LCX_LR_WSD) {
        const char *dt = json_string_value(json_object_get(lr, "decay_type"));
        s->decay_steps = jint(lr, "decay_steps");
        bad = !dt || lcx_lr_decay_parse(dt, &s->decay) != 0 || s->decay_steps < 0;
    }
    LCX_FAIL_IF(bad, LCX_ERR_FORMAT, "%s: training state: bad lr (schedule, peak, min_lr, warmup_steps, decay)", dir);
    s->peak = json_number_value(peak), s->min_lr = json_number_value(min);
    LCX_FAIL_IF(!(s->peak > 0) || !(s->min_lr >= 0), LCX_ERR_FORMAT, "%s: training state: bad lr peak %g, min_lr %g",
                dir, s->peak, s->min_lr);
    return LCX_OK;
}

lcx_status lcx_train_load(const char *dir, lcx_model *m, lcx_train_state *state) {
    lcx_ckpt *ck = NULL;
    LCX_TRY(lcx_ckpt_open(dir, &ck));
    const lcx_param_table *tab = lcx_model_params(m);
    size_t mx = 0;
    for (size_t i = 0; i < tab->n; i++) {
        param_part pp;
        lcx_status s0 = part_of(m, i, &pp);
        if (s0 != LCX_OK) {
            lcx_ckpt_free(ck);
            return s0;
        }
        if ((size_t)pp.numel > mx) mx = (size_t)pp.numel;
    }
    float *w = malloc(mx * 4 + 4), *am = malloc(mx * 4 + 4), *av = malloc(mx * 4 + 4);
    void *scratch = malloc(mx * 8 + 8);
    lcx_status st = LCX_OK;
    const int moments = lcx_model_memory_of(m).moments > 0; /* a training model */
    LCX_FAIL_GOTO(!w || !am || !av || !scratch, LCX_ERR_OOM, done, "checkpoint load: out of memory");
    for (size_t i = 0; i < tab->n; i++) {
        const lcx_param_spec *p = &tab->params[i];
        int f_master, f_param, f_m, f_v;
        /* this rank's TP box; the buffer's rows past it (vocab padding) stay zero */
        param_part pp;
        LCX_TRY_GOTO(part_of(m, i, &pp), done);
        memset(w, 0, (size_t)pp.numel * 4);
        LCX_TRY_GOTO(read_f32(ck, p, "master", &pp.sl.box, w, scratch, &f_master), done);
        if (!f_master) LCX_TRY_GOTO(read_f32(ck, p, "param", &pp.sl.box, w, scratch, &f_param), done);
        else f_param = 1;
        LCX_FAIL_GOTO(!f_param, LCX_ERR_FORMAT, done, "%s: tensor '%s' is missing", dir, p->name);
        if (!moments) { /* a forward-only model: weights only */
            LCX_TRY_GOTO(lcx_model_set_state(m, i, w, NULL, NULL), done);
            lcx_ckpt_release(ck);
            continue;
        }
        /* the moments of this rank's rows (ZeRO-1) or all rows, whatever partition the saver used */
        lcx_box mb = moment_box(&pp);
        size_t mbytes = (size_t)(pp.mrows * pp.row_len) * 4;
        memset(am, 0, mbytes);
        memset(av, 0, mbytes);
        LCX_TRY_GOTO(read_f32(ck, p, "adam_m", &mb, am, scratch, &f_m), done);
        LCX_TRY_GOTO(read_f32(ck, p, "adam_v", &mb, av, scratch, &f_v), done);
        if (!f_m || !f_v) { /* a plain model checkpoint: fresh optimizer */
            memset(am, 0, mbytes);
            memset(av, 0, mbytes);
        }
        LCX_TRY_GOTO(lcx_model_set_state(m, i, w, am, av), done);
        lcx_ckpt_release(ck);
    }
    const json_t *ts = lcx_ckpt_training_state(ck);
    int has_state = json_is_object(ts) && json_is_string(json_object_get(ts, "format")) &&
                    strcmp(json_string_value(json_object_get(ts, "format")), "lcextend-train") == 0;
    lcx_model_set_step_count(m, has_state ? jint(ts, "optimizer_step") : 0);
    LCX_FAIL_GOTO(has_state && lcx_model_step_count(m) < 0, LCX_ERR_FORMAT, done,
                  "%s: training state: bad optimizer_step", dir);
    if (state) {
        free(state->saved);
        lcx_train_state_init(state);
        state->saved = strdup(dir);
        if (has_state) {
            const json_t *smp = json_object_get(ts, "sampler");
            state->stage = (int)jint(ts, "stage") - 1; /* stored 1-based */
            state->step = jint(ts, "step");
            state->tokens = jint(ts, "tokens");
            state->stage_done = json_is_true(json_object_get(ts, "stage_done"));
            int64_t e = jint(smp, "epoch"), p = jint(smp, "pos"), o = jint(smp, "offset"), n = jint(smp, "samples");
            LCX_FAIL_GOTO(state->stage < 0 || state->step < 0 || state->tokens < 0 || e < 0 || p < 0 || o < 0 ||
                              n < 0,
                          LCX_ERR_FORMAT, done, "%s: training state: missing or negative stage/step/tokens/sampler",
                          dir);
            state->cursor.src[0] = (lcx_sampler_cursor){(uint64_t)e, (uint64_t)p, (uint64_t)o, (uint64_t)n};
            LCX_TRY_GOTO(load_mix(json_object_get(ts, "mix"), dir, state), done);
            const json_t *mn = json_object_get(smp, "min_doc_tokens"), *ln = json_object_get(smp, "long_doc_tokens"),
                         *lr = json_object_get(smp, "long_doc_repeat");
            state->min_doc_tokens = mn ? jint(smp, "min_doc_tokens") : 0;
            state->long_doc_tokens = ln ? jint(smp, "long_doc_tokens") : 0;
            state->long_doc_repeat = lr ? jint(smp, "long_doc_repeat") : 1;
            LCX_FAIL_GOTO(state->min_doc_tokens < 0 || state->long_doc_tokens < 0 || state->long_doc_repeat < 1,
                          LCX_ERR_FORMAT, done, "%s: training state: bad sampler min_doc_tokens/long_doc_tokens/"
                          "long_doc_repeat", dir);
            state->seq_len = jint(ts, "seq_len") > 0 ? jint(ts, "seq_len") : 0;
            state->stage_steps = jint(ts, "stage_steps") > 0 ? jint(ts, "stage_steps") : 0;
            state->seed = (uint64_t)json_integer_value(json_object_get(smp, "seed"));
            const char *am_ = json_string_value(json_object_get(ts, "attention_mask"));
            state->doc_mask = !am_ ? -1 : !strcmp(am_, "document") ? 1 : !strcmp(am_, "causal") ? 0 : -2;
            char shown[48];
            LCX_FAIL_GOTO(state->doc_mask == -2, LCX_ERR_FORMAT, done,
                          "%s: training state: attention_mask '%s' (expected causal or document)", dir,
                          lcx_printable(am_, shown, sizeof shown));
            const json_t *l = json_object_get(ts, "loss");
            state->loss = json_is_number(l) ? json_number_value(l) : NAN;
            LCX_TRY_GOTO(load_lr(json_object_get(ts, "lr"), dir, state), done);
        }
    }
done:
    free(w);
    free(am);
    free(av);
    free(scratch);
    lcx_ckpt_free(ck);
    return st;
}
