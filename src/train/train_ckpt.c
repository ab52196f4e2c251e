/* train_ckpt: training checkpoints of a run directory (src/train/train.h): model weights, fp32 master, AdamW moments
 * and the training state in one .lcx directory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/hf_config.h"
#include "formats/lcx.h"
#include "src/core/outpath.h"
#include "src/model/model_state.h"
#include "src/train/train.h"

void lcx_train_state_init(lcx_train_state *s) {
    memset(s, 0, sizeof *s);
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

static json_t *state_json(const lcx_model *m, const lcx_train_ctx *ctx, const lcx_train_state *s,
                          const lcx_train_stage *st) {
    double next_lr = lcx_lr_at(&st->lr, s->step);
    json_t *j = json_pack("{s:s, s:i, s:I, s:I, s:b, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:f}",
                          "format", "lcextend-train", "stage", s->stage + 1, "step", (json_int_t)s->step,
                          "stage_steps", (json_int_t)st->steps, "stage_done", s->stage_done, "tokens",
                          (json_int_t)s->tokens, "optimizer_step", (json_int_t)lcx_model_step_count(m), "seq_len",
                          (json_int_t)st->seq_len, "sampler", "seed", (json_int_t)st->seed, "epoch",
                          (json_int_t)s->cursor.epoch, "pos", (json_int_t)s->cursor.pos, "offset",
                          (json_int_t)s->cursor.offset, "samples", (json_int_t)s->cursor.samples, "next_lr", next_lr);
    if (!j) return NULL;
    json_object_set_new(j, "loss", isfinite(s->loss) ? json_real(s->loss) : json_null());
    json_object_set(j, "run", ctx->run_info ? (json_t *)ctx->run_info : json_null());
    const json_t *rec = ctx->run_info ? json_object_get(ctx->run_info, "recipe") : NULL;
    if (json_is_string(rec)) json_object_set(j, "recipe", (json_t *)rec); /* shown by lcextend inspect */
    return j;
}

static lcx_status put_f32(lcx_ckpt_writer *w, const lcx_param_spec *p, const char *role, lcx_dtype dt,
                          const float *src, void *scratch) {
    lcx_box box = lcx_box_full(p->shape.ndim, p->shape.dims);
    const void *data = src;
    if (dt != LCX_F32) {
        LCX_TRY(lcx_convert_from_f32(dt, src, scratch, (size_t)p->numel));
        data = scratch;
    }
    return lcx_ckpt_writer_put(w, p->name, role, dt, p->shape.ndim, p->shape.dims, &box, data);
}

lcx_status lcx_train_save(lcx_model *m, const lcx_train_ctx *ctx, const lcx_train_state *state,
                          const lcx_train_stage *stage) {
    lcx_train_state *s = (lcx_train_state *)state;
    char name[64];
    snprintf(name, sizeof name, "s%02d-step%06lld", state->stage + 1, (long long)state->step);
    char *parent = join(ctx->run_dir, "checkpoints");
    LCX_FAIL_IF(!parent, LCX_ERR_OOM, "out of memory");
    mkdir(parent, 0777);
    char *tmp = NULL, *final = NULL;
    lcx_ckpt_writer *w = NULL;
    json_t *rank = NULL, *tstate = NULL;
    const lcx_param_table *tab = lcx_model_params(m);
    size_t mx = 0;
    for (size_t i = 0; i < tab->n; i++)
        if (tab->params[i].numel > mx) mx = (size_t)tab->params[i].numel;
    float *a = malloc(mx * 4 + 4), *b = malloc(mx * 4 + 4), *c = malloc(mx * 4 + 4);
    const char **tok = NULL;
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!a || !b || !c, LCX_ERR_OOM, done, "checkpoint save: out of memory");
    final = join(parent, name);
    LCX_FAIL_GOTO(!final, LCX_ERR_OOM, done, "out of memory");
    struct stat sb;
    if (stat(final, &sb) == 0) { /* already saved at this exact position (e.g. interval == stage end) */
        free(s->saved);
        s->saved = final;
        final = NULL;
        goto done;
    }
    LCX_TRY_GOTO(lcx_ckpt_tmpdir_create(parent, name, &tmp), done);
    LCX_TRY_GOTO(lcx_ckpt_writer_open(tmp, 0, NULL, &w), done);
    lcx_dtype pdt = lcx_model_param_dtype(m);
    for (size_t i = 0; i < tab->n; i++) {
        const lcx_param_spec *p = &tab->params[i];
        LCX_TRY_GOTO(lcx_model_get_master(m, i, a), done);
        /* the stored weights are the master rounded (bf16) or the master itself (f32) */
        LCX_TRY_GOTO(put_f32(w, p, "param", pdt, a, b), done);
        if (pdt != LCX_F32) LCX_TRY_GOTO(put_f32(w, p, "master", LCX_F32, a, NULL), done);
        LCX_TRY_GOTO(lcx_model_get_moments(m, i, b, c), done);
        LCX_TRY_GOTO(put_f32(w, p, "adam_m", LCX_F32, b, NULL), done);
        LCX_TRY_GOTO(put_f32(w, p, "adam_v", LCX_F32, c, NULL), done);
    }
    LCX_TRY_GOTO(lcx_ckpt_writer_close(w, &rank), done);
    tok = calloc((size_t)ctx->n_tokenizer + 1, sizeof *tok);
    LCX_FAIL_GOTO(!tok, LCX_ERR_OOM, done, "out of memory");
    for (int i = 0; i < ctx->n_tokenizer; i++) {
        tok[i] = base_name(ctx->tokenizer_paths[i]);
        LCX_TRY_GOTO(lcx_ckpt_copy_file(tmp, ctx->tokenizer_paths[i], 0, tok[i]), done);
    }
    tstate = state_json(m, ctx, state, stage);
    LCX_FAIL_GOTO(!tstate, LCX_ERR_OOM, done, "out of memory for the training state");
    lcx_ckpt_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.model_config = ctx->model_config;
    meta.training_state = tstate;
    meta.tp = meta.cp = meta.dp = 1;
    meta.tokenizer_files = tok;
    meta.n_tokenizer_files = ctx->n_tokenizer;
    LCX_TRY_GOTO(lcx_ckpt_finalize(tmp, &meta, &rank, 1), done);
    LCX_TRY_GOTO(lcx_ckpt_commit(tmp, parent, name, ctx->keep_last), done);
    free(s->saved);
    s->saved = final;
    final = NULL;
done:
    if (st != LCX_OK) lcx_fail_context(st, "saving checkpoint %s/%s: ", parent, name);
    lcx_ckpt_writer_free(w);
    /* A failed save (a full disk) must not keep its space: after a failed commit the temporary may already be
     * the checkpoint (then it is gone from tmp and this does nothing). */
    if (st != LCX_OK && tmp) lcx_out_remove_temp(tmp);
    json_decref(rank);
    json_decref(tstate);
    free(tok);
    free(tmp);
    free(final);
    free(parent);
    free(a);
    free(b);
    free(c);
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

/* Read tensor (name, role) whole as float32 into dst (n elements); *found = 0 when absent. */
static lcx_status read_f32(lcx_ckpt *ck, const lcx_param_spec *p, const char *role, float *dst, void *scratch,
                           int *found) {
    const lcx_ckpt_tensor *t = lcx_ckpt_find(ck, p->name, role);
    *found = t != NULL;
    if (!t) return LCX_OK;
    int same = t->ndim == p->shape.ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == p->shape.dims[d];
    LCX_FAIL_IF(!same, LCX_ERR_INVALID, "%s: tensor '%s' (%s): shape does not match the model", lcx_ckpt_dir(ck),
                p->name, role);
    LCX_FAIL_IF(!lcx_dtype_is_float_loadable(t->dtype), LCX_ERR_UNSUPPORTED, "%s: tensor '%s' (%s): dtype %s",
                lcx_ckpt_dir(ck), p->name, role, lcx_dtype_name(t->dtype));
    lcx_box box = lcx_box_full(t->ndim, t->shape);
    if (t->dtype == LCX_F32) return lcx_ckpt_read_box(ck, p->name, role, &box, dst);
    LCX_TRY(lcx_ckpt_read_box(ck, p->name, role, &box, scratch));
    return lcx_convert_to_f32(t->dtype, scratch, dst, (size_t)p->numel);
}

static int64_t jint(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

lcx_status lcx_train_load(const char *dir, lcx_model *m, lcx_train_state *state) {
    lcx_ckpt *ck = NULL;
    LCX_TRY(lcx_ckpt_open(dir, &ck));
    const lcx_param_table *tab = lcx_model_params(m);
    size_t mx = 0;
    for (size_t i = 0; i < tab->n; i++)
        if (tab->params[i].numel > mx) mx = (size_t)tab->params[i].numel;
    float *w = malloc(mx * 4 + 4), *am = malloc(mx * 4 + 4), *av = malloc(mx * 4 + 4);
    void *scratch = malloc(mx * 8 + 8);
    lcx_status st = LCX_OK;
    const int moments = lcx_model_memory_of(m).moments > 0; /* a training model */
    LCX_FAIL_GOTO(!w || !am || !av || !scratch, LCX_ERR_OOM, done, "checkpoint load: out of memory");
    for (size_t i = 0; i < tab->n; i++) {
        const lcx_param_spec *p = &tab->params[i];
        int f_master, f_param, f_m, f_v;
        LCX_TRY_GOTO(read_f32(ck, p, "master", w, scratch, &f_master), done);
        if (!f_master) LCX_TRY_GOTO(read_f32(ck, p, "param", w, scratch, &f_param), done);
        else f_param = 1;
        LCX_FAIL_GOTO(!f_param, LCX_ERR_FORMAT, done, "%s: tensor '%s' is missing", dir, p->name);
        if (!moments) { /* a forward-only model: weights only */
            LCX_TRY_GOTO(lcx_model_set_state(m, i, w, NULL, NULL), done);
            lcx_ckpt_release(ck);
            continue;
        }
        LCX_TRY_GOTO(read_f32(ck, p, "adam_m", am, scratch, &f_m), done);
        LCX_TRY_GOTO(read_f32(ck, p, "adam_v", av, scratch, &f_v), done);
        if (!f_m || !f_v) { /* a plain model checkpoint: fresh optimizer */
            memset(am, 0, (size_t)p->numel * 4);
            memset(av, 0, (size_t)p->numel * 4);
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
            state->cursor.epoch = (uint64_t)e;
            state->cursor.pos = (uint64_t)p;
            state->cursor.offset = (uint64_t)o;
            state->cursor.samples = (uint64_t)n;
            state->seq_len = jint(ts, "seq_len") > 0 ? jint(ts, "seq_len") : 0;
            state->stage_steps = jint(ts, "stage_steps") > 0 ? jint(ts, "stage_steps") : 0;
            state->seed = (uint64_t)json_integer_value(json_object_get(smp, "seed"));
            const json_t *l = json_object_get(ts, "loss");
            state->loss = json_is_number(l) ? json_number_value(l) : NAN;
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
