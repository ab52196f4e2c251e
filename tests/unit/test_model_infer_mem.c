/* Memory of forward-only passes: peak RSS (VmHWM after a reset) of one lcx_model_forward at 256 and 2048 tokens,
 * for random models of 2 and 30 layers of the same width (hidden 64, intermediate 192), with the whole MLP at
 * once (2 and 30 layers) and in chunks of 48 rows (30 layers). The growth of the peak between the two lengths must be what the memory model
 * says: lcx_model_forward_bytes (the working set; its `ones` row is written at init, before the reset) plus the
 * rope tables (cos and sin: 2 x n_pairs floats a token; their host copies are gone before the layers run), within
 * GROWTH_TOL; it must not depend on the layer count (the training layout would grow ~30 times as much: checked
 * against its activation bytes). */
#include <malloc.h>
#include <string.h>
#include <sys/prctl.h>

#include "model_fixture.h"
#include "src/checkpoint/catalog.h"
#include "rss_util.h"
#include "test_util.h"

static const double GROWTH_TOL = 0.03; /* relative, plus 64 KiB for page rounding */

enum { T1 = 256, T2 = 2048 };

/* Peak RSS above the level at the start of one forward pass over T tokens. */
static double pass_peak(const lcx_model_config *cfg, int64_t T, int64_t mlp_chunk, const int32_t *ids) {
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = T;
    o.mlp_chunk = mlp_chunk;
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_init(&m, cfg, &o));
    if (!m) return 0;
    CHECK_OK(lcx_model_init_random(m, 3, 0.05));
    CHECK(lcx_model_memory_of(m).acts == lcx_model_forward_bytes(cfg, &o));
    lcx_batch b = {.n_seq = 1, .seq_len = T, .ids = ids};
    double ls = 0;
    if (!lcx_peak_rss_reset()) printf("cannot reset the peak RSS: skipped\n");
    uint64_t base = rss_now();
    CHECK_OK(lcx_model_forward(m, &b, NULL, &ls, NULL));
    uint64_t peak = lcx_peak_rss();
    CHECK(isfinite(ls) && ls > 0);
    lcx_model_free(m);
    return (double)peak - (double)base;
}

int main(void) {
    /* big blocks from mmap, returned to the system on free: each pass starts from the same resident set; no
     * transparent huge pages (they would make the resident set grow in 2 MiB steps). The threshold is below the
     * smallest length-dependent buffer (at 256 tokens a [T, H] row block is exactly 64 KiB): at 64 KiB whether
     * such a block came from the brk heap depended on the heap's state, and builds that differ only in their
     * layout measured 1451 or 1525 bytes/token for the chunked MLP (model 1428); at 16 KiB 1429-1449 */
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    mallopt(M_MMAP_THRESHOLD, 16 * 1024);
    mallopt(M_TRIM_THRESHOLD, 64 * 1024);
    char *dir = fx_path("llama_gqa", "models", "");
    lcx_catalog *c = NULL;
    CHECK_OK(lcx_catalog_open(dir, &c));
    free(dir);
    if (!c) return test_summary("test_model_infer_mem");
    lcx_model_config cfg = c->cfg;
    cfg.hidden_size = 64, cfg.intermediate_size = 192, cfg.num_attention_heads = 2, cfg.num_key_value_heads = 1;
    cfg.head_dim = 32, cfg.max_position_embeddings = T2;
    int32_t *ids = malloc(T2 * sizeof *ids);
    for (int i = 0; i < T2; i++) ids[i] = (int32_t)((i * 31 + 7) % cfg.vocab_size);
    const int64_t n_pairs = cfg.head_dim / 2;
    (void)pass_peak(&cfg, T2, 0, ids); /* warm-up: OpenMP threads, the BLAS buffers a pass touches */
    if (!RSS_MEANINGFUL) {
        printf("AddressSanitizer build: the resident set does not follow the allocations, growth checks skipped\n");
    } else if (lcx_peak_rss_reset()) {
        const int64_t layers[2] = {2, 30}, chunks[2] = {0, 48};
        double growth[2][2];
        for (int ci = 0; ci < 2; ci++) {
            lcx_model_opts o1, o2;
            memset(&o1, 0, sizeof o1), memset(&o2, 0, sizeof o2);
            o1.max_tokens = T1, o2.max_tokens = T2;
            o1.mlp_chunk = o2.mlp_chunk = chunks[ci];
            double model = (double)lcx_model_forward_bytes(&cfg, &o2) - (double)lcx_model_forward_bytes(&cfg, &o1) -
                           (double)(T2 - T1) * 4.0 +              /* ones: written at init */
                           (double)(T2 - T1) * (2.0 * n_pairs * 4); /* rope cos/sin tables */
            for (int li = ci; li < 2; li++) { /* chunked MLP: 30 layers only */
                lcx_model_config lc = cfg;
                lc.num_hidden_layers = layers[li];
                /* the smaller of two passes: first touches of allocator or BLAS memory only ever add */
                double p1 = fmin(pass_peak(&lc, T1, chunks[ci], ids), pass_peak(&lc, T1, chunks[ci], ids));
                double p2 = fmin(pass_peak(&lc, T2, chunks[ci], ids), pass_peak(&lc, T2, chunks[ci], ids));
                growth[ci][li] = p2 - p1;
                double e = fabs(growth[ci][li] - model);
                CHECK_MSG(e <= GROWTH_TOL * model + 65536.0,
                          "%lld layers, MLP chunk %lld: peak grows %.0f bytes from %d to %d tokens, model %.0f",
                          (long long)layers[li], (long long)chunks[ci], growth[ci][li], T1, T2, model);
                printf("%2lld layers, MLP chunk %2lld: peak +%.2f MiB from %d to %d tokens (%.0f bytes/token; memory "
                       "model %.0f)\n",
                       (long long)layers[li], (long long)chunks[ci], growth[ci][li] / 1048576.0, T1, T2,
                       growth[ci][li] / (T2 - T1), model / (T2 - T1));
            }
        }
        double d = fabs(growth[0][1] - growth[0][0]);
        CHECK_MSG(d <= GROWTH_TOL * growth[0][0] + 65536.0, "growth 2 layers %.0f, 30 layers %.0f", growth[0][0],
                  growth[0][1]);
        CHECK(growth[1][1] < 0.6 * growth[0][1]); /* the chunked MLP's temporaries do not grow */
        /* what the training layout would add over the same lengths, for scale */
        lcx_model_opts t1, t2;
        memset(&t1, 0, sizeof t1), memset(&t2, 0, sizeof t2);
        t1.max_tokens = T1, t2.max_tokens = T2, t1.training = t2.training = 1, t1.policy = t2.policy = LCX_ACT_KEEP;
        lcx_model_config lc = cfg;
        lc.num_hidden_layers = 30;
        lcx_model *a = NULL, *bm = NULL;
        CHECK_OK(lcx_model_init(&a, &lc, &t1));
        CHECK_OK(lcx_model_init(&bm, &lc, &t2));
        if (a && bm) {
            double tr = (double)lcx_model_memory_of(bm).acts - (double)lcx_model_memory_of(a).acts;
            CHECK(tr > 10 * growth[0][1]);
            printf("30 layers, training layout: activations +%.2f MiB over the same lengths\n", tr / 1048576.0);
        }
        lcx_model_free(a), lcx_model_free(bm);
    } else {
        printf("peak RSS cannot be reset here (/proc/self/clear_refs): growth checks skipped\n");
    }
    free(ids);
    lcx_catalog_close(c);
    return test_summary("test_model_infer_mem");
}
