/* Whole logits rows from a forward-only model under tensor parallelism (src/model/model_logits.c; 4 ranks): the
 * lm_head is vocab-parallel, so each TP rank computes its slice of a chunk and the slices are all-gathered into
 * whole rows, which evaluation (perplexity, passkey) reads. Reference: the same model on one rank (no TP group),
 * the same random weights (lcx_model_init_random is the same tensor whatever the layout). Cases:
 *   - qwen2's shape (GQA 4:1, q/k/v biases) TP 2, in two independent worlds of 2;
 *   - llama_gqa's shape with a vocabulary of 253, TP 2 and TP 4 (254 and 256 rows: padding rows dropped);
 *   - qwen3's shape (q/k norms, tied embeddings) TP 4, bf16 weights.
 * For each, on every rank: the logits rows of an uncached pass (37 tokens, chunks of 7, rows from 3 on) and of a
 * cached pass (a KV cache filled by 20 tokens, then 17 more) within 2e-5 of the reference row's largest
 * magnitude (float32 sums in another order: a rank's GEMMs cover its heads and columns, the row-parallel outputs
 * are summed over the group; observed below 1e-6), the loss of the TP pass within 1e-5 relative, and the same
 * bits on every TP rank (the gather copies: ranks take the same decisions from them). The planner's estimate of
 * the evaluation's memory (lcx_mem_eval_compute) against the model's allocations: working set and TP scratch to
 * the byte, weights within 10%. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"
#include "src/model/model.h"
#include "src/plan/plan.h"
#include "test_util.h"
#include "worst_of.h"

#define SEQ 37
#define FIRST 3
#define PREFIX 20

typedef struct rows {
    float *v;     /* [SEQ][V] */
    int64_t V;
    int64_t seen; /* rows handed out */
    int bad;      /* a call with another vocabulary or out of range */
} rows;

static lcx_status keep_rows(void *user, int64_t row0, int64_t n, const float *logits, int64_t V) {
    rows *r = user;
    if (V != r->V || row0 < 0 || row0 + n > SEQ) {
        r->bad = 1;
        return LCX_OK;
    }
    memcpy(r->v + row0 * V, logits, (size_t)(n * V) * sizeof(float));
    r->seen += n;
    return LCX_OK;
}

/* The cached pass's second call numbers its rows from its first new token: shifted by the prefix. */
typedef struct shifted {
    rows *r;
    int64_t base;
} shifted;

static lcx_status keep_shifted(void *user, int64_t row0, int64_t n, const float *logits, int64_t V) {
    shifted *s = user;
    return keep_rows(s->r, s->base + row0, n, logits, V);
}

typedef struct pass_out {
    rows plain, cached;
    double loss;
} pass_out;

static void batch_ids(int64_t vocab, int32_t *ids, int32_t *tgt) {
    for (int t = 0; t < SEQ; t++) ids[t] = (int32_t)(((uint64_t)t * 2654435761u + 5) % (uint64_t)vocab);
    for (int t = 0; t < SEQ; t++) tgt[t] = t + 1 < SEQ ? ids[t + 1] : LCX_IGNORE_INDEX;
}

static void run(const lcx_model_config *cfg, lcx_dtype pdt, lcx_comm *tp, pass_out *p) {
    const int64_t V = cfg->vocab_size;
    memset(p, 0, sizeof *p);
    p->plain.V = p->cached.V = V;
    p->plain.v = calloc((size_t)(SEQ * V), sizeof(float));
    p->cached.v = calloc((size_t)(SEQ * V), sizeof(float));
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = pdt;
    o.max_tokens = SEQ;
    o.loss_chunk = 7;
    o.training = 0;
    o.tp_comm = tp;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, cfg, &o));
    if (!m) return;
    CHECK_OK(lcx_model_init_random(m, 29, 0.08));
    /* the planner's memory of the evaluation (docs/plan.md "Evaluation"): the working set and the TP scratch
     * are what the model allocates, byte for byte; the weights P/TP within 10% (the planner splits everything
     * evenly; the norms are whole on every rank and a KV head is replicated when TP exceeds them, which in these
     * 32-wide fixtures is 6-9% of a rank's weights) */
    const int tp_size = tp ? tp->size : 1;
    const lcx_param_table *tab = lcx_model_params(m);
    uint64_t n_params = 0;
    for (size_t i = 0; i < tab->n; i++) n_params += tab->params[i].numel;
    lcx_mem_eval e;
    lcx_mem_eval_compute(cfg, n_params, tp_size, 1, SEQ - 16, 7, &e);
    lcx_model_memory mm = lcx_model_memory_of(m);
    CHECK_MSG(e.working_set == (double)mm.acts, "TP %d: working set %.0f bytes, the model %zu", tp_size,
              e.working_set, mm.acts);
    CHECK_MSG(e.tp_scratch == (double)mm.tp_scratch, "TP %d: TP scratch %.0f bytes, the model %zu", tp_size,
              e.tp_scratch, mm.tp_scratch);
    CHECK_MSG(fabs(e.weights - (double)mm.params) <= 0.10 * (double)mm.params || pdt != LCX_F32,
              "TP %d: weights %.0f bytes, the model %zu", tp_size, e.weights, mm.params);
    int32_t ids[SEQ], tgt[SEQ];
    batch_ids(V, ids, tgt);
    lcx_batch b = {.n_seq = 1, .seq_len = SEQ, .ids = ids};
    CHECK_OK(lcx_model_forward_logits(m, &b, FIRST, keep_rows, &p->plain));
    CHECK_MSG(!p->plain.bad && p->plain.seen == SEQ - FIRST, "uncached: %lld rows handed out, expected %d",
              (long long)p->plain.seen, SEQ - FIRST);
    lcx_kv_cache *c = NULL;
    CHECK_OK(lcx_kv_cache_init(&c, m, SEQ));
    if (c) {
        shifted sh = {&p->cached, PREFIX};
        CHECK_OK(lcx_model_forward_cached(m, c, ids, PREFIX, PREFIX, 0, keep_rows, &p->cached));
        CHECK_OK(lcx_model_forward_cached(m, c, ids + PREFIX, SEQ - PREFIX, SEQ - PREFIX, 0, keep_shifted, &sh));
        CHECK_MSG(!p->cached.bad && p->cached.seen == SEQ, "cached: %lld rows handed out, expected %d",
                  (long long)p->cached.seen, SEQ);
    }
    lcx_kv_cache_free(c);
    lcx_batch lb = {.n_seq = 1, .seq_len = SEQ, .ids = ids, .targets = tgt};
    int64_t count = 0;
    CHECK_OK(lcx_model_forward(m, &lb, NULL, &p->loss, &count));
    CHECK(count == SEQ - 1);
    lcx_model_free(m);
}

/* The largest |a - b| over row r, relative to the row's largest |b| (at least 1). */
static double row_err(const float *a, const float *b, int64_t V) {
    double d = 0, mx = 1;
    for (int64_t v = 0; v < V; v++) {
        if (fabs((double)b[v]) > mx) mx = fabs((double)b[v]);
        d = worst_of(d, fabs((double)a[v] - (double)b[v]));
    }
    return d / mx;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211u;
    return h;
}

static void check_case(lcx_comm *world, const char *fixture, int64_t vocab, int tp_size, lcx_dtype pdt) {
    char path[600];
    snprintf(path, sizeof path, "%s/tests/fixtures/models/%s/config.json", LCX_SOURCE_DIR, fixture);
    lcx_model_config cfg;
    CHECK_OK(lcx_config_load(path, &cfg));
    cfg.num_hidden_layers = 3;
    if (vocab) cfg.vocab_size = vocab;
    const int64_t V = cfg.vocab_size;
    lcx_comm *tp = NULL;
    CHECK_OK(world->impl->split(world, world->rank / tp_size, world->rank, &tp));
    if (!tp) return;
    pass_out ref, got;
    run(&cfg, pdt, NULL, &ref);
    run(&cfg, pdt, tp, &got);
    double worst = 0, worst_cached = 0;
    for (int64_t r = FIRST; r < SEQ; r++) {
        double e = row_err(got.plain.v + r * V, ref.plain.v + r * V, V);
        worst = worst_of(worst, e);
    }
    for (int64_t r = 0; r < SEQ; r++) {
        double e = row_err(got.cached.v + r * V, ref.plain.v + r * V, V);
        if (r < FIRST) e = row_err(got.cached.v + r * V, ref.cached.v + r * V, V);
        worst_cached = worst_of(worst_cached, e);
    }
    CHECK_MSG(worst <= 2e-5, "%s TP %d: uncached logits %.3g of the row's magnitude from one rank's", fixture,
              tp_size, worst);
    CHECK_MSG(worst_cached <= 2e-5, "%s TP %d: cached logits %.3g of the row's magnitude from one rank's", fixture,
              tp_size, worst_cached);
    CHECK_MSG(fabs(got.loss - ref.loss) <= 1e-5 * fabs(ref.loss), "%s TP %d: loss %.9g, one rank %.9g", fixture,
              tp_size, got.loss, ref.loss);
    /* every TP rank holds the same bits: each rank's hash against the group's */
    uint64_t h = fnv(got.plain.v + FIRST * V, (size_t)((SEQ - FIRST) * V) * sizeof(float), 1469598103934665603u);
    h = fnv(got.cached.v, (size_t)(SEQ * V) * sizeof(float), h);
    uint64_t all[8] = {0};
    CHECK_OK(lcx_comm_all_gather(tp, NULL, &h, all, 1, LCX_I64));
    int same = 1;
    for (int r = 0; r < tp_size; r++) same &= all[r] == all[0];
    CHECK_MSG(same, "%s TP %d: the TP ranks were handed different logits", fixture, tp_size);
    if (world->rank == 0)
        printf("%s%s TP %d (%s weights): logits %.2g (uncached) / %.2g (cached) of the row's magnitude from one "
               "rank's, loss %.9g vs %.9g, TP ranks %s\n",
               fixture, vocab ? " (vocab 253)" : "", tp_size, pdt == LCX_BF16 ? "bf16" : "f32", worst, worst_cached,
               got.loss, ref.loss, same ? "identical" : "DIFFERENT");
    free(ref.plain.v), free(ref.cached.v), free(got.plain.v), free(got.cached.v);
    tp->impl->free(tp);
    lcx_config_free(&cfg);
}

int main(void) {
    lcx_comm *world = NULL;
    if (lcx_comm_world_init(&world) != LCX_OK) {
        fprintf(stderr, "test_model_logits_tp_mpi: %s\n", lcx_last_error());
        return 1;
    }
    if (world->size != 4) {
        fprintf(stderr, "test_model_logits_tp_mpi: needs 4 ranks, has %d\n", world->size);
        return 1;
    }
    check_case(world, "qwen2", 0, 2, LCX_F32);
    check_case(world, "llama_gqa", 253, 2, LCX_F32);
    check_case(world, "llama_gqa", 253, 4, LCX_F32);
    check_case(world, "qwen3", 0, 4, LCX_BF16);
    CHECK_OK(lcx_comm_finalize(world));
    return test_summary("test_model_logits_tp_mpi");
}
