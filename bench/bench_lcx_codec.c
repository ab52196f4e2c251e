/* bench_lcx_codec: compression ratio and speed of the .lcx piece codecs (zstd levels x byte-shuffle filter) on
 * realistic checkpoint data: bf16 weights N(0, 0.02), fp32 Adam first moments N(0, 1e-3) and second moments
 * (squares of N(0, 1e-3)), and optionally the tensor data of a safetensors file given on the command line.
 *
 *   bench_lcx_codec [--mib N] [model.safetensors]
 *
 * Prints a markdown table: level, filter, ratio (raw/stored), compress and decompress MB/s of raw bytes (single
 * thread, plus one zstd run with 2 worker threads), each including the XXH3-64 of the stored bytes as the
 * checkpoint writer/reader do. Every run is decoded and compared with the input. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "formats/lcx_codec.h"
#include "src/core/fileio.h"
#include "src/core/tensor.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x853c49e6748fea9bull;
static double uniform(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void) { return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()); }

static volatile uint64_t sink;

typedef struct dataset {
    const char *name;
    size_t es;
    uint8_t *data;
    size_t bytes;
} dataset;

static int run(const dataset *ds, lcx_codec codec, lcx_filter filter, int level, int threads, size_t bytes) {
    lcx_codec_ctx c;
    lcx_codec_ctx_init(&c, level, threads);
    uint8_t *back = malloc(bytes);
    const uint8_t *stored;
    size_t stored_len = 0;
    /* Repeat small runs so each timing covers at least ~0.3 s. */
    int reps = 0;
    double t0 = now(), tc;
    do {
        if (lcx_codec_encode(&c, codec, filter, ds->es, ds->data, bytes, &stored, &stored_len) != LCX_OK) {
            fprintf(stderr, "encode: %s\n", lcx_last_error());
            return 1;
        }
        sink ^= lcx_xxh3(stored, stored_len); /* the writer checksums every stored piece */
        reps++;
        tc = now() - t0;
    } while (tc < 0.3);
    uint8_t *copy = malloc(stored_len);
    memcpy(copy, stored, stored_len);
    int dreps = 0;
    double td;
    t0 = now();
    do {
        sink ^= lcx_xxh3(copy, stored_len); /* the reader verifies the checksum before decoding */
        if (lcx_codec_decode(&c, codec, filter, ds->es, copy, stored_len, back, bytes) != LCX_OK) {
            fprintf(stderr, "decode: %s\n", lcx_last_error());
            return 1;
        }
        dreps++;
        td = now() - t0;
    } while (td < 0.3);
    int ok = memcmp(back, ds->data, bytes) == 0;
    double mb = (double)bytes / 1e6;
    char lv[16];
    if (codec == LCX_CODEC_RAW) snprintf(lv, sizeof lv, "raw");
    else snprintf(lv, sizeof lv, "zstd %d%s", level, threads ? " x2 thr" : "");
    printf("| %-14s | %-12s | %-7s | %6.3f | %8.1f | %8.1f | %5.1f |%s\n", ds->name, lv, lcx_filter_name(filter),
           (double)bytes / (double)stored_len, mb * reps / tc, mb * dreps / td, mb, ok ? "" : " MISMATCH");
    free(copy);
    free(back);
    lcx_codec_ctx_free(&c);
    return ok ? 0 : 1;
}

/* Tensor data section of a safetensors file (element size from the first tensor's dtype). */
static int load_safetensors(const char *path, dataset *ds) {
    char *buf;
    size_t len;
    if (lcx_read_file(path, (size_t)4 << 30, &buf, &len) != LCX_OK || len < 8) {
        fprintf(stderr, "%s\n", lcx_last_error());
        return 1;
    }
    uint64_t n;
    memcpy(&n, buf, 8);
    if (n > len - 8) return fprintf(stderr, "%s: bad header\n", path), 1;
    const char *bf = strstr(buf + 8, "\"BF16\""), *f32 = strstr(buf + 8, "\"F32\"");
    ds->es = bf && (!f32 || bf < f32) ? 2 : 4;
    ds->bytes = (len - 8 - n) / ds->es * ds->es;
    ds->data = malloc(ds->bytes);
    memcpy(ds->data, buf + 8 + n, ds->bytes);
    ds->name = ds->es == 2 ? "file (bf16)" : "file (f32)";
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    size_t mib = 8;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) mib = (size_t)atoi(argv[++i]);
        else file = argv[i];
    }
    size_t bytes = mib << 20;
    dataset sets[4];
    int ns = 0;
    /* bf16 weights ~ N(0, 0.02), rounded to nearest even. */
    sets[ns] = (dataset){"bf16 N(0,.02)", 2, malloc(bytes), bytes};
    for (size_t i = 0; i < bytes / 2; i++) ((uint16_t *)sets[ns].data)[i] = lcx_f32_to_bf16((float)(0.02 * normal()));
    ns++;
    sets[ns] = (dataset){"f32 adam_m", 4, malloc(bytes), bytes};
    for (size_t i = 0; i < bytes / 4; i++) ((float *)sets[ns].data)[i] = (float)(1e-3 * normal());
    ns++;
    sets[ns] = (dataset){"f32 adam_v", 4, malloc(bytes), bytes};
    for (size_t i = 0; i < bytes / 4; i++) {
        double g = 1e-3 * normal();
        ((float *)sets[ns].data)[i] = (float)(g * g);
    }
    ns++;
    if (file && load_safetensors(file, &sets[ns]) == 0) ns++;

    printf("| data           | codec        | filter  | ratio  | comp MB/s | decomp MB/s | MB |\n");
    printf("|----------------|--------------|---------|--------|----------|----------|-------|\n");
    int bad = 0;
    const int levels[] = {1, 3, 9, 19};
    for (int s = 0; s < ns; s++) {
        bad |= run(&sets[s], LCX_CODEC_RAW, LCX_FILTER_NONE, 0, 0, sets[s].bytes);
        bad |= run(&sets[s], LCX_CODEC_RAW, LCX_FILTER_SHUFFLE, 0, 0, sets[s].bytes);
        for (int l = 0; l < 4; l++)
            for (int f = 0; f < 2; f++) {
                /* Level 19 is slow: measure it on a quarter of the data (ratio barely depends on size here). */
                size_t b = levels[l] == 19 ? sets[s].bytes / 4 / sets[s].es * sets[s].es : sets[s].bytes;
                bad |= run(&sets[s], LCX_CODEC_ZSTD, (lcx_filter)f, levels[l], 0, b);
            }
        bad |= run(&sets[s], LCX_CODEC_ZSTD, LCX_FILTER_SHUFFLE, 3, 2, sets[s].bytes);
    }
    for (int s = 0; s < ns; s++) free(sets[s].data);
    return bad;
}
