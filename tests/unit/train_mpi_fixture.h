/* train_mpi_fixture: what test_train_dp_mpi.c, test_train_cp_mpi.c and test_train_zero_mpi.c share: the llama_gqa fixture's config, a
 * scratch directory named by rank 0, a small tokenised data set written by rank 0, a float32 training model, the
 * stage both train, the per-step log read from the reporter's "step" events, the final master weights, a hash to
 * compare ranks' weights, and the end of the test (every rank's verdict, cleanup, MPI finalised).
 * Include once, after defining STEPS, SEQ, ACCUM and EPS. */
#ifndef LCX_TEST_TRAIN_MPI_FIXTURE_H
#define LCX_TEST_TRAIN_MPI_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tokdata.h"
#include "src/comm/comm.h"
#include "src/train/train.h"
#include "test_util.h"

static lcx_model_config g_cfg;
static char g_root[512];
static int g_world_rank;

/* A float32 training model of g_cfg, random init with a fixed seed; cp: the CP group (NULL: none). */
static inline lcx_model *new_model(int64_t max_tokens, lcx_comm *cp) {
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = LCX_F32;
    o.max_tokens = max_tokens;
    o.training = 1;
    o.cp_comm = cp;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, &g_cfg, &o));
    if (m) CHECK_OK(lcx_model_init_random(m, 11, 0.05));
    return m;
}

/* The stage every test trains: STEPS AdamW steps with clipping active; a save every save_interval steps (0: the
 * stage's end only). */
static inline lcx_train_stage stage(int64_t micro_seqs, int64_t save_interval) {
    lcx_train_stage s;
    memset(&s, 0, sizeof s);
    s.n_stages = 1;
    s.seq_len = SEQ;
    s.steps = STEPS;
    s.micro_seqs = micro_seqs;
    s.grad_accum = ACCUM;
    s.lr.kind = LCX_LR_CONSTANT;
    s.lr.peak = 1e-2;
    s.lr.total_steps = STEPS;
    s.clip_norm = 0.3; /* below the gradient norms of this model: clipping is active */
    s.weight_decay = 0.1;
    s.seed = 5;
    s.eps = EPS;
    s.save_interval = save_interval;
    return s;
}

/* What the stage reports per step (on every rank, writer or not). */
typedef struct run_log {
    int n;
    double loss[STEPS], norm[STEPS], clip[STEPS];
    long long tokens[STEPS];
} run_log;
static inline double field(const char *json, const char *key) {
    const char *p = strstr(json, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}
static inline void on_event(void *user, const char *name, const char *json) {
    run_log *l = user;
    if (strcmp(name, "step") != 0 || l->n >= STEPS) return;
    /* the step number decides the slot: a resumed run logs its later steps only */
    int step = (int)field(json, "\"step\": ");
    if (step < 1 || step > STEPS) return;
    l->loss[step - 1] = field(json, "\"loss\": ");
    l->norm[step - 1] = field(json, "\"grad_norm\": ");
    l->clip[step - 1] = field(json, "\"clip\": ");
    l->tokens[step - 1] = (long long)field(json, "\"tokens\": ");
    l->n++;
}

/* Every parameter's float32 values as get gives them, all back to back (malloc'd). */
typedef lcx_status (*param_values_fn)(const lcx_model *m, size_t i, float *dst);
static inline float *all_params(lcx_model *m, size_t *n_out, param_values_fn get) {
    const lcx_param_table *t = lcx_model_params(m);
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) n += t->params[i].numel;
    float *w = malloc(n * sizeof *w);
    size_t o = 0;
    for (size_t i = 0; i < t->n; i++) {
        CHECK_OK(get(m, i, w + o));
        o += t->params[i].numel;
    }
    *n_out = n;
    return w;
}
/* The fp32 master weights. */
static inline float *masters(lcx_model *m, size_t *n_out) { return all_params(m, n_out, lcx_model_get_master); }
/* The stored parameters (bf16 ones exactly): what a model whose master is sharded (ZeRO-1 with bf16 parameters)
 * holds whole. */
static inline float *stored_params(lcx_model *m, size_t *n_out) { return all_params(m, n_out, lcx_model_get_param); }

static inline uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Start of the test: g_world_rank, g_cfg (llama_gqa), g_root (BINARY_DIR/NAME.XXXXXX, named by rank 0) and the
 * data set g_root/data opened in *td: 9 documents of doc0 + d * doc_step random ids (d < 9, at most 128 ids),
 * written by rank 0, read by all. */
static inline void fixture_open(lcx_comm *world, const char *name, size_t doc0, size_t doc_step, lcx_tokdata *td) {
    g_world_rank = world->rank;
    char cfgp[512];
    snprintf(cfgp, sizeof cfgp, "%s/tests/fixtures/models/llama_gqa/config.json", LCX_SOURCE_DIR);
    CHECK_OK(lcx_config_load(cfgp, &g_cfg));
    CHECK_OK(lcx_config_sync_json(&g_cfg));
    /* one scratch directory, named by rank 0 */
    if (world->rank == 0) {
        snprintf(g_root, sizeof g_root, "%s/%s.XXXXXX", LCX_BINARY_DIR, name);
        CHECK(mkdtemp(g_root) != NULL);
    }
    CHECK_OK(lcx_comm_broadcast(world, NULL, g_root, sizeof g_root / 8, LCX_I64, 0));

    /* data: written by rank 0, read by all */
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s/data", g_root);
    if (world->rank == 0) {
        lcx_tokdata_writer w;
        memset(&w, 0, sizeof w);
        CHECK_OK(lcx_tokdata_writer_open(&w, prefix, LCX_TOKDATA_U16));
        uint64_t r = 777;
        for (int d = 0; d < 9; d++) {
            uint32_t ids[128];
            size_t n = doc0 + (size_t)d * doc_step;
            CHECK(n <= 128);
            for (size_t i = 0; i < n && i < 128; i++)
                r = r * 6364136223846793005ull + 1442695040888963407ull,
                ids[i] = (uint32_t)((r >> 33) % (uint64_t)g_cfg.vocab_size);
            CHECK_OK(lcx_tokdata_writer_add(&w, ids, n));
        }
        CHECK_OK(lcx_tokdata_writer_commit(&w));
    }
    CHECK_OK(lcx_comm_barrier(world, NULL));
    CHECK_OK(lcx_tokdata_open(prefix, td));
}

/* End of the test: every rank's verdict (the job fails if any rank failed), the scratch directory removed, MPI
 * finalised; returns test_summary's exit code. */
static inline int fixture_close(lcx_comm *world, lcx_tokdata *td, const char *name) {
    lcx_tokdata_close(td);
    lcx_config_free(&g_cfg);
    int64_t bad = test_failures_ ? 1 : 0;
    CHECK_OK(lcx_comm_all_reduce(world, NULL, &bad, &bad, 1, LCX_I64, LCX_COMM_MAX));
    CHECK_OK(lcx_comm_barrier(world, NULL));
    if (world->rank == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        CHECK(system(cmd) == 0);
    }
    lcx_comm_finalize(world);
    CHECK(bad == 0);
    return test_summary(name);
}

#endif /* LCX_TEST_TRAIN_MPI_FIXTURE_H */
