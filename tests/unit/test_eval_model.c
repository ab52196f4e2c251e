/* eval_model: the model scorer behind src/eval against the model's own chunked loss (same forward, different
 * loss path: device cross-entropy vs host log-softmax of handed-out logits) and against transformers' logits
 * (models/llama_gqa/logits.npy, an independent implementation); the argmax adapter against the argmax of those
 * logits; the tokenizer adapter's snprintf contract; bad windows and over-capacity windows fail. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/npy.h"
#include "model_fixture.h"
#include "src/eval/eval_model.h"
#include "src/tokenizer/tokenizer.h"
#include "test_util.h"

static void check_model(lcx_dtype dt, double tol_hf) {
    int32_t ids[64];
    int64_t n = fx_inputs("llama_gqa", ids, 64);
    CHECK(n >= 8);
    if (n < 8) return;
    char *dir = fx_path("llama_gqa", "models", "");
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = dt;
    o.max_tokens = n;
    o.loss_chunk = 5; /* several chunks, the last one partial */
    lcx_model *m = NULL;
    CHECK_OK(lcx_model_from_checkpoint(dir, &o, &m));
    free(dir);
    if (!m) return;

    /* Sum of per-token NLLs (first = 1: every predicted token) = the model's summed loss. */
    lcx_batch b = {.n_seq = 1, .seq_len = n, .ids = ids};
    double loss_sum = 0;
    int64_t count = 0;
    CHECK_OK(lcx_model_forward(m, &b, NULL, &loss_sum, &count));
    CHECK(count == n - 1);
    double *nll = calloc((size_t)n, sizeof *nll);
    CHECK_OK(lcx_eval_model_score(m, ids, n, 1, nll));
    double s = 0;
    for (int64_t i = 0; i < n - 1; i++) s += nll[i];
    CHECK_REL(s, loss_sum, 1e-6);

    /* Each NLL against transformers' logits (double log-softmax of the reference). */
    char *lp = fx_path("llama_gqa", "models", "logits.npy");
    float *ref = NULL;
    lcx_shape sh;
    CHECK_OK(lcx_npy_read_f32(lp, &ref, &sh));
    free(lp);
    int32_t *next = calloc((size_t)n, sizeof *next);
    CHECK_OK(lcx_eval_model_argmax(m, ids, n, 1, next));
    if (ref && sh.ndim == 3 && (int64_t)sh.dims[1] == n) {
        int64_t V = (int64_t)sh.dims[2];
        for (int64_t r = 0; r < n - 1; r++) {
            const float *x = ref + r * V;
            double mx = x[0];
            int64_t best = 0;
            for (int64_t v = 1; v < V; v++)
                if (x[v] > x[best]) best = v;
            mx = x[best];
            double z = 0;
            for (int64_t v = 0; v < V; v++) z += exp((double)x[v] - mx);
            double want = log(z) + mx - x[ids[r + 1]];
            CHECK_NEAR(nll[r], want, tol_hf);
            /* the second best must be clearly apart for the argmax to be a fair comparison */
            double second = -INFINITY;
            for (int64_t v = 0; v < V; v++)
                if (v != best && x[v] > second) second = x[v];
            if (x[best] - second > 1e-3) CHECK(next[r] == best);
        }
    } else {
        CHECK(0);
    }
    free(ref);

    /* first > 1: the tail of the same scores (other chunk boundaries, same values). */
    double *tail = calloc((size_t)n, sizeof *tail);
    int32_t *tnext = calloc((size_t)n, sizeof *tnext);
    CHECK_OK(lcx_eval_model_score(m, ids, n, 6, tail));
    CHECK_OK(lcx_eval_model_argmax(m, ids, n, 6, tnext));
    for (int64_t i = 6; i < n; i++) {
        CHECK_NEAR(tail[i - 6], nll[i - 1], 1e-5);
        CHECK(tnext[i - 6] == next[i - 1]);
    }
    /* A shorter window scores its own prefix: the NLLs of a prefix do not depend on later tokens (causal). */
    CHECK_OK(lcx_eval_model_score(m, ids, n - 3, 1, tail));
    for (int64_t i = 0; i < n - 4; i++) CHECK_NEAR(tail[i], nll[i], 1e-5);

    CHECK_FAILS(lcx_eval_model_score(m, ids, n, 0, tail), LCX_ERR_INVALID, "first 0");
    CHECK_FAILS(lcx_eval_model_score(m, ids, n, n, tail), LCX_ERR_INVALID, "bad window");
    int32_t *big = calloc((size_t)n + 1, sizeof *big);
    memcpy(big, ids, (size_t)n * sizeof *ids);
    CHECK_FAILS(lcx_eval_model_score(m, big, n + 1, 1, tail), LCX_ERR_INVALID, "capacity");
    big[3] = 100000; /* an id outside the vocabulary */
    CHECK(lcx_eval_model_score(m, big, n, 1, tail) != LCX_OK);
    free(big);
    free(tail);
    free(tnext);
    free(next);
    free(nll);
    lcx_model_free(m);
}

static void check_encode(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/tokenizer/bytelevel.json", LCX_SOURCE_DIR);
    lcx_tokenizer *tok = NULL;
    CHECK_OK(lcx_tokenizer_load(path, &tok));
    if (!tok) return;
    const char *text = "The pass key is 68392. Remember it.";
    lcx_tok_ids v;
    memset(&v, 0, sizeof v);
    CHECK_OK(lcx_tokenizer_encode(tok, text, strlen(text), 0, &v)); /* no BOS: what the adapter must give */
    int64_t cnt = -1;
    CHECK_OK(lcx_eval_tok_encode(tok, text, strlen(text), NULL, 0, &cnt));
    CHECK(cnt == (int64_t)v.n);
    int32_t ids[256];
    for (int i = 0; i < 256; i++) ids[i] = -7;
    CHECK_OK(lcx_eval_tok_encode(tok, text, strlen(text), ids, 3, &cnt));
    CHECK(cnt == (int64_t)v.n);
    CHECK(ids[3] == -7); /* nothing past cap */
    CHECK_OK(lcx_eval_tok_encode(tok, text, strlen(text), ids, 256, &cnt));
    for (size_t i = 0; i < v.n && i < 256; i++) CHECK(ids[i] == (int32_t)v.ids[i]);
    lcx_tok_ids_free(&v);
    lcx_tokenizer_free(tok);
}

int main(void) {
    check_model(LCX_F32, 2e-4);
    check_model(LCX_BF16, 5e-2); /* bf16 weights vs transformers' float32 logits: only roughly equal */
    check_encode();
    return test_summary("test_eval_model");
}
