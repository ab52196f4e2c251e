/* eval_passkey: the passkey retrieval test (prompt of the landmark-attention / YaRN scripts, fitted to a token
 * length with our tokenizer; scoring by log-likelihood rank and by teacher-forced greedy match). */
#include "src/eval/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/strbuf.h"

const char LCX_PASSKEY_TASK[] = "There is an important info hidden inside a lot of irrelevant text. Find it and "
                                "memorize them. I will quiz you about the important information there.";
const char LCX_PASSKEY_FILLER[] =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
const char LCX_PASSKEY_QUESTION[] = "What is the pass key? The pass key is";

/* ---- small helpers -------------------------------------------------------------------------------------- */

static lcx_status count_tokens(const lcx_eval_tokenizer *tok, const char *text, size_t len, int64_t *n) {
    LCX_TRY(tok->encode(tok->ctx, text, len, NULL, 0, n));
    LCX_FAIL_IF(*n < 0, LCX_ERR_INVALID, "passkey: tokenizer returned a negative token count");
    return LCX_OK;
}

/* Encode into a new buffer with `extra` free slots in front (for BOS). */
static lcx_status encode_alloc(const lcx_eval_tokenizer *tok, const char *text, size_t len, int64_t extra,
                               int32_t **ids, int64_t *n) {
    int64_t count = 0, again = 0;
    LCX_TRY(count_tokens(tok, text, len, &count));
    int32_t *buf = malloc((size_t)(count + extra + 1) * sizeof(int32_t));
    LCX_FAIL_IF(!buf, LCX_ERR_OOM, "passkey: out of memory for %lld tokens", (long long)count);
    lcx_status st = tok->encode(tok->ctx, text, len, buf + extra, count, &again);
    if (st == LCX_OK && again != count)
        st = lcx_fail(LCX_ERR_INVALID, "passkey: tokenizer gave %lld then %lld tokens for the same text",
                      (long long)count, (long long)again);
    if (st != LCX_OK) {
        free(buf);
        return st;
    }
    *ids = buf;
    *n = count;
    return LCX_OK;
}


/* `units` whole filler units then the first `words` words of one more, joined by single spaces. */
static int put_filler(lcx_strbuf *b, int64_t units, int64_t words) {
    int first = 1;
    for (int64_t u = 0; u < units; u++) {
        if (!first && !lcx_strbuf_str(b, " ")) return 0;
        if (!lcx_strbuf_str(b, LCX_PASSKEY_FILLER)) return 0;
        first = 0;
    }
    const char *p = LCX_PASSKEY_FILLER;
    for (int64_t w = 0; w < words; w++) {
        const char *sp = strchr(p, ' ');
        size_t n = sp ? (size_t)(sp - p) : strlen(p);
        if (!first && !lcx_strbuf_str(b, " ")) return 0;
        if (!lcx_strbuf_put(b, p, n)) return 0;
        first = 0;
        p = sp ? sp + 1 : p + n;
    }
    return 1;
}

static int64_t filler_words(void) {
    int64_t n = 1;
    for (const char *p = LCX_PASSKEY_FILLER; *p; p++) n += *p == ' ';
    return n;
}

/* A text haystack (--haystack): its words, the runs of non-space bytes, in order. Filler unit k of a prompt is
 * word k mod n: the prompt reads the text from its start, joined by single spaces, and wraps around. */
typedef struct hay_words {
    const char *text;
    size_t *off, *len; /* [n] */
    int64_t n;
} hay_words;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* The first `max` words at most: a prompt of T tokens never reads more than 4 T + 64 (the fit's limit), so a long
 * text costs no more than a short one. */
static lcx_status hay_split(const char *text, size_t len, int64_t max, hay_words *h) {
    memset(h, 0, sizeof *h);
    h->text = text;
    int64_t n = 0;
    for (size_t i = 0; i < len && n < max; i++) n += !is_space(text[i]) && (i == 0 || is_space(text[i - 1]));
    LCX_FAIL_IF(n == 0, LCX_ERR_INVALID, "passkey: the haystack has no words");
    h->off = malloc((size_t)n * sizeof(size_t));
    h->len = malloc((size_t)n * sizeof(size_t));
    if (!h->off || !h->len) {
        free(h->off), free(h->len);
        return lcx_fail(LCX_ERR_OOM, "passkey: out of memory for %lld haystack words", (long long)n);
    }
    for (size_t i = 0, k = 0; i < len && (int64_t)k < n; i++)
        if (!is_space(text[i]) && (i == 0 || is_space(text[i - 1]))) {
            size_t j = i;
            while (j < len && !is_space(text[j])) j++;
            h->off[k] = i, h->len[k] = j - i;
            k++;
        }
    h->n = n;
    return LCX_OK;
}

static void hay_free(hay_words *h) {
    free(h->off);
    free(h->len);
    memset(h, 0, sizeof *h);
}

/* Filler units [from, to) of the prompt (the text's words from..to-1, or to - from units of the repeated filler)
 * and then `words` words of one more unit (repeated filler only), joined by single spaces. */
static int put_stretch(lcx_strbuf *b, const hay_words *h, int64_t from, int64_t to, int64_t words) {
    if (!h) return put_filler(b, to - from, words);
    for (int64_t k = from; k < to; k++) {
        const int64_t w = k % h->n;
        if (k > from && !lcx_strbuf_str(b, " ")) return 0;
        if (!lcx_strbuf_put(b, h->text + h->off[w], h->len[w])) return 0;
    }
    return 1;
}

/* ---- needles ------------------------------------------------------------------------------------------- */

/* Names of the needles of a multi-key prompt: plain nouns of one word each, so that "the pass key of the NAME"
 * differs between needles by one word, as RULER's multi-key needles do. */
static const char *const NEEDLE_NAMES[LCX_NEEDLE_NAMES] = {
    "apple",   "river",  "candle", "garden", "harbor",  "lantern", "meadow", "mirror",
    "orchard", "pebble", "saddle", "tunnel", "violin",  "window",  "falcon", "glacier",
    "island",  "jacket", "kettle", "ladder", "marble",  "octopus", "parrot", "quarry",
    "rabbit",  "spoon",  "teapot", "anchor", "valley",  "wagon",   "zebra",  "compass"};

const char *lcx_needle_name(int i) { return i >= 0 && i < LCX_NEEDLE_NAMES ? NEEDLE_NAMES[i] : NULL; }

double lcx_needle_depth(int j, int n_needles) {
    return j <= 0 || n_needles < 2 ? 0.0 : ((double)j - 0.5) / (double)(n_needles - 1);
}

/* The text of needle i: the classic key line with one needle, the named one with several. */
static int needle_line(const lcx_passkey_prompt_spec *ps, int i, char *line, size_t cap) {
    uint32_t key = ps->keys[i];
    int n = ps->n_needles > 1
                ? snprintf(line, cap, "The pass key of the %s is %u. Remember it. %u is the pass key of the %s.",
                           NEEDLE_NAMES[ps->names[i]], key, key, NEEDLE_NAMES[ps->names[i]])
                : snprintf(line, cap, "The pass key is %u. Remember it. %u is the pass key.", key, key);
    return n > 0 && (size_t)n < cap;
}

/* Whole filler units before needle i when the prompt has `units` of them (round(depth * units)). */
static int64_t units_before(const lcx_passkey_prompt_spec *ps, int i, int64_t units) {
    double depth = i == 0 ? ps->depth : lcx_needle_depth(i, ps->n_needles);
    int64_t p = (int64_t)llround(depth * (double)units);
    return p > units ? units : p;
}

/* The prompt text with `units` whole filler units split among the needles and `words` words of one more unit at
 * the end; *key_off = byte offset of the queried needle's line (needle 0). The lines appear in the order of their
 * units before them (needle order among equal ones), every line on its own; an empty filler stretch between two
 * lines is left out, the empty first and last ones are kept (the one-needle prompt of the literature). */
static lcx_status prompt_text(const lcx_passkey_prompt_spec *ps, const hay_words *h, int64_t units, int64_t words,
                              lcx_strbuf *b, size_t *key_off) {
    int order[LCX_NEEDLE_NAMES];
    int64_t at[LCX_NEEDLE_NAMES];
    for (int i = 0; i < ps->n_needles; i++) {
        at[i] = units_before(ps, i, units);
        int j = i;
        for (; j > 0 && at[order[j - 1]] > at[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    b->len = 0;
    int ok = lcx_strbuf_str(b, LCX_PASSKEY_TASK) && lcx_strbuf_str(b, "\n");
    int64_t done = 0;
    char line[192];
    for (int k = 0; k < ps->n_needles && ok; k++) {
        const int i = order[k];
        if (k == 0 || at[i] > done) ok = put_stretch(b, h, done, at[i], 0) && lcx_strbuf_str(b, "\n");
        done = at[i];
        if (i == 0) *key_off = b->len;
        ok = ok && needle_line(ps, i, line, sizeof line) && lcx_strbuf_str(b, line) && lcx_strbuf_str(b, "\n");
    }
    ok = ok && put_stretch(b, h, done, units, words) && lcx_strbuf_str(b, "\n");
    if (ok && ps->n_needles > 1) {
        const char *name = NEEDLE_NAMES[ps->names[0]];
        ok = lcx_strbuf_printf(b, "What is the pass key of the %s? The pass key of the %s is", name, name);
    } else {
        ok = ok && lcx_strbuf_str(b, LCX_PASSKEY_QUESTION);
    }
    LCX_FAIL_IF(!ok, LCX_ERR_OOM, "passkey: out of memory building a prompt of %lld filler units", (long long)units);
    return LCX_OK;
}

/* Tokens (BOS included) of the prompt with `units` whole units and `words` extra words. */
typedef struct fit_state {
    const lcx_eval_tokenizer *tok;
    const lcx_passkey_prompt_spec *ps;
    const hay_words *hay; /* NULL: the repeated filler */
    lcx_strbuf b;
    size_t key_off;
} fit_state;

static lcx_status fit_count(fit_state *fs, int64_t units, int64_t words, int64_t *n) {
    LCX_TRY(prompt_text(fs->ps, fs->hay, units, words, &fs->b, &fs->key_off));
    LCX_TRY(count_tokens(fs->tok, fs->b.s, fs->b.len, n));
    *n += fs->tok->bos_id >= 0;
    return LCX_OK;
}

/* ---- prompt --------------------------------------------------------------------------------------------- */

lcx_status lcx_passkey_prompt_build(const lcx_eval_tokenizer *tok, int64_t target, double depth, uint32_t key,
                                    lcx_passkey_prompt *out) {
    const lcx_passkey_prompt_spec ps = {.depth = depth, .keys = &key, .n_needles = 1};
    return lcx_passkey_prompt_build_spec(tok, target, &ps, out);
}

lcx_status lcx_passkey_prompt_build_spec(const lcx_eval_tokenizer *tok, int64_t target,
                                         const lcx_passkey_prompt_spec *ps, lcx_passkey_prompt *out) {
    LCX_FAIL_IF(!tok || !tok->encode || !out || !ps || !ps->keys, LCX_ERR_INVALID,
                "passkey: missing tokenizer, needles or output");
    const double depth = ps->depth;
    LCX_FAIL_IF(!(depth >= 0.0 && depth <= 1.0), LCX_ERR_INVALID, "passkey: depth %g is outside [0, 1]", depth);
    LCX_FAIL_IF(ps->n_needles < 1 || ps->n_needles > LCX_NEEDLE_NAMES, LCX_ERR_INVALID,
                "passkey: %d needles (1 to %d)", ps->n_needles, LCX_NEEDLE_NAMES);
    for (int i = 0; i < ps->n_needles && ps->n_needles > 1; i++) {
        LCX_FAIL_IF(!ps->names || ps->names[i] < 0 || ps->names[i] >= LCX_NEEDLE_NAMES, LCX_ERR_INVALID,
                    "passkey: needle %d has no name (index %d)", i, ps->names ? ps->names[i] : -1);
        for (int j = 0; j < i; j++)
            LCX_FAIL_IF(ps->names[j] == ps->names[i] || ps->keys[j] == ps->keys[i], LCX_ERR_INVALID,
                        "passkey: needles %d and %d share a name or a key", j, i);
    }
    LCX_FAIL_IF(target < 1 || target > ((int64_t)1 << 40), LCX_ERR_INVALID,
                "passkey: target length %lld out of range", (long long)target);
    memset(out, 0, sizeof(*out));
    fit_state fs = {.tok = tok, .ps = ps};
    hay_words hay = {0};
    if (ps->haystack) {
        LCX_TRY(hay_split(ps->haystack, ps->haystack_len, 4 * target + 65, &hay));
        fs.hay = &hay;
    }
    lcx_status st = LCX_OK;
    int64_t base = 0, n = 0;
    LCX_TRY_GOTO(fit_count(&fs, 0, 0, &base), fail);
    LCX_FAIL_GOTO(base > target, LCX_ERR_INVALID, fail,
                  "passkey: target length %lld is shorter than the prompt without filler (%lld tokens)",
                  (long long)target, (long long)base);
    int64_t units = 0, lo = 0;
    if (fs.hay) {
        /* a unit is one word of the text: the most that fit (counts grow with words), doubling then halving */
        int64_t hi = 1;
        for (;;) {
            LCX_TRY_GOTO(fit_count(&fs, hi, 0, &n), fail);
            if (n > target) break;
            units = hi;
            LCX_FAIL_GOTO(hi > 4 * target + 64, LCX_ERR_INVALID, fail,
                          "passkey: %lld words of the haystack still fit %lld tokens (words without tokens?)",
                          (long long)hi, (long long)target);
            hi *= 2;
        }
        while (hi - units > 1) {
            int64_t mid = units + (hi - units) / 2;
            LCX_TRY_GOTO(fit_count(&fs, mid, 0, &n), fail);
            if (n <= target)
                units = mid;
            else
                hi = mid;
        }
    } else {
        /* Tokens per unit measured where a unit joins another one (" " + unit), then corrected by counting. */
        int64_t one = 0, two = 0;
        LCX_TRY_GOTO(fit_count(&fs, 1, 0, &one), fail);
        LCX_TRY_GOTO(fit_count(&fs, 2, 0, &two), fail);
        int64_t per_unit = two - one > 0 ? two - one : 1;
        units = one > target ? 0 : 1 + (target - one) / per_unit;
        LCX_TRY_GOTO(fit_count(&fs, units, 0, &n), fail);
        while (n > target && units > 0) {
            units--;
            LCX_TRY_GOTO(fit_count(&fs, units, 0, &n), fail);
        }
        for (;;) {
            int64_t next = 0;
            LCX_TRY_GOTO(fit_count(&fs, units + 1, 0, &next), fail);
            if (next > target) break;
            units++;
        }
        /* Fill the rest with words of one more unit: the largest count that still fits (counts grow with
         * words). */
        int64_t hi = filler_words() - 1;
        while (lo < hi) {
            int64_t mid = (lo + hi + 1) / 2;
            LCX_TRY_GOTO(fit_count(&fs, units, mid, &n), fail);
            if (n <= target)
                lo = mid;
            else
                hi = mid - 1;
        }
    }
    LCX_TRY_GOTO(fit_count(&fs, units, lo, &n), fail);
    LCX_ASSERT(n <= target);

    const int bos = tok->bos_id >= 0;
    int64_t ntext = 0;
    LCX_TRY_GOTO(encode_alloc(tok, fs.b.s, fs.b.len, bos, &out->tokens, &ntext), fail);
    if (bos) out->tokens[0] = tok->bos_id;
    out->n = ntext + bos;
    LCX_ASSERT(out->n == n);
    int64_t before_tokens = 0;
    LCX_TRY_GOTO(count_tokens(tok, fs.b.s, fs.key_off, &before_tokens), fail);
    out->key_pos = before_tokens + bos;
    out->units_before = units_before(ps, 0, units);
    out->units_after = units - out->units_before;
    out->extra_words = lo;
    out->key = ps->keys[0];
    out->n_needles = ps->n_needles;
    out->text = fs.b.s;
    out->text_len = fs.b.len;
    hay_free(&hay);
    return LCX_OK;
fail:
    hay_free(&hay);
    lcx_strbuf_free(&fs.b);
    lcx_passkey_prompt_free(out);
    return st;
}

void lcx_passkey_prompt_free(lcx_passkey_prompt *p) {
    if (!p) return;
    free(p->tokens);
    free(p->text);
    memset(p, 0, sizeof(*p));
}

lcx_status lcx_passkey_answer_tokens(const lcx_eval_tokenizer *tok, const lcx_passkey_prompt *p, uint32_t key,
                                     int32_t **ids, int64_t *n) {
    LCX_FAIL_IF(!tok || !tok->encode || !p || !p->text || !ids || !n, LCX_ERR_INVALID,
                "passkey: missing tokenizer, prompt or output");
    char tail[32];
    int tl = snprintf(tail, sizeof(tail), " %u", key);
    size_t len = p->text_len + (size_t)tl;
    char *full = malloc(len + 1);
    LCX_FAIL_IF(!full, LCX_ERR_OOM, "passkey: out of memory for the answer text");
    memcpy(full, p->text, p->text_len);
    memcpy(full + p->text_len, tail, (size_t)tl + 1);
    int32_t *all = NULL;
    int64_t nall = 0;
    lcx_status st = encode_alloc(tok, full, len, 0, &all, &nall);
    free(full);
    LCX_TRY(st);
    const int bos = tok->bos_id >= 0;
    const int64_t nprompt = p->n - bos;
    int prefix = nall > nprompt && memcmp(all, p->tokens + bos, (size_t)nprompt * sizeof(int32_t)) == 0;
    if (!prefix) {
        free(all);
        return lcx_fail(LCX_ERR_UNSUPPORTED,
                        "passkey: the tokenizer merges the answer \"%s\" into the prompt's last tokens", tail);
    }
    memmove(all, all + nprompt, (size_t)(nall - nprompt) * sizeof(int32_t));
    *ids = all;
    *n = nall - nprompt;
    return LCX_OK;
}

/* ---- keys ----------------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint32_t key_draw(uint64_t seed, int64_t trial, int64_t draw) {
    uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ (uint64_t)trial) ^ (uint64_t)draw);
    return 10000u + (uint32_t)(h % 90000u);
}

void lcx_passkey_keys(uint64_t seed, int64_t trial, int n, uint32_t *keys) {
    int64_t draw = 0;
    for (int i = 0; i < n; i++) {
        int dup;
        do {
            keys[i] = key_draw(seed, trial, draw++);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= keys[j] == keys[i];
        } while (dup);
    }
}

void lcx_needle_names(uint64_t seed, int64_t trial, int n, int *names) {
    /* a stream of its own (the keys' seed, tagged), so adding needles changes no key */
    uint64_t base = splitmix64(splitmix64(seed ^ 0x6e6565646c65ULL) ^ (uint64_t)trial);
    int64_t draw = 0;
    for (int i = 0; i < n && i < LCX_NEEDLE_NAMES; i++) {
        int dup;
        do {
            names[i] = (int)(splitmix64(base ^ (uint64_t)draw++) % LCX_NEEDLE_NAMES);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= names[j] == names[i];
        } while (dup);
    }
}

/* ---- evaluation ----------------------------------------------------------------------------------------- */

/* Prompt + answer tokens of key in one new buffer. */
static lcx_status with_answer(const lcx_eval_tokenizer *tok, const lcx_passkey_prompt *p, uint32_t key,
                              int32_t **seq, int64_t *n) {
    int32_t *ans = NULL;
    int64_t na = 0;
    LCX_TRY(lcx_passkey_answer_tokens(tok, p, key, &ans, &na));
    int32_t *s = malloc((size_t)(p->n + na) * sizeof(int32_t));
    if (!s) {
        free(ans);
        return lcx_fail(LCX_ERR_OOM, "passkey: out of memory for %lld tokens", (long long)(p->n + na));
    }
    memcpy(s, p->tokens, (size_t)p->n * sizeof(int32_t));
    memcpy(s + p->n, ans, (size_t)na * sizeof(int32_t));
    free(ans);
    *seq = s;
    *n = p->n + na;
    return LCX_OK;
}

static lcx_status answer_nll(const lcx_eval_tokenizer *tok, const lcx_passkey_prompt *p, uint32_t key,
                             lcx_eval_score_fn score, void *model, double *sum) {
    int32_t *seq = NULL;
    int64_t n = 0;
    LCX_TRY(with_answer(tok, p, key, &seq, &n));
    double *nll = malloc((size_t)(n - p->n) * sizeof(double));
    lcx_status st = nll ? score(model, seq, n, p->n, nll) : lcx_fail(LCX_ERR_OOM, "passkey: out of memory");
    if (st == LCX_OK) {
        *sum = 0.0;
        for (int64_t i = 0; i < n - p->n; i++) *sum += nll[i];
    }
    free(nll);
    free(seq);
    return st;
}

static lcx_status greedy_hit(const lcx_eval_tokenizer *tok, const lcx_passkey_prompt *p,
                             lcx_eval_argmax_fn argmax, void *model, int *hit) {
    int32_t *seq = NULL;
    int64_t n = 0;
    LCX_TRY(with_answer(tok, p, p->key, &seq, &n));
    int32_t *next = malloc((size_t)(n - p->n) * sizeof(int32_t));
    lcx_status st = next ? argmax(model, seq, n, p->n, next) : lcx_fail(LCX_ERR_OOM, "passkey: out of memory");
    if (st == LCX_OK) *hit = memcmp(next, seq + p->n, (size_t)(n - p->n) * sizeof(int32_t)) == 0;
    free(next);
    free(seq);
    return st;
}

void lcx_passkey_result_free(lcx_passkey_result *r) {
    if (!r) return;
    free(r->lengths);
    free(r->depths);
    free(r->prompt_tokens);
    free(r->loglik_correct);
    free(r->loglik_confused);
    free(r->greedy_correct);
    memset(r, 0, sizeof(*r));
}

double lcx_passkey_accuracy(const lcx_passkey_result *r, int mode, int li, int di) {
    if (!(r->modes & mode) || r->trials < 1 || li < 0 || li >= r->n_lengths || di < 0 || di >= r->n_depths)
        return NAN;
    const int *c = mode == LCX_PASSKEY_LOGLIK ? r->loglik_correct : r->greedy_correct;
    return (double)c[li * r->n_depths + di] / (double)r->trials;
}

lcx_status lcx_passkey_eval(const lcx_passkey_config *cfg, const lcx_eval_tokenizer *tok,
                            lcx_eval_score_fn score, lcx_eval_argmax_fn argmax, void *model,
                            lcx_passkey_result *out) {
    LCX_FAIL_IF(!cfg || !tok || !out, LCX_ERR_INVALID, "passkey: missing config, tokenizer or output");
    LCX_FAIL_IF(cfg->n_lengths < 1 || !cfg->lengths || cfg->n_depths < 1 || !cfg->depths, LCX_ERR_INVALID,
                "passkey: no lengths or no depths");
    LCX_FAIL_IF(cfg->n_lengths > 4096 || cfg->n_depths > 4096, LCX_ERR_INVALID,
                "passkey: more than 4096 lengths or depths");
    LCX_FAIL_IF(cfg->trials < 1, LCX_ERR_INVALID, "passkey: trials %d < 1", cfg->trials);
    const int needles = cfg->needles > 1 ? cfg->needles : 1;
    LCX_FAIL_IF(cfg->needles < 0 || cfg->needles > LCX_NEEDLE_NAMES, LCX_ERR_INVALID, "passkey: %d needles (1 to %d)",
                cfg->needles, LCX_NEEDLE_NAMES);
    LCX_FAIL_IF(!(cfg->modes & (LCX_PASSKEY_LOGLIK | LCX_PASSKEY_GREEDY)) ||
                    (cfg->modes & ~(LCX_PASSKEY_LOGLIK | LCX_PASSKEY_GREEDY)),
                LCX_ERR_INVALID, "passkey: modes 0x%x: pick LOGLIK and/or GREEDY", (unsigned)cfg->modes);
    LCX_FAIL_IF((cfg->modes & LCX_PASSKEY_LOGLIK) && (!score || cfg->distractors < 1 || cfg->distractors > 1000),
                LCX_ERR_INVALID, "passkey: log-likelihood mode needs a scorer and 1..1000 distractors (got %d)",
                cfg->distractors);
    LCX_FAIL_IF((cfg->modes & LCX_PASSKEY_GREEDY) && !argmax, LCX_ERR_INVALID,
                "passkey: greedy mode needs an argmax callback");
    memset(out, 0, sizeof(*out));
    const size_t cells = (size_t)cfg->n_lengths * (size_t)cfg->n_depths;
    out->n_lengths = cfg->n_lengths;
    out->n_depths = cfg->n_depths;
    out->trials = cfg->trials;
    out->distractors = cfg->modes & LCX_PASSKEY_LOGLIK ? cfg->distractors : 0;
    out->modes = cfg->modes;
    out->needles = needles;
    out->lengths = malloc((size_t)cfg->n_lengths * sizeof(int64_t));
    out->depths = malloc((size_t)cfg->n_depths * sizeof(double));
    out->prompt_tokens = calloc(cells, sizeof(int64_t));
    out->loglik_correct = calloc(cells, sizeof(int));
    out->loglik_confused = calloc(cells, sizeof(int));
    out->greedy_correct = calloc(cells, sizeof(int));
    lcx_status st = LCX_OK;
    lcx_passkey_prompt p = {0};
    uint32_t keys[1000 + LCX_NEEDLE_NAMES];
    int names[LCX_NEEDLE_NAMES];
    LCX_FAIL_GOTO(!out->lengths || !out->depths || !out->prompt_tokens || !out->loglik_correct ||
                      !out->loglik_confused || !out->greedy_correct,
                  LCX_ERR_OOM, fail, "passkey: out of memory for %zu result cells", cells);
    memcpy(out->lengths, cfg->lengths, (size_t)cfg->n_lengths * sizeof(int64_t));
    memcpy(out->depths, cfg->depths, (size_t)cfg->n_depths * sizeof(double));

    for (int li = 0; li < cfg->n_lengths; li++) {
        for (int di = 0; di < cfg->n_depths; di++) {
            const size_t cell = (size_t)li * (size_t)cfg->n_depths + (size_t)di;
            for (int t = 0; t < cfg->trials; t++) {
                const int64_t item = (int64_t)cell * cfg->trials + t;
                if (cfg->n_shards > 1 && item % cfg->n_shards != cfg->shard) continue; /* another shard's trial */
                /* keys[0] is asked for, keys[1 .. needles) are the other needles', the rest distractors */
                const int wrong = needles - 1 + (cfg->modes & LCX_PASSKEY_LOGLIK ? cfg->distractors : 0);
                lcx_passkey_keys(cfg->seed, t, 1 + wrong, keys);
                lcx_needle_names(cfg->seed, t, needles, names);
                const uint32_t key = keys[0];
                const lcx_passkey_prompt_spec ps = {cfg->depths[di], keys, names, needles, cfg->haystack,
                                                    cfg->haystack_len};
                LCX_TRY_GOTO(lcx_passkey_prompt_build_spec(tok, cfg->lengths[li], &ps, &p), ctx);
                if (t == cfg->trials - 1) out->prompt_tokens[cell] = p.n;
                if (cfg->modes & LCX_PASSKEY_LOGLIK) {
                    double truth = 0.0, low = INFINITY;
                    LCX_TRY_GOTO(answer_nll(tok, &p, key, score, model, &truth), ctx);
                    int best = 1, lowest = 0;
                    /* one key: stop at the first distractor that wins; several: score them all, to tell a
                     * confusion with another key of the prompt from a miss */
                    for (int d = 1; d <= wrong && (best || needles > 1); d++) {
                        double other = 0.0;
                        LCX_TRY_GOTO(answer_nll(tok, &p, keys[d], score, model, &other), ctx);
                        best &= truth < other; /* a tie is a miss */
                        if (other < low) low = other, lowest = d;
                    }
                    out->loglik_correct[cell] += best;
                    out->loglik_confused[cell] += !best && lowest < needles;
                }
                if (cfg->modes & LCX_PASSKEY_GREEDY) {
                    int hit = 0;
                    LCX_TRY_GOTO(greedy_hit(tok, &p, argmax, model, &hit), ctx);
                    out->greedy_correct[cell] += hit;
                }
                lcx_passkey_prompt_free(&p);
                continue;
            ctx:
                lcx_fail_context(st, "passkey length %lld, depth %g, trial %d: ", (long long)cfg->lengths[li],
                                 cfg->depths[di], t);
                goto fail;
            }
        }
    }
    return LCX_OK;
fail:
    lcx_passkey_prompt_free(&p);
    lcx_passkey_result_free(out);
    return st;
}
