/* Training resume is bit-exact: 6 steps uninterrupted vs 3 steps, save, a fresh model loaded from the checkpoint,
 * 3 more steps -> the same per-step losses and the same final master weights and AdamW moments, bit for bit.
 * Also: SIGINT mid-stage saves and returns LCX_ERR_INTERRUPTED, and resuming from that save ends identically; a
 * next stage on the same seed continues the data stream (its cursor at both stages' tokens);
 * the first step's loss equals an independent forward pass over the first sample. bf16 stored weights so the
 * master copy matters. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/tokdata.h"
#include "src/model/model_state.h"
#include "src/train/sampler.h"
#include "src/train/train.h"
#include "tests/test_util.h"
#include "tests/test_tmpdir.h"

#define STEPS 6
#define SEQ 16

static char g_root[256];
static lcx_model_config g_cfg;

static lcx_model *new_model(void) {
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = LCX_BF16;
    o.max_tokens = 2 * SEQ;
    o.training = 1;
    o.policy = LCX_ACT_KEEP;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, &g_cfg, &o));
    if (m) CHECK_OK(lcx_model_init_random(m, 7, 0.05));
    return m;
}

static lcx_train_stage stage(void) {
    lcx_train_stage s;
    memset(&s, 0, sizeof s);
    s.n_stages = 1;
    s.seq_len = SEQ;
    s.steps = STEPS;
    s.micro_seqs = 2;
    s.grad_accum = 2;
    s.lr.kind = LCX_LR_COSINE;
    s.lr.peak = 1e-2;
    s.lr.min_lr = 1e-3;
    s.lr.warmup_steps = 2;
    s.lr.total_steps = STEPS;
    s.clip_norm = 0.5;
    s.weight_decay = 0.1;
    s.seed = 99;
    return s;
}

/* A reporter that counts what training reports (the terminal is never involved in a test). */
typedef struct step_log {
    int step_lines, step_events, saved_events;
    double last_loss;
} step_log;
static void log_line(void *user, lcx_report_level level, const char *text) {
    step_log *l = user;
    if (level == LCX_REPORT_STEP && strncmp(text, "stage 1/1 step ", 15) == 0) l->step_lines++;
}
static void log_event(void *user, const char *name, const char *json) {
    step_log *l = user;
    if (strcmp(name, "saved") == 0) l->saved_events++;
    if (strcmp(name, "step") != 0) return;
    l->step_events++;
    const char *p = strstr(json, "\"loss\": ");
    if (p) l->last_loss = strtod(p + 8, NULL);
}

static char *mkrun(const char *name) {
    char *d = malloc(512);
    snprintf(d, 512, "%s/%s", g_root, name);
    mkdir(d, 0777);
    return d;
}

/* losses[step-1] from RUN/metrics.jsonl (later lines for a step override earlier ones) */
static int read_losses(const char *run, double *loss) {
    char p[600];
    snprintf(p, sizeof p, "%s/metrics.jsonl", run);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        json_int_t step = json_integer_value(json_object_get(j, "step"));
        if (step >= 1 && step <= STEPS) loss[step - 1] = json_real_value(json_object_get(j, "loss")), n++;
        json_decref(j);
    }
    fclose(f);
    return n;
}

/* every master weight and moment of a and b bitwise equal */
static int same_state(const lcx_model *a, const lcx_model *b) {
    const lcx_param_table *t = lcx_model_params(a);
    int same = lcx_model_step_count(a) == lcx_model_step_count(b);
    for (size_t i = 0; i < t->n && same; i++) {
        size_t n = (size_t)t->params[i].numel;
        float *x = malloc(n * 4 * 6);
        CHECK_OK(lcx_model_get_master(a, i, x));
        CHECK_OK(lcx_model_get_master(b, i, x + n));
        CHECK_OK(lcx_model_get_moments(a, i, x + 2 * n, x + 3 * n));
        CHECK_OK(lcx_model_get_moments(b, i, x + 4 * n, x + 5 * n));
        same = memcmp(x, x + n, n * 4) == 0 && memcmp(x + 2 * n, x + 4 * n, n * 4) == 0 &&
               memcmp(x + 3 * n, x + 5 * n, n * 4) == 0;
        free(x);
    }
    return same;
}

/* Where cursor c stands in the token stream of sampler config sc over td: the tokens of its earlier epochs and
 * of the list entries before it in its epoch's order, plus its offset. */
static int64_t stream_pos_cfg(const lcx_tokdata *td, const lcx_sampler_cursor *c, lcx_sampler_config sc) {
    lcx_sampler *s = NULL;
    if (lcx_sampler_init(td, &sc, &s) != LCX_OK) return -1;
    int64_t pos = (int64_t)(c->epoch * lcx_sampler_epoch_tokens(s)) + (int64_t)c->offset;
    for (uint64_t j = 0; j < c->pos; j++) {
        uint64_t first, end, d = lcx_sampler_doc_at(s, c->epoch, j);
        lcx_tokdata_doc_seqs(td, d, &first, &end);
        for (uint64_t q = first; q < end; q++) pos += (int64_t)lcx_tokdata_seq_len(td, q);
    }
    lcx_sampler_free(s);
    return pos;
}
/* ... of a sampler over every document, no EOS, with seed seed */
static int64_t stream_pos_seed(const lcx_tokdata *td, const lcx_sampler_cursor *c, uint64_t seed) {
    return stream_pos_cfg(td, c, (lcx_sampler_config){SEQ, seed, 0, 0, 1, -1});
}
static int64_t stream_pos(const lcx_tokdata *td, const lcx_sampler_cursor *c) { return stream_pos_seed(td, c, 99); }

int main(void) {
    if (test_tmpdir_make(g_root, sizeof g_root, LCX_BINARY_DIR, "test_train_resume") != 0) return 1;
    char cfgp[512];
    snprintf(cfgp, sizeof cfgp, "%s/tests/fixtures/models/llama_gqa/config.json", LCX_SOURCE_DIR);
    CHECK_OK(lcx_config_load(cfgp, &g_cfg));
    CHECK_OK(lcx_config_sync_json(&g_cfg));

    /* data: 7 documents of random lengths, ids below the vocabulary */
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/data", g_root);
    lcx_tokdata_writer w;
    memset(&w, 0, sizeof w);
    CHECK_OK(lcx_tokdata_writer_open(&w, prefix, LCX_TOKDATA_U16));
    uint64_t r = 12345;
    for (int d = 0; d < 7; d++) {
        uint32_t ids[80];
        size_t n = 20 + (size_t)(d * 9);
        for (size_t i = 0; i < n; i++) r = r * 6364136223846793005ull + 1442695040888963407ull, ids[i] = (uint32_t)((r >> 33) % (uint64_t)g_cfg.vocab_size);
        CHECK_OK(lcx_tokdata_writer_add(&w, ids, n));
    }
    CHECK_OK(lcx_tokdata_writer_commit(&w));
    lcx_tokdata td;
    const lcx_mix_data data = lcx_mix_single(&td);
    CHECK_OK(lcx_tokdata_open(prefix, &td));

    lcx_train_stage sg = stage();
    lcx_train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.model_config = g_cfg.json;
    step_log log = {0};
    lcx_reporter rep = {.line = log_line, .event = log_event, .user = &log};
    ctx.report = &rep;
    lcx_train_summary sum;

    /* A: uninterrupted */
    char *runA = mkrun("A");
    ctx.run_dir = runA;
    lcx_model *a = new_model();
    /* independent check of the first step: the loss of the first batch under the initial weights */
    double first_ref = NAN;
    {
        lcx_sampler_config sc = {SEQ, 99, 0, 0, 1, -1};
        lcx_sampler *s = NULL;
        CHECK_OK(lcx_sampler_init(&td, &sc, &s));
        int32_t ids[4 * SEQ], tgt[4 * SEQ];
        uint32_t smp[SEQ + 1];
        for (int k = 0; k < 4; k++) {
            CHECK_OK(lcx_sampler_next(s, smp, NULL));
            for (int t = 0; t < SEQ; t++) ids[k * SEQ + t] = (int32_t)smp[t], tgt[k * SEQ + t] = (int32_t)smp[t + 1];
        }
        double tot = 0, ls;
        int64_t cnt = 0, c;
        for (int k = 0; k < 2; k++) {
            lcx_batch b = {.n_seq = 2, .seq_len = SEQ, .ids = ids + k * 2 * SEQ, .targets = tgt + k * 2 * SEQ};
            CHECK_OK(lcx_model_forward(a, &b, NULL, &ls, &c));
            tot += ls;
            cnt += c;
        }
        first_ref = tot / (double)cnt;
        lcx_sampler_free(s);
    }
    lcx_train_state sa;
    lcx_train_state_init(&sa);
    CHECK_OK(lcx_train_stage_run(a, &data, &sg, &ctx, &sa, &sum));
    CHECK(sa.stage_done == 1 && sa.step == STEPS && sa.tokens == STEPS * 4 * SEQ);
    double la[STEPS], lb[STEPS], lc[STEPS];
    CHECK(read_losses(runA, la) == STEPS);
    CHECK_REL(la[0], first_ref, 1e-6);
    CHECK(la[STEPS - 1] < la[0]); /* it learns */
    /* the reporter saw every step, as a line and as an event carrying the metrics line's loss, and the save */
    CHECK(log.step_lines == STEPS && log.step_events == STEPS && log.saved_events == 1);
    CHECK_REL(log.last_loss, la[STEPS - 1], 1e-9);
    log = (step_log){0};

    /* B: the same run saving every 3 steps (saving must not change anything) */
    char *runB = mkrun("B");
    ctx.run_dir = runB;
    sg.save_interval = 3;
    lcx_model *b = new_model();
    lcx_train_state sb;
    lcx_train_state_init(&sb);
    CHECK_OK(lcx_train_stage_run(b, &data, &sg, &ctx, &sb, &sum));
    CHECK(read_losses(runB, lb) == STEPS);
    CHECK(memcmp(la, lb, sizeof la) == 0);
    CHECK(same_state(a, b));

    /* C: a fresh model (different random init, to show everything is overwritten) from B's step-3 save */
    char ck3[600];
    snprintf(ck3, sizeof ck3, "%s/checkpoints/s01-step000003", runB);
    lcx_model_free(b);
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = LCX_BF16;
    o.max_tokens = 2 * SEQ;
    o.training = 1;
    lcx_model *c = NULL;
    CHECK_OK(lcx_model_init(&c, &g_cfg, &o));
    CHECK_OK(lcx_model_init_random(c, 8, 0.05));
    lcx_train_state sc;
    lcx_train_state_init(&sc);
    CHECK_OK(lcx_train_load(ck3, c, &sc));
    CHECK(sc.stage == 0 && sc.step == 3 && sc.tokens == 3 * 4 * SEQ && !sc.stage_done);
    CHECK(lcx_model_step_count(c) == 3);
    char *runC = mkrun("C");
    ctx.run_dir = runC;
    sg.save_interval = 0;
    CHECK_OK(lcx_train_stage_run(c, &data, &sg, &ctx, &sc, &sum));
    for (int i = 0; i < STEPS; i++) lc[i] = NAN;
    CHECK(read_losses(runC, lc) == 3);
    CHECK(memcmp(la + 3, lc + 3, 3 * sizeof(double)) == 0);
    CHECK(same_state(a, c));
    lcx_model_free(c);

    /* D: SIGINT before the run: one step, a save, LCX_ERR_INTERRUPTED; then resume from `latest` */
    char *runD = mkrun("D");
    ctx.run_dir = runD;
    lcx_train_catch_signals();
    raise(SIGINT);
    CHECK(lcx_train_interrupted());
    lcx_model *d = new_model();
    lcx_train_state sd;
    lcx_train_state_init(&sd);
    CHECK(lcx_train_stage_run(d, &data, &sg, &ctx, &sd, &sum) == LCX_ERR_INTERRUPTED);
    CHECK(strstr(lcx_last_error(), "interrupted at stage 1 step 1") != NULL);
    lcx_train_clear_interrupt();
    lcx_model_free(d);
    char *latest = NULL;
    CHECK_OK(lcx_train_latest(runD, &latest));
    d = NULL;
    CHECK_OK(lcx_model_init(&d, &g_cfg, &o));
    lcx_train_state_free(&sd);
    CHECK_OK(lcx_train_load(latest, d, &sd));
    CHECK(sd.step == 1);
    CHECK_OK(lcx_train_stage_run(d, &data, &sg, &ctx, &sd, &sum));
    CHECK(same_state(a, d));
    double ld[STEPS];
    CHECK(read_losses(runD, ld) == STEPS);
    CHECK(memcmp(la, ld, sizeof la) == 0);

    /* a finished stage run again does nothing */
    int64_t before = lcx_model_step_count(d);
    CHECK_OK(lcx_train_stage_run(d, &data, &sg, &ctx, &sd, &sum));
    CHECK(sum.steps_run == 0 && lcx_model_step_count(d) == before);

    /* E: the next stage (half the length, same seed) goes on with the data stream: its cursor stands at the
     * tokens of both stages, counted in the stream (the documents' lengths in the seeded order), where a stage
     * with another seed starts over */
    {
        lcx_train_stage s2 = sg;
        s2.index = 1, s2.n_stages = 2, s2.seq_len = SEQ / 2, s2.steps = 3, s2.lr.total_steps = 3;
        s2.lr.warmup_steps = 1;
        const lcx_mix_cursor end1 = sd.cursor;
        CHECK_OK(lcx_train_stage_run(d, &data, &s2, &ctx, &sd, &sum));
        const int64_t t1 = STEPS * 4 * SEQ, t2 = 3 * 4 * (SEQ / 2);
        CHECK(sd.stage == 1 && sd.stage_done && sd.cursor.src[0].samples == 12);
        CHECK_MSG(stream_pos(&td, &sd.cursor.src[0]) == t1 + t2, "stage 2 ends at stream token %lld, not %lld",
                  (long long)stream_pos(&td, &sd.cursor.src[0]), (long long)(t1 + t2));
        /* another seed: from the start of its own order */
        char *runE = mkrun("E");
        ctx.run_dir = runE;
        lcx_model *e = new_model();
        lcx_train_state se;
        lcx_train_state_init(&se);
        se.stage = 0, se.stage_done = 1, se.cursor = end1, se.seed = sg.seed;
        s2.seed = sg.seed + 1;
        CHECK_OK(lcx_train_stage_run(e, &data, &s2, &ctx, &se, &sum));
        lcx_sampler_cursor c = se.cursor.src[0];
        CHECK(stream_pos_seed(&td, &c, s2.seed) == t2);
        lcx_train_state_free(&se);
        lcx_model_free(e);
        free(runE);
        ctx.run_dir = runD;
    }

    /* F: the sampler's filter and upsampling (documents of 20 + 9 d tokens: 56, 65 and 74 have 50+, 65 and 74
     * have 60+): the stage's cursor stands at its tokens in the stream of that list (56 + 3 x 65 + 3 x 74 a
     * epoch), and a resume with other values is refused */
    {
        lcx_train_stage s3 = sg;
        s3.min_doc_tokens = 50, s3.long_doc_tokens = 60, s3.long_doc_repeat = 3;
        char *runF = mkrun("F");
        ctx.run_dir = runF;
        lcx_model *f = new_model();
        lcx_train_state sf;
        lcx_train_state_init(&sf);
        CHECK_OK(lcx_train_stage_run(f, &data, &s3, &ctx, &sf, &sum));
        const lcx_sampler_config fc = {SEQ, sg.seed, 50, 60, 3, -1};
        lcx_sampler *fs = NULL;
        CHECK_OK(lcx_sampler_init(&td, &fc, &fs));
        CHECK(fs && lcx_sampler_epoch_tokens(fs) == 56 + 3 * 65 + 3 * 74);
        lcx_sampler_free(fs);
        CHECK_MSG(stream_pos_cfg(&td, &sf.cursor.src[0], fc) == STEPS * 4 * SEQ,
                  "the filtered stage ends at stream token %lld, not %lld",
                  (long long)stream_pos_cfg(&td, &sf.cursor.src[0], fc), (long long)(STEPS * 4 * SEQ));
        /* saved and loaded with the checkpoint; a mid-stage resume with another filter is refused */
        char ck2[600];
        snprintf(ck2, sizeof ck2, "%s/checkpoints/s01-step%06d", runF, STEPS);
        lcx_train_state sl;
        lcx_train_state_init(&sl);
        CHECK_OK(lcx_train_load(ck2, f, &sl));
        CHECK(sl.min_doc_tokens == 50 && sl.long_doc_tokens == 60 && sl.long_doc_repeat == 3);
        sl.step = 2, sl.stage_done = 0;
        s3.long_doc_repeat = 2;
        CHECK_FAILS(lcx_train_stage_run(f, &data, &s3, &ctx, &sl, &sum), LCX_ERR_INVALID,
                    "sampling documents of 50+ tokens, those of 60+ tokens 3 times; this run has 50+, 60+ 2 times");
        lcx_train_state_free(&sl);
        lcx_train_state_free(&sf);
        lcx_model_free(f);
        free(runF);
        ctx.run_dir = runD;
    }

    /* the perplexity scorer: first = 1 sums to the HF-shift loss of the window; first = k to the sum over the
     * explicit targets k..n-1 (an independent forward with hand-built targets) */
    {
        int32_t tok[SEQ], tg[SEQ];
        for (int i = 0; i < SEQ; i++) tok[i] = (int32_t)((i * 37 + 5) % g_cfg.vocab_size);
        double nll[SEQ], ref = 0, s = 0;
        int64_t cnt = 0;
        lcx_batch hb = {.n_seq = 1, .seq_len = SEQ, .ids = tok};
        CHECK_OK(lcx_model_forward(d, &hb, NULL, &ref, &cnt));
        CHECK_OK(lcx_train_window_score(d, tok, SEQ, 1, nll));
        for (int i = 0; i < SEQ - 1; i++) s += nll[i];
        CHECK_REL(s, ref, 1e-9);
        for (int i = 0; i < SEQ; i++) tg[i] = i >= 9 && i + 1 < SEQ ? tok[i + 1] : LCX_IGNORE_INDEX;
        lcx_batch tb = {.n_seq = 1, .seq_len = SEQ, .ids = tok, .targets = tg};
        CHECK_OK(lcx_model_forward(d, &tb, NULL, &ref, &cnt));
        CHECK(cnt == SEQ - 10);
        CHECK_OK(lcx_train_window_score(d, tok, SEQ, 10, nll));
        s = 0;
        for (int i = 0; i < SEQ - 10; i++) s += nll[i];
        CHECK_REL(s, ref, 1e-9);
        CHECK_FAILS(lcx_train_window_score(d, tok, SEQ, SEQ, nll), LCX_ERR_INVALID, "bad window");
    }

    /* a checkpoint of another shape is refused with the tensor named */
    lcx_model_config small = g_cfg;
    small.json = NULL;
    small.intermediate_size = g_cfg.intermediate_size * 2;
    lcx_model *e = NULL;
    CHECK_OK(lcx_model_init(&e, &small, &o));
    CHECK_FAILS(lcx_train_load(latest, e, NULL), LCX_ERR_INVALID, "shape does not match");
    lcx_model_free(e);

    free(latest);
    lcx_model_free(d);
    lcx_model_free(a);
    lcx_train_state_free(&sa);
    lcx_train_state_free(&sb);
    lcx_train_state_free(&sc);
    lcx_train_state_free(&sd);
    lcx_tokdata_close(&td);
    lcx_config_free(&g_cfg);
    test_tmpdir_done(g_root);
    free(runA);
    free(runB);
    free(runC);
    free(runD);
    return test_summary("train_resume");
}
