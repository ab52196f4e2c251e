/* The evaluation's scorers under context parallelism (src/eval/eval_model.c; 4 ranks): a forward-only model whose
 * windows are split over its CP group. Reference: the same model on one rank (no group), the same random weights
 * (lcx_model_init_random gives the same tensor whatever the layout). Layouts: CP 2 (two independent worlds of 2),
 * CP 4, TP 2 x CP 2. Windows of 2 to 61 tokens with scored rows from the first to the last, so that the pad (to a
 * multiple of 2 CP), a first scored row inside either of a rank's chunks and ranks without a scored row all
 * occur. On every rank, for each window:
 *   - the per-token NLLs of lcx_eval_model_score within 2e-5 (+ 2e-5 relative) of one rank's (float32 attention
 *     merged by log-sum-exp over the ring: another summation order; observed below 5e-7);
 *   - the teacher-forced argmax of lcx_eval_model_argmax equal to one rank's on every row whose top two logits
 *     are at least 1e-3 apart (closer ones may swap under last-bit differences; all rows were, here);
 *   - every rank of the group holds the same bits (each row is scored by one rank and all-gathered);
 *   - lcx_eval_lm (the passkey's adapter) without a cache gives the same bits as the model's scorer; with the CP
 *     KV cache (the prefix through the ring, the rest a continuation merged over the ranks) NLLs within the same
 *     bound of one rank's, the same bits on every rank, and a prompt scored with 3 answers runs once (not with
 *     the dynamic rope, whose frequencies at the prompt's length are not the window's: then uncached);
 * With a dynamic NTK rope (frequencies from the pass's length) as well: the padded window runs with its own
 * length's frequencies (lcx_batch.rope_len), as one rank does.
 * Then the planner's estimate of the evaluation's memory (lcx_mem_eval_compute with CP) against the model's
 * allocations: working set, TP scratch and ring buffers to the byte; a window longer than the capacity fails with a
 * message on every rank, and so do the calls a CP cache cannot take (a partial prefill, a commit after it, a
 * continuation past its tail, a truncation into the prefix). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"
#include "src/core/cp_perm.h"
#include "src/eval/eval_model.h"
#include "src/model/model.h"
#include "src/plan/plan.h"
#include "test_util.h"
#include "worst_of.h"

#define MAXN 61
#define CHUNK 5

static const struct {
    int64_t n, first;
} WINDOWS[] = {{37, 1}, {37, 20}, {40, 39}, {8, 3}, {3, 2}, {2, 1}, {61, 7}, {61, 60}, {29, 15}};
enum { NWIN = sizeof WINDOWS / sizeof WINDOWS[0] };

static void window_ids(int w, int64_t vocab, int32_t *ids) {
    for (int64_t t = 0; t < WINDOWS[w].n; t++)
        ids[t] = (int32_t)(((uint64_t)(t + 7 * w) * 2654435761u + 11) % (uint64_t)vocab);
}

static lcx_model *make(const lcx_model_config *cfg, int64_t max_tokens, lcx_comm *tp, lcx_comm *cp) {
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = max_tokens;
    o.loss_chunk = CHUNK;
    o.mlp_chunk = LCX_EVAL_MLP_CHUNK;
    o.training = 0;
    o.tp_comm = tp;
    o.cp_comm = cp;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, cfg, &o));
    if (m) CHECK_OK(lcx_model_init_random(m, 31, 0.08));
    return m;
}

/* The gap between the two largest logits of each row (one rank's model): where an argmax is decided. */
typedef struct margins {
    double gap[MAXN];
} margins;

static lcx_status keep_gap(void *user, int64_t row0, int64_t rows, const float *logits, int64_t V) {
    margins *g = user;
    for (int64_t k = 0; k < rows; k++) {
        const float *x = logits + k * V;
        double a = -INFINITY, b = -INFINITY;
        for (int64_t v = 0; v < V; v++) {
            if (x[v] > a) b = a, a = x[v];
            else if (x[v] > b) b = x[v];
        }
        if (row0 + k < MAXN) g->gap[row0 + k] = a - b;
    }
    return LCX_OK;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211u;
    return h;
}

static void check_layout(lcx_comm *world, const char *fixture, int tp, int cp, int dynamic) {
    char path[600];
    snprintf(path, sizeof path, "%s/tests/fixtures/models/%s/config.json", LCX_SOURCE_DIR, fixture);
    lcx_model_config cfg;
    CHECK_OK(lcx_config_load(path, &cfg));
    cfg.num_hidden_layers = 2;
    if (dynamic) { /* frequencies that depend on the pass's length: the window's, never the padded one's */
        snprintf(cfg.rope.type, sizeof cfg.rope.type, "dynamic");
        cfg.rope.has_factor = 1;
        cfg.rope.factor = 2.0;
        cfg.max_position_embeddings = 16;
    }
    const int64_t V = cfg.vocab_size;
    lcx_comm *w = NULL; /* independent worlds of tp x cp ranks */
    CHECK_OK(world->impl->split(world, world->rank / (tp * cp), world->rank, &w));
    lcx_mesh mesh;
    lcx_comm_groups gs;
    memset(&gs, 0, sizeof gs);
    CHECK_OK(lcx_mesh_init(&mesh, tp, cp, 1));
    CHECK_OK(lcx_comm_mesh(w, &mesh, &gs));
    lcx_comm *tpc = tp > 1 ? gs.group[LCX_GROUP_TP] : NULL, *cpc = gs.group[LCX_GROUP_CP];
    const int64_t loc = lcx_cp_local_len(MAXN, cp);
    lcx_model *ref = make(&cfg, MAXN, NULL, NULL), *m = make(&cfg, loc, tpc, cpc);
    if (!ref || !m) goto done;

    double worst = 0, worst_cached = 0;
    int rows = 0, decided = 0, same_arg = 1, same_lm = 1;
    uint64_t h = 1469598103934665603u;
    for (int wi = 0; wi < NWIN; wi++) {
        const int64_t n = WINDOWS[wi].n, first = WINDOWS[wi].first, k = n - first;
        int32_t ids[MAXN], next_ref[MAXN], next[MAXN];
        double nll_ref[MAXN], nll[MAXN], nll_lm[MAXN];
        window_ids(wi, V, ids);
        margins g;
        memset(&g, 0, sizeof g);
        lcx_batch b = {.n_seq = 1, .seq_len = n, .ids = ids};
        CHECK_OK(lcx_model_forward_logits(ref, &b, first - 1, keep_gap, &g));
        CHECK_OK(lcx_eval_model_score(ref, ids, n, first, nll_ref));
        CHECK_OK(lcx_eval_model_argmax(ref, ids, n, first, next_ref));
        for (int64_t i = 0; i < k; i++) nll[i] = NAN, next[i] = -1;
        CHECK_OK(lcx_eval_model_score(m, ids, n, first, nll));
        CHECK_OK(lcx_eval_model_argmax(m, ids, n, first, next));
        for (int64_t i = 0; i < k; i++) {
            double e = fabs(nll[i] - nll_ref[i]);
            worst = worst_of(worst, e);
            CHECK_MSG(e <= 2e-5 + 2e-5 * fabs(nll_ref[i]), "%s TP %d CP %d window %lld/%lld: token %lld NLL %.9g, one "
                      "rank %.9g", fixture, tp, cp, (long long)n, (long long)first, (long long)(first + i), nll[i],
                      nll_ref[i]);
            rows++;
            if (g.gap[first - 1 + i] < 1e-3) continue;
            decided++;
            same_arg &= next[i] == next_ref[i];
        }
        h = fnv(nll, (size_t)k * sizeof *nll, h);
        h = fnv(next, (size_t)k * sizeof *next, h);
        lcx_eval_lm lm; /* without a cache: the model's scorer, bit for bit */
        CHECK_OK(lcx_eval_lm_init(&lm, m, 0));
        CHECK_OK(lcx_eval_lm_score(&lm, ids, n, first, nll_lm));
        same_lm &= memcmp(nll_lm, nll, (size_t)k * sizeof *nll) == 0;
        lcx_eval_lm_free(&lm);
        /* with the CP cache: the prefix through the ring, the rest a continuation on every rank (or uncached when
         * too short a prefix or too long a rest) */
        CHECK_OK(lcx_eval_lm_init(&lm, m, MAXN));
        CHECK_OK(lcx_eval_lm_score(&lm, ids, n, first, nll_lm));
        for (int64_t i = 0; i < k; i++) {
            double e = fabs(nll_lm[i] - nll_ref[i]);
            worst_cached = worst_of(worst_cached, e);
        }
        h = fnv(nll_lm, (size_t)k * sizeof *nll_lm, h);
        lcx_eval_lm_free(&lm);
    }
    CHECK_MSG(worst_cached <= 2e-5, "%s TP %d CP %d: cached NLLs %.3g from one rank's", fixture, tp, cp, worst_cached);
    /* the passkey's pattern: one prompt, several answers; the prompt fills the cache once */
    {
        enum { P = 40, A = 5, NA = 3 };
        int32_t seq[P + A];
        double got[A], want[A];
        lcx_eval_lm lm;
        CHECK_OK(lcx_eval_lm_init(&lm, m, MAXN));
        for (int a = 0; a < NA; a++) {
            for (int t = 0; t < P; t++) seq[t] = (int32_t)(((uint64_t)t * 40503u + 17) % (uint64_t)V); /* the prompt */
            for (int i = 0; i < A; i++) seq[P + i] = (int32_t)((a * 37 + i * 11 + 3) % V);     /* answer a */
            CHECK_OK(lcx_eval_lm_score(&lm, seq, P + A, P + 1, got));
            CHECK_OK(lcx_eval_model_score(ref, seq, P + A, P + 1, want));
            for (int i = 0; i < A - 1; i++) {
                double e = fabs(got[i] - want[i]);
                worst_cached = worst_of(worst_cached, e);
            }
            h = fnv(got, (A - 1) * sizeof *got, h);
        }
        /* the dynamic rope's frequencies at the prompt's length are not the window's: uncached every time */
        const int64_t run_want = dynamic ? NA * (P + A) : P + NA * A, reused_want = dynamic ? 0 : (NA - 1) * P;
        CHECK_MSG(lm.cache && lm.tokens_reused == reused_want && lm.tokens_run == run_want,
                  "%s CP %d: the prompts ran %lld tokens, %lld reused (want %lld and %lld)", fixture, cp,
                  (long long)lm.tokens_run, (long long)lm.tokens_reused, (long long)run_want,
                  (long long)reused_want);
        CHECK_MSG(worst_cached <= 2e-5, "%s TP %d CP %d: answers' NLLs %.3g from one rank's", fixture, tp, cp,
                  worst_cached);
        lcx_eval_lm_free(&lm);
    }
    CHECK_MSG(same_arg, "%s TP %d CP %d: an argmax differs from one rank's", fixture, tp, cp);
    CHECK_MSG(decided >= rows * 9 / 10, "%s: only %d of %d rows have a clear argmax", fixture, decided, rows);
    CHECK_MSG(same_lm, "%s TP %d CP %d: lcx_eval_lm's NLLs differ from the model scorer's", fixture, tp, cp);
    uint64_t all[4] = {0};
    CHECK_OK(lcx_comm_all_gather(w, NULL, &h, all, 1, LCX_I64));
    int same = 1;
    for (int r = 0; r < w->size; r++) same &= all[r] == all[0];
    CHECK_MSG(same, "%s TP %d CP %d: the ranks returned different results", fixture, tp, cp);

    /* the CP cache's refusals, on every rank alike and before any collective */
    {
        lcx_kv_cache *c = NULL;
        int32_t ids[MAXN];
        window_ids(0, V, ids);
        CHECK_OK(lcx_kv_cache_init(&c, m, 40));
        if (c) {
            const int64_t tail = lcx_kv_cache_cp_tail(c);
            CHECK(tail == (loc < 64 ? loc : 64) && lcx_kv_cache_capacity(c) == 40);
            CHECK_FAILS(lcx_model_forward_cached(m, c, ids, 10, 5, 0, NULL, NULL), LCX_ERR_INVALID,
                        "under CP the first call fills the cache with a whole prefix");
            CHECK_FAILS(lcx_model_forward_cached(m, c, ids, 41, 41, 41, NULL, NULL), LCX_ERR_INVALID,
                        "a prefix of 41 tokens exceeds the cache's capacity of 40");
            CHECK_OK(lcx_model_forward_cached(m, c, ids, 10, 10, 10, NULL, NULL));
            CHECK(lcx_kv_cache_len(c) == 10);
            CHECK_FAILS(lcx_kv_cache_truncate(c, 5), LCX_ERR_INVALID, "split over the ring: truncate to 0");
            CHECK_FAILS(lcx_model_forward_cached(m, c, ids, 3, 1, 0, NULL, NULL), LCX_ERR_INVALID,
                        "under CP a filled cache takes continuations only");
            CHECK_FAILS(lcx_model_forward_cached(m, c, ids, tail + 1, 0, 0, NULL, NULL), LCX_ERR_INVALID,
                        "a continuation holds at most");
            CHECK_OK(lcx_kv_cache_truncate(c, 0));
            CHECK(lcx_kv_cache_len(c) == 0);
        }
        lcx_kv_cache_free(c);
    }

    /* the planner's memory of this evaluation (docs/plan.md "Evaluation") against what the model allocated */
    const lcx_param_table *tab = lcx_model_params(m);
    uint64_t n_params = 0;
    for (size_t i = 0; i < tab->n; i++) n_params += tab->params[i].numel;
    lcx_mem_eval e;
    lcx_mem_eval_compute(&cfg, n_params, tp, cp, MAXN - 16, CHUNK, &e);
    lcx_model_memory mm = lcx_model_memory_of(m);
    CHECK_MSG(e.local_tokens == loc && e.working_set == (double)mm.acts && e.tp_scratch == (double)mm.tp_scratch &&
                  e.cp_ring == (double)mm.cp_ring && e.kv_cache == 0,
              "TP %d CP %d: the plan says %lld tokens, working set %.0f, TP %.0f, ring %.0f; the model %lld, %zu, %zu, "
              "%zu", tp, cp, (long long)e.local_tokens, e.working_set, e.tp_scratch, e.cp_ring, (long long)loc,
              mm.acts, mm.tp_scratch, mm.cp_ring);

    /* a window past the capacity: every rank of the group fails alike, before any collective */
    int32_t big[2 * MAXN + 8];
    for (int i = 0; i < 2 * MAXN + 8; i++) big[i] = i % 7;
    double sink[2 * MAXN + 8];
    lcx_status st = lcx_eval_model_score(m, big, 2 * MAXN + 8, 1, sink);
    CHECK_MSG(st != LCX_OK && strstr(lcx_last_error(), "tokens"), "CP %d: a %d-token window: %s", cp, 2 * MAXN + 8,
              st == LCX_OK ? "accepted" : lcx_last_error());
    if (world->rank == 0)
        printf("%s%s TP %d x CP %d: %d windows, NLL at most %.2g (KV-cached %.2g) from one rank's, argmax equal on "
               "the %d of %d rows with a top-2 gap of 1e-3 or more, ranks %s\n",
               fixture, dynamic ? " (dynamic NTK rope)" : "", tp, cp, NWIN, worst, worst_cached, decided, rows,
               same ? "identical" : "DIFFERENT");
done:
    lcx_model_free(m);
    lcx_model_free(ref);
    lcx_comm_groups_free(&gs);
    w->impl->free(w);
    lcx_config_free(&cfg);
}

int main(void) {
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK) {
        fprintf(stderr, "test_eval_cp_mpi: %s\n", lcx_last_error());
        return 1;
    }
    if (world->size != 4) {
        fprintf(stderr, "test_eval_cp_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    check_layout(world, "qwen2", 1, 2, 0);
    check_layout(world, "qwen2", 1, 4, 0);
    check_layout(world, "llama_gqa", 2, 2, 0);
    check_layout(world, "qwen2", 1, 4, 1);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_eval_cp_mpi");
}
