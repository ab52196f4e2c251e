/* eval: sliding-window perplexity against a literal re-implementation of the Hugging Face guide's label
 * arithmetic and hand-derived contexts; passkey prompt fitting and scoring with fake tokenizers/models; JSON
 * round trip; SVG well-formedness. Pictures are left in the build dir (eval_ppl.svg, eval_passkey.svg). */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/eval/eval.h"
#include "test_util.h"

/* ==== perplexity ========================================================================================== */

/* Document d's token at position p is 1000 + d * 100000 + p, so the fake model can tell where it is. */
#define TOK(d, p) (1000 + (d) * 100000 + (p))
#define BOS 1
#define MAXDOC 8
#define MAXLEN 128

/* NLL as a function of the target token and of how many tokens of context the model saw (its position). */
static double f_nll(int32_t tok, int64_t ctx) { return 1.0 + 0.01 * (double)(tok % 97) + 0.1 * log1p((double)ctx); }

typedef struct fake_lm {
    int32_t bos;              /* -1: windows must not start with BOS */
    int seen[MAXDOC][MAXLEN]; /* how often each document token was scored */
    int64_t ctx[MAXDOC][MAXLEN];
    int bad;                  /* a window that is not BOS + a contiguous slice of one document */
    int64_t calls;
} fake_lm;

static lcx_status fake_score(void *model, const int32_t *t, int64_t n, int64_t first, double *nll) {
    fake_lm *m = model;
    m->calls++;
    int64_t off = m->bos >= 0;
    if (first < 1 || first >= n || (m->bos >= 0 && t[0] != m->bos)) m->bad++;
    int d = (t[off] - 1000) / 100000, p0 = (t[off] - 1000) % 100000;
    for (int64_t i = off; i < n; i++)
        if (t[i] != TOK(d, p0 + (i - off))) m->bad++;
    for (int64_t i = first; i < n; i++) {
        int p = (t[i] - 1000) % 100000;
        m->seen[d][p]++;
        m->ctx[d][p] = i;
        nll[i - first] = f_nll(t[i], i);
    }
    return LCX_OK;
}

/* Reference: the guide's loop written out with its label tensor (-100 = ignored) and the one-position shift
 * of the loss, per document; the effective stride is given. */
typedef struct ref_out {
    double nll_sum, window_mean_sum;
    int64_t tokens, windows, docs, skipped;
} ref_out;

static void ref_doc(const int32_t *doc, int64_t n, int64_t lw, int64_t stride, int32_t bos, int truncate,
                    ref_out *r) {
    int64_t max_tok = bos >= 0 ? lw - 1 : lw;
    if (truncate && n > max_tok) n = max_tok;
    int64_t prev_end = 0;
    for (int64_t begin = 0; begin < n; begin += stride) {
        int64_t end = begin + max_tok < n ? begin + max_tok : n;
        int64_t trg_len = end - prev_end;
        int32_t input[MAXLEN + 1];
        int32_t labels[MAXLEN + 1];
        int64_t len = 0;
        if (bos >= 0) input[len++] = bos;
        for (int64_t i = begin; i < end; i++) input[len++] = doc[i];
        for (int64_t j = 0; j < len; j++) labels[j] = j < len - trg_len ? -100 : input[j];
        double s = 0.0;
        int64_t cnt = 0;
        for (int64_t j = 1; j < len; j++) /* logits at j-1 predict labels[j] */
            if (labels[j] != -100) {
                s += f_nll(labels[j], j);
                cnt++;
            }
        if (cnt) {
            r->nll_sum += s;
            r->tokens += cnt;
            r->windows++;
            r->window_mean_sum += s / (double)cnt;
        }
        prev_end = end;
        if (end == n) break;
    }
}

static void check_against_reference(int64_t const *doc_lens, int n_docs, const int64_t *lengths, int n_lengths,
                                    int64_t stride, int32_t bos, int short_policy, int truncate, int one_pass) {
    static int32_t store[MAXDOC][MAXLEN];
    lcx_ppl_doc docs[MAXDOC];
    for (int d = 0; d < n_docs; d++) {
        for (int64_t p = 0; p < doc_lens[d]; p++) store[d][p] = TOK(d, p);
        docs[d] = (lcx_ppl_doc){store[d], doc_lens[d]};
    }
    lcx_ppl_config cfg = {lengths, n_lengths, stride, bos, short_policy, truncate, one_pass, 0, 0};
    lcx_ppl_result res[8];
    static fake_lm m;
    memset(&m, 0, sizeof m);
    m.bos = bos;
    CHECK_OK(lcx_ppl_eval(&cfg, docs, n_docs, fake_score, &m, res));
    CHECK(m.bad == 0);
    /* one pass: at most one forward pass per document, whatever the number of lengths */
    if (truncate && one_pass) CHECK_MSG(m.calls <= n_docs, "one pass: %lld calls for %d documents", (long long)m.calls, n_docs);
    for (int li = 0; li < n_lengths; li++) {
        int64_t max_tok = bos >= 0 ? lengths[li] - 1 : lengths[li];
        int64_t s_eff = stride == 0 || stride > max_tok ? max_tok : stride;
        ref_out r = {0};
        for (int d = 0; d < n_docs; d++) {
            int unscorable = doc_lens[d] < (bos >= 0 ? 1 : 2);
            if (unscorable || (doc_lens[d] < max_tok && short_policy == LCX_PPL_SHORT_SKIP)) {
                r.skipped++;
                continue;
            }
            r.docs++;
            ref_doc(store[d], doc_lens[d], lengths[li], s_eff, bos, truncate, &r);
        }
        CHECK_MSG(res[li].tokens == r.tokens, "Lw %lld S %lld bos %d: tokens %lld vs %lld", (long long)lengths[li],
                  (long long)stride, bos, (long long)res[li].tokens, (long long)r.tokens);
        CHECK(res[li].windows == r.windows);
        CHECK(res[li].docs == r.docs && res[li].docs_skipped == r.skipped);
        CHECK(res[li].stride == (truncate ? max_tok : s_eff));
        CHECK_REL(res[li].nll_sum, r.nll_sum, 1e-12);
        if (r.tokens) {
            CHECK_REL(res[li].ppl, exp(r.nll_sum / (double)r.tokens), 1e-12);
            CHECK_REL(res[li].ppl_window_mean, exp(r.window_mean_sum / (double)r.windows), 1e-12);
        } else {
            CHECK(isnan(res[li].ppl));
        }
    }
    /* No document token scored twice in any single-length run. */
    if (n_lengths == 1) {
        int twice = 0;
        for (int d = 0; d < n_docs; d++)
            for (int64_t p = 0; p < doc_lens[d]; p++) twice += m.seen[d][p] > 1;
        CHECK(twice == 0);
    }
}

/* Hand-derived (docs/evaluation-protocol.md worked example): contexts each token is scored with. */
static void check_worked_example(void) {
    int32_t doc[11];
    for (int p = 0; p < 11; p++) doc[p] = TOK(0, p);
    lcx_ppl_result r;
    static fake_lm m;
    {   /* Lw = 5 with BOS (4 document tokens per window), S = 2, n = 11 */
        memset(&m, 0, sizeof m);
        m.bos = BOS;
        lcx_ppl_doc d = {doc, 11};
        int64_t lw = 5;
        lcx_ppl_config cfg = {&lw, 1, 2, BOS, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0};
        CHECK_OK(lcx_ppl_eval(&cfg, &d, 1, fake_score, &m, &r));
        const int64_t want[11] = {1, 2, 3, 4, 3, 4, 3, 4, 3, 4, 3};
        double sum = 0.0;
        for (int p = 0; p < 11; p++) {
            CHECK_MSG(m.seen[0][p] == 1 && m.ctx[0][p] == want[p], "token %d: seen %d ctx %lld want %lld", p,
                      m.seen[0][p], (long long)m.ctx[0][p], (long long)want[p]);
            sum += f_nll(doc[p], want[p]);
        }
        CHECK(r.windows == 5 && r.tokens == 11 && m.calls == 5);
        CHECK_REL(r.ppl, exp(sum / 11.0), 1e-12);
        /* per-window means: windows score {0..3}, {4,5}, {6,7}, {8,9}, {10} */
        double wm = 0.0;
        const int groups[6] = {0, 4, 6, 8, 10, 11};
        for (int g = 0; g < 5; g++) {
            double s = 0.0;
            for (int p = groups[g]; p < groups[g + 1]; p++) s += f_nll(doc[p], want[p]);
            wm += s / (groups[g + 1] - groups[g]);
        }
        CHECK_REL(r.ppl_window_mean, exp(wm / 5.0), 1e-12);
    }
    {   /* Lw = 4 without BOS, S = 2, n = 10: token 0 is never scored */
        memset(&m, 0, sizeof m);
        m.bos = -1;
        lcx_ppl_doc d = {doc, 10};
        int64_t lw = 4;
        lcx_ppl_config cfg = {&lw, 1, 2, -1, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0};
        CHECK_OK(lcx_ppl_eval(&cfg, &d, 1, fake_score, &m, &r));
        const int64_t want[10] = {-1, 1, 2, 3, 2, 3, 2, 3, 2, 3};
        for (int p = 0; p < 10; p++)
            CHECK_MSG(want[p] < 0 ? m.seen[0][p] == 0 : (m.seen[0][p] == 1 && m.ctx[0][p] == want[p]),
                      "no BOS, token %d: seen %d ctx %lld", p, m.seen[0][p], (long long)m.ctx[0][p]);
        CHECK(r.tokens == 9 && r.windows == 4);
    }
    {   /* non-overlapping, no BOS, Lw = S = 4, n = 10: first token of each window unscored (as in the guide) */
        memset(&m, 0, sizeof m);
        m.bos = -1;
        lcx_ppl_doc d = {doc, 10};
        int64_t lw = 4;
        lcx_ppl_config cfg = {&lw, 1, 4, -1, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0};
        CHECK_OK(lcx_ppl_eval(&cfg, &d, 1, fake_score, &m, &r));
        const int64_t want[10] = {-1, 1, 2, 3, -1, 1, 2, 3, -1, 1};
        for (int p = 0; p < 10; p++)
            CHECK_MSG(want[p] < 0 ? m.seen[0][p] == 0 : (m.seen[0][p] == 1 && m.ctx[0][p] == want[p]),
                      "no BOS S=Lw, token %d: seen %d ctx %lld", p, m.seen[0][p], (long long)m.ctx[0][p]);
        CHECK(r.tokens == 7 && r.windows == 3);
    }
    {   /* non-overlapping with BOS, Lw = 5, --stride = Lw (clamped to 4 document tokens): every token once */
        memset(&m, 0, sizeof m);
        m.bos = BOS;
        lcx_ppl_doc d = {doc, 10};
        int64_t lw = 5;
        lcx_ppl_config cfg = {&lw, 1, 5, BOS, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0};
        CHECK_OK(lcx_ppl_eval(&cfg, &d, 1, fake_score, &m, &r));
        const int64_t want[10] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2};
        for (int p = 0; p < 10; p++)
            CHECK_MSG(m.seen[0][p] == 1 && m.ctx[0][p] == want[p], "BOS S=Lw, token %d: seen %d ctx %lld", p,
                      m.seen[0][p], (long long)m.ctx[0][p]);
        CHECK(r.tokens == 10 && r.windows == 3 && r.stride == 4);
    }
}

static lcx_status failing_score(void *model, const int32_t *t, int64_t n, int64_t first, double *nll) {
    (void)model, (void)t, (void)n, (void)first, (void)nll;
    return lcx_fail(LCX_ERR_CUDA, "out of device memory");
}

/* Fixture model of gen_eval.py: logits[j, v] = 2 sin(0.37 v + 0.11 j + 0.023 x_j); NLL of tokens[i] is read
 * from row i - 1. */
static lcx_status closed_form_score(void *model, const int32_t *t, int64_t n, int64_t first, double *nll) {
    const int vocab = *(const int *)model;
    for (int64_t i = first; i < n; i++) {
        double j = (double)(i - 1), x = (double)t[i - 1], mx = -INFINITY, row[256];
        for (int v = 0; v < vocab; v++) {
            row[v] = 2.0 * sin(0.37 * v + 0.11 * j + 0.023 * x);
            mx = fmax(mx, row[v]);
        }
        double se = 0.0;
        for (int v = 0; v < vocab; v++) se += exp(row[v] - mx);
        nll[i - first] = mx + log(se) - row[t[i]];
    }
    return LCX_OK;
}

/* Window losses of the HF guide's and YaRN's own loops (tests/fixtures/eval/ppl_windows.json). */
static void test_ppl_fixture(void) {
    json_error_t err;
    json_t *root = json_load_file(LCX_SOURCE_DIR "/tests/fixtures/eval/ppl_windows.json", 0, &err);
    CHECK_MSG(root != NULL, "ppl_windows.json: line %d: %s", err.line, err.text);
    if (!root) return;
    int vocab = (int)json_integer_value(json_object_get(root, "vocab"));
    CHECK(vocab > 0 && vocab <= 256);
    json_t *jd = json_object_get(root, "docs");
    enum { ND = 8, NT = 256 };
    static int32_t store[ND][NT];
    lcx_ppl_doc docs[ND];
    size_t nd = json_array_size(jd);
    CHECK(nd > 0 && nd <= ND);
    for (size_t d = 0; d < nd && d < ND; d++) {
        json_t *a = json_array_get(jd, d);
        size_t n = json_array_size(a);
        CHECK(n <= NT);
        for (size_t p = 0; p < n && p < NT; p++) store[d][p] = (int32_t)json_integer_value(json_array_get(a, p));
        docs[d] = (lcx_ppl_doc){store[d], (int64_t)(n < NT ? n : NT)};
    }
    size_t i;
    json_t *c;
    int cases = 0;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        int64_t lw = json_integer_value(json_object_get(c, "max_length"));
        lcx_ppl_config cfg = {&lw, 1, json_integer_value(json_object_get(c, "stride")),
                              (int32_t)json_integer_value(json_object_get(c, "bos_id")), LCX_PPL_SHORT_SCORE,
                              (int)json_integer_value(json_object_get(c, "truncate")), 0, 0, 0};
        lcx_ppl_result r;
        CHECK_OK(lcx_ppl_eval(&cfg, docs, (int64_t)nd, closed_form_score, &vocab, &r));
        json_t *losses = json_object_get(c, "window_losses");
        CHECK_MSG(r.windows == (int64_t)json_array_size(losses) &&
                      r.tokens == json_integer_value(json_object_get(c, "tokens")),
                  "case %zu (%s Lw %lld): %lld windows %lld tokens", i,
                  json_string_value(json_object_get(c, "protocol")), (long long)lw, (long long)r.windows,
                  (long long)r.tokens);
        CHECK_REL(r.nll_sum, json_real_value(json_object_get(c, "nll_sum")), 1e-12);
        CHECK_REL(r.ppl_window_mean, json_real_value(json_object_get(c, "ppl_window_mean")), 1e-12);
        cases++;
    }
    CHECK(cases >= 8);
    json_decref(root);
}

static void test_default_lengths(void) {
    int64_t out[16];
    int n = 0;
    CHECK_OK(lcx_eval_default_lengths(4096, 131072, out, 16, &n));
    CHECK(n == 6 && out[0] == 4096 && out[1] == 8192 && out[5] == 131072);
    CHECK_OK(lcx_eval_default_lengths(3000, 20000, out, 16, &n));
    CHECK(n == 5 && out[0] == 3000 && out[1] == 4096 && out[3] == 16384 && out[4] == 20000);
    CHECK_OK(lcx_eval_default_lengths(256, 256, out, 16, &n));
    CHECK(n == 1 && out[0] == 256);
    CHECK_FAILS(lcx_eval_default_lengths(4096, 131072, out, 5, &n), LCX_ERR_INVALID, "room for 5");
    CHECK_FAILS(lcx_eval_default_lengths(4096, 2048, out, 16, &n), LCX_ERR_INVALID, "target");
}

static void test_ppl(void) {
    check_worked_example();
    test_default_lengths();
    test_ppl_fixture();
    const int64_t lens_a[] = {5, 10, 31, 64, 2, 1, 0, 100};
    const int64_t lengths[] = {2, 3, 5, 8, 16, 33, 64};
    const int64_t strides[] = {0, 1, 2, 3, 7, 16, 64};
    for (int bos = 0; bos < 2; bos++)
        for (int si = 0; si < 7; si++)
            for (int sp = 0; sp < 2; sp++) {
                check_against_reference(lens_a, 8, lengths, 7, strides[si], bos ? BOS : -1, sp, 0, 0);
                for (int li = 0; li < 7; li++) /* single length: also checks nothing is scored twice */
                    check_against_reference(lens_a, 8, &lengths[li], 1, strides[si], bos ? BOS : -1, sp, 0, 0);
            }
    /* truncate, separately per length and from one pass per document (the same numbers: the fake model's NLL
     * depends only on the token and its position, as a causal model's does), both short-document policies */
    for (int bos = 0; bos < 2; bos++)
        for (int sp = 0; sp < 2; sp++)
            for (int op = 0; op < 2; op++) check_against_reference(lens_a, 8, lengths, 7, 2, bos ? BOS : -1, sp, 1, op);

    /* Short documents: skipped by default (counted), scored as one shorter window on request. */
    {
        int32_t doc[6];
        for (int p = 0; p < 6; p++) doc[p] = TOK(0, p);
        lcx_ppl_doc d = {doc, 6};
        int64_t lw = 8;
        lcx_ppl_result r;
        fake_lm *m = calloc(1, sizeof *m);
        m->bos = BOS;
        lcx_ppl_config cfg = {&lw, 1, 2, BOS, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0};
        CHECK_OK(lcx_ppl_eval(&cfg, &d, 1, fake_score, m, &r));
        CHECK(r.docs == 0 && r.docs_skipped == 1 && r.tokens == 0 && isnan(r.ppl) && m->calls == 0);
        cfg.short_docs = LCX_PPL_SHORT_SCORE;
        CHECK_OK(lcx_ppl_eval(&cfg, &d, 1, fake_score, m, &r));
        CHECK(r.docs == 1 && r.tokens == 6 && r.windows == 1 && m->calls == 1);
        free(m);
    }
    /* Errors */
    {
        int32_t doc[4] = {TOK(0, 0), TOK(0, 1), TOK(0, 2), TOK(0, 3)};
        lcx_ppl_doc d = {doc, 4};
        int64_t bad = 1, lw = 3;
        lcx_ppl_result r;
        lcx_ppl_config cfg = {&bad, 1, 1, -1, 0, 0, 0, 0, 0};
        CHECK_FAILS(lcx_ppl_eval(&cfg, &d, 1, fake_score, NULL, &r), LCX_ERR_INVALID, "window length 1");
        cfg.lengths = &lw;
        cfg.stride = -1;
        CHECK_FAILS(lcx_ppl_eval(&cfg, &d, 1, fake_score, NULL, &r), LCX_ERR_INVALID, "stride");
        cfg.stride = 1;
        CHECK_FAILS(lcx_ppl_eval(&cfg, &d, 1, failing_score, NULL, &r), LCX_ERR_CUDA,
                    "ppl length 3, document 0, window at token 0: out of device memory");
    }
}

/* ==== passkey ============================================================================================= */

/* Fake tokenizer: each digit is a token (10 + digit), "\n" is token 3, every other run of non-space,
 * non-digit characters is one token (a hash >= 100) -- or two when split_long and the run is over 5 bytes. */
typedef struct fake_tok {
    int split_long;
    int64_t calls;
} fake_tok;

static int32_t word_id(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return 100 + (int32_t)(h % 30000u);
}

static lcx_status fake_encode(void *ctx, const char *text, size_t len, int32_t *ids, int64_t cap, int64_t *n_out) {
    fake_tok *t = ctx;
    t->calls++;
    int64_t n = 0;
#define EMIT(v)                                                                                                 \
    do {                                                                                                        \
        if (n < cap) ids[n] = (v);                                                                              \
        n++;                                                                                                    \
    } while (0)
    size_t i = 0;
    while (i < len) {
        char c = text[i];
        if (c == ' ') {
            i++;
        } else if (c == '\n') {
            EMIT(3);
            i++;
        } else if (c >= '0' && c <= '9') {
            EMIT(10 + (c - '0'));
            i++;
        } else {
            size_t j = i;
            while (j < len && text[j] != ' ' && text[j] != '\n' && !(text[j] >= '0' && text[j] <= '9')) j++;
            if (t->split_long && j - i > 5) {
                EMIT(word_id(text + i, 3));
                EMIT(word_id(text + i + 3, j - i - 3));
            } else {
                EMIT(word_id(text + i, j - i));
            }
            i = j;
        }
    }
#undef EMIT
    *n_out = n;
    return LCX_OK;
}

static int64_t ntok(fake_tok *t, const char *s) {
    int64_t n = 0;
    fake_encode(t, s, strlen(s), NULL, 0, &n);
    return n;
}

static void test_prompt(void) {
    for (int split = 0; split < 2; split++) {
        fake_tok ft = {split, 0};
        lcx_eval_tokenizer tok = {fake_encode, &ft, BOS};
        const int64_t unit = ntok(&ft, LCX_PASSKEY_FILLER);
        const int64_t max_word = split ? 2 : 1;
        const int64_t fixed_before = 1 + ntok(&ft, LCX_PASSKEY_TASK) + 1; /* BOS, task, "\n" */
        const int64_t targets[] = {70, 100, 257, 1000, 4096};
        const double depths[] = {0.0, 0.1, 0.25, 0.5, 0.9, 1.0};
        for (int ti = 0; ti < 5; ti++)
            for (int di = 0; di < 6; di++) {
                lcx_passkey_prompt p;
                lcx_status st = lcx_passkey_prompt_build(&tok, targets[ti], depths[di], 68392, &p);
                CHECK_MSG(st == LCX_OK, "%s", lcx_last_error());
                if (st != LCX_OK) continue;
                CHECK_MSG(p.n <= targets[ti] && targets[ti] - p.n < max_word, "target %lld: got %lld tokens",
                          (long long)targets[ti], (long long)p.n);
                /* the literature's sentences, verbatim, in order */
                const char *key_line = "The pass key is 68392. Remember it. 68392 is the pass key.";
                CHECK(strncmp(p.text, LCX_PASSKEY_TASK, strlen(LCX_PASSKEY_TASK)) == 0);
                CHECK(p.text[strlen(LCX_PASSKEY_TASK)] == '\n');
                const char *k = strstr(p.text, key_line);
                CHECK(k && k[-1] == '\n' && k[strlen(key_line)] == '\n');
                size_t ql = strlen(LCX_PASSKEY_QUESTION);
                CHECK(p.text_len > ql && strcmp(p.text + p.text_len - ql, LCX_PASSKEY_QUESTION) == 0 &&
                      p.text[p.text_len - ql - 1] == '\n');
                CHECK(strstr(p.text, LCX_PASSKEY_FILLER) || p.units_before + p.units_after == 0);
                CHECK(p.tokens[0] == BOS);
                /* The key line's tokens start at key_pos. */
                int32_t kl[32];
                int64_t nk = 0;
                fake_encode(&ft, key_line, strlen(key_line), kl, 32, &nk);
                CHECK(p.key_pos + nk <= p.n && memcmp(p.tokens + p.key_pos, kl, (size_t)nk * sizeof(int32_t)) == 0);
                /* Depth in tokens: filler before the key vs depth x all filler, within one filler unit. */
                int64_t fixed = fixed_before + nk + 1 + 1 + ntok(&ft, LCX_PASSKEY_QUESTION) + 1;
                int64_t filler = p.n - fixed;
                int64_t before = p.key_pos - fixed_before;
                CHECK_MSG(fabs((double)before - depths[di] * (double)filler) <= (double)unit,
                          "target %lld depth %g: %lld filler tokens before the key of %lld", (long long)targets[ti],
                          depths[di], (long long)before, (long long)filler);
                /* Prompt fills up: one more word would not fit, one more unit certainly not. */
                CHECK(p.extra_words < 19);
                CHECK(targets[ti] < 100 || p.units_before + p.units_after >= 1);
                /* answer tokens: the five digits */
                int32_t *ans = NULL;
                int64_t na = 0;
                CHECK_OK(lcx_passkey_answer_tokens(&tok, &p, 68392, &ans, &na));
                CHECK(na == 5 && ans && ans[0] == 16 && ans[1] == 18 && ans[4] == 12);
                free(ans);
                lcx_passkey_prompt_free(&p);
            }
        lcx_passkey_prompt p;
        CHECK_FAILS(lcx_passkey_prompt_build(&tok, 20, 0.5, 12345, &p), LCX_ERR_INVALID, "shorter than the prompt");
        CHECK_FAILS(lcx_passkey_prompt_build(&tok, 200, 1.5, 12345, &p), LCX_ERR_INVALID, "depth");
        lcx_passkey_prompt_free(NULL);
    }
    /* keys: 5 digits, deterministic, distinct within a trial, different across trials and seeds */
    uint32_t a[50], b[50], c[50];
    lcx_passkey_keys(7, 3, 50, a);
    lcx_passkey_keys(7, 3, 50, b);
    lcx_passkey_keys(8, 3, 50, c);
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(a, c, sizeof a) != 0);
    int ok = 1;
    for (int i = 0; i < 50; i++) {
        ok &= a[i] >= 10000 && a[i] <= 99999;
        for (int j = 0; j < i; j++) ok &= a[i] != a[j];
    }
    CHECK(ok);
    uint32_t first[4];
    lcx_passkey_keys(7, 3, 4, first);
    CHECK(memcmp(first, a, sizeof first) == 0);
}

/* Fake models over the fake tokenizer. "Knows": reads the digits after the first "pass key is" in its context
 * and predicts them after the last one. "Guesses": NLL and argmax are hashes of (token, position). */
typedef struct fake_pk {
    int64_t knows_up_to; /* knows the key when the sequence is at most this long */
    int64_t calls;
} fake_pk;

static int is_pass_key_is(const int32_t *t, int64_t i) { /* t[i-3..i) == "pass key is" */
    return i >= 3 && t[i - 3] == word_id("pass", 4) && t[i - 2] == word_id("key", 3) && t[i - 1] == word_id("is", 2);
}

static int32_t predict(const fake_pk *m, const int32_t *t, int64_t n, int64_t i) {
    uint64_t h = (uint64_t)t[i] * 0x9E3779B97F4A7C15ULL ^ (uint64_t)i * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29;
    int32_t guess = 100 + (int32_t)(h % 30000u);
    if (n > m->knows_up_to) return guess;
    int64_t first = -1, last = -1;
    for (int64_t j = 3; j <= i; j++)
        if (is_pass_key_is(t, j)) {
            if (first < 0) first = j;
            last = j;
        }
    if (first < 0 || last == first || i - last >= 5) return guess;
    return t[first + (i - last)];
}

static lcx_status pk_score(void *model, const int32_t *t, int64_t n, int64_t first, double *nll) {
    fake_pk *m = model;
    m->calls++;
    for (int64_t i = first; i < n; i++) {
        if (n <= m->knows_up_to) {
            nll[i - first] = predict(m, t, n, i) == t[i] ? 0.05 : 6.0;
        } else {
            uint64_t h = (uint64_t)t[i] * 0x9E3779B97F4A7C15ULL + (uint64_t)(i + 7 * (t[i - 1] + 1));
            h ^= h >> 31;
            h *= 0xBF58476D1CE4E5B9ULL;
            h ^= h >> 29;
            nll[i - first] = 5.0 * (double)(h % 1000003u) / 1000003.0;
        }
    }
    return LCX_OK;
}

static lcx_status pk_argmax(void *model, const int32_t *t, int64_t n, int64_t first, int32_t *next) {
    fake_pk *m = model;
    for (int64_t i = first; i < n; i++) next[i - first] = predict(m, t, n, i);
    return LCX_OK;
}

static void test_passkey_scoring(void) {
    fake_tok ft = {0, 0};
    lcx_eval_tokenizer tok = {fake_encode, &ft, BOS};
    const int64_t lengths[] = {96, 200};
    const double depths[] = {0.0, 0.5, 1.0};
    lcx_passkey_config cfg = {lengths, 2, depths, 3, 40, 3, LCX_PASSKEY_LOGLIK | LCX_PASSKEY_GREEDY, 42, 1, NULL, 0,
                              0, 0};
    lcx_passkey_result r;
    /* knows the key only in the short prompts: row 0 all 100%, row 1 ~ 1/(K+1) by log-likelihood, 0 greedy */
    fake_pk m = {120, 0};
    CHECK_OK(lcx_passkey_eval(&cfg, &tok, pk_score, pk_argmax, &m, &r));
    CHECK(m.calls >= 3 * 40 * 4 + 3 * 40 && m.calls < 2 * 3 * 40 * 4); /* a miss stops the distractors */
    int pooled = 0;
    for (int d = 0; d < 3; d++) {
        CHECK(lcx_passkey_accuracy(&r, LCX_PASSKEY_LOGLIK, 0, d) == 1.0);
        CHECK(lcx_passkey_accuracy(&r, LCX_PASSKEY_GREEDY, 0, d) == 1.0);
        CHECK(lcx_passkey_accuracy(&r, LCX_PASSKEY_GREEDY, 1, d) == 0.0);
        pooled += r.loglik_correct[1 * 3 + d];
        CHECK(r.prompt_tokens[d] <= 96 && r.prompt_tokens[d] >= 95);
        CHECK(r.prompt_tokens[3 + d] <= 200 && r.prompt_tokens[3 + d] >= 199);
    }
    /* 120 trials at p = 1/4: mean 30, sd 4.7 */
    CHECK_MSG(pooled >= 14 && pooled <= 46, "guessing model: %d of 120 correct", pooled);
    CHECK(isnan(lcx_passkey_accuracy(&r, LCX_PASSKEY_LOGLIK, 2, 0)));

    /* JSON */
    json_t *j = lcx_passkey_to_json(&r);
    CHECK(j && json_array_size(json_object_get(j, "cells")) == 6);
    json_t *c0 = json_array_get(json_object_get(j, "cells"), 0);
    CHECK(json_real_value(json_object_get(c0, "loglik_accuracy")) == 1.0 &&
          json_integer_value(json_object_get(c0, "greedy_correct")) == 40);
    json_decref(j);

    /* SVG heat map: one cell rect per (length, depth) */
    char *svg = NULL;
    CHECK_OK(lcx_svg_passkey_heatmap(&r, LCX_PASSKEY_LOGLIK, "passkey <test> & co", &svg));
    if (svg) {
        int cells = 0;
        for (const char *p = svg; (p = strstr(p, "class=\"cell\"")); p++) cells++;
        CHECK(cells == 6);
        CHECK(strstr(svg, "passkey &lt;test&gt; &amp; co") != NULL);
        CHECK(strstr(svg, ">100%<") != NULL);
        free(svg);
    }
    lcx_passkey_result_free(&r);
    lcx_passkey_result_free(NULL);

    cfg.modes = LCX_PASSKEY_GREEDY;
    CHECK_FAILS(lcx_passkey_eval(&cfg, &tok, pk_score, NULL, &m, &r), LCX_ERR_INVALID, "argmax");
    cfg.modes = LCX_PASSKEY_LOGLIK;
    cfg.distractors = 0;
    CHECK_FAILS(lcx_passkey_eval(&cfg, &tok, pk_score, NULL, &m, &r), LCX_ERR_INVALID, "distractors");
}

/* ==== multi-key prompts (--needles) ======================================================================= */

/* Occurrences of the filler unit in text[0, end). */
static int64_t units_in(const char *text, size_t end) {
    int64_t n = 0;
    size_t ul = strlen(LCX_PASSKEY_FILLER);
    for (const char *q = text; (q = strstr(q, LCX_PASSKEY_FILLER)) && (size_t)(q - text) + ul <= end; q += ul) n++;
    return n;
}

/* A line of filler: units joined by single spaces, the last one possibly cut after a word. */
static int is_filler(const char *l, size_t n) {
    const size_t ul = strlen(LCX_PASSKEY_FILLER);
    for (size_t i = 0; i < n; i++) {
        size_t k = i % (ul + 1);
        if (l[i] != (k == ul ? ' ' : LCX_PASSKEY_FILLER[k])) return 0;
    }
    return n == 0 || l[n - 1] != ' ';
}

/* The prompt read back as its lines: the task first, the question last, every needle's line once after the
 * filler units its depth asks for, nothing but filler between, no empty line between two needles. */
static void check_needle_prompt(fake_tok *ft, const lcx_passkey_prompt *p, const lcx_passkey_prompt_spec *ps) {
    const int n = ps->n_needles;
    const int64_t units = units_in(p->text, p->text_len);
    char want[256];
    snprintf(want, sizeof want, "What is the pass key of the %s? The pass key of the %s is",
             lcx_needle_name(ps->names[0]), lcx_needle_name(ps->names[0]));
    size_t wl = strlen(want);
    CHECK(p->text_len > wl && strcmp(p->text + p->text_len - wl, want) == 0 && p->text[p->text_len - wl - 1] == '\n');
    CHECK(strncmp(p->text, LCX_PASSKEY_TASK, strlen(LCX_PASSKEY_TASK)) == 0);
    for (int i = 0; i < n; i++) {
        const char *name = lcx_needle_name(ps->names[i]);
        snprintf(want, sizeof want, "\nThe pass key of the %s is %u. Remember it. %u is the pass key of the %s.\n",
                 name, ps->keys[i], ps->keys[i], name);
        const char *at = strstr(p->text, want);
        CHECK_MSG(at && !strstr(at + 1, want), "needle %d (%s): %s", i, name, at ? "twice" : "missing");
        if (!at) continue;
        double depth = i == 0 ? ps->depth : (i - 0.5) / (n - 1);
        int64_t before = units_in(p->text, (size_t)(at - p->text));
        CHECK_MSG(before == (int64_t)llround(depth * (double)units), "needle %d at depth %g: %lld of %lld units before",
                  i, depth, (long long)before, (long long)units);
        if (i == 0) { /* the queried line's tokens start at key_pos */
            int32_t kl[64];
            int64_t nk = 0;
            fake_encode(ft, at + 1, strlen(want) - 2, kl, 64, &nk);
            CHECK(nk <= 64 && p->key_pos + nk <= p->n &&
                  memcmp(p->tokens + p->key_pos, kl, (size_t)nk * sizeof(int32_t)) == 0);
            CHECK(p->units_before == before && p->units_before + p->units_after == units && p->key == ps->keys[0]);
        }
    }
    /* every other line is filler (or empty: the first and the last filler stretch may be) */
    int lines = 0, empty_between = 0, prev_needle = 0;
    for (const char *l = p->text, *e; l < p->text + p->text_len; l = e + 1, lines++) {
        e = strchr(l, '\n');
        if (!e) e = p->text + p->text_len;
        const int needle = strncmp(l, "The pass key of the ", 20) == 0;
        if (e == l && prev_needle && e[1] && strncmp(e + 1, "The pass key of the ", 20) == 0) empty_between = 1;
        if (!needle && lines > 0 && e < p->text + p->text_len)
            CHECK_MSG(is_filler(l, (size_t)(e - l)), "line %d: %.40s", lines, l);
        prev_needle = needle;
    }
    CHECK(!empty_between);
}

static void test_needles_prompt(void) {
    for (int split = 0; split < 2; split++) {
        fake_tok ft = {split, 0};
        lcx_eval_tokenizer tok = {fake_encode, &ft, BOS};
        const int counts[] = {2, 3, 5, LCX_NEEDLE_NAMES};
        const int64_t targets[] = {700, 1500, 4096};
        const double depths[] = {0.0, 0.3, 0.5, 1.0};
        for (int ci = 0; ci < 4; ci++)
            for (int ti = 0; ti < 3; ti++)
                for (int di = 0; di < 4; di++) {
                    uint32_t keys[LCX_NEEDLE_NAMES];
                    int names[LCX_NEEDLE_NAMES];
                    lcx_passkey_keys(9, ti * 4 + di, counts[ci], keys);
                    lcx_needle_names(9, ti * 4 + di, counts[ci], names);
                    const lcx_passkey_prompt_spec ps = {depths[di], keys, names, counts[ci], NULL, 0};
                    lcx_passkey_prompt p;
                    lcx_status st = lcx_passkey_prompt_build_spec(&tok, targets[ti], &ps, &p);
                    if (counts[ci] == LCX_NEEDLE_NAMES && targets[ti] < 1500) { /* 32 lines do not fit 700 */
                        CHECK(st == LCX_ERR_INVALID && strstr(lcx_last_error(), "shorter than the prompt"));
                        continue;
                    }
                    CHECK_MSG(st == LCX_OK, "%s", lcx_last_error());
                    if (st != LCX_OK) continue;
                    /* within a word of the target, and a line break: one more unit may open a stretch of
                     * filler between two needles that had none */
                    CHECK_MSG(p.n <= targets[ti] && targets[ti] - p.n <= (split ? 2 : 1),
                              "target %lld: %lld tokens (%d needles, depth %g)", (long long)targets[ti],
                              (long long)p.n, counts[ci], depths[di]);
                    CHECK(p.n_needles == counts[ci] && p.tokens[0] == BOS);
                    check_needle_prompt(&ft, &p, &ps);
                    int32_t *ans = NULL;
                    int64_t na = 0;
                    CHECK_OK(lcx_passkey_answer_tokens(&tok, &p, keys[0], &ans, &na));
                    CHECK(na == 5 && ans[0] == 10 + (int32_t)(keys[0] / 10000));
                    free(ans);
                    lcx_passkey_prompt_free(&p);
                }
        /* one needle through the general builder is the classic prompt, byte for byte */
        uint32_t key = 68392;
        lcx_passkey_prompt a, b;
        const lcx_passkey_prompt_spec one = {0.25, &key, NULL, 1, NULL, 0};
        CHECK_OK(lcx_passkey_prompt_build(&tok, 1000, 0.25, key, &a));
        CHECK_OK(lcx_passkey_prompt_build_spec(&tok, 1000, &one, &b));
        CHECK(a.n == b.n && a.key_pos == b.key_pos && strcmp(a.text, b.text) == 0 &&
              memcmp(a.tokens, b.tokens, (size_t)a.n * sizeof(int32_t)) == 0);
        lcx_passkey_prompt_free(&a);
        lcx_passkey_prompt_free(&b);
        /* bad needles */
        uint32_t keys[3] = {11111, 22222, 33333};
        int names[3] = {4, 7, 4};
        lcx_passkey_prompt_spec bad = {0.5, keys, names, 3, NULL, 0};
        CHECK_FAILS(lcx_passkey_prompt_build_spec(&tok, 1000, &bad, &a), LCX_ERR_INVALID, "share a name");
        names[2] = 9, keys[2] = 11111;
        CHECK_FAILS(lcx_passkey_prompt_build_spec(&tok, 1000, &bad, &a), LCX_ERR_INVALID, "share a name or a key");
        bad.names = NULL;
        CHECK_FAILS(lcx_passkey_prompt_build_spec(&tok, 1000, &bad, &a), LCX_ERR_INVALID, "no name");
        bad.n_needles = LCX_NEEDLE_NAMES + 1;
        CHECK_FAILS(lcx_passkey_prompt_build_spec(&tok, 1000, &bad, &a), LCX_ERR_INVALID, "needles");
    }
    /* names: distinct, deterministic, a prefix independent of n, not the same for every trial */
    int a[LCX_NEEDLE_NAMES], b[5], c[LCX_NEEDLE_NAMES];
    lcx_needle_names(3, 1, LCX_NEEDLE_NAMES, a);
    lcx_needle_names(3, 1, 5, b);
    lcx_needle_names(3, 2, LCX_NEEDLE_NAMES, c);
    uint64_t seen = 0;
    int ok = 1;
    for (int i = 0; i < LCX_NEEDLE_NAMES; i++) {
        ok &= a[i] >= 0 && a[i] < LCX_NEEDLE_NAMES && lcx_needle_name(a[i]) && !((seen >> a[i]) & 1);
        seen |= (uint64_t)1 << a[i];
    }
    CHECK(ok && memcmp(a, b, sizeof b) == 0 && memcmp(a, c, sizeof a) != 0);
    CHECK(lcx_needle_name(-1) == NULL && lcx_needle_name(LCX_NEEDLE_NAMES) == NULL);
}

/* A text haystack (--haystack): the filler lines, read in order, are the text's words from its start, wrapping
 * around; each needle has round(depth x U) of the U words before it; the fit is within a word (one token here)
 * and a line break of the target. */
static void test_haystack_prompt(void) {
    fake_tok ft = {0, 0};
    lcx_eval_tokenizer tok = {fake_encode, &ft, BOS};
    /* 37 words of 3 letters, between them every kind of white space */
    char text[512], words[37][4];
    size_t tl = 0;
    const char *gaps[] = {" ", "\n", "  ", "\t", " \r\n", "\f", "\v "};
    tl += (size_t)snprintf(text, sizeof text, "  ");
    for (int w = 0; w < 37; w++) {
        snprintf(words[w], sizeof words[w], "%c%c%c", 'a' + w % 26, 'a' + (w * 7) % 26, 'q' + w / 26);
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "%s%s", words[w], gaps[w % 7]);
    }
    const int counts[] = {1, 3};
    const int64_t targets[] = {300, 1000};
    const double depths[] = {0.0, 0.5, 1.0};
    for (int ci = 0; ci < 2; ci++)
        for (int ti = 0; ti < 2; ti++)
            for (int di = 0; di < 3; di++) {
                uint32_t keys[3];
                int names[3];
                lcx_passkey_keys(4, di, counts[ci], keys);
                lcx_needle_names(4, di, counts[ci], names);
                const lcx_passkey_prompt_spec ps = {depths[di], keys, names, counts[ci], text, tl};
                lcx_passkey_prompt p;
                lcx_status st = lcx_passkey_prompt_build_spec(&tok, targets[ti], &ps, &p);
                CHECK_MSG(st == LCX_OK, "%s", lcx_last_error());
                if (st != LCX_OK) continue;
                CHECK_MSG(p.n <= targets[ti] && targets[ti] - p.n <= 2, "target %lld: %lld tokens",
                          (long long)targets[ti], (long long)p.n);
                CHECK(!strstr(p.text, "grass") && p.extra_words == 0);
                /* walk the lines: filler words must be the text's, in order; count them before each needle */
                int64_t k = 0, before[3] = {-1, -1, -1}, line = 0, bad = 0;
                const char *end = p.text + p.text_len;
                for (const char *l = p.text, *e; l < end; l = e + 1, line++) {
                    e = memchr(l, '\n', (size_t)(end - l));
                    if (!e) e = end;
                    if (line == 0 || e == end) continue; /* the task, the question */
                    int needle = -1;
                    for (int i = 0; i < counts[ci]; i++) {
                        char want[160];
                        if (counts[ci] > 1)
                            snprintf(want, sizeof want, "The pass key of the %s is %u.", lcx_needle_name(names[i]),
                                     keys[i]);
                        else
                            snprintf(want, sizeof want, "The pass key is %u.", keys[i]);
                        if (strncmp(l, want, strlen(want)) == 0) needle = i;
                    }
                    if (needle >= 0) {
                        before[needle] = k;
                        continue;
                    }
                    for (const char *q = l; q < e;) { /* words joined by single spaces */
                        const char *sp = memchr(q, ' ', (size_t)(e - q));
                        size_t wl = sp ? (size_t)(sp - q) : (size_t)(e - q);
                        bad |= wl != 3 || memcmp(q, words[k % 37], 3) != 0;
                        k++;
                        q += wl + (sp != NULL);
                    }
                }
                CHECK_MSG(!bad, "target %lld: filler words out of order", (long long)targets[ti]);
                CHECK(k == p.units_before + p.units_after && (targets[ti] < 1000 || k > 37)); /* 1000 wraps */
                for (int i = 0; i < counts[ci]; i++) {
                    double depth = i == 0 ? depths[di] : (i - 0.5) / (counts[ci] - 1);
                    CHECK_MSG(before[i] == (int64_t)llround(depth * (double)k), "needle %d at %g: %lld of %lld words",
                              i, depth, (long long)before[i], (long long)k);
                }
                lcx_passkey_prompt_free(&p);
            }
    uint32_t key = 12345;
    const lcx_passkey_prompt_spec blank = {0.5, &key, NULL, 1, " \n\t ", 4};
    lcx_passkey_prompt p;
    CHECK_FAILS(lcx_passkey_prompt_build_spec(&tok, 300, &blank, &p), LCX_ERR_INVALID, "haystack has no words");
}

/* Fake readers over the fake tokenizer for multi-key prompts: an answer slot is the 5 tokens after "pass key of
 * the NAME is". The "reader" predicts the digits of the earlier line with the same NAME; the "recency" model
 * those of the last needle line before the question, whatever its name (right only when that is the asked one). */
static int needle_end(const int32_t *t, int64_t k) { /* t[k-6..k) == "pass key of the NAME is" */
    return k >= 6 && t[k - 6] == word_id("pass", 4) && t[k - 5] == word_id("key", 3) && t[k - 4] == word_id("of", 2) &&
           t[k - 3] == word_id("the", 3) && t[k - 1] == word_id("is", 2);
}

static int32_t read_needle(int recency, const int32_t *t, int64_t i) {
    int64_t k = i;
    while (k > 0 && !needle_end(t, k)) k--;
    if (k == 0 || i - k >= 5) return 1; /* not in an answer */
    for (int64_t j = k - 1; j > 0; j--)
        if (needle_end(t, j) && (recency || t[j - 2] == t[k - 2])) return t[j + (i - k)];
    return 1;
}

typedef struct fake_reader {
    int recency;
} fake_reader;

static lcx_status reader_score(void *model, const int32_t *t, int64_t n, int64_t first, double *nll) {
    const fake_reader *m = model;
    for (int64_t i = first; i < n; i++) { /* a miss costs 3..6, by a hash: two wrong keys seldom tie */
        uint64_t h = ((uint64_t)t[i] * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)i * 0xC2B2AE3D27D4EB4FULL);
        h ^= h >> 29;
        nll[i - first] = read_needle(m->recency, t, i) == t[i] ? 0.05 : 3.0 + 3.0 * (double)(h % 1000) / 1000.0;
    }
    return LCX_OK;
}

static lcx_status reader_argmax(void *model, const int32_t *t, int64_t n, int64_t first, int32_t *next) {
    const fake_reader *m = model;
    for (int64_t i = first; i < n; i++) next[i - first] = read_needle(m->recency, t, i);
    return LCX_OK;
}

static void test_needles_scoring(void) {
    fake_tok ft = {0, 0};
    lcx_eval_tokenizer tok = {fake_encode, &ft, BOS};
    const int64_t lengths[] = {600, 1200};
    const double depths[] = {0.0, 0.5, 1.0};
    lcx_passkey_config cfg = {lengths, 2, depths, 3, 6, 2, LCX_PASSKEY_LOGLIK | LCX_PASSKEY_GREEDY, 5, 4, NULL, 0,
                              0, 0};
    for (int recency = 0; recency < 2; recency++) {
        fake_reader m = {recency};
        lcx_passkey_result r;
        CHECK_OK(lcx_passkey_eval(&cfg, &tok, reader_score, reader_argmax, &m, &r));
        CHECK(r.needles == 4);
        for (int l = 0; l < 2; l++)
            for (int d = 0; d < 3; d++) {
                /* the asked needle is the last line only at depth 1 (the others sit at 1/6, 1/2, 5/6); the
                 * recency model's key is in the prompt, so log-likelihood ranks it first everywhere else */
                double want = !recency || d == 2 ? 1.0 : 0.0;
                /* and every miss is another key of the prompt (all of them scored, not just until one wins) */
                CHECK(r.loglik_confused[l * 3 + d] == (want == 1.0 ? 0 : 6));
                CHECK_MSG(lcx_passkey_accuracy(&r, LCX_PASSKEY_LOGLIK, l, d) == want &&
                              lcx_passkey_accuracy(&r, LCX_PASSKEY_GREEDY, l, d) == want,
                          "recency %d, length %lld, depth %g: loglik %g, greedy %g", recency, (long long)lengths[l],
                          depths[d], lcx_passkey_accuracy(&r, LCX_PASSKEY_LOGLIK, l, d),
                          lcx_passkey_accuracy(&r, LCX_PASSKEY_GREEDY, l, d));
            }
        json_t *j = lcx_passkey_to_json(&r);
        CHECK(j && json_integer_value(json_object_get(j, "needles")) == 4);
        json_t *c0 = json_array_get(json_object_get(j, "cells"), 0);
        CHECK(json_integer_value(json_object_get(c0, "loglik_confused")) == (recency ? 6 : 0));
        json_decref(j);
        lcx_passkey_result_free(&r);
    }
    /* 0 needles is the classic test (one key, no names) */
    cfg.needles = 0;
    fake_pk knows = {100000, 0};
    lcx_passkey_result r;
    CHECK_OK(lcx_passkey_eval(&cfg, &tok, pk_score, pk_argmax, &knows, &r));
    CHECK(r.needles == 1 && lcx_passkey_accuracy(&r, LCX_PASSKEY_LOGLIK, 0, 0) == 1.0);
    json_t *j = lcx_passkey_to_json(&r);
    CHECK(j && json_integer_value(json_object_get(j, "needles")) == 1);
    json_decref(j);
    lcx_passkey_result_free(&r);
    fake_reader m = {1};
    cfg.needles = LCX_NEEDLE_NAMES + 1;
    CHECK_FAILS(lcx_passkey_eval(&cfg, &tok, reader_score, reader_argmax, &m, &r), LCX_ERR_INVALID, "needles");
}

/* ==== SVG well-formedness and JSON ======================================================================== */

/* Balanced tags and quotes; returns the number of tags or -1. Enough for our hand-written SVG. */
static int xml_check(const char *s) {
    char stack[64][32];
    int depth = 0, tags = 0;
    for (const char *p = s; *p; p++) {
        if (*p != '<') continue;
        const char *e = p + 1;
        int quote = 0;
        while (*e && (quote || *e != '>')) {
            if (*e == '"') quote = !quote;
            if (*e == '<' && !quote) return -1;
            e++;
        }
        if (!*e) return -1;
        if (p[1] == '?') {
            p = e;
            continue;
        }
        tags++;
        if (p[1] == '/') {
            if (depth == 0) return -1;
            size_t n = strlen(stack[depth - 1]);
            if (strncmp(p + 2, stack[--depth], n) != 0 || p[2 + n] != '>') return -1;
        } else if (e[-1] != '/') {
            if (depth == 64) return -1;
            size_t n = strcspn(p + 1, " >/\n");
            if (n >= 32) return -1;
            memcpy(stack[depth], p + 1, n);
            stack[depth++][n] = '\0';
        }
        p = e;
    }
    return depth == 0 ? tags : -1;
}

static int count_points(const char *polyline) {
    const char *q = strstr(polyline, "points=\"");
    if (!q) return -1;
    int n = 0;
    for (q += 8; *q && *q != '"'; q++) n += *q == ',';
    return n;
}

static void test_output(void) {
    /* perplexity plot: 3 series, the second with a hole (NaN) -> 2 polylines */
    const double x[] = {1024, 2048, 4096, 8192, 16384};
    const double base[] = {7.2, 7.1, 45.0, 310.0, 1800.0};
    const double yarn[] = {7.3, 7.0, NAN, 6.8, 6.75};
    const double tuned[] = {7.25, 6.95, 6.9, 6.8, 6.7};
    lcx_plot_series s[3] = {{"base", x, base, 5}, {"YaRN s=16", x, yarn, 5}, {"YaRN + stage 2", x, tuned, 5}};
    char *svg = NULL;
    CHECK_OK(lcx_svg_ppl_plot(s, 3, "Perplexity by context length", &svg));
    char path[512];
    if (svg) {
        CHECK(xml_check(svg) > 10);
        int lines = 0, pts[8] = {0};
        for (const char *p = svg; (p = strstr(p, "<polyline")); p++) pts[lines < 8 ? lines++ : 7] = count_points(p);
        CHECK(lines == 4 && pts[0] == 5 && pts[1] == 2 && pts[2] == 2 && pts[3] == 5);
        CHECK(strstr(svg, ">16k<") && strstr(svg, ">1k<") && strstr(svg, "(log scale)"));
        CHECK(strstr(svg, ">YaRN + stage 2<") != NULL);
        snprintf(path, sizeof path, "%s/eval_ppl.svg", LCX_BINARY_DIR);
        CHECK_OK(lcx_svg_write(path, svg));
        free(svg);
    }
    /* flat curve: linear y axis */
    lcx_plot_series flat = {"tuned", x, tuned, 5};
    CHECK_OK(lcx_svg_ppl_plot(&flat, 1, NULL, &svg));
    if (svg) {
        CHECK(xml_check(svg) > 5 && !strstr(svg, "(log scale)"));
        snprintf(path, sizeof path, "%s/eval_ppl_flat.svg", LCX_BINARY_DIR);
        CHECK_OK(lcx_svg_write(path, svg));
        free(svg);
    }
    CHECK_OK(lcx_svg_ppl_plot(NULL, 0, "empty", &svg));
    if (svg) {
        CHECK(xml_check(svg) > 0);
        free(svg);
    }
    const double bad_x[] = {0.0};
    lcx_plot_series bad = {"bad", bad_x, tuned, 1};
    CHECK_FAILS(lcx_svg_ppl_plot(&bad, 1, NULL, &svg), LCX_ERR_INVALID, "length 0");

    /* heat map from a hand-made result, written for a look */
    int64_t lens[5] = {1024, 2048, 4096, 8192, 16384};
    double deps[5] = {0.0, 0.25, 0.5, 0.75, 1.0};
    int64_t pt[25];
    int ll[25], gg[25];
    for (int i = 0; i < 25; i++) {
        pt[i] = lens[i / 5];
        ll[i] = i / 5 < 2 ? 10 : 10 - 2 * (i / 5) + (i % 5 == 0);
        gg[i] = ll[i] / 2;
    }
    lcx_passkey_result r = {5, 5, 10, 4, LCX_PASSKEY_LOGLIK | LCX_PASSKEY_GREEDY, lens, deps, pt, ll, gg, 1, NULL};
    CHECK_OK(lcx_svg_passkey_heatmap(&r, LCX_PASSKEY_LOGLIK, "Passkey retrieval", &svg));
    if (svg) {
        CHECK(xml_check(svg) > 25);
        snprintf(path, sizeof path, "%s/eval_passkey.svg", LCX_BINARY_DIR);
        CHECK_OK(lcx_svg_write(path, svg));
        free(svg);
    }

    /* JSON round trip through a file; NaN becomes null */
    lcx_ppl_result res[2] = {{.length = 1024, .stride = 256, .docs = 3, .windows = 9, .tokens = 3000,
                              .nll_sum = 3000 * 1.9, .mean_nll = 1.9, .ppl = exp(1.9), .window_mean_nll = 1.95,
                              .ppl_window_mean = exp(1.95)},
                             {.length = 2048, .docs_skipped = 3, .mean_nll = NAN, .ppl = NAN,
                              .window_mean_nll = NAN, .ppl_window_mean = NAN}};
    int64_t L2[2] = {1024, 2048};
    lcx_ppl_config cfg = {L2, 2, 256, BOS, LCX_PPL_SHORT_SKIP, 0, 0, 0, 0};
    json_t *j = lcx_ppl_to_json(&cfg, res, "base");
    CHECK(j != NULL);
    snprintf(path, sizeof path, "%s/test_eval_%d.json", LCX_BINARY_DIR, (int)getpid());
    CHECK_OK(lcx_eval_json_write(path, j));
    json_decref(j);
    json_error_t err;
    json_t *back = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    CHECK(back != NULL);
    if (back) {
        json_t *a = json_object_get(back, "results");
        CHECK(json_array_size(a) == 2);
        CHECK_REL(json_number_value(json_object_get(json_array_get(a, 0), "ppl")), exp(1.9), 1e-9);
        CHECK(json_integer_value(json_object_get(json_array_get(a, 0), "tokens")) == 3000);
        CHECK(json_is_null(json_object_get(json_array_get(a, 1), "ppl")));
        CHECK(strcmp(json_string_value(json_object_get(back, "series")), "base") == 0);
        lcx_ppl_result *rr = NULL;
        int nr = 0;
        char *name = NULL;
        CHECK_OK(lcx_ppl_from_json(back, "base.json", &rr, &nr, &name));
        CHECK(nr == 2 && name && strcmp(name, "base") == 0);
        if (rr && nr == 2) {
            CHECK(rr[0].length == 1024 && rr[0].tokens == 3000 && rr[0].windows == 9 && rr[1].docs_skipped == 3);
            CHECK_REL(rr[0].ppl, exp(1.9), 1e-9);
            CHECK(isnan(rr[1].ppl));
        }
        free(rr);
        free(name);
        /* broken inputs name the file, the entry and the key */
        json_object_set_new(json_array_get(a, 1), "tokens", json_integer(-5));
        CHECK_FAILS(lcx_ppl_from_json(back, "stage2.json", &rr, &nr, &name), LCX_ERR_FORMAT,
                    "stage2.json: results[1]: 'tokens' is missing or not an integer >= 0");
        json_object_set_new(json_array_get(a, 0), "ppl", json_string("3.5"));
        CHECK_FAILS(lcx_ppl_from_json(back, "s.json", &rr, &nr, &name), LCX_ERR_FORMAT,
                    "s.json: results[0]: 'ppl' is missing or not a number or null");
        json_object_set_new(back, "results", json_object());
        CHECK_FAILS(lcx_ppl_from_json(back, "s.json", &rr, &nr, &name), LCX_ERR_FORMAT, "'results'");
        json_decref(back);
    }
    unlink(path);
}

/* Shards (lcx_ppl_config / lcx_passkey_config .shard, .n_shards): each of 3 shards scores its own windows
 * (documents in one-pass mode) and trials; added up they are the unsharded run: tokens, windows and counts
 * exactly, the NLL sums to float rounding (other addition order); every shard counts every document; the
 * scorer is called only for the shard's work. */
static void test_shards(void) {
    static int32_t store[3][MAXLEN];
    const int64_t doc_lens[3] = {120, 45, 100};
    lcx_ppl_doc docs[3];
    for (int d = 0; d < 3; d++) {
        for (int64_t p = 0; p < doc_lens[d]; p++) store[d][p] = TOK(d, p);
        docs[d] = (lcx_ppl_doc){store[d], doc_lens[d]};
    }
    const int64_t lengths[] = {16, 32, 64};
    for (int mode = 0; mode < 2; mode++) { /* sliding windows; truncate in one pass */
        lcx_ppl_config cfg = {lengths, 3, 8, BOS, LCX_PPL_SHORT_SCORE, mode, mode, 0, 0};
        lcx_ppl_result whole[3], part[3][3], sum[3];
        static fake_lm m;
        memset(&m, 0, sizeof m);
        m.bos = BOS;
        CHECK_OK(lcx_ppl_eval(&cfg, docs, 3, fake_score, &m, whole));
        const int64_t calls = m.calls;
        int64_t shard_calls = 0;
        memset(sum, 0, sizeof sum);
        for (int k = 0; k < 3; k++) {
            cfg.shard = k, cfg.n_shards = 3;
            memset(&m, 0, sizeof m);
            m.bos = BOS;
            CHECK_OK(lcx_ppl_eval(&cfg, docs, 3, fake_score, &m, part[k]));
            CHECK(m.bad == 0);
            shard_calls += m.calls;
            CHECK_MSG(m.calls < calls || calls < 2, "mode %d shard %d: %lld of %lld passes", mode, k,
                      (long long)m.calls, (long long)calls);
            for (int li = 0; li < 3; li++) {
                CHECK(part[k][li].docs == whole[li].docs && part[k][li].docs_skipped == whole[li].docs_skipped);
                sum[li].tokens += part[k][li].tokens, sum[li].windows += part[k][li].windows;
                sum[li].nll_sum += part[k][li].nll_sum, sum[li].window_nll_sum += part[k][li].window_nll_sum;
            }
        }
        CHECK_MSG(shard_calls == calls, "mode %d: %lld passes over the shards, %lld whole", mode,
                  (long long)shard_calls, (long long)calls);
        for (int li = 0; li < 3; li++) {
            lcx_ppl_result_finish(&sum[li]);
            CHECK(sum[li].tokens == whole[li].tokens && sum[li].windows == whole[li].windows);
            CHECK_REL(sum[li].ppl, whole[li].ppl, 1e-12);
            CHECK_REL(sum[li].ppl_window_mean, whole[li].ppl_window_mean, 1e-12);
        }
    }

    fake_tok ft = {0, 0};
    lcx_eval_tokenizer tok = {fake_encode, &ft, BOS};
    const int64_t pk_lengths[] = {96, 200};
    const double depths[] = {0.0, 0.5, 1.0};
    lcx_passkey_config pc = {pk_lengths, 2, depths, 3, 7, 3, LCX_PASSKEY_LOGLIK | LCX_PASSKEY_GREEDY, 42, 1, NULL, 0,
                             0, 0};
    lcx_passkey_result whole, part;
    fake_pk m = {120, 0};
    CHECK_OK(lcx_passkey_eval(&pc, &tok, pk_score, pk_argmax, &m, &whole));
    int lc[6] = {0}, gc[6] = {0};
    int64_t pt[6] = {0};
    for (int k = 0; k < 3; k++) {
        pc.shard = k, pc.n_shards = 3;
        CHECK_OK(lcx_passkey_eval(&pc, &tok, pk_score, pk_argmax, &m, &part));
        for (int c = 0; c < 6; c++)
            lc[c] += part.loglik_correct[c], gc[c] += part.greedy_correct[c], pt[c] += part.prompt_tokens[c];
        lcx_passkey_result_free(&part);
    }
    for (int c = 0; c < 6; c++)
        CHECK_MSG(lc[c] == whole.loglik_correct[c] && gc[c] == whole.greedy_correct[c] &&
                      pt[c] == whole.prompt_tokens[c],
                  "cell %d: shards add up to loglik %d, greedy %d, prompt %lld; whole %d, %d, %lld", c, lc[c], gc[c],
                  (long long)pt[c], whole.loglik_correct[c], whole.greedy_correct[c],
                  (long long)whole.prompt_tokens[c]);
    lcx_passkey_result_free(&whole);
}

int main(void) {
    test_ppl();
    test_prompt();
    test_passkey_scoring();
    test_needles_prompt();
    test_haystack_prompt();
    test_needles_scoring();
    test_shards();
    test_output();
    return test_summary("test_eval");
}
