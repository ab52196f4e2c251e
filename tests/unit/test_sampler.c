/* Sampler: every sample is a window of one stream made of whole documents (each followed by EOS), every epoch
 * lists each eligible document the right number of times, shuffles are seeded, and a saved cursor resumes
 * exactly; the document starts it reports match the documents' first tokens. Documents carry their identity in
 * their tokens (doc * 1000 + k), so the stream can be parsed back. */
#include <string.h>

#include "formats/tokdata.h"
#include "src/train/sampler.h"
#include "test_util.h"

#define N_DOCS 40
#define EOS 999999u

static uint32_t len_of(uint32_t d) { return d % 7 == 3 ? 0 : 1 + (d * 53) % 120; } /* some empty */

/* Parse a stream: documents must be complete (tokens d*1000+0..len-1 then EOS); counts[d]++ per document. */
static int parse_stream(const uint32_t *t, size_t n, uint32_t *counts, size_t *consumed) {
    size_t i = 0;
    while (i < n) {
        uint32_t d = t[i] / 1000;
        if (d >= N_DOCS || t[i] % 1000 != 0) return 0;
        uint32_t L = len_of(d);
        if (i + L + 1 > n) break; /* a document cut by the end of what we drew */
        for (uint32_t k = 0; k < L; k++)
            if (t[i + k] != d * 1000 + k) return 0;
        if (t[i + L] != EOS) return 0;
        counts[d]++;
        i += L + 1;
    }
    *consumed = i;
    return 1;
}

int main(void) {
    const char *prefix = LCX_BINARY_DIR "/sampler_data";
    lcx_tokdata_writer w;
    CHECK_OK(lcx_tokdata_writer_open(&w, prefix, LCX_TOKDATA_I32));
    uint32_t buf[200];
    for (uint32_t d = 0; d < N_DOCS; d++) {
        for (uint32_t k = 0; k < len_of(d); k++) buf[k] = d * 1000 + k;
        CHECK_OK(lcx_tokdata_writer_add(&w, buf, len_of(d)));
    }
    CHECK_OK(lcx_tokdata_writer_commit(&w));
    lcx_tokdata td;
    CHECK_OK(lcx_tokdata_open(prefix, &td));

    const uint64_t L = 64, MIN = 10, LONG = 100;
    const uint32_t REP = 3;
    lcx_sampler_config cfg = {L, 42, MIN, LONG, REP, EOS};
    lcx_sampler *s = NULL, *s2 = NULL, *s3 = NULL;
    CHECK_OK(lcx_sampler_init(&td, &cfg, &s));
    if (!s) return test_summary("test_sampler");

    /* expected list per epoch, counted by hand from len_of */
    uint64_t entries = 0, tokens = 0;
    for (uint32_t d = 0; d < N_DOCS; d++) {
        uint32_t l = len_of(d);
        if (l == 0 || l < MIN) continue;
        uint32_t r = l >= LONG ? REP : 1;
        entries += r;
        tokens += (uint64_t)r * (l + 1);
    }
    CHECK(lcx_sampler_epoch_entries(s) == entries);
    CHECK(lcx_sampler_epoch_tokens(s) == tokens);

    /* draw 3 epochs' worth of samples; rebuild the stream from the non-overlapping parts */
    size_t n_samples = (size_t)(3 * tokens / L);
    uint32_t *stream = malloc((n_samples * L + 1) * sizeof *stream);
    uint32_t *smp = malloc((L + 1) * sizeof *smp), *prev_last = NULL;
    uint32_t last_tok = 0;
    int overlap_ok = 1;
    lcx_sampler_cursor saved = {0};
    uint32_t *after = malloc(5 * (L + 1) * sizeof *after);
    int32_t doc[64];
    int64_t doc_bad = 0, doc_starts = 0;
    for (size_t i = 0; i < n_samples; i++) {
        if (i == n_samples / 2 + 7) saved = lcx_sampler_tell(s);
        CHECK_OK(lcx_sampler_next(s, smp, doc));
        /* document starts: where a token d*1000+0 is (EOS ends the document before it), else 0 */
        for (uint64_t t = 0, start = 0; t < L; t++) {
            if (smp[t] != EOS && smp[t] % 1000 == 0) start = t, doc_starts += t > 0;
            doc_bad += doc[t] != (int32_t)start;
        }
        if (i >= n_samples / 2 + 7 && i < n_samples / 2 + 12) memcpy(after + (i - n_samples / 2 - 7) * (L + 1), smp, (L + 1) * sizeof *smp);
        if (prev_last && smp[0] != last_tok) overlap_ok = 0;
        memcpy(stream + i * L, smp, L * sizeof *smp);
        last_tok = smp[L];
        prev_last = &last_tok;
    }
    CHECK_MSG(overlap_ok, "sample k's last token is not sample k+1's first");
    CHECK_MSG(doc_bad == 0 && doc_starts > (int64_t)n_samples / 2, "document starts: %lld wrong (%lld documents begin "
              "inside a sample)", (long long)doc_bad, (long long)doc_starts);
    CHECK(lcx_sampler_tell(s).samples == n_samples);
    CHECK(lcx_sampler_tell(s).epoch >= 2);

    /* epoch by epoch: each eligible document exactly r times, nothing else */
    size_t off = 0;
    for (int e = 0; e < 2; e++) {
        uint32_t counts[N_DOCS] = {0};
        size_t used = 0;
        /* exactly one epoch's tokens */
        CHECK(parse_stream(stream + off, (size_t)tokens, counts, &used));
        CHECK(used == tokens);
        int ok = 1;
        for (uint32_t d = 0; d < N_DOCS; d++) {
            uint32_t l = len_of(d), want = (l == 0 || l < MIN) ? 0 : l >= LONG ? REP : 1;
            ok &= counts[d] == want;
        }
        CHECK_MSG(ok, "epoch %d does not list every eligible document the right number of times", e);
        off += (size_t)tokens;
    }
    /* the two epochs are shuffled differently */
    CHECK(memcmp(stream, stream + tokens, (size_t)tokens * sizeof *stream) != 0);

    /* same seed: same samples; other seed: other samples */
    CHECK_OK(lcx_sampler_init(&td, &cfg, &s2));
    int same = 1;
    for (size_t i = 0; s2 && i < 50; i++) {
        CHECK_OK(lcx_sampler_next(s2, smp, NULL));
        same &= memcmp(smp, stream + i * L, L * sizeof *smp) == 0;
    }
    CHECK(same);
    lcx_sampler_config other = cfg;
    other.seed = 43;
    CHECK_OK(lcx_sampler_init(&td, &other, &s3));
    int differs = 0;
    for (size_t i = 0; s3 && i < 50; i++) {
        CHECK_OK(lcx_sampler_next(s3, smp, NULL));
        differs |= memcmp(smp, stream + i * L, L * sizeof *smp) != 0;
    }
    CHECK(differs);
    lcx_sampler_free(s3);

    /* resume: a fresh sampler seeked to the saved cursor continues identically */
    lcx_sampler_free(s2);
    CHECK_OK(lcx_sampler_init(&td, &cfg, &s2));
    CHECK_OK(lcx_sampler_seek(s2, &saved));
    int resumed = 1;
    for (size_t i = 0; s2 && i < 5; i++) {
        CHECK_OK(lcx_sampler_next(s2, smp, NULL));
        resumed &= memcmp(smp, after + i * (L + 1), (L + 1) * sizeof *smp) == 0;
    }
    CHECK_MSG(resumed, "samples after seek differ from the original run");
    CHECK(lcx_sampler_tell(s2).samples == saved.samples + 5);

    /* bad cursors and configs */
    lcx_sampler_cursor bad = saved;
    bad.pos = entries;
    CHECK_FAILS(lcx_sampler_seek(s2, &bad), LCX_ERR_INVALID, "past the");
    bad = saved;
    bad.offset = 1000;
    CHECK_FAILS(lcx_sampler_seek(s2, &bad), LCX_ERR_INVALID, "offset 1000 past document");
    lcx_sampler_config none = cfg;
    none.min_doc_tokens = 100000;
    lcx_sampler *s4 = NULL;
    CHECK_FAILS(lcx_sampler_init(&td, &none, &s4), LCX_ERR_INVALID, "no document has at least 100000 tokens");
    none = cfg;
    none.seq_len = 0;
    CHECK_FAILS(lcx_sampler_init(&td, &none, &s4), LCX_ERR_INVALID, "sequence length");

    /* only long documents (long-context stage): min = LONG */
    lcx_sampler_config longonly = {L, 7, LONG, 0, 1, EOS};
    CHECK_OK(lcx_sampler_init(&td, &longonly, &s4));
    if (s4) {
        uint64_t n_long = 0;
        for (uint32_t d = 0; d < N_DOCS; d++) n_long += len_of(d) >= LONG;
        CHECK(lcx_sampler_epoch_entries(s4) == n_long);
        int all_long = 1;
        for (uint64_t p = 0; p < n_long; p++) all_long &= len_of((uint32_t)lcx_sampler_doc_at(s4, 0, p)) >= LONG;
        CHECK(all_long);
    }
    lcx_sampler_free(s4);

    free(stream);
    free(smp);
    free(after);
    lcx_sampler_free(s);
    lcx_sampler_free(s2);
    lcx_tokdata_close(&td);
    return test_summary("test_sampler");
}
