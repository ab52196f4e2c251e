/* safetensors reader/writer/sets.
 *
 * References: the attack catalogue (tests/attack/safetensors/EXPECTED.tsv, each verdict also checked against the
 * Rust reader by tests/attack/check_reference.py); header bytes and tensor order written out by hand from the
 * format rules and the reference writer's observed order; shard assignment worked out by hand from
 * huggingface_hub's splitting rule. With LCX_KEEP_OUTPUT=dir the interop files for
 * tests/fixtures/check_safetensors_interop.py are left in dir. */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/safetensors.h"
#include "src/core/fileio.h"
#include "test_util.h"
#include "test_tmpdir.h"

static char tmpdir[256];

static char *tpath(const char *name) { return lcx_path_join(tmpdir, name); }

static char *subdir(const char *name) {
    char *p = tpath(name);
    mkdir(p, 0755);
    return p;
}

/* ---- attack catalogue ------------------------------------------------------------------------------------ */

static int expected_has(char names[][96], size_t n, const char *f) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], f)) return 1;
    return 0;
}

static void test_attack_catalogue(void) {
    const char *dir = LCX_SOURCE_DIR "/tests/attack/safetensors";
    char *tsv = lcx_path_join(dir, "EXPECTED.tsv");
    FILE *fp = fopen(tsv, "r");
    CHECK_MSG(fp != NULL, "cannot open %s", tsv);
    if (!fp) { free(tsv); return; }
    static char names[256][96];
    size_t n_rows = 0, n_reject = 0, n_accept = 0;
    char line[1024];
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        char *file = strtok(line, "\t"), *ours = strtok(NULL, "\t"), *ref = strtok(NULL, "\t"),
             *detail = strtok(NULL, "\t");
        CHECK(file && ours && ref && detail);
        if (!file || !ours || !ref || !detail || n_rows >= 256) continue;
        snprintf(names[n_rows++], sizeof names[0], "%s", file);
        char *path = lcx_path_join(dir, file);
        lcx_st_file *f = NULL;
        lcx_clear_error();
        lcx_status st = lcx_st_open(path, &f);
        if (!strcmp(ours, "reject")) {
            n_reject++;
            CHECK_MSG(st != LCX_OK, "%s: accepted, expected a rejection containing '%s'", file, detail);
            CHECK_MSG(st == LCX_OK || (strstr(lcx_last_error(), detail) && !strncmp(lcx_last_error(), path, strlen(path))),
                      "%s: message '%s' lacks the path prefix or '%s'", file, lcx_last_error(), detail);
            /* the in-memory entry point agrees and names its label */
            char *buf = NULL;
            size_t len = 0;
            if (lcx_read_file(path, 1 << 20, &buf, &len) == LCX_OK) {
                lcx_st_file *g = NULL;
                CHECK_MSG(lcx_st_parse("mem.safetensors", (const uint8_t *)buf, len, &g) != LCX_OK &&
                              !strncmp(lcx_last_error(), "mem.safetensors: ", 17) && g == NULL,
                          "%s: lcx_st_parse disagrees: %s", file, lcx_last_error());
                lcx_st_close(g);
                free(buf);
            }
        } else {
            n_accept++;
            CHECK_MSG(st == LCX_OK, "%s: rejected: %s", file, lcx_last_error());
            if (st == LCX_OK) CHECK_MSG(f->n_tensors == strtoul(detail, NULL, 10), "%s: %zu tensors", file, f->n_tensors);
        }
        lcx_st_close(f);
        free(path);
    }
    fclose(fp);
    free(tsv);
    CHECK(n_reject >= 20 && n_accept >= 4);
    /* every file in the directory is in the table */
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".safetensors"))
            CHECK_MSG(expected_has(names, n_rows, de->d_name), "%s is not listed in EXPECTED.tsv", de->d_name);
    if (d) closedir(d);
}

/* Contents of some accepted catalogue files, from the bytes the generator wrote. */
static void test_catalogue_contents(void) {
    lcx_st_file *f = NULL;
    CHECK_OK(lcx_st_open(LCX_SOURCE_DIR "/tests/attack/safetensors/ok_all_dtypes.safetensors", &f));
    if (f) {
        /* data byte at buffer offset k is k % 251; F64 (first, 64 bytes) and F4 (last, 4 bytes) */
        const lcx_st_tensor *a = lcx_st_find(f, "t_f64"), *b = lcx_st_find(f, "t_f4"), *c = lcx_st_find(f, "t_bf16");
        CHECK(a && b && c);
        if (a && b && c) {
            CHECK(a->dtype == LCX_F64 && a->begin == 0 && a->end == 64 && a->shape.ndim == 2 && a->shape.dims[1] == 4);
            CHECK(b->dtype == LCX_F4 && b->end - b->begin == 4 && b->end == f->tensors[f->n_tensors - 1].end);
            int ok = 1;
            for (uint64_t k = 0; k < c->end - c->begin; k++) ok &= c->data[k] == (uint8_t)((c->begin + k) % 251);
            CHECK(ok);
            CHECK(f->base + f->size == b->data + 4);
        }
        CHECK(lcx_st_find(f, "t_nope") == NULL);
    }
    lcx_st_close(f);
    CHECK_OK(lcx_st_open(LCX_SOURCE_DIR "/tests/attack/safetensors/ok_header_order_not_offset_order.safetensors", &f));
    if (f) { /* tensors stay in header order */
        CHECK(!strcmp(f->tensors[0].name, "b") && f->tensors[0].begin == 4);
        CHECK(!strcmp(f->tensors[1].name, "a") && f->tensors[1].begin == 0);
    }
    lcx_st_close(f);
    CHECK_OK(lcx_st_open(LCX_SOURCE_DIR "/tests/attack/safetensors/ok_zero_size.safetensors", &f));
    if (f) {
        const lcx_st_tensor *z = lcx_st_find(f, "z1");
        CHECK(z && z->data == NULL && z->shape.ndim == 2 && z->shape.dims[0] == 3 && z->shape.dims[1] == 0);
        float v;
        const lcx_st_tensor *a = lcx_st_find(f, "a");
        CHECK(a && a->data);
        if (a && a->data) { memcpy(&v, a->data, 4); CHECK(v == 1.0f); }
    }
    lcx_st_close(f);
    CHECK_OK(lcx_st_open(LCX_SOURCE_DIR "/tests/attack/safetensors/ok_rank0.safetensors", &f));
    if (f) CHECK(f->n_tensors == 1 && f->tensors[0].shape.ndim == 0 && f->tensors[0].end == 4);
    lcx_st_close(f);
    CHECK_OK(lcx_st_open(LCX_SOURCE_DIR "/tests/attack/safetensors/ok_only_metadata.safetensors", &f));
    if (f) CHECK(f->n_meta == 1 && !strcmp(lcx_st_meta(f, "format"), "pt") && lcx_st_meta(f, "x") == NULL);
    lcx_st_close(f);
    CHECK_FAILS(lcx_st_open("/nonexistent/x.safetensors", &f), LCX_ERR_NOT_FOUND, "/nonexistent/x.safetensors");
}

/* ---- writer ---------------------------------------------------------------------------------------------- */

static uint8_t *pattern(size_t n, unsigned seed) {
    uint8_t *p = malloc(n ? n : 1);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (uint8_t)(x >> 24);
    }
    return p;
}

static uint64_t out_bytes(const lcx_st_out_tensor *t) {
    uint64_t n = 1, b = 0;
    for (int i = 0; i < t->shape.ndim; i++) n *= t->shape.dims[i];
    return lcx_dtype_nbytes(t->dtype, n, &b) == LCX_OK ? b : 0;
}

/* Read back and compare every tensor byte for byte. */
static void check_roundtrip(const char *path, const lcx_st_out_tensor *ts, size_t n) {
    lcx_st_file *f = NULL;
    CHECK_OK(lcx_st_open(path, &f));
    if (!f) return;
    CHECK(f->n_tensors == n);
    for (size_t i = 0; i < n; i++) {
        const lcx_st_tensor *t = lcx_st_find(f, ts[i].name);
        CHECK_MSG(t != NULL, "tensor %s missing", ts[i].name);
        if (!t) continue;
        uint64_t b = out_bytes(&ts[i]);
        CHECK(t->dtype == ts[i].dtype && lcx_shape_equal(&t->shape, &ts[i].shape) && t->end - t->begin == b);
        CHECK_MSG(b == 0 ? t->data == NULL : memcmp(t->data, ts[i].data, b) == 0, "tensor %s bytes differ",
                  ts[i].name);
    }
    lcx_st_close(f);
}

static void test_roundtrip(void) {
    /* every dtype the format has, odd shapes, rank 0, zero-size */
    static const lcx_dtype all[] = {LCX_F32, LCX_BF16, LCX_F16, LCX_F64, LCX_F8_E4M3, LCX_F8_E5M2, LCX_F8_E8M0,
                                    LCX_F8_E4M3FNUZ, LCX_F8_E5M2FNUZ, LCX_F6_E2M3, LCX_F6_E3M2, LCX_F4, LCX_BOOL,
                                    LCX_U8, LCX_I8, LCX_I16, LCX_U16, LCX_I32, LCX_U32, LCX_I64, LCX_U64, LCX_C64};
    size_t nd = sizeof all / sizeof all[0];
    lcx_st_out_tensor ts[64];
    uint8_t *bufs[64];
    char names[64][32];
    size_t n = 0;
    for (size_t i = 0; i < nd; i++, n++) {
        snprintf(names[n], sizeof names[n], "layer.%zu.%s", i, lcx_dtype_name(all[i]));
        ts[n] = (lcx_st_out_tensor){names[n], all[i], {2, {4, 3 + (uint64_t)i % 3 * 4}}, NULL};
        bufs[n] = pattern(out_bytes(&ts[n]), (unsigned)n);
        ts[n].data = bufs[n];
    }
    ts[n] = (lcx_st_out_tensor){"scalar", LCX_F32, {0, {0}}, NULL};
    bufs[n] = pattern(4, 99);
    ts[n].data = bufs[n];
    n++;
    ts[n] = (lcx_st_out_tensor){"empty.bf16", LCX_BF16, {2, {0, 7}}, NULL}; /* zero-size, data may be NULL */
    bufs[n++] = NULL;
    ts[n] = (lcx_st_out_tensor){"empty.f32", LCX_F32, {1, {0}}, NULL};
    bufs[n++] = NULL;
    ts[n] = (lcx_st_out_tensor){"deep", LCX_F16, {8, {1, 2, 1, 2, 1, 2, 1, 3}}, NULL};
    bufs[n] = pattern(out_bytes(&ts[n]), 7);
    ts[n].data = bufs[n];
    n++;
    char *p = tpath("all.safetensors");
    const char *mk[] = {"source", "format"}, *mv[] = {"lcextend \"test\"\n\xc3\xa9", "pt"};
    CHECK_OK(lcx_st_write(p, ts, n, mk, mv, 2));
    check_roundtrip(p, ts, n);
    lcx_st_file *f = NULL;
    CHECK_OK(lcx_st_open(p, &f));
    if (f) {
        CHECK(f->n_meta == 2 && !strcmp(f->meta_keys[0], "format") && !strcmp(f->meta_keys[1], "source"));
        CHECK(!strcmp(lcx_st_meta(f, "source"), mv[0]) && !strcmp(lcx_st_meta(f, "format"), "pt"));
        /* the file is its own proof of alignment: every tensor starts at a multiple of its element size */
        for (size_t i = 0; i < f->n_tensors; i++) {
            unsigned bits = lcx_dtype_bits(f->tensors[i].dtype);
            if (bits >= 8) CHECK_MSG(f->tensors[i].begin % (bits / 8) == 0, "%s misaligned", f->tensors[i].name);
        }
    }
    lcx_st_close(f);
    free(p);

    /* many tensors: 500 small ones with shuffled names */
    enum { M = 500 };
    lcx_st_out_tensor *many = calloc(M, sizeof *many);
    static char mnames[M][24];
    uint8_t *blob = pattern(M * 40, 3);
    for (size_t i = 0; i < M; i++) {
        snprintf(mnames[i], sizeof mnames[i], "t%03zu", (i * 7919) % M);
        lcx_dtype dt = i % 3 == 0 ? LCX_F32 : i % 3 == 1 ? LCX_BF16 : LCX_F16;
        many[i] = (lcx_st_out_tensor){mnames[i], dt, lcx_shape_1d(i % 5 + 1), blob + i * 40};
    }
    p = tpath("many.safetensors");
    CHECK_OK(lcx_st_write(p, many, M, NULL, NULL, 0));
    check_roundtrip(p, many, M);
    free(p);
    free(many);
    free(blob);
    for (size_t i = 0; i < n; i++) free(bufs[i]);
}

/* Header bytes, tensor order and padding, read from the raw file. */
static void test_layout_raw(void) {
    float w[2] = {1.0f, -2.0f};
    lcx_st_out_tensor one = {"w", LCX_F32, lcx_shape_1d(2), w};
    char *p = tpath("one.safetensors");
    CHECK_OK(lcx_st_write(p, &one, 1, NULL, NULL, 0));
    char *buf = NULL;
    size_t len = 0;
    CHECK_OK(lcx_read_file(p, 1 << 20, &buf, &len));
    const char *want = "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t wl = strlen(want), padded = (wl + 7) / 8 * 8; /* 86 -> 88 */
    CHECK(padded == 88);
    if (buf && len == 8 + padded + 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | (uint8_t)buf[i];
        CHECK(n == padded);
        CHECK(memcmp(buf + 8, want, wl) == 0);
        CHECK(buf[8 + wl] == ' ' && buf[8 + wl + 1] == ' ');
        CHECK(memcmp(buf + 8 + padded, w, 8) == 0);
    } else {
        CHECK_MSG(0, "one.safetensors is %zu bytes, expected %zu", len, 8 + padded + 8);
    }
    free(buf);
    free(p);

    /* order: dtype size descending, equal sizes in the reference writer's order (I64 > F64, F32 > I32,
     * BF16 > F16, I8 > U8 > BOOL), then name; observed from safetensors.torch.save_file */
    uint8_t data[64] = {0};
    lcx_st_out_tensor ts[] = {
        {"bo", LCX_BOOL, lcx_shape_1d(1), data}, {"z", LCX_F16, lcx_shape_1d(2), data},
        {"a", LCX_BF16, lcx_shape_1d(2), data},  {"i", LCX_I32, lcx_shape_1d(1), data},
        {"f", LCX_F32, lcx_shape_1d(1), data},   {"u", LCX_U8, lcx_shape_1d(1), data},
        {"i8", LCX_I8, lcx_shape_1d(1), data},   {"l", LCX_I64, lcx_shape_1d(1), data},
        {"d", LCX_F64, lcx_shape_1d(1), data},   {"b2", LCX_BF16, lcx_shape_1d(1), data},
    };
    p = tpath("order.safetensors");
    CHECK_OK(lcx_st_write(p, ts, sizeof ts / sizeof ts[0], NULL, NULL, 0));
    CHECK_OK(lcx_read_file(p, 1 << 20, &buf, &len));
    const char *order[] = {"l", "d", "f", "i", "a", "b2", "z", "i8", "u", "bo"};
    const uint64_t begins[] = {0, 8, 16, 20, 24, 28, 30, 34, 35, 36};
    if (buf) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | (uint8_t)buf[i];
        CHECK(n % 8 == 0 && len == 8 + n + 37);
        json_error_t e;
        json_t *h = json_loadb(buf + 8, n, 0, &e);
        CHECK(h != NULL);
        const char *k;
        json_t *v;
        size_t i = 0;
        json_object_foreach(h, k, v) {
            if (i == 0) CHECK(!strcmp(k, "__metadata__"));
            else if (i <= 10) {
                CHECK_MSG(!strcmp(k, order[i - 1]), "position %zu: %s, expected %s", i, k, order[i - 1]);
                CHECK(json_integer_value(json_array_get(json_object_get(v, "data_offsets"), 0)) == (json_int_t)begins[i - 1]);
            }
            i++;
        }
        CHECK(i == 11);
        json_decref(h);
        /* padding: only spaces between the JSON text and the data */
        size_t tl = strnlen(buf + 8, n);
        while (tl > 0 && buf[8 + tl - 1] == ' ') tl--;
        CHECK(buf[8 + tl - 1] == '}' && n - tl < 8);
    }
    free(buf);
    free(p);
}

static void test_write_errors(void) {
    uint8_t d[8] = {0};
    char *p = tpath("err.safetensors");
    lcx_st_out_tensor dup[] = {{"x", LCX_F32, lcx_shape_1d(1), d}, {"x", LCX_F16, lcx_shape_1d(1), d}};
    CHECK_FAILS(lcx_st_write(p, dup, 2, NULL, NULL, 0), LCX_ERR_INVALID, "tensor 'x' given twice");
    lcx_st_out_tensor noname[] = {{"x", LCX_F32, lcx_shape_1d(1), d}, {NULL, LCX_F32, lcx_shape_1d(1), d}};
    CHECK_FAILS(lcx_st_write(p, noname, 2, NULL, NULL, 0), LCX_ERR_INVALID, "tensor 1 has no name");
    CHECK_FAILS(lcx_st_write_sharded(tmpdir, noname, 2, 0), LCX_ERR_INVALID, "tensor without a name");
    lcx_st_out_tensor meta = {"__metadata__", LCX_F32, lcx_shape_1d(1), d};
    CHECK_FAILS(lcx_st_write(p, &meta, 1, NULL, NULL, 0), LCX_ERR_INVALID, "'__metadata__' cannot be a tensor name");
    lcx_st_out_tensor nodata = {"y", LCX_F32, lcx_shape_1d(2), NULL};
    CHECK_FAILS(lcx_st_write(p, &nodata, 1, NULL, NULL, 0), LCX_ERR_INVALID, "tensor 'y': no data");
    lcx_st_out_tensor q = {"q", LCX_Q8_0, lcx_shape_1d(32), d};
    CHECK_FAILS(lcx_st_write(p, &q, 1, NULL, NULL, 0), LCX_ERR_UNSUPPORTED, "tensor 'q': dtype Q8_0");
    lcx_st_out_tensor f4 = {"h", LCX_F4, lcx_shape_1d(3), d};
    CHECK_FAILS(lcx_st_write(p, &f4, 1, NULL, NULL, 0), LCX_ERR_INVALID, "not a whole number of bytes");
    lcx_st_out_tensor badutf = {"a\xff", LCX_F32, lcx_shape_1d(1), d};
    CHECK_FAILS(lcx_st_write(p, &badutf, 1, NULL, NULL, 0), LCX_ERR_INVALID, "not valid UTF-8");
    const char *k2[] = {"a", "a"}, *v2[] = {"1", "2"};
    CHECK_FAILS(lcx_st_write(p, dup, 1, k2, v2, 2), LCX_ERR_INVALID, "metadata key 'a' given twice");
    CHECK(!lcx_is_file(p)); /* nothing left behind */
    CHECK_FAILS(lcx_st_write("/nonexistent-dir/x.safetensors", dup, 1, NULL, NULL, 0), LCX_ERR_IO,
                "/nonexistent-dir/x.safetensors");
    free(p);
}

/* ---- sharding and sets ----------------------------------------------------------------------------------- */

static void touch(const char *dir, const char *name) {
    char *p = lcx_path_join(dir, name);
    FILE *fp = fopen(p, "w");
    if (fp) { fputs("junk", fp); fclose(fp); }
    free(p);
}

static void test_sharded(void) {
    /* sizes 40, 40, 40, 150, 30, 80 bytes with a 100-byte limit. By huggingface_hub's rule:
     * t0,t1 -> shard 1 (80); t2 starts shard 2; t3 > limit gets its own shard 3 at once; t4 fits in shard 2
     * (70); t5 would make 150 -> shard 4. */
    uint8_t *blob = pattern(1000, 11);
    lcx_st_out_tensor ts[] = {
        {"t0", LCX_F32, lcx_shape_1d(10), blob},        {"t1", LCX_BF16, lcx_shape_2d(4, 5), blob + 40},
        {"t2", LCX_F16, lcx_shape_1d(20), blob + 80},   {"t3", LCX_U8, lcx_shape_2d(15, 10), blob + 120},
        {"t4", LCX_F16, lcx_shape_1d(15), blob + 270},  {"t5", LCX_F32, lcx_shape_1d(20), blob + 300},
    };
    const char *want_file[] = {"model-00001-of-00004.safetensors", "model-00001-of-00004.safetensors",
                               "model-00002-of-00004.safetensors", "model-00003-of-00004.safetensors",
                               "model-00002-of-00004.safetensors", "model-00004-of-00004.safetensors"};
    char *dir = subdir("sharded");
    touch(dir, "model.safetensors");                /* stale single file */
    touch(dir, "model-00001-of-00009.safetensors"); /* stale shard of an older save */
    touch(dir, "notes.txt");
    CHECK_OK(lcx_st_write_sharded(dir, ts, 6, 100));
    char *idx = lcx_path_join(dir, "model.safetensors.index.json");
    json_error_t e;
    json_t *j = json_load_file(idx, 0, &e);
    CHECK(j != NULL);
    if (j) {
        json_t *wm = json_object_get(j, "weight_map"), *md = json_object_get(j, "metadata");
        CHECK(json_object_size(j) == 2 && json_object_size(wm) == 6);
        CHECK(json_integer_value(json_object_get(md, "total_size")) == 380);
        CHECK(json_integer_value(json_object_get(md, "total_parameters")) == 10 + 20 + 20 + 150 + 15 + 20);
        for (int i = 0; i < 6; i++)
            CHECK_MSG(!strcmp(json_string_value(json_object_get(wm, ts[i].name)), want_file[i]), "%s -> %s",
                      ts[i].name, json_string_value(json_object_get(wm, ts[i].name)));
        json_decref(j);
    }
    /* index text: indent 2, sorted keys, trailing newline (json.dumps(indent=2, sort_keys=True) + "\n") */
    char *txt = NULL;
    size_t len = 0;
    CHECK_OK(lcx_read_file(idx, 1 << 20, &txt, &len));
    if (txt) {
        const char *want = "{\n  \"metadata\": {\n    \"total_parameters\": 235,\n    \"total_size\": 380\n  },\n"
                           "  \"weight_map\": {\n    \"t0\": \"model-00001-of-00004.safetensors\",\n";
        CHECK_MSG(!strncmp(txt, want, strlen(want)), "index text:\n%s", txt);
        CHECK(len > 2 && txt[len - 1] == '\n' && txt[len - 2] == '}');
    }
    free(txt);
    char *stale1 = lcx_path_join(dir, "model.safetensors"), *stale2 = lcx_path_join(dir, "model-00001-of-00009.safetensors"),
         *kept = lcx_path_join(dir, "notes.txt");
    CHECK(!lcx_is_file(stale1) && !lcx_is_file(stale2) && lcx_is_file(kept));
    for (int i = 0; i < 6; i++) {
        char *fp = lcx_path_join(dir, want_file[i]);
        lcx_st_file *f = NULL;
        CHECK_OK(lcx_st_open(fp, &f));
        const lcx_st_tensor *t = lcx_st_find(f, ts[i].name);
        CHECK(t && memcmp(t->data, ts[i].data, out_bytes(&ts[i])) == 0);
        lcx_st_close(f);
        free(fp);
    }
    /* set_open: directory, index path */
    lcx_st_set *s = NULL;
    CHECK_OK(lcx_st_set_open(dir, &s));
    if (s) {
        CHECK(s->n_files == 4 && s->n_tensors == 6 && s->total_size_index == 380);
        for (int i = 0; i < 6; i++) {
            const lcx_st_tensor *t = lcx_st_set_find(s, ts[i].name);
            CHECK(t && t->dtype == ts[i].dtype && memcmp(t->data, ts[i].data, out_bytes(&ts[i])) == 0);
        }
        CHECK(lcx_st_set_find(s, "t6") == NULL);
        for (size_t i = 1; i < s->n_tensors; i++) CHECK(strcmp(s->tensors[i - 1]->name, s->tensors[i]->name) < 0);
    }
    lcx_st_set_close(s);
    CHECK_OK(lcx_st_set_open(idx, &s));
    if (s) CHECK(s->n_files == 4 && s->n_tensors == 6);
    lcx_st_set_close(s);

    /* everything fits: a single model.safetensors, the old index removed */
    CHECK_OK(lcx_st_write_sharded(dir, ts, 6, 0));
    CHECK(lcx_is_file(stale1) && !lcx_is_file(idx));
    char *shard1 = lcx_path_join(dir, "model-00001-of-00004.safetensors");
    CHECK(!lcx_is_file(shard1));
    CHECK_OK(lcx_st_set_open(dir, &s));
    if (s) CHECK(s->n_files == 1 && s->n_tensors == 6 && s->total_size_index == 0);
    lcx_st_set_close(s);
    CHECK_OK(lcx_st_set_open(stale1, &s));
    if (s) CHECK(s->n_files == 1 && lcx_st_set_find(s, "t3") != NULL);
    lcx_st_set_close(s);
    lcx_st_out_tensor dup[] = {ts[0], ts[0]};
    CHECK_FAILS(lcx_st_write_sharded(dir, dup, 2, 50), LCX_ERR_INVALID, "tensor 't0' given twice");
    free(shard1);
    free(stale1);
    free(stale2);
    free(kept);
    free(idx);
    free(dir);
    free(blob);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char *p = lcx_path_join(dir, name);
    CHECK_OK(lcx_write_file_atomic(p, text, strlen(text)));
    free(p);
}

static void write_st(const char *dir, const char *name, const lcx_st_out_tensor *ts, size_t n) {
    char *p = lcx_path_join(dir, name);
    CHECK_OK(lcx_st_write(p, ts, n, NULL, NULL, 0));
    free(p);
}

static void test_set_errors(void) {
    float v[4] = {1, 2, 3, 4};
    lcx_st_out_tensor a = {"a", LCX_F32, lcx_shape_1d(2), v}, b = {"b", LCX_F32, lcx_shape_1d(2), v + 2};
    lcx_st_out_tensor ab[] = {a, b};
    lcx_st_set *s = NULL;

    char *d = subdir("set_ok");
    write_st(d, "one.safetensors", &a, 1);
    write_st(d, "two.safetensors", &b, 1);
    /* any JSON inside metadata is fine */
    write_text(d, "model.safetensors.index.json",
               "{\"metadata\": {\"total_size\": 16, \"note\": {\"x\": [1, null, true]}, \"s\": \"y\", \"f\": 1.5},"
               " \"weight_map\": {\"b\": \"two.safetensors\", \"a\": \"one.safetensors\"}}");
    CHECK_OK(lcx_st_set_open(d, &s));
    if (s) {
        CHECK(s->n_files == 2 && s->n_tensors == 2 && s->total_size_index == 16);
        CHECK(!strcmp(s->tensors[0]->name, "a") && lcx_st_set_find(s, "b")->data[0] == ((uint8_t *)(v + 2))[0]);
    }
    lcx_st_set_close(s);
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"b\": \"two.safetensors\", \"a\": \"one.safetensors\"}}");
    CHECK_OK(lcx_st_set_open(d, &s));
    if (s) CHECK(s->n_tensors == 2 && s->total_size_index == 0);
    lcx_st_set_close(s);
    free(d);

    d = subdir("set_bad");
    char *idx = lcx_path_join(d, "model.safetensors.index.json");
    write_st(d, "one.safetensors", ab, 2);
    write_st(d, "two.safetensors", &b, 1);
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"one.safetensors\", \"b\": \"one.safetensors\", \"c\": \"three.safetensors\"}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_NOT_FOUND,
                "weight_map names file 'three.safetensors' (e.g. for tensor 'c'), which does not exist");
    CHECK(s == NULL);
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"one.safetensors\"}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "tensor 'b' of one.safetensors is not in the weight_map");
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"one.safetensors\", \"b\": \"one.safetensors\", \"c\": \"one.safetensors\"}}");
    CHECK_FAILS(lcx_st_set_open(idx, &s), LCX_ERR_FORMAT,
                "weight_map assigns tensor 'c' to one.safetensors, which does not contain it");
    /* b is in both files */
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"one.safetensors\", \"b\": \"two.safetensors\"}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "tensor 'b' appears in both ");
    CHECK(strstr(lcx_last_error(), "/one.safetensors") && strstr(lcx_last_error(), "/two.safetensors"));
    /* b only in one.safetensors but mapped to two.safetensors (which holds c) */
    lcx_st_out_tensor c = {"c", LCX_F32, lcx_shape_1d(1), v};
    write_st(d, "two.safetensors", &c, 1);
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\": {\"a\": \"one.safetensors\", \"b\": \"two.safetensors\", \"c\": \"two.safetensors\"}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT,
                "tensor 'b' is in one.safetensors but the weight_map assigns it to two.safetensors");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"/etc/one.safetensors\"}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "must be relative");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"../set_ok/one.safetensors\"}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "must be relative");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"a\": 3}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "weight_map entry 'a' is not a file name");
    write_text(d, "model.safetensors.index.json", "{\"metadata\": {}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "weight_map is missing");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"one.safetensors\", \"a\": \"x\"}}");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "duplicate object key");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"one.safetensors\"");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "model.safetensors.index.json: not valid JSON");
    unlink(idx);
    /* two files, no index, no model.safetensors: ambiguous */
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_FORMAT, "2 .safetensors files");
    char *two = lcx_path_join(d, "two.safetensors");
    unlink(two);
    CHECK_OK(lcx_st_set_open(d, &s)); /* the lone file */
    if (s) CHECK(s->n_files == 1 && s->n_tensors == 2);
    lcx_st_set_close(s);
    free(two);
    free(idx);
    free(d);

    d = subdir("set_empty");
    CHECK_FAILS(lcx_st_set_open(d, &s), LCX_ERR_NOT_FOUND, "no model.safetensors.index.json");
    free(d);
    CHECK_FAILS(lcx_st_set_open("/nonexistent/model.safetensors", &s), LCX_ERR_NOT_FOUND, "/nonexistent");
}

/* ---- files for the Python interop check ------------------------------------------------------------------ */

/* Values are simple formulas of the element index i that tests/fixtures/check_safetensors_interop.py repeats. */
static void write_interop(const char *dir) {
    float f32[15], sc[1];
    double f64[3];
    uint16_t bf16[32], f16[7];
    int64_t i64[6];
    uint8_t u8[5], bl[4];
    for (int i = 0; i < 15; i++) f32[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 32; i++) bf16[i] = lcx_f32_to_bf16((float)(i - 16) / 8.0f);
    for (int i = 0; i < 7; i++) f16[i] = lcx_f32_to_f16((float)i / 4.0f);
    for (int i = 0; i < 6; i++) i64[i] = (int64_t)i * 1000000000000ll - 3;
    for (int i = 0; i < 5; i++) u8[i] = (uint8_t)(i * 50);
    for (int i = 0; i < 4; i++) bl[i] = (uint8_t)(i % 2);
    for (int i = 0; i < 3; i++) f64[i] = 1.0 / (i + 3);
    sc[0] = 3.5f;
    lcx_st_out_tensor ts[] = {
        {"f32", LCX_F32, lcx_shape_2d(3, 5), f32},
        {"bf16", LCX_BF16, lcx_shape_2d(4, 8), bf16},
        {"f16", LCX_F16, lcx_shape_1d(7), f16},
        {"i64", LCX_I64, lcx_shape_2d(2, 3), i64},
        {"u8", LCX_U8, lcx_shape_1d(5), u8},
        {"bool", LCX_BOOL, lcx_shape_1d(4), bl},
        {"f64", LCX_F64, lcx_shape_1d(3), f64},
        {"scalar", LCX_F32, {0, {0}}, sc},
        {"empty", LCX_F32, lcx_shape_2d(0, 4), NULL},
    };
    size_t n = sizeof ts / sizeof ts[0];
    char *p = lcx_path_join(dir, "interop.safetensors");
    const char *mk[] = {"producer"}, *mv[] = {"lcextend"};
    CHECK_OK(lcx_st_write(p, ts, n, mk, mv, 1));
    free(p);
    /* same tensors with only {"format": "pt"}: must equal safetensors.torch.save_file byte for byte */
    p = lcx_path_join(dir, "interop_plain.safetensors");
    CHECK_OK(lcx_st_write(p, ts, n, NULL, NULL, 0));
    free(p);
    /* names that need JSON escaping: must also match the reference writer byte for byte */
    static const char *odd[] = {"a\037b", "q\"uote\\back/slash", "unicod\xc3\xa9\xe2\x80\xa8", "tab\tnl\n", "del\x7f"};
    float ov[5][2];
    lcx_st_out_tensor ot[5];
    for (int i = 0; i < 5; i++) {
        ov[i][0] = (float)(i + 1);
        ov[i][1] = -(float)(i + 1);
        ot[i] = (lcx_st_out_tensor){odd[i], LCX_F32, lcx_shape_1d(2), ov[i]};
    }
    p = lcx_path_join(dir, "interop_names.safetensors");
    CHECK_OK(lcx_st_write(p, ot, 5, NULL, NULL, 0));
    lcx_st_file *f = NULL;
    CHECK_OK(lcx_st_open(p, &f));
    for (int i = 0; f && i < 5; i++) {
        const lcx_st_tensor *t = lcx_st_find(f, odd[i]);
        CHECK(t && memcmp(t->data, ov[i], 8) == 0);
    }
    lcx_st_close(f);
    free(p);
    p = lcx_path_join(dir, "interop_sharded");
    mkdir(p, 0755);
    CHECK_OK(lcx_st_write_sharded(p, ts, n, 64));
    free(p);
}

/* The lazy sharded writer: the same files as the eager one, byte for byte, each tensor fetched once with its index
 * in the list and released after it; a failing fetch fails the write with its message. */
typedef struct lazy_src {
    const lcx_st_out_tensor *ts;
    int fetched[8], released[8], fail_at, open;
} lazy_src;

static lcx_status lazy_fetch(void *user, size_t i, const void **data) {
    lazy_src *l = user;
    CHECK(i < 8 && l->open < 0);
    l->fetched[i]++;
    l->open = (int)i;
    if ((int)i == l->fail_at) return lcx_fail(LCX_ERR_IO, "tensor %zu: cannot read", i);
    *data = l->ts[i].data;
    return LCX_OK;
}

static void lazy_release(void *user, size_t i) {
    lazy_src *l = user;
    CHECK((int)i == l->open);
    l->released[i]++;
    l->open = -1;
}

static void test_sharded_lazy(void) {
    uint8_t *blob = pattern(1000, 12);
    lcx_st_out_tensor ts[] = {
        {"t0", LCX_F32, lcx_shape_1d(10), blob},        {"t1", LCX_BF16, lcx_shape_2d(4, 5), blob + 40},
        {"t2", LCX_F16, lcx_shape_1d(20), blob + 80},   {"t3", LCX_U8, lcx_shape_2d(15, 10), blob + 120},
        {"t4", LCX_F16, lcx_shape_1d(15), blob + 270},  {"t5", LCX_F32, lcx_shape_1d(20), blob + 300},
    };
    const uint64_t limits[] = {100, 0};
    for (int li = 0; li < 2; li++) {
        char *eager = subdir(li ? "lazy_single_eager" : "lazy_eager"), *lazy = subdir(li ? "lazy_single" : "lazy");
        CHECK_OK(lcx_st_write_sharded(eager, ts, 6, limits[li]));
        lcx_st_out_tensor nodata[6];
        for (int i = 0; i < 6; i++) nodata[i] = ts[i], nodata[i].data = NULL;
        lazy_src l = {.ts = ts, .fail_at = -1, .open = -1};
        CHECK_OK(lcx_st_write_sharded_lazy(lazy, nodata, 6, limits[li], lazy_fetch, lazy_release, &l));
        for (int i = 0; i < 6; i++) CHECK(l.fetched[i] == 1 && l.released[i] == 1);
        const char *names[] = {"model.safetensors.index.json", "model-00001-of-00004.safetensors",
                               "model-00002-of-00004.safetensors", "model-00003-of-00004.safetensors",
                               "model-00004-of-00004.safetensors", "model.safetensors"};
        for (int f = 0; f < 6; f++) {
            char *pe = lcx_path_join(eager, names[f]), *pl = lcx_path_join(lazy, names[f]);
            CHECK(lcx_is_file(pe) == (li ? f == 5 : f < 5));
            CHECK(lcx_is_file(pe) == lcx_is_file(pl));
            char *be = NULL, *bl = NULL;
            size_t ne = 0, nl = 0;
            if (lcx_is_file(pe) && lcx_read_file(pe, 1 << 20, &be, &ne) == LCX_OK &&
                lcx_read_file(pl, 1 << 20, &bl, &nl) == LCX_OK)
                CHECK_MSG(ne == nl && memcmp(be, bl, ne) == 0, "%s differs", names[f]);
            free(be);
            free(bl);
            free(pe);
            free(pl);
        }
        free(eager);
        free(lazy);
    }
    char *dir = subdir("lazy_fail");
    lazy_src l = {.ts = ts, .fail_at = 4, .open = -1};
    CHECK_FAILS(lcx_st_write_sharded_lazy(dir, ts, 6, 100, lazy_fetch, lazy_release, &l), LCX_ERR_IO,
                "tensor 4: cannot read");
    CHECK(l.fetched[4] == 1 && l.released[4] == 1 && l.open == -1);
    char *idx = lcx_path_join(dir, "model.safetensors.index.json");
    CHECK(!lcx_is_file(idx)); /* the index comes last: a failed save leaves none */
    free(idx);
    free(dir);
    free(blob);
}

int main(void) {
    if (test_tmpdir_make(tmpdir, sizeof tmpdir, ".", "test_safetensors") != 0) return 1;
    test_attack_catalogue();
    test_catalogue_contents();
    test_roundtrip();
    test_layout_raw();
    test_write_errors();
    test_sharded();
    test_sharded_lazy();
    test_set_errors();
    const char *keep = getenv("LCX_KEEP_OUTPUT");
    if (keep && *keep) {
        mkdir(keep, 0755);
        write_interop(keep);
    }
    test_tmpdir_done(tmpdir);
    return test_summary("test_safetensors");
}
