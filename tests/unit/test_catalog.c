/* catalog: matching a checkpoint against its config, on hand-built checkpoints (counts derived by hand from
 * docs/formats.md's tensor list) and on every fixture model under tests/fixtures/models/ against the
 * expected_inspect.json that transformers wrote for it (tests/fixtures/gen_models.py). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/safetensors.h"
#include "src/checkpoint/catalog.h"
#include "src/core/fileio.h"
#include "test_util.h"

/* ---- building tiny checkpoints ------------------------------------------------------------------------------ */

#define MAXT 64
typedef struct ckpt {
    size_t n;
    lcx_st_out_tensor t[MAXT];
    char names[MAXT][96];
    void *data[MAXT];
} ckpt;

/* Add a tensor filled with a pattern that depends on `seed` (so two tensors with equal seeds are equal). */
static void ck_add(ckpt *c, const char *name, lcx_dtype dt, lcx_shape shape, int seed) {
    LCX_ASSERT(c->n < MAXT);
    size_t i = c->n++;
    snprintf(c->names[i], sizeof c->names[i], "%s", name);
    uint64_t numel = 0, bytes = 0;
    LCX_ASSERT(lcx_shape_numel(&shape, &numel) == LCX_OK && lcx_dtype_nbytes(dt, numel, &bytes) == LCX_OK);
    float *f = malloc((numel ? numel : 1) * sizeof(float));
    c->data[i] = malloc(bytes ? bytes : 1);
    for (uint64_t k = 0; k < numel; k++) f[k] = (float)((int)((k * 7 + (uint64_t)seed * 13) % 17) - 8) * 0.25f;
    if (lcx_dtype_is_compute(dt)) LCX_ASSERT(lcx_convert_from_f32(dt, f, c->data[i], numel) == LCX_OK);
    else memset(c->data[i], seed, bytes);
    free(f);
    c->t[i] = (lcx_st_out_tensor){c->names[i], dt, shape, c->data[i]};
}

static void ck_free(ckpt *c) {
    for (size_t i = 0; i < c->n; i++) free(c->data[i]);
    c->n = 0;
}

static char tmpdir[400];

static void write_text(const char *path, const char *text) {
    CHECK_OK(lcx_write_file_atomic(path, text, strlen(text)));
}

/* A fresh directory <tmp>/<name> with config.json = cfg (NULL: none) and model.safetensors from c. */
static char *make_dir(const char *name, const char *cfg, const ckpt *c) {
    static char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
    mkdir(dir, 0755);
    char p[800];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    if (cfg) write_text(p, cfg);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK_OK(lcx_st_write(p, c->t, c->n, NULL, NULL, 0));
    return dir;
}

/* llama V=8 H=4 F=8 L=1 heads 2 kv 1 (d=2): q [4,4] k/v [2,4] o [4,4]. */
#define LLAMA_CFG(extra)                                                                                           \
    "{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 4, \"intermediate_size\": 8, "               \
    "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "                          \
    "\"max_position_embeddings\": 64" extra "}"

static void add_llama_layer(ckpt *c, lcx_dtype dt, int skip_q) {
    ck_add(c, "model.layers.0.input_layernorm.weight", dt, lcx_shape_1d(4), 1);
    if (!skip_q) ck_add(c, "model.layers.0.self_attn.q_proj.weight", dt, lcx_shape_2d(4, 4), 2);
    ck_add(c, "model.layers.0.self_attn.k_proj.weight", dt, lcx_shape_2d(2, 4), 3);
    ck_add(c, "model.layers.0.self_attn.v_proj.weight", dt, lcx_shape_2d(2, 4), 4);
    ck_add(c, "model.layers.0.self_attn.o_proj.weight", dt, lcx_shape_2d(4, 4), 5);
    ck_add(c, "model.layers.0.post_attention_layernorm.weight", dt, lcx_shape_1d(4), 6);
    ck_add(c, "model.layers.0.mlp.gate_proj.weight", dt, lcx_shape_2d(8, 4), 7);
    ck_add(c, "model.layers.0.mlp.up_proj.weight", dt, lcx_shape_2d(8, 4), 8);
    ck_add(c, "model.layers.0.mlp.down_proj.weight", dt, lcx_shape_2d(4, 8), 9);
}

static void test_match_ok(void) {
    ckpt c = {0};
    ck_add(&c, "model.embed_tokens.weight", LCX_BF16, lcx_shape_2d(8, 4), 0);
    add_llama_layer(&c, LCX_BF16, 0);
    ck_add(&c, "model.norm.weight", LCX_F32, lcx_shape_1d(4), 10);
    ck_add(&c, "lm_head.weight", LCX_BF16, lcx_shape_2d(8, 4), 11);
    ck_add(&c, "model.layers.0.self_attn.rotary_emb.inv_freq", LCX_F32, lcx_shape_1d(1), 12);
    char *dir = make_dir("ok", LLAMA_CFG(""), &c);
    lcx_catalog *cat = NULL;
    CHECK_OK(lcx_catalog_open(dir, &cat));
    if (cat) {
        /* embed 32 + layer (4 + 16 + 8 + 8 + 16 + 4 + 32 + 32 + 32 = 152) + norm 4 + lm_head 32 */
        CHECK(cat->has_config && cat->n_parameters == 220);
        CHECK(cat->n_tensors == 13 && cat->n_ignored == 1);
        CHECK(cat->dtypes[LCX_BF16].tensors == 11 && cat->dtypes[LCX_BF16].elements == 216);
        CHECK(cat->dtypes[LCX_BF16].bytes == 432);
        CHECK(cat->dtypes[LCX_F32].tensors == 2 && cat->dtypes[LCX_F32].elements == 5 && cat->dtypes[LCX_F32].bytes == 20);
        CHECK(cat->total_bytes == 452 && cat->total_elements == 221);
        for (size_t i = 0; i < cat->params.n; i++) CHECK(cat->tensor_of[i] != NULL);
        CHECK(!cat->lm_head_tied);
        json_t *j = lcx_catalog_summary_json(cat);
        CHECK(j && json_integer_value(json_object_get(j, "num_parameters")) == 220);
        CHECK(json_integer_value(json_object_get(json_object_get(json_object_get(j, "dtypes"), "BF16"), "bytes")) == 432);
        CHECK(!strcmp(json_string_value(json_object_get(j, "arch")), "llama"));
        json_decref(j);
    }
    lcx_catalog_close(cat);

    /* the same file opened directly (config beside it is used) */
    char p[800];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK_OK(lcx_catalog_open(p, &cat));
    CHECK(cat && cat->has_config && cat->n_parameters == 220);
    lcx_catalog_close(cat);
    /* config.json itself is not a checkpoint path */
    snprintf(p, sizeof p, "%s/config.json", dir);
    CHECK_FAILS(lcx_catalog_open(p, &cat), LCX_ERR_INVALID, "give the model directory");

    /* tensors-only: a file with no config.json beside it */
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK_OK(lcx_catalog_open(p, &cat));
    if (cat) {
        CHECK(!cat->has_config && cat->n_parameters == 221 && cat->n_tensors == 13);
        json_t *j = lcx_catalog_summary_json(cat);
        CHECK(j && json_array_size(json_object_get(j, "tensors")) == 13 && !json_object_get(j, "arch"));
        json_decref(j);
    }
    lcx_catalog_close(cat);
    /* ... but a directory must have one */
    CHECK_FAILS(lcx_catalog_open(dir, &cat), LCX_ERR_NOT_FOUND, "config.json is missing");

    /* sharded: the same tensors split into several files + index; open by directory and by index path */
    char sdir[600];
    snprintf(sdir, sizeof sdir, "%s/sharded", tmpdir);
    mkdir(sdir, 0755);
    CHECK_OK(lcx_st_write_sharded(sdir, c.t, c.n, 200));
    snprintf(p, sizeof p, "%s/config.json", sdir);
    write_text(p, LLAMA_CFG(""));
    CHECK_OK(lcx_catalog_open(sdir, &cat));
    CHECK(cat && cat->set->n_files > 1 && cat->n_parameters == 220 && cat->total_bytes == 452);
    lcx_catalog_close(cat);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", sdir);
    CHECK_OK(lcx_catalog_open(p, &cat));
    CHECK(cat && cat->has_config && cat->set->n_files > 1 && cat->n_tensors == 13);
    lcx_catalog_close(cat);
    /* ... but a directory must have one (checked again after the sharded detour) */
    CHECK_FAILS(lcx_catalog_open(dir, &cat), LCX_ERR_NOT_FOUND, "config.json is missing");
    CHECK_FAILS(lcx_catalog_open("/nonexistent/x", &cat), LCX_ERR_NOT_FOUND, "/nonexistent/x");
    ck_free(&c);
}

static void test_match_problems(void) {
    ckpt c = {0};
    ck_add(&c, "model.embed_tokens.weight", LCX_F32, lcx_shape_2d(8, 4), 0);
    add_llama_layer(&c, LCX_F32, 1);                                            /* q_proj missing */
    ck_add(&c, "model.norm.weight", LCX_I32, lcx_shape_1d(4), 10);             /* not a float dtype */
    ck_add(&c, "lm_head.weight", LCX_F32, lcx_shape_2d(8, 5), 11);             /* wrong shape */
    ck_add(&c, "model.layers.0.self_attn.q_proj.bias", LCX_F32, lcx_shape_1d(4), 12); /* unexpected */
    char *dir = make_dir("problems", LLAMA_CFG(""), &c);
    lcx_catalog *cat = NULL;
    lcx_status st = lcx_catalog_open(dir, &cat);
    CHECK(st == LCX_ERR_FORMAT && cat == NULL);
    const char *m = lcx_last_error();
    CHECK_MSG(strstr(m, "1 missing: model.layers.0.self_attn.q_proj.weight") != NULL, "%s", m);
    CHECK_MSG(strstr(m, "1 unexpected: model.layers.0.self_attn.q_proj.bias") != NULL, "%s", m);
    CHECK_MSG(strstr(m, "1 wrong shape: lm_head.weight [8, 5] (expected [8, 4])") != NULL, "%s", m);
    CHECK_MSG(strstr(m, "1 not a float dtype: model.norm.weight I32") != NULL, "%s", m);
    CHECK_MSG(strstr(m, "config.json (llama, 1 layers)") != NULL, "%s", m);
    CHECK(strchr(m, '\n') == NULL);
    ck_free(&c);

    /* the same tensors against a config with attention_bias: q/k/v/o biases are expected; list is truncated */
    ck_add(&c, "model.embed_tokens.weight", LCX_F32, lcx_shape_2d(8, 4), 0);
    add_llama_layer(&c, LCX_F32, 0);
    ck_add(&c, "model.norm.weight", LCX_F32, lcx_shape_1d(4), 10);
    ck_add(&c, "lm_head.weight", LCX_F32, lcx_shape_2d(8, 4), 11);
    dir = make_dir("bias", LLAMA_CFG(", \"attention_bias\": true, \"mlp_bias\": true"), &c);
    CHECK_FAILS(lcx_catalog_open(dir, &cat), LCX_ERR_FORMAT,
                "7 missing: model.layers.0.self_attn.q_proj.bias, model.layers.0.self_attn.k_proj.bias, "
                "model.layers.0.self_attn.v_proj.bias, model.layers.0.self_attn.o_proj.bias (+3 more)");
    ck_free(&c);
}

static void test_tied(void) {
    const char *cfg = LLAMA_CFG(", \"tie_word_embeddings\": true");
    lcx_catalog *cat = NULL;
    ckpt c = {0};
    /* absent lm_head */
    ck_add(&c, "model.embed_tokens.weight", LCX_BF16, lcx_shape_2d(8, 4), 0);
    add_llama_layer(&c, LCX_BF16, 0);
    ck_add(&c, "model.norm.weight", LCX_BF16, lcx_shape_1d(4), 10);
    char *dir = make_dir("tied", cfg, &c);
    CHECK_OK(lcx_catalog_open(dir, &cat));
    CHECK(cat && cat->n_parameters == 188 && !cat->lm_head_tied && cat->params.tied); /* 220 - 32 */
    lcx_catalog_close(cat);
    /* present and bitwise equal */
    ck_add(&c, "lm_head.weight", LCX_BF16, lcx_shape_2d(8, 4), 0);
    dir = make_dir("tied", cfg, &c);
    CHECK_OK(lcx_catalog_open(dir, &cat));
    CHECK(cat && cat->lm_head_tied && cat->n_parameters == 188 && cat->total_elements == 220);
    lcx_catalog_close(cat);
    ck_free(&c);
    /* present in another dtype, equal in value (the pattern is exact in bf16 and f32) */
    ck_add(&c, "model.embed_tokens.weight", LCX_BF16, lcx_shape_2d(8, 4), 0);
    add_llama_layer(&c, LCX_BF16, 0);
    ck_add(&c, "model.norm.weight", LCX_BF16, lcx_shape_1d(4), 10);
    ck_add(&c, "lm_head.weight", LCX_F32, lcx_shape_2d(8, 4), 0);
    dir = make_dir("tied", cfg, &c);
    CHECK_OK(lcx_catalog_open(dir, &cat));
    CHECK(cat && cat->lm_head_tied);
    lcx_catalog_close(cat);
    ck_free(&c);
    /* present and different */
    ck_add(&c, "model.embed_tokens.weight", LCX_BF16, lcx_shape_2d(8, 4), 0);
    add_llama_layer(&c, LCX_BF16, 0);
    ck_add(&c, "model.norm.weight", LCX_BF16, lcx_shape_1d(4), 10);
    ck_add(&c, "lm_head.weight", LCX_BF16, lcx_shape_2d(8, 4), 1);
    dir = make_dir("tied", cfg, &c);
    CHECK_FAILS(lcx_catalog_open(dir, &cat), LCX_ERR_INVALID,
                "tensor 'lm_head.weight': present while tie_word_embeddings is true, but differs from "
                "model.embed_tokens.weight (first at element 0)");
    ck_free(&c);
    /* present with the wrong shape */
    ck_add(&c, "model.embed_tokens.weight", LCX_BF16, lcx_shape_2d(8, 4), 0);
    add_llama_layer(&c, LCX_BF16, 0);
    ck_add(&c, "model.norm.weight", LCX_BF16, lcx_shape_1d(4), 10);
    ck_add(&c, "lm_head.weight", LCX_BF16, lcx_shape_2d(4, 8), 0);
    dir = make_dir("tied", cfg, &c);
    CHECK_FAILS(lcx_catalog_open(dir, &cat), LCX_ERR_FORMAT, "lm_head.weight [4, 8] (tied: expected [8, 4])");
    ck_free(&c);
}

/* ---- fixtures: compare with what transformers reported --------------------------------------------------- */

static int64_t jint(const json_t *o, const char *k) { return (int64_t)json_integer_value(json_object_get(o, k)); }

static void compare_fixture(const char *dir, const char *name) {
    char p[1200];
    snprintf(p, sizeof p, "%s/expected_inspect.json", dir);
    json_error_t err;
    json_t *e = json_load_file(p, 0, &err);
    CHECK_MSG(e != NULL, "%s: %s", p, err.text);
    if (!e) return;
    lcx_catalog *cat = NULL;
    lcx_status st = lcx_catalog_open(dir, &cat);
    CHECK_MSG(st == LCX_OK, "%s: %s", name, lcx_last_error());
    if (st != LCX_OK) {
        json_decref(e);
        return;
    }
    const lcx_model_config *m = &cat->cfg;
#define FIELD(cond) CHECK_MSG(cond, "fixture %s", name)
    FIELD(!strcmp(lcx_arch_name(m->arch), json_string_value(json_object_get(e, "model_type"))));
    json_t *archs = json_object_get(e, "architectures");
    FIELD(json_array_size(archs) == 1 &&
          !strcmp(lcx_arch_class(m->arch), json_string_value(json_array_get(archs, 0))));
    FIELD(m->num_hidden_layers == jint(e, "num_hidden_layers"));
    FIELD(m->hidden_size == jint(e, "hidden_size"));
    FIELD(m->num_attention_heads == jint(e, "num_attention_heads"));
    FIELD(m->num_key_value_heads == jint(e, "num_key_value_heads"));
    FIELD(m->head_dim == jint(e, "head_dim"));
    FIELD(m->head_dim_explicit == json_is_true(json_object_get(e, "head_dim_in_config_json")) || !m->head_dim_explicit);
    FIELD(m->intermediate_size == jint(e, "intermediate_size"));
    FIELD(m->vocab_size == jint(e, "vocab_size"));
    FIELD(m->max_position_embeddings == jint(e, "max_position_embeddings"));
    CHECK_REL(m->rms_norm_eps, json_number_value(json_object_get(e, "rms_norm_eps")), 1e-15);
    FIELD(m->tie_word_embeddings == json_is_true(json_object_get(e, "tie_word_embeddings")));
    json_t *ab = json_object_get(e, "attention_bias");
    if (json_is_boolean(ab) && m->arch != LCX_ARCH_QWEN2 && m->arch != LCX_ARCH_MISTRAL)
        FIELD(m->qkv_bias == json_is_true(ab) && m->o_bias == json_is_true(ab));
    if (m->arch == LCX_ARCH_QWEN2) FIELD(m->qkv_bias && !m->o_bias);
    json_t *mb = json_object_get(e, "mlp_bias");
    if (json_is_boolean(mb)) FIELD(m->mlp_bias == json_is_true(mb));
    json_t *sw = json_object_get(e, "sliding_window");
    FIELD(json_is_null(sw) ? m->sliding_window == 0 : m->sliding_window == (int64_t)json_integer_value(sw));
    const char *cd = json_string_value(json_object_get(e, "config_dtype"));
    if (cd) FIELD(m->dtype == (!strcmp(cd, "bfloat16") ? LCX_BF16 : !strcmp(cd, "float16") ? LCX_F16 : LCX_F32));
    json_t *bos = json_object_get(e, "bos_token_id");
    FIELD(json_is_null(bos) ? m->bos_token_id == -1 : m->bos_token_id == (int64_t)json_integer_value(bos));
    json_t *eos = json_object_get(e, "eos_token_id");
    if (json_is_integer(eos)) FIELD(m->n_eos == 1 && m->eos_token_ids[0] == (int64_t)json_integer_value(eos));
    else if (json_is_array(eos)) {
        FIELD(m->n_eos == (int)json_array_size(eos));
        for (int i = 0; i < m->n_eos && i < (int)json_array_size(eos); i++)
            FIELD(m->eos_token_ids[i] == (int64_t)json_integer_value(json_array_get(eos, (size_t)i)));
    } else FIELD(m->n_eos == 0);

    /* counts: transformers' num_parameters() and the bytes in the files */
    FIELD(cat->n_parameters == (uint64_t)jint(e, "num_parameters"));
    FIELD(cat->total_elements == (uint64_t)jint(e, "file_tensor_elements"));
    FIELD(cat->total_bytes == (uint64_t)jint(e, "file_tensor_bytes"));
    FIELD(cat->set->n_files == json_array_size(json_object_get(e, "files")));
    json_t *de = json_object_get(e, "file_dtype_elements");
    size_t n_dt = 0;
    for (int dt = 0; dt < LCX_DTYPE_COUNT; dt++) {
        if (!cat->dtypes[dt].tensors) continue;
        n_dt++;
        FIELD(cat->dtypes[dt].elements == (uint64_t)jint(de, lcx_dtype_name((lcx_dtype)dt)));
    }
    FIELD(n_dt == json_object_size(de));
    FIELD((cat->lm_head_tied || !m->tie_word_embeddings) == json_is_true(json_object_get(e, "lm_head_in_files")));

    /* every tensor transformers listed, with dtype and shape */
    json_t *tl = json_object_get(e, "tensors");
    FIELD(cat->n_tensors == json_array_size(tl));
    size_t i;
    json_t *t;
    json_array_foreach(tl, i, t) {
        const char *tn = json_string_value(json_object_get(t, "name"));
        const lcx_st_tensor *st_t = tn ? lcx_st_set_find(cat->set, tn) : NULL;
        CHECK_MSG(st_t != NULL, "fixture %s: tensor %s not found", name, tn ? tn : "?");
        if (!st_t) continue;
        CHECK_MSG(!strcmp(lcx_dtype_name(st_t->dtype), json_string_value(json_object_get(t, "dtype"))),
                  "fixture %s: tensor %s dtype", name, tn);
        json_t *sh = json_object_get(t, "shape");
        int same = (size_t)st_t->shape.ndim == json_array_size(sh);
        for (int k = 0; same && k < st_t->shape.ndim; k++)
            same = st_t->shape.dims[k] == (uint64_t)json_integer_value(json_array_get(sh, (size_t)k));
        CHECK_MSG(same, "fixture %s: tensor %s shape", name, tn);
    }

    /* rope as transformers resolved it */
    json_t *r = json_object_get(e, "rope");
    FIELD(!strcmp(m->rope.type, json_string_value(json_object_get(r, "rope_type"))));
    CHECK_REL(m->rope.theta, json_number_value(json_object_get(r, "rope_theta")), 1e-15);
    json_t *f = json_object_get(r, "factor");
    FIELD(json_is_null(f) || !f ? !m->rope.has_factor : m->rope.has_factor && m->rope.factor == json_number_value(f));
    json_t *om = json_object_get(r, "original_max_position_embeddings");
    int64_t our_om = m->rope.has_original_max ? m->rope.original_max_position_embeddings : m->max_position_embeddings;
    if (json_is_integer(om)) FIELD(our_om == (int64_t)json_integer_value(om));
    json_t *rp = json_object_get(r, "rope_parameters");
    json_t *prf = json_object_get(rp, "partial_rotary_factor");
    FIELD(m->rope.partial_rotary_factor == (json_is_number(prf) ? json_number_value(prf) : 1.0));
    FIELD(lcx_rope_implied_context(m) == jint(e, "effective_context"));
#undef FIELD
    lcx_catalog_close(cat);
    json_decref(e);
}

static void test_fixtures(void) {
    const char *root = getenv("LCX_FIXTURE_MODELS"); /* development override */
    char def[600];
    snprintf(def, sizeof def, "%s/tests/fixtures/models", LCX_SOURCE_DIR);
    if (!root) root = def;
    DIR *d = opendir(root);
    if (!d) {
        printf("note: %s not present; fixture comparison not run\n", root);
        return;
    }
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (ent->d_name[0] == '.') continue;
        char dir[1024], exp[1100];
        snprintf(dir, sizeof dir, "%s/%s", root, ent->d_name);
        snprintf(exp, sizeof exp, "%s/expected_inspect.json", dir);
        if (!lcx_is_file(exp)) continue;
        compare_fixture(dir, ent->d_name);
        n++;
    }
    closedir(d);
    printf("compared %d fixture models with transformers' expected_inspect.json\n", n);
    CHECK(n >= 4); /* llama, mistral, qwen2, qwen3 at least */
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/test_catalog_%d", LCX_BINARY_DIR, (int)getpid());
    mkdir(tmpdir, 0755);
    test_match_ok();
    test_match_problems();
    test_tied();
    test_fixtures();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("test_catalog");
}
