/* GGUF reader/writer against gguf-py: fixtures written by gguf-py's GGUFWriter and described by its GGUFReader
 * and gguf.quants.dequantize (tests/fixtures/gen_gguf.py) must read back identically; files written by our
 * writer read back with our reader (and, with LCX_KEEP_OUTPUT=DIR, are left for
 * tests/fixtures/check_gguf_read.py to read with gguf-py); the Q8_0 quantiser matches gguf-py byte for byte;
 * the Q/K permutation matches llama.cpp's converter. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "src/core/fileio.h"
#include "test_util.h"
#include "worst_of.h"

#define FIX LCX_SOURCE_DIR "/tests/fixtures/gguf/"

static json_t *expected;
static float *ref;     /* expected.f32 */
static size_t ref_len; /* floats */

static int hexval(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* Decode a hex string into buf (returns length). */
static size_t unhex(const char *h, char *buf, size_t cap) {
    size_t n = strlen(h) / 2;
    if (n > cap) n = cap;
    for (size_t i = 0; i < n; i++) buf[i] = (char)(hexval(h[2 * i]) << 4 | hexval(h[2 * i + 1]));
    return n;
}

/* Compare one scalar element (expected as in gen_gguf.py: ints as strings, strings as hex). */
static void check_elem(const char *key, lcx_gguf_type t, json_t *exp, const lcx_gguf_kv *kv, uint64_t i,
                       const uint8_t *scalar) {
    int is_arr = kv->type == LCX_GGUF_ARRAY;
    if (t == LCX_GGUF_STRING) {
        static char want[4096];
        size_t wl = unhex(json_string_value(exp), want, sizeof want);
        const char *s;
        size_t len;
        if (is_arr) CHECK_OK(lcx_gguf_arr_str(kv, i, &s, &len));
        else s = (const char *)kv->data, len = kv->str_len;
        CHECK_MSG(len == wl && memcmp(s, want, wl) == 0, "%s[%llu]: string differs", key, (unsigned long long)i);
    } else if (t == LCX_GGUF_F32 || t == LCX_GGUF_F64) {
        double v = 0;
        if (is_arr) CHECK_OK(lcx_gguf_arr_float(kv, i, &v));
        else if (t == LCX_GGUF_F32) { float x; memcpy(&x, scalar, 4); v = x; }
        else memcpy(&v, scalar, 8);
        double w = json_real_value(exp);
        CHECK_MSG(v == w && signbit(v) == signbit(w), "%s[%llu]: %.17g != %.17g", key, (unsigned long long)i, v, w);
    } else if (t == LCX_GGUF_BOOL) {
        int v = is_arr ? kv->data[i] != 0 : scalar[0] != 0;
        CHECK_MSG(v == json_is_true(exp), "%s[%llu]: bool differs", key, (unsigned long long)i);
    } else {
        const char *ws = json_string_value(exp);
        char got[32];
        if (is_arr && t != LCX_GGUF_U64) {
            int64_t v;
            CHECK_OK(lcx_gguf_arr_int(kv, i, &v));
            snprintf(got, sizeof got, "%lld", (long long)v);
        } else if (is_arr) {
            uint64_t v;
            memcpy(&v, kv->data + 8 * i, 8);
            snprintf(got, sizeof got, "%llu", (unsigned long long)v);
        } else {
            snprintf(got, sizeof got, "?");
        }
        if (!is_arr) return; /* scalars checked through the getters below */
        CHECK_MSG(strcmp(got, ws) == 0, "%s[%llu]: %s != %s", key, (unsigned long long)i, got, ws);
    }
}

/* Scalar integers through the public getters (u64 range, i64 range). */
static void check_scalar_int(const lcx_gguf_file *f, const char *key, lcx_gguf_type t, const char *want) {
    char got[32];
    if (t == LCX_GGUF_U64 || want[0] != '-') {
        uint64_t v;
        CHECK_OK(lcx_gguf_get_u64(f, key, &v));
        snprintf(got, sizeof got, "%llu", (unsigned long long)v);
    } else {
        int64_t v;
        CHECK_OK(lcx_gguf_get_i64(f, key, &v));
        snprintf(got, sizeof got, "%lld", (long long)v);
    }
    CHECK_MSG(strcmp(got, want) == 0, "%s: %s != %s", key, got, want);
}

static void check_fixture(const char *fn) {
    char path[512];
    snprintf(path, sizeof path, FIX "%s", fn);
    json_t *d = json_object_get(json_object_get(expected, "files"), fn);
    CHECK(d != NULL);
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(path, &f));
    if (!f || !d) return;
    CHECK(f->version == 3);
    CHECK(f->alignment == json_integer_value(json_object_get(d, "alignment")));
    json_t *kvs = json_object_get(d, "kvs"), *tensors = json_object_get(d, "tensors");
    CHECK_MSG(f->n_kv == json_array_size(kvs), "%s: %zu KVs, gguf-py %zu", fn, f->n_kv, json_array_size(kvs));
    size_t i;
    json_t *e;
    json_array_foreach(kvs, i, e) {
        const char *key = json_string_value(json_object_get(e, "key"));
        const lcx_gguf_kv *kv = lcx_gguf_find_kv(f, key);
        CHECK_MSG(kv != NULL, "%s: key %s missing", fn, key);
        if (!kv) continue;
        CHECK_MSG(kv == &f->kv[i], "%s: key %s out of file order", fn, key);
        lcx_gguf_type t = (lcx_gguf_type)json_integer_value(json_object_get(e, "type"));
        CHECK(kv->type == t);
        if (t == LCX_GGUF_ARRAY) {
            lcx_gguf_type et = (lcx_gguf_type)json_integer_value(json_object_get(e, "elem_type"));
            json_t *vals = json_object_get(e, "values");
            CHECK(kv->elem_type == et);
            CHECK(kv->count == json_array_size(vals));
            const lcx_gguf_kv *a;
            CHECK_OK(lcx_gguf_get_array(f, key, et, &a));
            for (size_t k = 0; k < json_array_size(vals) && k < kv->count; k++)
                check_elem(key, et, json_array_get(vals, k), kv, k, NULL);
            CHECK_FAILS(lcx_gguf_arr_int(kv, kv->count, &(int64_t){0}), LCX_ERR_INVALID, "out of range");
        } else {
            json_t *v = json_object_get(e, "value");
            check_elem(key, t, v, kv, 0, kv->data);
            if (t == LCX_GGUF_STRING) {
                const char *s;
                size_t len;
                char want[512];
                size_t wl = unhex(json_string_value(v), want, sizeof want);
                CHECK_OK(lcx_gguf_get_str(f, key, &s, &len));
                CHECK(len == wl && memcmp(s, want, wl) == 0);
            } else if (t == LCX_GGUF_F32 || t == LCX_GGUF_F64) {
                double x;
                CHECK_OK(lcx_gguf_get_f64(f, key, &x));
                CHECK(x == json_real_value(v));
            } else if (t == LCX_GGUF_BOOL) {
                int b;
                CHECK_OK(lcx_gguf_get_bool(f, key, &b));
                CHECK(b == json_is_true(v));
            } else {
                check_scalar_int(f, key, t, json_string_value(v));
            }
        }
    }
    CHECK_MSG(f->n_tensors == json_array_size(tensors), "%s: %zu tensors", fn, f->n_tensors);
    json_array_foreach(tensors, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const lcx_gguf_tensor *t = lcx_gguf_find_tensor(f, name);
        CHECK_MSG(t == &f->tensors[i], "%s: tensor %s missing or out of order", fn, name);
        if (!t) continue;
        CHECK(t->ggml_type == json_integer_value(json_object_get(e, "ggml_type")));
        json_t *dims = json_object_get(e, "dims");
        CHECK(t->n_dims == json_array_size(dims));
        for (size_t k = 0; k < json_array_size(dims) && k < 4; k++)
            CHECK(t->dims[k] == (uint64_t)json_integer_value(json_array_get(dims, k)));
        lcx_shape s = lcx_gguf_tensor_shape(t);
        CHECK(s.ndim == (int)t->n_dims && s.dims[0] == t->dims[t->n_dims - 1]);
        CHECK_MSG((uint64_t)(t->data - f->base) == (uint64_t)json_integer_value(json_object_get(e, "offset")),
                  "%s: tensor %s at %lld", fn, name, (long long)(t->data - f->base));
        CHECK(t->nbytes == (uint64_t)json_integer_value(json_object_get(e, "nbytes")));
        json_t *at = json_object_get(e, "f32_at");
        if (at) {
            size_t off = (size_t)json_integer_value(at), n = (size_t)json_integer_value(json_object_get(e, "numel"));
            CHECK(n == t->numel && off + n <= ref_len);
            float *got = malloc(n * sizeof(float));
            CHECK_OK(lcx_gguf_tensor_to_f32(f, t, got));
            size_t bad = 0;
            for (size_t k = 0; k < n && off + k <= ref_len; k++)
                bad += memcmp(&got[k], &ref[off + k], 4) != 0; /* bit-exact, as gguf-py dequantises */
            CHECK_MSG(bad == 0, "%s: tensor %s: %zu of %zu values differ from gguf.quants.dequantize", fn, name, bad,
                      n);
            free(got);
        } else {
            lcx_dtype dt;
            char needle[128];
            snprintf(needle, sizeof needle, "unsupported ggml type %u (%s) for tensor '%s'", t->ggml_type,
                     lcx_ggml_type_name(t->ggml_type), name);
            CHECK_FAILS(lcx_gguf_tensor_dtype(f, t, &dt), LCX_ERR_UNSUPPORTED, needle);
        }
    }
    lcx_gguf_close(f);
}

/* Getters' type and range rules on types.gguf. */
static void check_getters(void) {
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(FIX "types.gguf", &f));
    if (!f) return;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float x;
    char *s = NULL;
    CHECK_OK(lcx_gguf_get_u32(f, "t.u8", &u32));
    CHECK(u32 == 200);
    CHECK_OK(lcx_gguf_get_u32(f, "t.u32", &u32));
    CHECK(u32 == 4000000000u);
    CHECK_OK(lcx_gguf_get_u64(f, "t.u16", &u64));
    CHECK(u64 == 60000);
    CHECK_FAILS(lcx_gguf_get_u32(f, "t.u64", &u32), LCX_ERR_FORMAT, "more than a u32");
    CHECK_FAILS(lcx_gguf_get_i64(f, "t.u64", &i64), LCX_ERR_FORMAT, "more than an i64");
    CHECK_FAILS(lcx_gguf_get_u64(f, "t.i8", &u64), LCX_ERR_FORMAT, "is -100, expected a non-negative");
    CHECK_OK(lcx_gguf_get_i64(f, "t.i16", &i64));
    CHECK(i64 == -30000);
    CHECK_FAILS(lcx_gguf_get_u64(f, "t.str", &u64), LCX_ERR_FORMAT, "key 't.str' has type string, expected an integer");
    CHECK_FAILS(lcx_gguf_get_u64(f, "t.arr_u8", &u64), LCX_ERR_FORMAT, "has type array");
    CHECK_FAILS(lcx_gguf_get_f32(f, "t.u8", &x), LCX_ERR_FORMAT, "expected f32 or f64");
    CHECK_FAILS(lcx_gguf_get_u32(f, "no.such.key", &u32), LCX_ERR_NOT_FOUND, "types.gguf: key 'no.such.key' not found");
    CHECK_OK(lcx_gguf_get_f32(f, "t.f32", &x));
    CHECK(x == 0.1f);
    CHECK_OK(lcx_gguf_get_str_dup(f, "general.architecture", &s));
    CHECK(s && strcmp(s, "lcxtest") == 0);
    free(s);
    s = NULL;
    CHECK_OK(lcx_gguf_get_str_dup(f, "t.str_empty", &s));
    CHECK(s && s[0] == 0);
    free(s);
    const lcx_gguf_kv *a;
    CHECK_FAILS(lcx_gguf_get_array(f, "t.arr_u8", LCX_GGUF_STRING, &a), LCX_ERR_FORMAT,
                "is an array of u8, expected an array of string");
    CHECK_OK(lcx_gguf_get_array(f, "t.arr_str", LCX_GGUF_TYPE_COUNT, &a));
    double dv;
    CHECK_FAILS(lcx_gguf_arr_float(a, 0, &dv), LCX_ERR_INVALID, "not of numbers");
    CHECK_OK(lcx_gguf_get_array(f, "t.arr_u64", LCX_GGUF_U64, &a));
    CHECK_FAILS(lcx_gguf_arr_int(a, 1, &i64), LCX_ERR_FORMAT, "exceeds int64");
    CHECK(lcx_gguf_find_tensor(f, "nope") == NULL);
    lcx_gguf_close(f);
}

/* v2 has the v3 layout (v3 only added big-endian files): the same bytes with version 2 must read; 1 and 4 not. */
static void check_versions(void) {
    char *buf = NULL;
    size_t len = 0;
    CHECK_OK(lcx_read_file(FIX "types.gguf", 1 << 20, &buf, &len));
    if (!buf) return;
    lcx_gguf_file *f = NULL;
    buf[4] = 2;
    CHECK_OK(lcx_gguf_parse("v2.gguf", (const uint8_t *)buf, len, &f));
    CHECK(f && f->version == 2 && f->n_tensors == 9);
    lcx_gguf_close(f);
    buf[4] = 1;
    CHECK_FAILS(lcx_gguf_parse("v1.gguf", (const uint8_t *)buf, len, &f), LCX_ERR_FORMAT,
                "v1.gguf: unsupported GGUF version 1");
    CHECK(f == NULL);
    buf[4] = 4;
    CHECK_FAILS(lcx_gguf_parse("v4.gguf", (const uint8_t *)buf, len, &f), LCX_ERR_FORMAT, "unsupported GGUF version 4");
    /* Every truncation of a valid file fails cleanly (no crash, a message naming the file). */
    buf[4] = 3;
    size_t fails = 0;
    for (size_t n = 0; n < len; n++) {
        lcx_status st = lcx_gguf_parse("cut.gguf", (const uint8_t *)buf, n, &f);
        if (st == LCX_OK) lcx_gguf_close(f);
        fails += st == LCX_ERR_FORMAT && strstr(lcx_last_error(), "cut.gguf: ") == lcx_last_error();
    }
    /* The file ends with the last tensor's padding; only cuts inside it can still be valid. */
    CHECK_MSG(fails >= len - 32, "%zu of %zu truncations rejected", fails, len);
    free(buf);
}

/* ggml's reference Q8_0 quantiser (gguf-py reproduces it bit-exactly): our bytes must equal gguf-py's. */
static void check_q8_quantiser(void) {
    json_t *src = json_object_get(json_object_get(expected, "quantizer_sources"), "q8_0");
    size_t off = (size_t)json_integer_value(json_object_get(src, "f32_at"));
    size_t n = (size_t)json_integer_value(json_object_get(src, "numel"));
    CHECK(n == 128 && off + n <= ref_len);
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(FIX "types.gguf", &f));
    if (!f || n != 128) return;
    const lcx_gguf_tensor *t = lcx_gguf_find_tensor(f, "q8_0");
    uint8_t mine[4 * 34];
    CHECK_OK(lcx_quantize_q8_0(ref + off, mine, n));
    CHECK(t && t->nbytes == sizeof mine && memcmp(mine, t->data, sizeof mine) == 0);
    /* The fixture holds exact ties (block 2 has d = 1): -126.5 must round away from zero to -127. */
    CHECK(ref[off + 65] == -126.5f && (int8_t)mine[2 * 34 + 2 + 1] == -127);
    CHECK((int8_t)mine[2 * 34 + 2 + 2] == 1 && (int8_t)mine[2 * 34 + 2 + 6] == 3); /* 0.5 -> 1, 2.5 -> 3 */
    float bad[32] = {0};
    bad[3] = NAN;
    CHECK_FAILS(lcx_quantize_q8_0(bad, mine, 32), LCX_ERR_INVALID, "non-finite value at element 3");
    CHECK_FAILS(lcx_quantize_q8_0(bad, mine, 31), LCX_ERR_INVALID, "not whole 32-value blocks");
    lcx_gguf_close(f);
}

/* llama-shaped file: metadata, tokenizer arrays, Q/K permutation against llama.cpp's converter. */
static void check_llama(void) {
    json_t *c = json_object_get(expected, "llama");
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(FIX "llama_tiny.gguf", &f));
    if (!f) return;
    uint32_t v;
    float x;
    const char *s;
    size_t len;
    CHECK_OK(lcx_gguf_get_str(f, "general.architecture", &s, &len));
    CHECK(len == 5 && memcmp(s, "llama", 5) == 0);
    CHECK_OK(lcx_gguf_get_u32(f, "llama.block_count", &v));
    CHECK(v == json_integer_value(json_object_get(c, "layers")));
    CHECK_OK(lcx_gguf_get_u32(f, "llama.embedding_length", &v));
    uint32_t H = v;
    CHECK(v == json_integer_value(json_object_get(c, "hidden")));
    CHECK_OK(lcx_gguf_get_u32(f, "llama.attention.head_count", &v));
    uint32_t nh = v;
    CHECK(v == json_integer_value(json_object_get(c, "heads")));
    CHECK_OK(lcx_gguf_get_u32(f, "llama.attention.head_count_kv", &v));
    uint32_t nkv = v;
    CHECK(v == json_integer_value(json_object_get(c, "kv_heads")));
    CHECK_OK(lcx_gguf_get_u32(f, "llama.context_length", &v));
    CHECK(v == json_integer_value(json_object_get(c, "ctx")));
    CHECK_OK(lcx_gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &x));
    CHECK(x == (float)json_real_value(json_object_get(c, "eps")));
    CHECK_OK(lcx_gguf_get_f32(f, "llama.rope.freq_base", &x));
    CHECK(x == (float)json_real_value(json_object_get(c, "theta")));
    const lcx_gguf_kv *tok, *sc, *tt;
    CHECK_OK(lcx_gguf_get_array(f, "tokenizer.ggml.tokens", LCX_GGUF_STRING, &tok));
    CHECK_OK(lcx_gguf_get_array(f, "tokenizer.ggml.scores", LCX_GGUF_F32, &sc));
    CHECK_OK(lcx_gguf_get_array(f, "tokenizer.ggml.token_type", LCX_GGUF_I32, &tt));
    if (tok && sc && tt) {
        CHECK(tok->count == 64 && sc->count == 64 && tt->count == 64);
        CHECK_OK(lcx_gguf_arr_str(tok, 19, &s, &len));
        CHECK(len == 4 && memcmp(s, "\xe2\x96\x81" "a", 4) == 0);
        double d;
        int64_t k;
        CHECK_OK(lcx_gguf_arr_float(sc, 3, &d));
        CHECK(d == -1.5);
        CHECK_OK(lcx_gguf_arr_int(tt, 1, &k));
        CHECK(k == 3);
    }
    uint32_t bos;
    CHECK_OK(lcx_gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &bos));
    CHECK(bos == 1);

    /* q/k: HF entries encode row*1000 + col. Un-permuting the stored tensor must give them back. */
    const char *names[2] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight"};
    uint32_t heads[2] = {nh, nkv};
    for (int w = 0; w < 2; w++) {
        const lcx_gguf_tensor *t = lcx_gguf_find_tensor(f, names[w]);
        CHECK(t != NULL && t->ggml_type == LCX_GGML_F32 && t->dims[0] == H);
        if (!t) continue;
        size_t rows = (size_t)t->dims[1], n = rows * H;
        float *g = malloc(n * 4), *hf = malloc(n * 4), *back = malloc(n * 4);
        CHECK_OK(lcx_gguf_tensor_to_f32(f, t, g));
        CHECK_OK(lcx_gguf_unpermute_qk(hf, g, rows, H, 4, heads[w]));
        size_t bad = 0;
        for (size_t r = 0; r < rows; r++)
            for (size_t col = 0; col < H; col++) bad += hf[r * H + col] != (float)(r * 1000 + col);
        CHECK_MSG(bad == 0, "%s: %zu entries wrong after unpermute", names[w], bad);
        CHECK_OK(lcx_gguf_permute_qk(back, hf, rows, H, 4, heads[w]));
        CHECK(memcmp(back, g, n * 4) == 0);
        free(g), free(hf), free(back);
    }
    lcx_gguf_close(f);

    /* Row orders recorded from the converter's reshape/swapaxes permute. */
    json_t *perm = json_object_get(expected, "permutation");
    const char *keys[3] = {"q", "k", "q3"};
    size_t nheads[3] = {4, 2, 3}, esz[3] = {4, 4, 2}, cols[3] = {1, 3, 2};
    for (int k = 0; k < 3; k++) {
        json_t *p = json_object_get(perm, keys[k]);
        size_t rows = json_array_size(p), rb = cols[k] * esz[k];
        CHECK(rows > 0);
        uint8_t *src = malloc(rows * rb), *dst = malloc(rows * rb), *inv = malloc(rows * rb);
        for (size_t i = 0; i < rows * rb; i++) src[i] = (uint8_t)(i * 7 + 3); /* distinct per row */
        CHECK_OK(lcx_gguf_permute_qk(dst, src, rows, cols[k], esz[k], nheads[k]));
        for (size_t i = 0; i < rows; i++) {
            size_t from = (size_t)json_integer_value(json_array_get(p, i));
            CHECK_MSG(memcmp(dst + i * rb, src + from * rb, rb) == 0, "perm %s row %zu", keys[k], i);
        }
        CHECK_OK(lcx_gguf_unpermute_qk(inv, dst, rows, cols[k], esz[k], nheads[k]));
        CHECK(memcmp(inv, src, rows * rb) == 0);
        free(src), free(dst), free(inv);
    }
    uint8_t buf[12];
    CHECK_FAILS(lcx_gguf_permute_qk(buf, buf + 6, 6, 1, 1, 4), LCX_ERR_INVALID, "do not split into 4 heads");
    CHECK_FAILS(lcx_gguf_permute_qk(buf, buf + 6, 6, 1, 1, 2), LCX_ERR_INVALID, "head size 3 is odd");
}

/* ---- our writer ------------------------------------------------------------------------------------------ */

/* The file check_gguf_read.py expects (keep the two in sync). */
#define W_ROWS 4
#define W_COLS 64
static void fill_src(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i * 37 % 101) - 50) * 0.0625f + (float)i * 1e-3f;
}

static lcx_status build_file(const char *path, uint32_t alignment, const float *src, const uint16_t *bf16src) {
    lcx_gguf_writer *w = NULL;
    lcx_status st;
    LCX_TRY(lcx_gguf_writer_init(&w, alignment));
    static const uint16_t u16s[3] = {1, 2, 65535};
    static const int32_t i32s[3] = {-7, 0, 2147483647};
    static const float f32s[2] = {0.25f, -1e-3f};
    static const uint8_t bools[2] = {1, 0};
    static const uint64_t u64s[1] = {18446744073709551615ull};
    static const double f64s[2] = {1.0 / 3.0, -2.5};
    static const char *const strs[3] = {"<s>", "", "\xc3\xa9t\xc3\xa9"};
    LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "general.architecture", "llama"), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_u8(w, "w.u8", 250), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_i8(w, "w.i8", -5), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_u16(w, "w.u16", 65535), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_i16(w, "w.i16", -32768), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_u32(w, "llama.block_count", 2), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_i32(w, "w.i32", -123456), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_f32(w, "llama.rope.freq_base", 500000.0f), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_bool(w, "w.bool", 1), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_u64(w, "llama.context_length", 131072), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_i64(w, "w.i64", -9000000000ll), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_f64(w, "w.f64", 0.1), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "llama.rope.scaling.type", "yarn"), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "w.arr_u16", LCX_GGUF_U16, u16s, 3), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "w.arr_i32", LCX_GGUF_I32, i32s, 3), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "w.arr_f32", LCX_GGUF_F32, f32s, 2), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "w.arr_bool", LCX_GGUF_BOOL, bools, 2), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "w.arr_u64", LCX_GGUF_U64, u64s, 1), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "w.arr_f64", LCX_GGUF_F64, f64s, 2), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", strs, NULL, 3), out);
    lcx_shape s2 = lcx_shape_2d(W_ROWS, W_COLS), s1 = lcx_shape_1d(W_COLS), s3 = {3, {2, 2, W_COLS}};
    LCX_TRY_GOTO(lcx_gguf_writer_add_tensor(w, "t.f32", LCX_F32, &s2, LCX_F32, src), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_tensor(w, "t.f16", LCX_F16, &s2, LCX_F32, src), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_tensor(w, "t.bf16", LCX_BF16, &s1, LCX_F32, src), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_tensor(w, "t.bf16_raw", LCX_BF16, &s1, LCX_BF16, bf16src), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_tensor(w, "t.q8_0", LCX_Q8_0, &s2, LCX_F32, src), out);
    LCX_TRY_GOTO(lcx_gguf_writer_add_tensor(w, "t.f32_3d", LCX_F32, &s3, LCX_F32, src), out);
    LCX_TRY_GOTO(lcx_gguf_writer_write(w, path), out);
out:
    lcx_gguf_writer_free(w);
    return st;
}

static void check_written(const char *path, uint32_t alignment, const float *src, const uint16_t *bf16src) {
    lcx_gguf_file *f = NULL;
    CHECK_OK(lcx_gguf_open(path, &f));
    if (!f) return;
    CHECK(f->version == 3 && f->alignment == alignment && f->n_tensors == 6);
    CHECK(f->n_kv == 20u + (alignment != 32));
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float x;
    double dv;
    int b;
    const char *s;
    size_t len;
    CHECK_OK(lcx_gguf_get_u32(f, "w.u8", &u32)); CHECK(u32 == 250);
    CHECK_OK(lcx_gguf_get_i64(f, "w.i8", &i64)); CHECK(i64 == -5);
    CHECK_OK(lcx_gguf_get_u32(f, "w.u16", &u32)); CHECK(u32 == 65535);
    CHECK_OK(lcx_gguf_get_i64(f, "w.i16", &i64)); CHECK(i64 == -32768);
    CHECK_OK(lcx_gguf_get_u32(f, "llama.block_count", &u32)); CHECK(u32 == 2);
    CHECK_OK(lcx_gguf_get_i64(f, "w.i32", &i64)); CHECK(i64 == -123456);
    CHECK_OK(lcx_gguf_get_f32(f, "llama.rope.freq_base", &x)); CHECK(x == 500000.0f);
    CHECK_OK(lcx_gguf_get_bool(f, "w.bool", &b)); CHECK(b == 1);
    CHECK_OK(lcx_gguf_get_u64(f, "llama.context_length", &u64)); CHECK(u64 == 131072);
    CHECK_OK(lcx_gguf_get_i64(f, "w.i64", &i64)); CHECK(i64 == -9000000000ll);
    CHECK_OK(lcx_gguf_get_f64(f, "w.f64", &dv)); CHECK(dv == 0.1);
    CHECK_OK(lcx_gguf_get_str(f, "llama.rope.scaling.type", &s, &len)); CHECK(len == 4 && !memcmp(s, "yarn", 4));
    const lcx_gguf_kv *a;
    CHECK_OK(lcx_gguf_get_array(f, "w.arr_u16", LCX_GGUF_U16, &a));
    CHECK_OK(lcx_gguf_arr_int(a, 2, &i64)); CHECK(i64 == 65535);
    CHECK_OK(lcx_gguf_get_array(f, "w.arr_i32", LCX_GGUF_I32, &a));
    CHECK_OK(lcx_gguf_arr_int(a, 0, &i64)); CHECK(i64 == -7);
    CHECK_OK(lcx_gguf_arr_int(a, 2, &i64)); CHECK(i64 == 2147483647);
    CHECK_OK(lcx_gguf_get_array(f, "w.arr_f32", LCX_GGUF_F32, &a));
    CHECK_OK(lcx_gguf_arr_float(a, 1, &dv)); CHECK(dv == (double)-1e-3f);
    CHECK_OK(lcx_gguf_get_array(f, "w.arr_bool", LCX_GGUF_BOOL, &a)); CHECK(a->count == 2 && a->data[0] == 1 && a->data[1] == 0);
    CHECK_OK(lcx_gguf_get_array(f, "w.arr_u64", LCX_GGUF_U64, &a)); CHECK(a->count == 1);
    CHECK_FAILS(lcx_gguf_arr_int(a, 0, &i64), LCX_ERR_FORMAT, "exceeds int64");
    CHECK_OK(lcx_gguf_get_array(f, "w.arr_f64", LCX_GGUF_F64, &a));
    CHECK_OK(lcx_gguf_arr_float(a, 0, &dv)); CHECK(dv == 1.0 / 3.0);
    CHECK_OK(lcx_gguf_get_array(f, "tokenizer.ggml.tokens", LCX_GGUF_STRING, &a));
    CHECK(a->count == 3);
    CHECK_OK(lcx_gguf_arr_str(a, 1, &s, &len)); CHECK(len == 0);
    CHECK_OK(lcx_gguf_arr_str(a, 2, &s, &len)); CHECK(len == 5 && !memcmp(s, "\xc3\xa9t\xc3\xa9", 5));

    /* Tensors: offsets laid out in order with padding (llama.cpp requires exactly that), data as converted. */
    uint64_t expect_off = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lcx_gguf_tensor *t = &f->tensors[i];
        CHECK_MSG(t->offset == expect_off, "%s at %llu, expected %llu", t->name, (unsigned long long)t->offset,
                  (unsigned long long)expect_off);
        expect_off += (t->nbytes + alignment - 1) / alignment * alignment;
    }
    CHECK(f->data_offset % alignment == 0 && f->data_offset + expect_off == f->size);
    const size_t n = W_ROWS * W_COLS;
    const lcx_gguf_tensor *t = lcx_gguf_find_tensor(f, "t.f32");
    CHECK(t && t->ggml_type == LCX_GGML_F32 && t->n_dims == 2 && t->dims[0] == W_COLS && t->dims[1] == W_ROWS);
    CHECK(t && memcmp(t->data, src, n * 4) == 0);
    t = lcx_gguf_find_tensor(f, "t.f16");
    CHECK(t && t->ggml_type == LCX_GGML_F16 && t->nbytes == n * 2);
    for (size_t i = 0; t && i < n; i++) {
        uint16_t h;
        memcpy(&h, t->data + 2 * i, 2);
        if (h != lcx_f32_to_f16(src[i])) { CHECK_MSG(0, "f16[%zu]", i); break; }
    }
    t = lcx_gguf_find_tensor(f, "t.bf16");
    CHECK(t && t->ggml_type == LCX_GGML_BF16 && t->n_dims == 1 && t->nbytes == W_COLS * 2);
    for (size_t i = 0; t && i < W_COLS; i++) {
        uint16_t h;
        memcpy(&h, t->data + 2 * i, 2);
        if (h != lcx_f32_to_bf16(src[i])) { CHECK_MSG(0, "bf16[%zu]", i); break; }
    }
    t = lcx_gguf_find_tensor(f, "t.bf16_raw");
    CHECK(t && memcmp(t->data, bf16src, W_COLS * 2) == 0);
    t = lcx_gguf_find_tensor(f, "t.q8_0");
    uint8_t q[W_ROWS * W_COLS / 32 * 34];
    CHECK_OK(lcx_quantize_q8_0(src, q, n));
    CHECK(t && t->ggml_type == LCX_GGML_Q8_0 && t->nbytes == sizeof q && memcmp(t->data, q, sizeof q) == 0);
    float deq[W_ROWS * W_COLS];
    if (t) CHECK_OK(lcx_gguf_tensor_to_f32(f, t, deq));
    double maxerr = 0;
    for (size_t i = 0; i < n; i++) maxerr = worst_of(maxerr, fabs(deq[i] - src[i]));
    CHECK_MSG(maxerr < 3.2 / 127 * 0.5 * 1.01 + 1e-3, "Q8_0 round trip error %g", maxerr); /* amax <= ~3.2 */
    t = lcx_gguf_find_tensor(f, "t.f32_3d");
    CHECK(t && t->n_dims == 3 && t->dims[0] == W_COLS && t->dims[1] == 2 && t->dims[2] == 2);
    lcx_shape sh = t ? lcx_gguf_tensor_shape(t) : (lcx_shape){0};
    CHECK(sh.ndim == 3 && sh.dims[0] == 2 && sh.dims[2] == W_COLS);
    lcx_gguf_close(f);
}

static void check_writer(void) {
    float src[W_ROWS * W_COLS];
    uint16_t bf[W_COLS];
    fill_src(src, W_ROWS * W_COLS);
    for (size_t i = 0; i < W_COLS; i++) bf[i] = (uint16_t)(0x3f80 + i);
    const char *keep = getenv("LCX_KEEP_OUTPUT");
    char dir[512], p32[600], p64[600];
    if (keep && keep[0]) snprintf(dir, sizeof dir, "%s", keep);
    else snprintf(dir, sizeof dir, "%s/test_gguf_out_%d", LCX_BINARY_DIR, (int)getpid());
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CHECK(system(cmd) == 0);
    snprintf(p32, sizeof p32, "%s/lcx_written.gguf", dir);
    snprintf(p64, sizeof p64, "%s/lcx_written_align64.gguf", dir);
    CHECK_OK(build_file(p32, 0, src, bf));
    check_written(p32, 32, src, bf);
    CHECK_OK(build_file(p64, 64, src, bf));
    check_written(p64, 64, src, bf);

    /* Writer refusals. */
    lcx_gguf_writer *w = NULL;
    CHECK_FAILS(lcx_gguf_writer_init(&w, 48), LCX_ERR_INVALID, "not a power of two");
    CHECK_OK(lcx_gguf_writer_init(&w, 0));
    if (w) {
        CHECK_OK(lcx_gguf_writer_add_u32(w, "a.b", 1));
        CHECK_FAILS(lcx_gguf_writer_add_u32(w, "a.b", 2), LCX_ERR_INVALID, "duplicate key 'a.b'");
        CHECK_FAILS(lcx_gguf_writer_add_str(w, "", "x"), LCX_ERR_INVALID, "empty key");
        CHECK_FAILS(lcx_gguf_writer_add_u32(w, "general.alignment", 64), LCX_ERR_INVALID, "general.alignment");
        CHECK_FAILS(lcx_gguf_writer_add_array(w, "arr", LCX_GGUF_STRING, NULL, 0), LCX_ERR_INVALID, "add_str_array");
        lcx_shape s = lcx_shape_2d(2, 48), s1 = lcx_shape_1d(32);
        CHECK_FAILS(lcx_gguf_writer_add_tensor(w, "q", LCX_Q8_0, &s, LCX_F32, src), LCX_ERR_INVALID,
                    "multiple of 32, got 48");
        CHECK_FAILS(lcx_gguf_writer_add_tensor(w, "q", LCX_Q4_0, &s, LCX_F32, src), LCX_ERR_UNSUPPORTED,
                    "cannot write dtype");
        CHECK_FAILS(lcx_gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123",
                                               LCX_F32, &s, LCX_F32, src), LCX_ERR_INVALID, "name longer than 63");
        float nan_src[32] = {0};
        nan_src[5] = NAN;
        CHECK_OK(lcx_gguf_writer_add_tensor(w, "x", LCX_F32, &s, LCX_F32, src));
        CHECK_FAILS(lcx_gguf_writer_add_tensor(w, "x", LCX_F32, &s, LCX_F32, src), LCX_ERR_INVALID,
                    "duplicate tensor 'x'");
        CHECK_OK(lcx_gguf_writer_add_tensor(w, "nan", LCX_Q8_0, &s1, LCX_F32, nan_src));
        char pbad[620];
        snprintf(pbad, sizeof pbad, "%s/bad.gguf", dir);
        CHECK_FAILS(lcx_gguf_writer_write(w, pbad), LCX_ERR_INVALID, "tensor 'nan': Q8_0: non-finite value at element 5");
        CHECK(!lcx_is_file(pbad)); /* atomic: nothing left behind */
    }
    lcx_gguf_writer_free(w);
    lcx_gguf_writer_free(NULL);
    lcx_gguf_close(NULL);
    if (!(keep && keep[0])) {
        remove(p32);
        remove(p64);
        rmdir(dir);
    }
}

int main(void) {
    json_error_t err;
    expected = json_load_file(FIX "expected.json", 0, &err);
    if (!expected) {
        fprintf(stderr, "expected.json: %s (line %d)\n", err.text, err.line);
        return 1;
    }
    char *blob = NULL;
    size_t blen = 0;
    CHECK_OK(lcx_read_file(FIX "expected.f32", 1 << 24, &blob, &blen));
    ref = (float *)blob; /* lcx_read_file's buffer comes from malloc: aligned for float */
    ref_len = blen / 4;

    check_fixture("types.gguf");
    check_fixture("align64.gguf");
    check_fixture("llama_tiny.gguf");
    check_getters();
    check_versions();
    check_q8_quantiser();
    check_llama();
    check_writer();

    free(blob);
    json_decref(expected);
    return test_summary("test_gguf");
}
