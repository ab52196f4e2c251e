/* lcx native checkpoints: round trips with every codec/filter, TP x CP writes read back through arbitrary boxes,
 * resharding chains by reading (TP1->TP2->TP4->TP1, TP2xCP2->TP4xCP1->TP2xCP2) compared bit for bit with the
 * in-memory global tensors, corruption and hostile manifests, and a SIGKILL crash-safety loop.
 *
 * Reference: the global tensors are random bytes held in memory; pieces are cut from them with the TP rules of
 * src/layout (checked against hand-derived slices in test_layout) and every read is compared with a direct
 * slice of the in-memory tensor. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "formats/lcx.h"
#include "src/core/fileio.h"
#include "src/core/layout.h"
#include "test_util.h"
#include "test_tmpdir.h"

/* ---- random numbers -------------------------------------------------------------------------------------- */

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

/* ---- the model under test -------------------------------------------------------------------------------- */

/* nh=4, ng=2 (kv heads < TP at TP4: replicated), V=13 (not divisible by 2 or 4). */
static const lcx_tp_dims DIMS = {.nh = 4, .ng = 2, .d = 4, .H = 8, .F = 12, .V = 13};

static const char *tensor_names[] = {
    "lm_head.weight",
    "model.embed_tokens.weight",
    "model.layers.0.input_layernorm.weight",
    "model.layers.0.mlp.down_proj.weight",
    "model.layers.0.mlp.gate_proj.weight",
    "model.layers.0.mlp.up_proj.weight",
    "model.layers.0.post_attention_layernorm.weight",
    "model.layers.0.self_attn.k_norm.weight",
    "model.layers.0.self_attn.k_proj.bias",
    "model.layers.0.self_attn.k_proj.weight",
    "model.layers.0.self_attn.o_proj.weight",
    "model.layers.0.self_attn.q_norm.weight",
    "model.layers.0.self_attn.q_proj.bias",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.self_attn.v_proj.bias",
    "model.layers.0.self_attn.v_proj.weight",
    "model.norm.weight",
};
#define NT ((int)(sizeof tensor_names / sizeof tensor_names[0]))
static const char *roles[] = {"param", "master", "adam_m", "adam_v"};
static const lcx_dtype role_dtype[] = {LCX_BF16, LCX_F32, LCX_F32, LCX_F32};
#define NR 4

typedef struct truth {
    int ndim[NT];
    uint64_t shape[NT][2];
    uint8_t *data[NT][NR];
} truth;

static void truth_init(truth *tr) {
    for (int i = 0; i < NT; i++) {
        lcx_tp_slice s;
        CHECK_OK(lcx_tp_slice_of(lcx_weight_kind_of_name(tensor_names[i]), &DIMS, 1, 0, &s));
        tr->ndim[i] = s.ndim;
        tr->shape[i][0] = s.global.shape[0];
        tr->shape[i][1] = s.ndim > 1 ? s.global.shape[1] : 0;
        uint64_t n = s.global.shape[0] * (s.ndim > 1 ? s.global.shape[1] : 1);
        for (int r = 0; r < NR; r++) {
            size_t es = lcx_dtype_bits(role_dtype[r]) / 8;
            tr->data[i][r] = malloc(n * es);
            for (uint64_t k = 0; k < n * es; k++) tr->data[i][r][k] = (uint8_t)rnd();
        }
    }
}

static void truth_free(truth *tr) {
    for (int i = 0; i < NT; i++)
        for (int r = 0; r < NR; r++) free(tr->data[i][r]);
}

/* Where pieces come from: the in-memory truth or an earlier checkpoint (reshard by reading). */
typedef struct source {
    const truth *tr;
    lcx_ckpt *ck;
} source;

static void source_read(const source *src, int ti, int ri, const lcx_box *box, void *dst) {
    if (src->ck) {
        CHECK_OK(lcx_ckpt_read_box(src->ck, tensor_names[ti], roles[ri], box, dst));
        return;
    }
    lcx_box full = lcx_box_full(src->tr->ndim[ti], src->tr->shape[ti]);
    CHECK_OK(lcx_box_copy(&full, src->tr->data[ti][ri], box, dst, lcx_dtype_bits(role_dtype[ri]) / 8, NULL));
}

static char workdir[256];
static json_t *model_config;

/* Write checkpoint parent/name in layout tp x cp from src: params once (CP rank 0, first replica of replicated kv
 * heads), optimizer roles partitioned ZeRO-style along dim 0 of the TP shard across the CP ranks. */
static void write_layout(const char *parent, const char *name, int tp, int cp, const lcx_ckpt_write_opts *opts,
                         const source *src, int keep_last) {
    char *tmp = NULL;
    CHECK_OK(lcx_ckpt_tmpdir_create(parent, name, &tmp));
    if (!tmp) return;
    int W = tp * cp;
    json_t *rank_json[16] = {0};
    for (int rank = 0; rank < W; rank++) {
        int t = rank % tp, c = rank / tp;
        lcx_ckpt_writer *w = NULL;
        CHECK_OK(lcx_ckpt_writer_open(tmp, rank, opts, &w));
        if (!w) continue;
        for (int ti = 0; ti < NT; ti++) {
            lcx_tp_slice s;
            CHECK_OK(lcx_tp_slice_of(lcx_weight_kind_of_name(tensor_names[ti]), &DIMS, tp, t, &s));
            if (s.replica_index != 0) continue; /* replicas are stored once */
            for (int ri = 0; ri < NR; ri++) {
                lcx_box box = s.box;
                if (ri == 0) {
                    if (c != 0) continue;
                } else {
                    uint64_t R = box.shape[0];
                    box.start[0] += R * (uint64_t)c / (uint64_t)cp;
                    box.shape[0] = R * (uint64_t)(c + 1) / (uint64_t)cp - R * (uint64_t)c / (uint64_t)cp;
                }
                uint64_t vol;
                CHECK_OK(lcx_box_volume(&box, &vol));
                size_t es = lcx_dtype_bits(role_dtype[ri]) / 8;
                uint8_t *buf = malloc(vol * es + 1);
                if (vol) source_read(src, ti, ri, &box, buf);
                CHECK_OK(lcx_ckpt_writer_put(w, tensor_names[ti], roles[ri], role_dtype[ri], s.ndim, s.global.shape,
                                             &box, buf));
                free(buf);
            }
        }
        CHECK_OK(lcx_ckpt_writer_close(w, &rank_json[rank]));
        lcx_ckpt_writer_free(w);
    }
    char tokpath[300];
    snprintf(tokpath, sizeof tokpath, "%s/tokenizer.json", workdir);
    CHECK_OK(lcx_ckpt_copy_file(tmp, tokpath, 0, "tokenizer.json"));
    const char *tok[] = {"tokenizer.json"};
    json_t *state = json_pack("{s:i, s:i, s:[i,i]}", "step", 100 * tp + cp, "tokens", 4096, "rng", 1, 2);
    lcx_ckpt_meta meta = {.model_config = model_config, .training_state = state, .tp = tp, .cp = cp, .dp = 1,
                          .kv_layout = lcx_tp_kv_replicated(&DIMS, tp) ? "replicated" : "split",
                          .tokenizer_files = tok, .n_tokenizer_files = 1};
    CHECK_OK(lcx_ckpt_finalize(tmp, &meta, rank_json, W));
    CHECK_OK(lcx_ckpt_commit(tmp, parent, name, keep_last));
    json_decref(state);
    for (int r = 0; r < W; r++) json_decref(rank_json[r]);
    free(tmp);
}

static lcx_ckpt *open_ckpt(const char *parent, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", parent, name);
    lcx_ckpt *ck = NULL;
    CHECK_OK(lcx_ckpt_open(path, &ck));
    return ck;
}

/* Every tensor of every role read whole, plus random boxes, equal to the truth bit for bit. */
static void expect_truth(lcx_ckpt *ck, const truth *tr, int n_random_boxes) {
    if (!ck) return;
    CHECK(lcx_ckpt_tensor_count(ck) == NT * NR);
    source ts = {.tr = tr};
    for (int ti = 0; ti < NT; ti++) {
        for (int ri = 0; ri < NR; ri++) {
            const lcx_ckpt_tensor *t = lcx_ckpt_find(ck, tensor_names[ti], roles[ri]);
            CHECK(t && t->dtype == role_dtype[ri] && t->ndim == tr->ndim[ti] && t->shape[0] == tr->shape[ti][0]);
            size_t es = lcx_dtype_bits(role_dtype[ri]) / 8;
            lcx_box full = lcx_box_full(tr->ndim[ti], tr->shape[ti]);
            uint64_t n;
            CHECK_OK(lcx_box_volume(&full, &n));
            uint8_t *buf = malloc(n * es);
            memset(buf, 0x5A, n * es);
            CHECK_OK(lcx_ckpt_read_box(ck, tensor_names[ti], roles[ri], &full, buf));
            CHECK_MSG(memcmp(buf, tr->data[ti][ri], n * es) == 0, "%s %s differs", tensor_names[ti], roles[ri]);
            free(buf);
            for (int k = 0; k < n_random_boxes; k++) {
                lcx_box b = {.ndim = tr->ndim[ti]};
                for (int dd = 0; dd < b.ndim; dd++) {
                    b.start[dd] = rnd_below(tr->shape[ti][dd]);
                    b.shape[dd] = 1 + rnd_below(tr->shape[ti][dd] - b.start[dd]);
                }
                uint64_t v;
                CHECK_OK(lcx_box_volume(&b, &v));
                uint8_t *got = malloc(v * es), *want = malloc(v * es);
                CHECK_OK(lcx_ckpt_read_box(ck, tensor_names[ti], roles[ri], &b, got));
                source_read(&ts, ti, ri, &b, want);
                CHECK_MSG(memcmp(got, want, v * es) == 0, "%s %s random box differs", tensor_names[ti], roles[ri]);
                free(got);
                free(want);
            }
        }
    }
}

/* ---- codec ----------------------------------------------------------------------------------------------- */

static void test_codec(void) {
    /* Shuffle against its definition dst[k*n + i] = src[i*es + k], for sizes around the 4-element fast path. */
    const size_t ess[] = {1, 2, 3, 4, 8};
    for (size_t e = 0; e < 5; e++)
        for (size_t n = 0; n < 23; n++) {
            size_t es = ess[e];
            uint8_t src[23 * 8], sh[23 * 8], back[23 * 8];
            for (size_t i = 0; i < n * es; i++) src[i] = (uint8_t)rnd();
            lcx_byte_shuffle(src, sh, n, es);
            int ok = 1;
            for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < es; k++) ok = ok && sh[k * n + i] == src[i * es + k];
            CHECK_MSG(ok, "shuffle es=%zu n=%zu", es, n);
            memset(back, 0, sizeof back);
            lcx_byte_unshuffle(sh, back, n, es);
            CHECK(memcmp(back, src, n * es) == 0);
        }
    /* Encode/decode every codec x filter on bf16-like data; zstd + shuffle must actually compress it. */
    size_t n = 1 << 17; /* several zstd blocks, so the shuffled byte planes get their own entropy tables */
    uint16_t *w = malloc(n * 2), *back = malloc(n * 2);
    for (size_t i = 0; i < n; i++) w[i] = (uint16_t)(0x3c00 + rnd_below(4) * 256 + rnd_below(256)) ^ (uint16_t)(rnd_below(2) << 15);
    for (int c = 0; c < LCX_CODEC_COUNT; c++)
        for (int f = 0; f < LCX_FILTER_COUNT; f++) {
            lcx_codec_ctx ctx;
            lcx_codec_ctx_init(&ctx, 3, 0);
            const uint8_t *stored;
            size_t len;
            CHECK_OK(lcx_codec_encode(&ctx, (lcx_codec)c, (lcx_filter)f, 2, w, n * 2, &stored, &len));
            if (c == LCX_CODEC_ZSTD) CHECK(len < n * 2 * (f == LCX_FILTER_SHUFFLE ? 75 : 90) / 100);
            if (c == LCX_CODEC_RAW) CHECK(len == n * 2);
            memset(back, 0, n * 2);
            CHECK_OK(lcx_codec_decode(&ctx, (lcx_codec)c, (lcx_filter)f, 2, stored, len, back, n * 2));
            CHECK(memcmp(back, w, n * 2) == 0);
            if (c == LCX_CODEC_ZSTD) /* wrong expected length is refused, never silently truncated */
                CHECK_FAILS(lcx_codec_decode(&ctx, (lcx_codec)c, (lcx_filter)f, 2, stored, len, back, n * 2 - 2),
                            LCX_ERR_FORMAT, "expected");
            lcx_codec_ctx_free(&ctx);
        }
    free(w);
    free(back);
    lcx_codec c;
    lcx_filter f;
    CHECK(lcx_codec_parse("zstd", &c) && c == LCX_CODEC_ZSTD && !lcx_codec_parse("ZSTD", &c));
    CHECK(lcx_filter_parse("shuffle", &f) && f == LCX_FILTER_SHUFFLE && !lcx_filter_parse("", &f));
    /* XXH3-64 of the empty input, from the xxHash documentation/sanity tests. */
    CHECK(lcx_xxh3("", 0) == 0x2D06800538D394C2ull);
    char hex[17];
    uint64_t h;
    lcx_xxh3_hex(0x0123456789abcdefull, hex);
    CHECK(strcmp(hex, "0123456789abcdef") == 0);
    CHECK(lcx_xxh3_parse(hex, &h) && h == 0x0123456789abcdefull);
    CHECK(!lcx_xxh3_parse("0123456789ABCDEF", &h) && !lcx_xxh3_parse("0123", &h) &&
          !lcx_xxh3_parse("0123456789abcdef0", &h));
}

/* ---- tests ----------------------------------------------------------------------------------------------- */

static void test_roundtrip_codecs(const truth *tr) {
    source src = {.tr = tr};
    const struct { lcx_codec c; lcx_filter f; int level; uint64_t max_piece; } cases[] = {
        {LCX_CODEC_RAW, LCX_FILTER_NONE, 0, 0},      {LCX_CODEC_RAW, LCX_FILTER_SHUFFLE, 0, 0},
        {LCX_CODEC_ZSTD, LCX_FILTER_NONE, 1, 0},     {LCX_CODEC_ZSTD, LCX_FILTER_SHUFFLE, 3, 0},
        {LCX_CODEC_ZSTD, LCX_FILTER_SHUFFLE, 19, 96}, {LCX_CODEC_RAW, LCX_FILTER_NONE, 0, 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lcx_ckpt_write_opts o;
        lcx_ckpt_write_opts_default(&o);
        o.codec = cases[i].c;
        o.filter = cases[i].f;
        o.level = cases[i].level;
        o.threads = i == 3 ? 2 : 0;
        o.max_piece_bytes = cases[i].max_piece;
        char name[32];
        snprintf(name, sizeof name, "codec-%zu", i);
        write_layout(workdir, name, 1, 1, &o, &src, 0);
        lcx_ckpt *ck = open_ckpt(workdir, name);
        if (!ck) continue;
        CHECK_OK(lcx_ckpt_verify(ck));
        expect_truth(ck, tr, 3);
        /* Metadata survives: layout, config, training state, tokenizer list. */
        int tp, cp, dp;
        const char *kv;
        lcx_ckpt_layout(ck, &tp, &cp, &dp, &kv);
        CHECK(tp == 1 && cp == 1 && dp == 1 && strcmp(kv, "split") == 0);
        CHECK(json_equal(lcx_ckpt_model_config(ck), model_config));
        CHECK(json_integer_value(json_object_get(lcx_ckpt_training_state(ck), "step")) == 101);
        CHECK(lcx_ckpt_tokenizer_file_count(ck) == 1 && strcmp(lcx_ckpt_tokenizer_file(ck, 0), "tokenizer.json") == 0);
        const lcx_ckpt_tensor *t = lcx_ckpt_find(ck, "model.embed_tokens.weight", "param");
        CHECK(t && t->n_pieces >= 1 && t->pieces[0].codec == cases[i].c && t->pieces[0].filter == cases[i].f);
        if (t && cases[i].max_piece) CHECK(t->n_pieces > 1); /* split along dim 0 */
        if (t && cases[i].c == LCX_CODEC_RAW) CHECK(t->pieces[0].offset % 64 == 0);
        lcx_ckpt_free(ck);
    }
}

static void test_tp2cp2_boxes(const truth *tr) {
    source src = {.tr = tr};
    lcx_ckpt_write_opts o;
    lcx_ckpt_write_opts_default(&o);
    write_layout(workdir, "tp2cp2", 2, 2, &o, &src, 0);
    lcx_ckpt *ck = open_ckpt(workdir, "tp2cp2");
    if (!ck) return;
    CHECK(lcx_ckpt_file_count(ck) == 4);
    const lcx_ckpt_tensor *q = lcx_ckpt_find(ck, "model.layers.0.self_attn.q_proj.weight", "param");
    CHECK(q && q->n_pieces == 2);                   /* one per TP rank */
    const lcx_ckpt_tensor *m = lcx_ckpt_find(ck, "model.layers.0.self_attn.q_proj.weight", "adam_m");
    CHECK(m && m->n_pieces == 4);                   /* and split across the 2 CP ranks */
    expect_truth(ck, tr, 25);
    lcx_ckpt_free(ck);
}

static void reshard(const char *from, const char *to, int tp, int cp) {
    lcx_ckpt *ck = open_ckpt(workdir, from);
    if (!ck) return;
    source src = {.ck = ck};
    lcx_ckpt_write_opts o;
    lcx_ckpt_write_opts_default(&o);
    o.codec = tp % 2 ? LCX_CODEC_RAW : LCX_CODEC_ZSTD; /* mix codecs along the chain */
    write_layout(workdir, to, tp, cp, &o, &src, 0);
    lcx_ckpt_free(ck);
}

static void test_reshard_chains(const truth *tr) {
    source src = {.tr = tr};
    lcx_ckpt_write_opts o;
    lcx_ckpt_write_opts_default(&o);
    write_layout(workdir, "chain-tp1", 1, 1, &o, &src, 0);
    reshard("chain-tp1", "chain-tp2", 2, 1);
    reshard("chain-tp2", "chain-tp4", 4, 1);
    reshard("chain-tp4", "chain-tp1b", 1, 1);
    const char *chain1[] = {"chain-tp2", "chain-tp4", "chain-tp1b"};
    for (int i = 0; i < 3; i++) {
        lcx_ckpt *ck = open_ckpt(workdir, chain1[i]);
        expect_truth(ck, tr, 2);
        if (ck && i == 1) {
            const char *kv;
            int tp;
            lcx_ckpt_layout(ck, &tp, NULL, NULL, &kv);
            CHECK(tp == 4 && strcmp(kv, "replicated") == 0);
            /* kv heads replicated: stored once, by 2 of the 4 ranks; vocab 13 over 4 ranks of 4 rows: 4+4+4+1. */
            const lcx_ckpt_tensor *k = lcx_ckpt_find(ck, "model.layers.0.self_attn.k_proj.weight", "param");
            CHECK(k && k->n_pieces == 2);
            const lcx_ckpt_tensor *e = lcx_ckpt_find(ck, "model.embed_tokens.weight", "param");
            CHECK(e && e->n_pieces == 4);
            uint64_t rows = 0;
            for (int p = 0; e && p < e->n_pieces; p++) rows += e->pieces[p].box.shape[0];
            CHECK(rows == 13);
        }
        lcx_ckpt_free(ck);
    }
    write_layout(workdir, "chain-tp2cp2", 2, 2, &o, &src, 0);
    reshard("chain-tp2cp2", "chain-tp4cp1", 4, 1);
    reshard("chain-tp4cp1", "chain-tp2cp2b", 2, 2);
    const char *chain2[] = {"chain-tp4cp1", "chain-tp2cp2b"};
    for (int i = 0; i < 2; i++) {
        lcx_ckpt *ck = open_ckpt(workdir, chain2[i]);
        expect_truth(ck, tr, 2);
        lcx_ckpt_free(ck);
    }
}

/* Flip one byte inside a stored piece: the read names the file and the tensor. */
static void test_corruption(const truth *tr) {
    source src = {.tr = tr};
    for (int zstd = 0; zstd < 2; zstd++) {
        lcx_ckpt_write_opts o;
        lcx_ckpt_write_opts_default(&o);
        o.codec = zstd ? LCX_CODEC_ZSTD : LCX_CODEC_RAW;
        const char *name = zstd ? "corrupt-zstd" : "corrupt-raw";
        write_layout(workdir, name, 2, 1, &o, &src, 0);
        lcx_ckpt *ck = open_ckpt(workdir, name);
        if (!ck) continue;
        const char *victim = "model.layers.0.mlp.up_proj.weight";
        const lcx_ckpt_tensor *t = lcx_ckpt_find(ck, victim, "adam_v");
        const lcx_ckpt_piece *p = &t->pieces[1];
        char path[600];
        snprintf(path, sizeof path, "%s/%s/%s", workdir, name, lcx_ckpt_file_name(ck, p->file));
        int fd = open(path, O_RDWR);
        CHECK(fd >= 0);
        uint8_t byte;
        off_t at = (off_t)(p->offset + p->length / 2);
        CHECK(pread(fd, &byte, 1, at) == 1);
        byte ^= 0x10;
        CHECK(pwrite(fd, &byte, 1, at) == 1);
        close(fd);
        lcx_box full = lcx_box_full(t->ndim, t->shape);
        float *buf = malloc(sizeof(float) * DIMS.F * DIMS.H);
        CHECK_FAILS(lcx_ckpt_read_box(ck, victim, "adam_v", &full, buf), LCX_ERR_FORMAT, "checksum mismatch");
        CHECK(strstr(lcx_last_error(), victim) && strstr(lcx_last_error(), "data-1.bin"));
        /* The other roles and tensors still read fine. */
        CHECK_OK(lcx_ckpt_read_box(ck, victim, "adam_m", &full, buf));
        CHECK_FAILS(lcx_ckpt_verify(ck), LCX_ERR_FORMAT, "checksum mismatch");
        CHECK(strstr(lcx_last_error(), victim) != NULL);
        free(buf);
        lcx_ckpt_free(ck);
    }
}

/* ---- hostile manifests ----------------------------------------------------------------------------------- */

static char hostile_dir[300], manifest_path[320];
static char *manifest_text;

static json_t *piece_of(json_t *root, const char *name, const char *role, size_t k) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(root, "tensors"), i, t) {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0 &&
            strcmp(json_string_value(json_object_get(t, "role")), role) == 0)
            return json_array_get(json_object_get(t, "pieces"), k);
    }
    return NULL;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* Open after a mutation of the manifest JSON; restores the original afterwards. */
typedef void (*mutator)(json_t *root);
static void expect_open_fails(mutator fn, lcx_status code, const char *needle, const char *what) {
    json_t *root = json_loads(manifest_text, 0, NULL);
    fn(root);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    write_text(manifest_path, text);
    free(text);
    json_decref(root);
    lcx_ckpt *ck = NULL;
    lcx_clear_error();
    lcx_status st = lcx_ckpt_open(hostile_dir, &ck);
    CHECK_MSG(st == code && strstr(lcx_last_error(), needle), "%s: expected %s containing '%s', got %s: %s", what,
              lcx_status_name(code), needle, lcx_status_name(st), lcx_last_error());
    lcx_ckpt_free(ck);
    write_text(manifest_path, manifest_text);
}

#define QW "model.layers.0.self_attn.q_proj.weight"
static void m_outside(json_t *r) { json_array_set_new(json_object_get(piece_of(r, QW, "param", 0), "start"), 0, json_integer(16)); }
static void m_overlap(json_t *r) { json_array_set_new(json_object_get(piece_of(r, QW, "param", 1), "start"), 0, json_integer(4)); }
static void m_gap(json_t *r) {
    json_t *p = piece_of(r, QW, "param", 1);
    json_array_set_new(json_object_get(p, "box"), 0, json_integer(4));
    json_object_set_new(p, "raw_length", json_integer(4 * 8 * 2));
    json_object_set_new(p, "length", json_integer(4 * 8 * 2));
}
static void m_negative(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "offset", json_integer(-64)); }
static void m_huge(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "offset", json_integer(INT64_MAX - 5)); }
static void m_huge_len(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "length", json_integer(INT64_MAX)); }
static void m_real(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "offset", json_real(1.5)); }
static void m_codec(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "codec", json_string("lz4")); }
static void m_filter(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "filter", json_string("delta")); }
static void m_rawlen(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "raw_length", json_integer(12)); }
static void m_sum(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "xxh3", json_string("xyz")); }
static void m_file(json_t *r) { json_object_set_new(piece_of(r, QW, "param", 0), "file", json_string("data-9.bin")); }
static void m_dims(json_t *r) { json_array_append_new(json_object_get(piece_of(r, QW, "param", 0), "box"), json_integer(1)); }
static void m_version(json_t *r) { json_object_set_new(r, "version", json_integer(2)); }
static void m_format(json_t *r) { json_object_set_new(r, "format", json_string("safetensors")); }
static void m_dtype(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(r, "tensors"), 0), "dtype", json_string("Q9"));
}
static void m_subbyte(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(r, "tensors"), 0), "dtype", json_string("F4"));
}
static void m_dup_tensor(json_t *r) {
    json_t *ts = json_object_get(r, "tensors");
    json_array_append_new(ts, json_deep_copy(json_array_get(ts, 0)));
}
static void m_path(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(r, "files"), 0), "name", json_string("../data-0.bin"));
}
static void m_size(json_t *r) {
    json_object_set_new(json_array_get(json_object_get(r, "files"), 0), "size", json_integer(3));
}
static void m_layout(json_t *r) { json_object_set_new(json_object_get(r, "layout"), "tp", json_integer(0)); }
static void m_tok(json_t *r) { json_array_append_new(json_object_get(r, "tokenizer_files"), json_string("vocab.txt")); }
/* Two different tensors pointing at the same bytes (each box fine on its own). */
static void m_shared_bytes(json_t *r) {
    json_t *a = piece_of(r, "model.layers.0.self_attn.q_norm.weight", "param", 0);
    json_t *b = piece_of(r, "model.layers.0.self_attn.k_norm.weight", "param", 0);
    json_object_set(b, "offset", json_object_get(a, "offset"));
    json_object_set(b, "xxh3", json_object_get(a, "xxh3"));
}
static void m_optimizer_overlap(json_t *r) {
    json_array_set_new(json_object_get(piece_of(r, QW, "adam_m", 1), "start"), 0, json_integer(2));
}

/* o_proj is split by columns: the overlap sweep must look along dim 1. */
static void m_col_overlap(json_t *r) {
    json_array_set_new(json_object_get(piece_of(r, "model.layers.0.self_attn.o_proj.weight", "param", 1), "start"), 1,
                       json_integer(4));
}

static void test_hostile(const truth *tr) {
    source src = {.tr = tr};
    lcx_ckpt_write_opts o;
    lcx_ckpt_write_opts_default(&o);
    o.codec = LCX_CODEC_RAW;
    write_layout(workdir, "hostile", 2, 1, &o, &src, 0);
    snprintf(hostile_dir, sizeof hostile_dir, "%s/hostile", workdir);
    snprintf(manifest_path, sizeof manifest_path, "%s/manifest.json", hostile_dir);
    size_t len;
    CHECK_OK(lcx_read_file(manifest_path, 1 << 24, &manifest_text, &len));
    if (!manifest_text) return;
    lcx_ckpt *ck = NULL;
    CHECK_OK(lcx_ckpt_open(hostile_dir, &ck)); /* pristine */
    lcx_ckpt_free(ck);

    expect_open_fails(m_outside, LCX_ERR_FORMAT, "lies outside the tensor shape", "outside");
    expect_open_fails(m_overlap, LCX_ERR_FORMAT, "overlap", "overlap");
    expect_open_fails(m_gap, LCX_ERR_FORMAT, "pieces cover 96 of its 128 elements", "gap");
    expect_open_fails(m_negative, LCX_ERR_FORMAT, "'offset' must be a non-negative integer", "negative");
    expect_open_fails(m_huge, LCX_ERR_FORMAT, "run past the end", "huge offset");
    expect_open_fails(m_huge_len, LCX_ERR_FORMAT, "raw piece stores", "huge length");
    expect_open_fails(m_real, LCX_ERR_FORMAT, "'offset' must be a non-negative integer", "real offset");
    expect_open_fails(m_codec, LCX_ERR_FORMAT, "unknown codec 'lz4'", "codec");
    expect_open_fails(m_filter, LCX_ERR_FORMAT, "unknown filter 'delta'", "filter");
    expect_open_fails(m_rawlen, LCX_ERR_FORMAT, "raw_length 12 does not match", "raw_length");
    expect_open_fails(m_sum, LCX_ERR_FORMAT, "16 lowercase hex", "checksum text");
    expect_open_fails(m_file, LCX_ERR_FORMAT, "file 'data-9.bin' is not in the manifest's file list", "file");
    expect_open_fails(m_dims, LCX_ERR_FORMAT, "box has 2/3 dims", "dims");
    expect_open_fails(m_version, LCX_ERR_UNSUPPORTED, "format version 2", "version");
    expect_open_fails(m_format, LCX_ERR_FORMAT, "'format' is 'safetensors'", "format");
    expect_open_fails(m_dtype, LCX_ERR_FORMAT, "unknown dtype 'Q9'", "dtype");
    expect_open_fails(m_subbyte, LCX_ERR_UNSUPPORTED, "whole-byte", "F4");
    expect_open_fails(m_dup_tensor, LCX_ERR_FORMAT, "listed twice", "duplicate tensor");
    expect_open_fails(m_path, LCX_ERR_FORMAT, "plain file name", "path traversal");
    expect_open_fails(m_size, LCX_ERR_FORMAT, "truncated or modified", "size");
    expect_open_fails(m_layout, LCX_ERR_FORMAT, "'layout' needs integers", "layout");
    expect_open_fails(m_tok, LCX_ERR_NOT_FOUND, "tokenizer file 'vocab.txt' is missing", "tokenizer");
    expect_open_fails(m_shared_bytes, LCX_ERR_FORMAT, "overlap at offset", "shared bytes");
    expect_open_fails(m_optimizer_overlap, LCX_ERR_FORMAT, "overlap", "adam_m overlap");
    expect_open_fails(m_col_overlap, LCX_ERR_FORMAT, "[0:8, 4:12] overlap", "column overlap");

    /* Text-level attacks: integers beyond int64, duplicate keys, truncated JSON. */
    char *big = strdup(manifest_text), *at = strstr(big, "\"offset\": ");
    if (at) {
        char *num = at + strlen("\"offset\": ");
        size_t digits = strspn(num, "0123456789");
        char *t2 = malloc(strlen(big) + 40);
        sprintf(t2, "%.*s99999999999999999999999%s", (int)(num - big), big, num + digits);
        write_text(manifest_path, t2);
        CHECK_FAILS(lcx_ckpt_open(hostile_dir, &ck), LCX_ERR_FORMAT, "manifest.json:");
        free(t2);
    }
    free(big);
    char *dup = malloc(strlen(manifest_text) + 64);
    sprintf(dup, "{\"format\": \"x\", %s", manifest_text + 1);
    write_text(manifest_path, dup);
    CHECK_FAILS(lcx_ckpt_open(hostile_dir, &ck), LCX_ERR_FORMAT, "duplicate");
    free(dup);
    char *cut = strndup(manifest_text, strlen(manifest_text) / 2);
    write_text(manifest_path, cut);
    CHECK_FAILS(lcx_ckpt_open(hostile_dir, &ck), LCX_ERR_FORMAT, "manifest.json:");
    free(cut);
    write_text(manifest_path, manifest_text);

    /* Missing and truncated data files. */
    char f1[400], f1b[420];
    snprintf(f1, sizeof f1, "%s/data-1.bin", hostile_dir);
    snprintf(f1b, sizeof f1b, "%s.away", f1);
    CHECK(rename(f1, f1b) == 0);
    CHECK_FAILS(lcx_ckpt_open(hostile_dir, &ck), LCX_ERR_NOT_FOUND, "data-1.bin: data file missing");
    CHECK(rename(f1b, f1) == 0);
    struct stat sb;
    CHECK(stat(f1, &sb) == 0);
    uint8_t last = 0;
    int fd = open(f1, O_RDWR);
    CHECK(fd >= 0 && pread(fd, &last, 1, sb.st_size - 1) == 1);
    CHECK(ftruncate(fd, sb.st_size - 1) == 0);
    CHECK_FAILS(lcx_ckpt_open(hostile_dir, &ck), LCX_ERR_FORMAT, "truncated");
    last ^= 0xFF; /* put back a different last byte: sizes match again, the checksum catches it */
    CHECK(pwrite(fd, &last, 1, sb.st_size - 1) == 1);
    close(fd);
    CHECK_OK(lcx_ckpt_open(hostile_dir, &ck));
    if (ck) CHECK_FAILS(lcx_ckpt_verify(ck), LCX_ERR_FORMAT, "checksum mismatch");
    lcx_ckpt_free(ck);
    free(manifest_text);

    /* Reads outside the tensor / of absent tensors; writer argument checks. */
    ck = open_ckpt(workdir, "codec-0");
    if (ck) {
        lcx_box b = {.ndim = 2, .start = {0, 0}, .shape = {17, 8}};
        uint8_t buf[4096];
        CHECK_FAILS(lcx_ckpt_read_box(ck, QW, "param", &b, buf), LCX_ERR_INVALID, "outside");
        CHECK_FAILS(lcx_ckpt_read_box(ck, "nope.weight", "param", &b, buf), LCX_ERR_NOT_FOUND, "no tensor 'nope.weight'");
        lcx_ckpt_free(ck);
    }
    char *tmp = NULL;
    CHECK_FAILS(lcx_ckpt_tmpdir_create(workdir, "../evil", &tmp), LCX_ERR_INVALID, "checkpoint name");
    CHECK_FAILS(lcx_ckpt_tmpdir_create(workdir, "latest", &tmp), LCX_ERR_INVALID, "checkpoint name");
    CHECK_FAILS(lcx_ckpt_tmpdir_create(workdir, "codec-0", &tmp), LCX_ERR_INVALID, "already exists");
    CHECK_OK(lcx_ckpt_tmpdir_create(workdir, "writer-args", &tmp));
    lcx_ckpt_writer *w = NULL;
    CHECK_OK(lcx_ckpt_writer_open(tmp, 0, NULL, &w));
    if (w) {
        uint64_t shape[2] = {4, 4};
        lcx_box b = {.ndim = 2, .start = {2, 0}, .shape = {3, 4}};
        uint8_t buf[64] = {0};
        CHECK_FAILS(lcx_ckpt_writer_put(w, "x", "param", LCX_BF16, 2, shape, &b, buf), LCX_ERR_INVALID, "outside");
        b.shape[0] = 2;
        CHECK_FAILS(lcx_ckpt_writer_put(w, "x", "Param", LCX_BF16, 2, shape, &b, buf), LCX_ERR_INVALID, "role");
        CHECK_FAILS(lcx_ckpt_writer_put(w, "x", "param", LCX_Q4_0, 2, shape, &b, buf), LCX_ERR_UNSUPPORTED, "Q");
        CHECK_OK(lcx_ckpt_writer_put(w, "x", "param", LCX_BF16, 2, shape, &b, buf));
        CHECK_FAILS(lcx_ckpt_writer_put(w, "x", "param", LCX_F32, 2, shape, &b, buf), LCX_ERR_INVALID, "different dtype");
        /* A param covered only half: finalize re-opens it and refuses. */
        json_t *rj = NULL;
        CHECK_OK(lcx_ckpt_writer_close(w, &rj));
        lcx_ckpt_meta meta = {.tp = 1, .cp = 1, .dp = 1};
        CHECK_FAILS(lcx_ckpt_finalize(tmp, &meta, &rj, 1), LCX_ERR_FORMAT, "pieces cover 8 of its 16 elements");
        json_decref(rj);
        lcx_ckpt_writer_free(w);
    }
    free(tmp);
}

/* ---- crash safety ---------------------------------------------------------------------------------------- */

#define CRASH_N 2048 /* bf16 elements per tensor */

static void crash_fill(int step, int k, uint16_t *buf) {
    uint64_t s = (uint64_t)step * 1000003u + (uint64_t)k * 7919u + 1;
    for (int i = 0; i < CRASH_N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (uint16_t)(s >> 48);
    }
}

static void crash_save(const char *parent, int step, int round) {
    char name[64];
    snprintf(name, sizeof name, "step-%06d-r%02d", step, round);
    char *tmp = NULL;
    if (lcx_ckpt_tmpdir_create(parent, name, &tmp) != LCX_OK) _exit(3);
    lcx_ckpt_write_opts o;
    lcx_ckpt_write_opts_default(&o);
    o.level = 1;
    json_t *rj[2] = {0};
    uint16_t buf[CRASH_N];
    for (int rank = 0; rank < 2; rank++) {
        lcx_ckpt_writer *w;
        if (lcx_ckpt_writer_open(tmp, rank, &o, &w) != LCX_OK) _exit(4);
        for (int k = 0; k < 4; k++) {
            char tn[32];
            snprintf(tn, sizeof tn, "t%d", k);
            crash_fill(step, k, buf);
            uint64_t shape[1] = {2 * CRASH_N};
            lcx_box b = {.ndim = 1, .start = {(uint64_t)rank * CRASH_N}, .shape = {CRASH_N}};
            if (lcx_ckpt_writer_put(w, tn, "param", LCX_BF16, 1, shape, &b, buf) != LCX_OK) _exit(5);
        }
        if (lcx_ckpt_writer_close(w, &rj[rank]) != LCX_OK) _exit(6);
        lcx_ckpt_writer_free(w);
    }
    json_t *state = json_pack("{s:i}", "step", step);
    lcx_ckpt_meta meta = {.training_state = state, .tp = 2, .cp = 1, .dp = 1};
    if (lcx_ckpt_finalize(tmp, &meta, rj, 2) != LCX_OK) _exit(7);
    if (lcx_ckpt_commit(tmp, parent, name, 2) != LCX_OK) _exit(8);
    json_decref(state);
    json_decref(rj[0]);
    json_decref(rj[1]);
    free(tmp);
}

/* Opens, verifies and checks the contents against the step it claims; returns the step or -1. */
static int check_crash_ckpt(const char *dir) {
    lcx_ckpt *ck = NULL;
    lcx_status st = lcx_ckpt_open(dir, &ck);
    CHECK_MSG(st == LCX_OK, "%s: %s", dir, lcx_last_error());
    if (st != LCX_OK) return -1;
    int step = (int)json_integer_value(json_object_get(lcx_ckpt_training_state(ck), "step"));
    CHECK_OK(lcx_ckpt_verify(ck));
    uint16_t got[CRASH_N], want[CRASH_N];
    for (int k = 0; k < 4; k++) {
        char tn[32];
        snprintf(tn, sizeof tn, "t%d", k);
        crash_fill(step, k, want);
        lcx_box b = {.ndim = 1, .start = {CRASH_N}, .shape = {CRASH_N}};
        CHECK_OK(lcx_ckpt_read_box(ck, tn, "param", &b, got));
        CHECK(memcmp(got, want, sizeof got) == 0);
    }
    lcx_ckpt_free(ck);
    return step;
}

static void test_crash_safety(void) {
    char parent[300];
    snprintf(parent, sizeof parent, "%s/crash", workdir);
    CHECK(mkdir(parent, 0755) == 0);
    crash_save(parent, 0, 0);
    int next = 1, rounds = 30, kills_mid_write = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int round = 1; round <= rounds; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int s = next;; s++) crash_save(parent, s, round);
        }
        struct timespec d = {0, (long)(rnd_below(60000) + 1000) * 1000L}; /* 1-61 ms */
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECK_MSG(WIFSIGNALED(status), "child exited by itself (status %d): a save failed", status);
        /* latest names a complete, verifiable checkpoint; every non-temporary checkpoint directory is complete;
         * at least one other complete checkpoint remains to fall back to. */
        char *latest = NULL;
        CHECK_OK(lcx_ckpt_latest(parent, &latest));
        int lstep = latest ? check_crash_ckpt(latest) : -1;
        int others = 0, tmps = 0;
        DIR *dd = opendir(parent);
        struct dirent *e;
        while (dd && (e = readdir(dd))) {
            if (e->d_name[0] == '.' || strcmp(e->d_name, "latest") == 0) continue;
            if (strstr(e->d_name, ".tmp-")) { tmps++; continue; }
            char p[700];
            snprintf(p, sizeof p, "%s/%s", parent, e->d_name);
            if (latest && strcmp(p, latest) == 0) continue;
            if (check_crash_ckpt(p) >= 0) others++;
        }
        if (dd) closedir(dd);
        if (tmps) kills_mid_write++;
        CHECK_MSG(lstep >= 0 && (lstep == 0 || others >= 1), "round %d: latest step %d, %d other checkpoints", round,
                  lstep, others);
        next = lstep + 1;
        free(latest);
    }
    /* One clean save: pruning keeps exactly the 2 newest and clears every leftover of the killed saves. */
    crash_save(parent, next, 99);
    int dirs = 0, leftovers = 0, has_latest = 0;
    DIR *dd = opendir(parent);
    struct dirent *e;
    while (dd && (e = readdir(dd))) {
        if (e->d_name[0] == '.') continue;
        if (strcmp(e->d_name, "latest") == 0) has_latest = 1;
        else if (strstr(e->d_name, ".tmp-")) leftovers++;
        else dirs++;
    }
    if (dd) closedir(dd);
    CHECK_MSG(dirs == 2 && leftovers == 0 && has_latest, "%d checkpoints, %d leftovers", dirs, leftovers);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("crash safety: %d kills, %d left temporary directories behind, reached step %d in %.2f s\n", rounds,
           kills_mid_write, next - 1, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    CHECK(next > 1); /* the child made progress */
}

/* lcx_ckpt_count and lcx_ckpt_held_new against commits: a parent with E checkpoints (kept all) takes S more
 * commits that keep K; each commit's new directory is complete beside the ones it finds, so the most at once,
 * beyond E, is the largest count before a commit, + 1, - E. */
static void test_held_new(const truth *tr) {
    source src = {.tr = tr};
    lcx_ckpt_write_opts o;
    lcx_ckpt_write_opts_default(&o);
    int case_no = 0;
    for (int E = 0; E <= 3; E += 1 + (E == 0))
        for (int S = 1; S <= 3; S += 2)
            for (int K = 0; K <= 2; K++) {
                char parent[300], name[32];
                snprintf(parent, sizeof parent, "%s/held-%d", workdir, case_no++);
                CHECK(mkdir(parent, 0777) == 0);
                CHECK(lcx_ckpt_count(parent) == 0);
                for (int i = 0; i < E; i++) {
                    snprintf(name, sizeof name, "old-%d", i);
                    write_layout(parent, name, 1, 1, &o, &src, 0);
                }
                CHECK(lcx_ckpt_count(parent) == E);
                int64_t peak = 0;
                for (int i = 0; i < S; i++) {
                    const int64_t at_once = lcx_ckpt_count(parent) + 1;
                    if (at_once > peak) peak = at_once;
                    snprintf(name, sizeof name, "new-%d", i);
                    write_layout(parent, name, 1, 1, &o, &src, K);
                }
                CHECK(lcx_ckpt_count(parent) == (K > 0 && K < E + S ? K : E + S));
                if (lcx_ckpt_held_new(E, S, K) != peak - E)
                    fprintf(stderr, "  held_new(%d, %d, %d) = %lld, commits held %lld more\n", E, S, K,
                            (long long)lcx_ckpt_held_new(E, S, K), (long long)(peak - E));
                CHECK(lcx_ckpt_held_new(E, S, K) == peak - E);
            }
    CHECK(lcx_ckpt_held_new(2, 0, 2) == 0);
    CHECK(lcx_ckpt_count("/nonexistent-lcx-parent") == 0);
}

/* ---- setup ----------------------------------------------------------------------------------------------- */

int main(void) {
    if (test_tmpdir_make(workdir, sizeof workdir, ".", "test_lcx") != 0) return 1;
    char tokpath[300];
    snprintf(tokpath, sizeof tokpath, "%s/tokenizer.json", workdir);
    write_text(tokpath, "{\"model\": {\"type\": \"BPE\"}}\n");
    model_config = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "model_type", "llama", "vocab_size", 13,
                             "hidden_size", 8, "intermediate_size", 12, "num_attention_heads", 4,
                             "num_key_value_heads", 2, "head_dim", 4);
    truth tr;
    truth_init(&tr);
    test_codec();
    test_roundtrip_codecs(&tr);
    test_tp2cp2_boxes(&tr);
    test_reshard_chains(&tr);
    test_corruption(&tr);
    test_hostile(&tr);
    test_crash_safety();
    test_held_new(&tr);
    truth_free(&tr);
    json_decref(model_config);
    test_tmpdir_done(workdir);
    return test_summary("test_lcx");
}
