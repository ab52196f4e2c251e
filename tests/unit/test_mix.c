/* Data mix (src/train/mix.h): three datasets whose tokens name their source (source * 100000 + ...), weights
 * 5 : 3 : 2. Checked against properties and against the samplers alone, not against the mix's own arithmetic:
 *   - every sample comes whole from the source the mix reports;
 *   - after every k samples each source has given within 1 of its share w_i k (Megatron's blending guarantee);
 *   - source i's samples are, in order, exactly those of its sampler alone with seed lcx_mix_seed(seed, i);
 *   - weights 5 : 3 : 2 and 0.5 : 0.3 : 0.2 give the same samples; a one-source mix is its sampler, seed unchanged;
 *   - a cursor saved after k samples continues exactly as the unbroken mix;
 *   - bad mixes fail with one line: no source, too many, a weight that is not positive, a source with nothing to
 *     draw (named), a cursor of another mix. */
#include <math.h>
#include <string.h>

#include "formats/tokdata.h"
#include "src/train/mix.h"
#include "test_util.h"
#include "worst_of.h"

#define N_SRC 3
#define L 32
#define EOS 99999u

/* source s: 30 + 7 s documents of 1 + (d * 37 + s) % 90 tokens */
static void write_source(const char *prefix, uint32_t s) {
    lcx_tokdata_writer w;
    CHECK_OK(lcx_tokdata_writer_open(&w, prefix, LCX_TOKDATA_I32));
    uint32_t buf[100];
    for (uint32_t d = 0; d < 30 + 7 * s; d++) {
        const uint32_t len = 1 + (d * 37 + s) % 90;
        for (uint32_t k = 0; k < len; k++) buf[k] = s * 100000 + d * 100 + k;
        CHECK_OK(lcx_tokdata_writer_add(&w, buf, len));
    }
    CHECK_OK(lcx_tokdata_writer_commit(&w));
}

/* the source every token of a sample names (EOS belongs to any), -1 when they disagree */
static int source_of(const uint32_t *smp) {
    int s = -1;
    for (int t = 0; t <= L; t++) {
        if (smp[t] == EOS) continue;
        const int ts = (int)(smp[t] / 100000);
        if (s >= 0 && ts != s) return -1;
        s = ts;
    }
    return s;
}

int main(void) {
    lcx_tokdata td[N_SRC + 1];
    char prefix[N_SRC + 1][256];
    for (int s = 0; s < N_SRC; s++) {
        snprintf(prefix[s], sizeof prefix[s], "%s/mix_src%d", LCX_BINARY_DIR, s);
        write_source(prefix[s], (uint32_t)s);
        CHECK_OK(lcx_tokdata_open(prefix[s], &td[s]));
    }
    const lcx_sampler_config cfg = {L, 77, 0, 0, 1, EOS};
    lcx_mix_data data = {N_SRC, {&td[0], &td[1], &td[2]}, {5, 3, 2}};
    const double share[N_SRC] = {0.5, 0.3, 0.2};
    lcx_mix *m = NULL;
    CHECK_OK(lcx_mix_init(&data, &cfg, &m));
    if (!m) return test_summary("test_mix");

    /* the samplers alone, one per source */
    lcx_sampler *alone[N_SRC];
    for (int s = 0; s < N_SRC; s++) {
        lcx_sampler_config c = cfg;
        c.seed = lcx_mix_seed(cfg.seed, s);
        CHECK_OK(lcx_sampler_init(&td[s], &c, &alone[s]));
    }
    enum { K = 500 };
    static uint32_t drawn[K][L + 1];
    static int32_t docs[K][L];
    uint32_t ref[L + 1];
    int32_t ref_doc[L];
    int whole = 1, named = 1, same = 1, doc_same = 1;
    double worst_lag = 0;
    uint64_t count[N_SRC] = {0};
    for (int k = 0; k < K; k++) {
        int src = -1;
        CHECK_OK(lcx_mix_next(m, drawn[k], docs[k], &src));
        const int s = source_of(drawn[k]);
        whole &= s >= 0;
        named &= s == src;
        if (src < 0 || src >= N_SRC) break;
        count[src]++;
        for (int i = 0; i < N_SRC; i++) {
            const double lag = fabs((double)count[i] - share[i] * (k + 1));
            worst_lag = worst_of(worst_lag, lag);
        }
        CHECK_OK(lcx_sampler_next(alone[src], ref, ref_doc));
        same &= memcmp(ref, drawn[k], sizeof ref) == 0;
        doc_same &= memcmp(ref_doc, docs[k], sizeof ref_doc) == 0;
    }
    CHECK_MSG(whole, "a sample mixes tokens of two sources");
    CHECK_MSG(named, "a sample came from another source than the mix reported");
    CHECK_MSG(worst_lag < 1, "a source's count strayed %.3f samples from its share", worst_lag);
    CHECK_MSG(same && doc_same, "a source's samples differ from its sampler's alone");
    for (int s = 0; s < N_SRC; s++) {
        CHECK(count[s] == (uint64_t)llround(share[s] * K));
        CHECK(lcx_mix_tell(m).src[s].samples == count[s]);
        CHECK(fabs(lcx_mix_weight(m, s) - share[s]) < 1e-15);
    }
    printf("test_mix: %d samples: %llu / %llu / %llu from the three sources, largest lag %.3f\n", K,
           (unsigned long long)count[0], (unsigned long long)count[1], (unsigned long long)count[2], worst_lag);

    /* weights are shares: 0.5 : 0.3 : 0.2 draws the same samples as 5 : 3 : 2 */
    lcx_mix_data norm = data;
    for (int s = 0; s < N_SRC; s++) norm.weight[s] = share[s];
    lcx_mix *m2 = NULL;
    CHECK_OK(lcx_mix_init(&norm, &cfg, &m2));
    int norm_same = 1;
    uint32_t smp[L + 1];
    int32_t doc[L];
    for (int k = 0; m2 && k < 100; k++) {
        CHECK_OK(lcx_mix_next(m2, smp, NULL, NULL));
        norm_same &= memcmp(smp, drawn[k], sizeof smp) == 0;
    }
    CHECK_MSG(norm_same, "normalised weights draw other samples");

    /* a saved cursor continues exactly */
    lcx_mix_free(m2);
    m2 = NULL;
    CHECK_OK(lcx_mix_init(&data, &cfg, &m2));
    for (int k = 0; m2 && k < 137; k++) CHECK_OK(lcx_mix_next(m2, smp, NULL, NULL));
    const lcx_mix_cursor at = m2 ? lcx_mix_tell(m2) : (lcx_mix_cursor){0};
    lcx_mix_free(m2);
    m2 = NULL;
    CHECK_OK(lcx_mix_init(&data, &cfg, &m2));
    CHECK_OK(m2 ? lcx_mix_seek(m2, &at) : LCX_ERR_INVALID);
    int resumed = 1;
    for (int k = 137; m2 && k < 237; k++) {
        CHECK_OK(lcx_mix_next(m2, smp, doc, NULL));
        resumed &= memcmp(smp, drawn[k], sizeof smp) == 0 && memcmp(doc, docs[k], sizeof doc) == 0;
    }
    CHECK_MSG(resumed, "a mix sought to a saved cursor draws other samples than the unbroken one");
    lcx_mix_free(m2);

    /* one source: its sampler, seed unchanged */
    lcx_mix_data one = lcx_mix_single(&td[1]);
    lcx_sampler *plain = NULL;
    CHECK_OK(lcx_mix_init(&one, &cfg, &m2));
    CHECK_OK(lcx_sampler_init(&td[1], &cfg, &plain));
    int single_same = 1;
    for (int k = 0; m2 && plain && k < 60; k++) {
        CHECK_OK(lcx_mix_next(m2, smp, NULL, NULL));
        CHECK_OK(lcx_sampler_next(plain, ref, NULL));
        single_same &= memcmp(smp, ref, sizeof smp) == 0;
    }
    CHECK_MSG(single_same, "a one-source mix draws other samples than its sampler");
    /* a cursor of the three-source mix does not fit it */
    if (m2) CHECK_FAILS(lcx_mix_seek(m2, &at), LCX_ERR_INVALID, "3 sources saved, this mix has 1");
    lcx_mix_free(m2);
    lcx_sampler_free(plain);

    /* bad mixes */
    lcx_mix *bad = NULL;
    lcx_mix_data b = data;
    b.n = 0;
    CHECK_FAILS(lcx_mix_init(&b, &cfg, &bad), LCX_ERR_INVALID, "0 sources (1 to 8)");
    b.n = LCX_MIX_MAX + 1;
    CHECK_FAILS(lcx_mix_init(&b, &cfg, &bad), LCX_ERR_INVALID, "9 sources (1 to 8)");
    const double bad_w[] = {0, -1, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        b = data;
        b.weight[1] = bad_w[i];
        CHECK_FAILS(lcx_mix_init(&b, &cfg, &bad), LCX_ERR_INVALID, "mix_src1: weight");
    }
    lcx_sampler_config picky = cfg;
    picky.min_doc_tokens = 95; /* source 2's documents are at most 90 tokens */
    CHECK_FAILS(lcx_mix_init(&data, &picky, &bad), LCX_ERR_INVALID, "mix_src0: no document has at least 95 tokens");
    CHECK(bad == NULL);
    lcx_mix_cursor wrong = at;
    wrong.src[2].pos = 1u << 30;
    CHECK_OK(lcx_mix_init(&data, &cfg, &m2));
    if (m2) CHECK_FAILS(lcx_mix_seek(m2, &wrong), LCX_ERR_INVALID, "mix_src2: sampler cursor: position");
    lcx_mix_free(m2);

    for (int s = 0; s < N_SRC; s++) {
        lcx_sampler_free(alone[s]);
        lcx_tokdata_close(&td[s]);
    }
    lcx_mix_free(m);
    return test_summary("test_mix");
}
