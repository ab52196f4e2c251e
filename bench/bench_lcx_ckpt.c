/* bench_lcx_ckpt: end-to-end .lcx save and load speed through the public API.
 *
 *   bench_lcx_ckpt [--mib N] [--dir PARENT]
 *
 * Saves N MiB (default 256) of bf16 weights N(0, 0.02) in 8 tensors [rows, 4096] as one TP1 writer, with raw and
 * with zstd level 1 + shuffle (fsync included), then: open (manifest checks), read everything back, read it as
 * the 4 ranks of TP4 would (row boxes, each rank its quarter of every tensor: a reshard), and verify. Every read is
 * compared with the source. Prints MB/s of raw tensor bytes. The page cache is warm for the reads. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "formats/lcx.h"
#include "src/core/tensor.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

#define NT 8
#define COLS 4096

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, lcx_last_error());
    return 1;
}

int main(int argc, char **argv) {
    size_t mib = 256;
    const char *parent = "/tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mib") == 0) mib = (size_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--dir") == 0) parent = argv[i + 1];
    }
    uint64_t rows = (uint64_t)(mib << 20) / NT / COLS / 2 / 4 * 4; /* multiple of 4 for the TP4 split */
    size_t tbytes = (size_t)rows * COLS * 2;
    double mb = (double)tbytes * NT / 1e6;
    uint16_t *src[NT];
    for (int t = 0; t < NT; t++) {
        src[t] = malloc(tbytes);
        for (size_t i = 0; i < tbytes / 2; i++) {
            double g = sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
            src[t][i] = lcx_f32_to_bf16((float)(0.02 * g));
        }
    }
    uint16_t *buf = malloc(tbytes);
    char run[256];
    snprintf(run, sizeof run, "%s/bench_lcx_ckpt.%d", parent, (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", run);
    if (system(cmd) != 0) return 1;
    printf("%.0f MB of bf16 in %d tensors [%llu, %d], parent %s\n\n", mb, NT, (unsigned long long)rows, COLS, parent);
    printf("| codec | size MB | save MB/s | open ms | read MB/s | TP4 reshard read MB/s | verify MB/s |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int v = 0; v < 2; v++) {
        lcx_ckpt_write_opts o;
        lcx_ckpt_write_opts_default(&o);
        if (v == 0) o.codec = LCX_CODEC_RAW, o.filter = LCX_FILTER_NONE;
        const char *name = v == 0 ? "raw" : "zstd1";
        double t0 = now();
        char *tmp;
        lcx_ckpt_writer *w;
        json_t *rj;
        if (lcx_ckpt_tmpdir_create(run, name, &tmp) != LCX_OK) return fail("tmpdir");
        if (lcx_ckpt_writer_open(tmp, 0, &o, &w) != LCX_OK) return fail("writer");
        uint64_t shape[2] = {rows, COLS};
        lcx_box full = lcx_box_full(2, shape);
        for (int t = 0; t < NT; t++) {
            char tn[64];
            snprintf(tn, sizeof tn, "model.layers.%d.mlp.up_proj.weight", t);
            if (lcx_ckpt_writer_put(w, tn, "param", LCX_BF16, 2, shape, &full, src[t]) != LCX_OK) return fail("put");
        }
        if (lcx_ckpt_writer_close(w, &rj) != LCX_OK) return fail("close");
        lcx_ckpt_writer_free(w);
        lcx_ckpt_meta meta = {.tp = 1, .cp = 1, .dp = 1};
        if (lcx_ckpt_finalize(tmp, &meta, &rj, 1) != LCX_OK) return fail("finalize");
        if (lcx_ckpt_commit(tmp, run, name, 0) != LCX_OK) return fail("commit");
        double t_save = now() - t0;
        json_decref(rj);
        free(tmp);

        char dir[300];
        snprintf(dir, sizeof dir, "%s/%s", run, name);
        t0 = now();
        lcx_ckpt *ck;
        if (lcx_ckpt_open(dir, &ck) != LCX_OK) return fail("open");
        double t_open = now() - t0;
        uint64_t stored = 0;
        for (int i = 0; i < lcx_ckpt_tensor_count(ck); i++) {
            const lcx_ckpt_tensor *t = lcx_ckpt_tensor_at(ck, i);
            for (int p = 0; p < t->n_pieces; p++) stored += t->pieces[p].length;
        }
        int ok = 1;
        t0 = now();
        for (int t = 0; t < NT; t++) {
            char tn[64];
            snprintf(tn, sizeof tn, "model.layers.%d.mlp.up_proj.weight", t);
            if (lcx_ckpt_read_box(ck, tn, "param", &full, buf) != LCX_OK) return fail("read");
            ok &= memcmp(buf, src[t], tbytes) == 0;
        }
        double t_read = now() - t0;
        t0 = now();
        for (int t = 0; t < NT; t++) {
            char tn[64];
            snprintf(tn, sizeof tn, "model.layers.%d.mlp.up_proj.weight", t);
            for (int r = 0; r < 4; r++) {
                lcx_box b = {.ndim = 2, .start = {rows / 4 * (uint64_t)r, 0}, .shape = {rows / 4, COLS}};
                if (lcx_ckpt_read_box(ck, tn, "param", &b, buf) != LCX_OK) return fail("read");
                ok &= memcmp(buf, src[t] + (size_t)(rows / 4 * (uint64_t)r) * COLS, tbytes / 4) == 0;
            }
        }
        double t_reshard = now() - t0;
        t0 = now();
        if (lcx_ckpt_verify(ck) != LCX_OK) return fail("verify");
        double t_verify = now() - t0;
        lcx_ckpt_free(ck);
        printf("| %s | %.0f | %.0f | %.1f | %.0f | %.0f | %.0f |%s\n", v == 0 ? "raw" : "zstd 1 + shuffle",
               (double)stored / 1e6, mb / t_save, t_open * 1e3, mb / t_read, mb / t_reshard, mb / t_verify,
               ok ? "" : " MISMATCH");
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", run);
    if (system(cmd) != 0) return 1;
    for (int t = 0; t < NT; t++) free(src[t]);
    free(buf);
    return 0;
}
