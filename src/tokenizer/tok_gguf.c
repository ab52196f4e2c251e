/* Tokenizers from GGUF metadata (tokenizer.ggml.*), built as the equivalent Hugging Face pipeline:
 *   gpt2:  byte-level BPE, merges from tokenizer.ggml.merges, split regex chosen by tokenizer.ggml.pre;
 *   llama: SentencePiece BPE: "▁" prepended to every text piece and spaces -> "▁" (what llama.cpp does),
 *          byte fallback to the <0xXX> tokens, and - unless the file carries merges - merges derived from the
 *          scores: every split of a normal token into two vocabulary tokens merges, and all merges producing
 *          tokens of equal score share one rank, so the highest-scoring, then leftmost, pair merges first, as in
 *          SentencePiece's BPE.
 * Control, user-defined and unknown tokens become added tokens (control/unknown special), matched in text like
 * llama.cpp with parse_special. The file itself is read by formats/gguf.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "src/tokenizer/tok_internal.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static const char *const LLAMA3_RE[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
static const char *const QWEN2_RE[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
static const char *const GPT2_RE[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"};
/* DeepSeek LLM and Coder (Llama architecture): the Split regexes of their tokenizer.json, in order. The LLM's
 * second one is a list of cased letters (A-Z, a-z, Latin, Greek, Cyrillic, ...), its fourth takes the whitespace
 * before each line end (a line anchor, as in tokenizers' regex engine). */
static const char *const DEEPSEEK_LLM_RE[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}"
    "\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}"
    "\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
    "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+"};
static const char *const DEEPSEEK_CODER_RE[] = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"};
#define N_OF(a) ((int)(sizeof(a) / sizeof(a)[0]))

int tok_gguf_split_of(const char *pre, tok_gguf_split *out) {
    *out = (tok_gguf_split){GPT2_RE, 1, 0, 0};
    if (!pre || strcmp(pre, "default") == 0 || strcmp(pre, "gpt2") == 0 || strcmp(pre, "gpt-2") == 0) return 1;
    if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0 || strcmp(pre, "smaug-bpe") == 0) {
        /* llama.cpp: whole-word vocabulary hits for Llama 3 (HF: ignore_merges) */
        *out = (tok_gguf_split){LLAMA3_RE, 1, 0, 1};
        return 1;
    }
    if (strcmp(pre, "qwen2") == 0) {
        out->regex = QWEN2_RE;
        return 1;
    }
    if (strcmp(pre, "deepseek-llm") == 0) {
        *out = (tok_gguf_split){DEEPSEEK_LLM_RE, N_OF(DEEPSEEK_LLM_RE), 0, 0};
        return 1;
    }
    if (strcmp(pre, "deepseek-coder") == 0) {
        *out = (tok_gguf_split){DEEPSEEK_CODER_RE, N_OF(DEEPSEEK_CODER_RE), 0, 0};
        return 1;
    }
    /* llama.cpp's "\\p{N}" split before the GPT-2 regex (HF: Digits(individual_digits)) */
    if (strcmp(pre, "smollm") == 0 || strcmp(pre, "starcoder") == 0 || strcmp(pre, "refact") == 0) {
        out->digits = 1;
        return 1;
    }
    return 0;
}

static lcx_status add_added(lcx_tokenizer *t, uint32_t id, const char *s, size_t len, int special) {
    tok_added *p = realloc(t->added, (t->n_added + 1) * sizeof *p);
    if (!p) return lcx_fail(LCX_ERR_OOM, "added tokens");
    t->added = p;
    tok_added *a = &t->added[t->n_added];
    memset(a, 0, sizeof *a);
    a->content = malloc(len + 1);
    if (!a->content) return lcx_fail(LCX_ERR_OOM, "added tokens");
    memcpy(a->content, s, len);
    a->content[len] = 0;
    a->len = len;
    a->id = id;
    a->special = special;
    t->n_added++;
    t->id_flags[id] |= TOK_ID_ADDED | (special ? TOK_ID_SPECIAL : 0);
    return LCX_OK;
}

/* Pre-tokenizers: [Digits(individual) when digits,] Split(re, Isolated) for each regex, ByteLevel (no regex). */
static lcx_status add_pre_split(lcx_tokenizer *t, const tok_gguf_split *sp) {
    t->pres = calloc((size_t)sp->n_regex + 2, sizeof *t->pres);
    if (!t->pres) return lcx_fail(LCX_ERR_OOM, "pre-tokenizer");
    if (sp->digits) {
        tok_pre *d = &t->pres[t->n_pres];
        d->kind = PRE_DIGITS;
        d->individual_digits = 1;
        d->behavior = SPLIT_ISOLATED;
        LCX_TRY(tok_regex_compile("\\p{N}", 5, 0, "GGUF pre-tokenizer", &d->re));
        t->n_pres++;
    }
    for (int k = 0; k < sp->n_regex; k++) {
        tok_pre *p = &t->pres[t->n_pres];
        p->kind = PRE_SPLIT;
        p->behavior = SPLIT_ISOLATED;
        LCX_TRY(tok_regex_compile(sp->regex[k], strlen(sp->regex[k]), 0, "GGUF pre-tokenizer", &p->re));
        t->n_pres++;
    }
    t->pres[t->n_pres++].kind = PRE_BYTELEVEL;
    return LCX_OK;
}

typedef struct smerge {
    uint32_t a, b, merged;
    float score;
} smerge;

static int smerge_cmp(const void *x, const void *y) {
    const smerge *p = x, *q = y;
    if (p->score != q->score) return p->score > q->score ? -1 : 1;
    if (p->merged != q->merged) return p->merged < q->merged ? -1 : 1;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* Merges of a SentencePiece vocabulary, from the scores (see the file comment). */
static lcx_status spm_merges(lcx_tokenizer *t, const lcx_gguf_vocab *v) {
    smerge *m = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < v->n_tokens; i++) {
        int32_t type = v->token_types ? v->token_types[i] : TT_NORMAL;
        if (type != TT_NORMAL && type != TT_USER) continue;
        const char *s = v->tokens[i];
        size_t len = v->token_lens[i];
        for (size_t k = 1; k < len; k++) {
            if (((uint8_t)s[k] & 0xC0) == 0x80) continue; /* split at character boundaries only */
            uint32_t a, b;
            if (!tok_strmap_get(&t->vocab, s, k, &a) || !tok_strmap_get(&t->vocab, s + k, len - k, &b)) continue;
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 4096;
                smerge *p = realloc(m, nc * sizeof *p);
                if (!p) { free(m); return lcx_fail(LCX_ERR_OOM, "merges"); }
                m = p;
                cap = nc;
            }
            m[n++] = (smerge){a, b, (uint32_t)i, v->scores ? v->scores[i] : -(float)i};
        }
    }
    if (n) qsort(m, n, sizeof *m, smerge_cmp);
    uint32_t rank = 0;
    lcx_status st = LCX_OK;
    for (size_t i = 0; i < n && st == LCX_OK; i++) {
        if (i > 0 && m[i].score != m[i - 1].score) rank++;
        uint32_t r0, id0;
        /* one pair can only produce one token; keep the better-scoring one (sorted first) */
        if (tok_pairmap_get(&t->merges, m[i].a, m[i].b, &r0, &id0)) continue;
        st = tok_pairmap_put(&t->merges, m[i].a, m[i].b, rank, m[i].merged);
    }
    free(m);
    return st;
}

lcx_status lcx_tokenizer_from_gguf(const lcx_gguf_vocab *v, const char *name, lcx_tokenizer **out) {
    *out = NULL;
    LCX_FAIL_IF(!v->model, LCX_ERR_FORMAT, "%s: tokenizer.ggml.model is missing", name);
    int gpt2 = strcmp(v->model, "gpt2") == 0, llama = strcmp(v->model, "llama") == 0;
    LCX_FAIL_IF(!gpt2 && !llama, LCX_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%s' is not supported (gpt2, llama)",
                name, v->model);
    LCX_FAIL_IF(v->n_tokens == 0 || v->n_tokens >= (1u << 31), LCX_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %zu "
                "entries", name, v->n_tokens);
    lcx_tokenizer *t = tok_alloc(name);
    if (!t) return lcx_fail(LCX_ERR_OOM, "tokenizer");
    lcx_status st = LCX_OK;
    t->byte_level = gpt2;
    if (gpt2) {
        tok_gguf_split sp;
        LCX_FAIL_GOTO(!tok_gguf_split_of(v->pre, &sp), LCX_ERR_UNSUPPORTED, fail, "%s: tokenizer.ggml.pre '%s' is not "
                      "supported (llama-bpe, qwen2, gpt2, smollm, starcoder, refact, deepseek-llm, deepseek-coder, "
                      "default)", name, v->pre);
        LCX_TRY_GOTO(add_pre_split(t, &sp), fail);
        t->ignore_merges = sp.ignore_merges;
        t->decs = calloc(1, sizeof *t->decs);
        LCX_FAIL_GOTO(!t->decs, LCX_ERR_OOM, fail, "decoder");
        t->decs[0].kind = DEC_BYTELEVEL;
        t->n_decs = 1;
    } else {
        t->norms = calloc(2, sizeof *t->norms);
        t->decs = calloc(4, sizeof *t->decs);
        LCX_FAIL_GOTO(!t->norms || !t->decs, LCX_ERR_OOM, fail, "pipeline");
        char *m1 = strdup("\xE2\x96\x81"), *m2 = strdup("\xE2\x96\x81"), *sp = strdup(" "), *sp2 = strdup(" "),
             *m3 = strdup("\xE2\x96\x81");
        /* llama.cpp prepends a space to each text piece unless add_space_prefix is false */
        size_t k = 0;
        if (v->add_space_prefix != 0) t->norms[k++] = (tok_norm){NORM_PREPEND, m1, 3, NULL, 0};
        else free(m1);
        t->norms[k++] = (tok_norm){NORM_REPLACE, sp, 1, m2, 3};
        t->n_norms = k;
        t->decs[0] = (tok_dec){DEC_REPLACE, m3, 3, sp2, 1, 0, 0, PREPEND_ALWAYS};
        t->decs[1].kind = DEC_BYTEFALLBACK;
        t->decs[2].kind = DEC_FUSE;
        char *sp3 = strdup(" ");
        t->decs[3] = (tok_dec){DEC_STRIP, sp3, 1, NULL, 0, 1, 0, PREPEND_ALWAYS};
        t->n_decs = 4;
        LCX_FAIL_GOTO(!m2 || !m3 || !sp || !sp2 || !sp3 || (v->add_space_prefix != 0 && !t->norms[0].a), LCX_ERR_OOM,
                      fail, "pipeline");
        if (v->add_space_prefix == 0) { /* the leading space is only stripped if one was added */
            free(t->decs[3].a);
            t->decs[3].a = NULL;
            t->n_decs = 3;
        }
        t->byte_fallback = 1;
        t->fuse_unk = 1;
    }
    t->has_decoder = 1;
    t->id_limit = v->n_tokens; /* ids are the array's indices */
    for (size_t i = 0; i < v->n_tokens; i++) {
        const char *s = v->tokens[i];
        size_t len = v->token_lens[i];
        LCX_TRY_GOTO(tok_set_id(t, (uint32_t)i, s, len), fail);
        int32_t type = v->token_types ? v->token_types[i] : TT_NORMAL;
        if (type == TT_CONTROL || type == TT_UNKNOWN || type == TT_USER) {
            LCX_TRY_GOTO(add_added(t, (uint32_t)i, s, len, type != TT_USER), fail);
            if (type == TT_UNKNOWN && t->unk_id == TOK_NONE) t->unk_id = (uint32_t)i;
        }
        if (type == TT_UNUSED) continue;
        if (gpt2) {
            /* byte-level vocabulary: key by the raw bytes the characters stand for */
            char *raw = malloc(len + 1);
            LCX_FAIL_GOTO(!raw, LCX_ERR_OOM, fail, "vocabulary");
            size_t o = 0, k = 0;
            int ok = 1;
            while (k < len) {
                size_t adv;
                if (tok_utf8_len((uint8_t)s[k]) > len - k) { ok = 0; break; }
                int b = tok_cp_to_byte(tok_utf8_decode((const uint8_t *)s + k, &adv));
                if (b < 0) { ok = 0; break; }
                raw[o++] = (char)b;
                k += adv;
            }
            if (ok) st = tok_strmap_put(&t->vocab, raw, o, (uint32_t)i);
            free(raw);
            LCX_TRY_GOTO(st, fail);
        } else {
            LCX_TRY_GOTO(tok_strmap_put(&t->vocab, s, len, (uint32_t)i), fail);
        }
    }
    if (v->unk_id >= 0) {
        LCX_FAIL_GOTO((uint64_t)v->unk_id >= v->n_tokens, LCX_ERR_FORMAT, fail, "%s: tokenizer.ggml.unknown_token_id "
                      "%lld out of range", name, (long long)v->unk_id);
        if (llama) t->unk_id = (uint32_t)v->unk_id;
    }
    if (gpt2) t->unk_id = TOK_NONE; /* byte-level: every byte has a token */
    if (v->n_merges) {
        for (size_t i = 0; i < v->n_merges; i++) {
            char where[96];
            snprintf(where, sizeof where, "%s: tokenizer.ggml.merges[%zu]", name, i);
            const char *s = v->merges[i];
            size_t len = v->merge_lens[i];
            const char *sp = memchr(s, ' ', len);
            LCX_FAIL_GOTO(!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)), LCX_ERR_FORMAT, fail,
                          "%s: '%.*s' is not two tokens separated by one space", where, (int)len, s);
            /* byte-level strings are keyed through the byte alphabet, like the vocabulary above */
            LCX_TRY_GOTO(tok_add_merge(t, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp - s) - 1, (uint32_t)i, where),
                         fail);
        }
    } else if (llama) {
        LCX_TRY_GOTO(spm_merges(t, v), fail);
    } else {
        LCX_FAIL_GOTO(1, LCX_ERR_FORMAT, fail, "%s: gpt2 tokenizer without tokenizer.ggml.merges", name);
    }
    int add_bos = v->add_bos >= 0 ? v->add_bos : llama;
    int add_eos = v->add_eos >= 0 ? v->add_eos : 0;
    if (v->bos_id >= 0) {
        LCX_FAIL_GOTO((uint64_t)v->bos_id >= v->n_tokens, LCX_ERR_FORMAT, fail, "%s: tokenizer.ggml.bos_token_id %lld "
                      "out of range", name, (long long)v->bos_id);
        t->bos_id = v->bos_id;
        if (add_bos) {
            t->tmpl_pre = malloc(sizeof *t->tmpl_pre);
            LCX_FAIL_GOTO(!t->tmpl_pre, LCX_ERR_OOM, fail, "template");
            t->tmpl_pre[0] = (uint32_t)v->bos_id;
            t->n_tmpl_pre = 1;
        }
    }
    if (v->eos_id >= 0) {
        LCX_FAIL_GOTO((uint64_t)v->eos_id >= v->n_tokens, LCX_ERR_FORMAT, fail, "%s: tokenizer.ggml.eos_token_id %lld "
                      "out of range", name, (long long)v->eos_id);
        t->eos_id = v->eos_id;
        if (add_eos) {
            t->tmpl_post = malloc(sizeof *t->tmpl_post);
            LCX_FAIL_GOTO(!t->tmpl_post, LCX_ERR_OOM, fail, "template");
            t->tmpl_post[0] = (uint32_t)v->eos_id;
            t->n_tmpl_post = 1;
        }
    }
    /* Added tokens are matched by their raw text, as llama.cpp matches special tokens (converters write them
     * unmapped, e.g. "<|begin_of_text|>"). */
    LCX_TRY_GOTO(tok_finish(t), fail);
    *out = t;
    return LCX_OK;
fail:
    lcx_tokenizer_free(t);
    return st;
}

/* ---- tokenizer.ggml.* keys of an open GGUF file ---------------------------------------------------------- */

/* Optional integer / bool keys: left at their default when absent; a value of the wrong type is an error naming
 * the file and key (from the getters). */
static lcx_status opt_i64(const lcx_gguf_file *f, const char *key, int64_t *v) {
    return lcx_gguf_find_kv(f, key) ? lcx_gguf_get_i64(f, key, v) : LCX_OK;
}
static lcx_status opt_bool(const lcx_gguf_file *f, const char *key, int *v) {
    return lcx_gguf_find_kv(f, key) ? lcx_gguf_get_bool(f, key, v) : LCX_OK;
}

/* Views of a string array's elements as the pointer + length arrays lcx_gguf_vocab takes. */
static lcx_status str_views(const lcx_gguf_kv *kv, const char ***s, size_t **len) {
    size_t n = (size_t)kv->count;
    *s = malloc((n ? n : 1) * sizeof **s);
    *len = malloc((n ? n : 1) * sizeof **len);
    if (!*s || !*len) return lcx_fail(LCX_ERR_OOM, "key '%s': %zu strings", kv->key, n);
    for (size_t i = 0; i < n; i++) LCX_TRY(lcx_gguf_arr_str(kv, i, &(*s)[i], &(*len)[i]));
    return LCX_OK;
}

/* An optional array with one element per token, of element type t1 or t2; *buf gets room for n_tokens values of
 * elem_size bytes (caller frees). *kv and *buf are NULL when the key is absent. */
static lcx_status per_token(const lcx_gguf_file *f, const char *key, lcx_gguf_type t1, lcx_gguf_type t2,
                            const char *expected, size_t n_tokens, size_t elem_size, const lcx_gguf_kv **kv,
                            void **buf) {
    *kv = NULL;
    *buf = NULL;
    if (!lcx_gguf_find_kv(f, key)) return LCX_OK;
    LCX_TRY(lcx_gguf_get_array(f, key, LCX_GGUF_TYPE_COUNT, kv));
    LCX_FAIL_IF((*kv)->elem_type != t1 && (*kv)->elem_type != t2, LCX_ERR_FORMAT, "%s: key '%s' is an array of %s, "
                "expected %s", f->path, key, lcx_gguf_type_name((*kv)->elem_type), expected);
    LCX_FAIL_IF((*kv)->count != n_tokens, LCX_ERR_FORMAT, "%s: %s has %llu entries for %zu tokens", f->path, key,
                (unsigned long long)(*kv)->count, n_tokens);
    *buf = malloc(n_tokens * elem_size); /* n_tokens > 0 and was allocated once already: no overflow */
    LCX_FAIL_IF(!*buf, LCX_ERR_OOM, "%s: %s", f->path, key);
    return LCX_OK;
}

/* tokenizer.ggml.scores: f32, finite (*out NULL when absent). */
static lcx_status read_scores(const lcx_gguf_file *f, size_t n, float **out) {
    const lcx_gguf_kv *kv;
    void *buf;
    LCX_TRY(per_token(f, "tokenizer.ggml.scores", LCX_GGUF_F32, LCX_GGUF_F32, "an array of f32", n, sizeof **out,
                      &kv, &buf));
    float *sc = buf;
    lcx_status st = LCX_OK;
    for (size_t i = 0; kv && i < n && st == LCX_OK; i++) {
        double x = 0;
        st = lcx_gguf_arr_float(kv, i, &x);
        if (st == LCX_OK && !isfinite(x))
            st = lcx_fail(LCX_ERR_FORMAT, "%s: tokenizer.ggml.scores[%zu] is not finite", f->path, i);
        sc[i] = (float)x; /* exact: the elements are f32 */
    }
    if (st != LCX_OK) free(sc), sc = NULL;
    *out = sc;
    return st;
}

/* tokenizer.ggml.token_type: i32 or u32 (*out NULL when absent). */
static lcx_status read_types(const lcx_gguf_file *f, size_t n, int32_t **out) {
    const lcx_gguf_kv *kv;
    void *buf;
    LCX_TRY(per_token(f, "tokenizer.ggml.token_type", LCX_GGUF_I32, LCX_GGUF_U32, "an array of i32 or u32", n,
                      sizeof **out, &kv, &buf));
    int32_t *ty = buf;
    lcx_status st = LCX_OK;
    for (size_t i = 0; kv && i < n && st == LCX_OK; i++) {
        int64_t x = 0;
        st = lcx_gguf_arr_int(kv, i, &x);
        ty[i] = x <= INT32_MAX ? (int32_t)x : -1; /* a u32 past INT32_MAX is no known type either */
    }
    if (st != LCX_OK) free(ty), ty = NULL;
    *out = ty;
    return st;
}

lcx_status tok_gguf_vocab_read(const lcx_gguf_file *f, lcx_gguf_vocab *v) {
    const char *path = f->path;
    memset(v, 0, sizeof *v);
    v->bos_id = v->eos_id = v->unk_id = -1;
    v->add_bos = v->add_eos = v->add_space_prefix = -1;
    const char **toks = NULL, **merges = NULL;
    size_t *tok_lens = NULL, *merge_lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    char *model = NULL, *pre = NULL;
    const lcx_gguf_kv *kv;
    lcx_status st = LCX_OK;

    if (lcx_gguf_find_kv(f, "tokenizer.ggml.model"))
        LCX_TRY_GOTO(lcx_gguf_get_str_dup(f, "tokenizer.ggml.model", &model), fail);
    if (lcx_gguf_find_kv(f, "tokenizer.ggml.pre"))
        LCX_TRY_GOTO(lcx_gguf_get_str_dup(f, "tokenizer.ggml.pre", &pre), fail);
    v->model = model;
    v->pre = pre;

    LCX_FAIL_GOTO(!lcx_gguf_find_kv(f, "tokenizer.ggml.tokens"), LCX_ERR_FORMAT, fail, "%s: no tokenizer.ggml.tokens",
                  path);
    LCX_TRY_GOTO(lcx_gguf_get_array(f, "tokenizer.ggml.tokens", LCX_GGUF_STRING, &kv), fail);
    LCX_FAIL_GOTO(kv->count == 0, LCX_ERR_FORMAT, fail, "%s: no tokenizer.ggml.tokens", path);
    LCX_TRY_GOTO(str_views(kv, &toks, &tok_lens), fail);
    v->n_tokens = (size_t)kv->count;
    v->tokens = toks;
    v->token_lens = tok_lens;

    LCX_TRY_GOTO(read_scores(f, v->n_tokens, &scores), fail);
    LCX_TRY_GOTO(read_types(f, v->n_tokens, &types), fail);
    v->scores = scores;
    v->token_types = types;

    if (lcx_gguf_find_kv(f, "tokenizer.ggml.merges")) {
        LCX_TRY_GOTO(lcx_gguf_get_array(f, "tokenizer.ggml.merges", LCX_GGUF_STRING, &kv), fail);
        LCX_TRY_GOTO(str_views(kv, &merges, &merge_lens), fail);
        v->n_merges = (size_t)kv->count;
        v->merges = merges;
        v->merge_lens = merge_lens;
    }

    LCX_TRY_GOTO(opt_i64(f, "tokenizer.ggml.bos_token_id", &v->bos_id), fail);
    LCX_TRY_GOTO(opt_i64(f, "tokenizer.ggml.eos_token_id", &v->eos_id), fail);
    LCX_TRY_GOTO(opt_i64(f, "tokenizer.ggml.unknown_token_id", &v->unk_id), fail);
    LCX_TRY_GOTO(opt_bool(f, "tokenizer.ggml.add_bos_token", &v->add_bos), fail);
    LCX_TRY_GOTO(opt_bool(f, "tokenizer.ggml.add_eos_token", &v->add_eos), fail);
    LCX_TRY_GOTO(opt_bool(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix), fail);
    return LCX_OK;
fail:
    free(toks); free(tok_lens); free(merges); free(merge_lens);
    free(scores); free(types); free(model); free(pre);
    memset(v, 0, sizeof *v);
    return st;
}

/* The arrays are the ones tok_gguf_vocab_read allocated (the struct's pointers are const for its readers). */
void tok_gguf_vocab_free(lcx_gguf_vocab *v) {
    free((void *)v->tokens); free((void *)v->token_lens); free((void *)v->merges); free((void *)v->merge_lens);
    free((void *)v->scores); free((void *)v->token_types); free((void *)v->model); free((void *)v->pre);
    memset(v, 0, sizeof *v);
}

lcx_status lcx_tokenizer_from_gguf_file(const lcx_gguf_file *f, lcx_tokenizer **out) {
    *out = NULL;
    lcx_gguf_vocab v;
    LCX_TRY(tok_gguf_vocab_read(f, &v));
    lcx_status st = lcx_tokenizer_from_gguf(&v, f->path, out);
    tok_gguf_vocab_free(&v);
    return st;
}

lcx_status lcx_tokenizer_load_gguf(const char *path, lcx_tokenizer **out) {
    *out = NULL;
    lcx_gguf_file *f;
    LCX_TRY(lcx_gguf_open(path, &f));
    lcx_status st = lcx_tokenizer_from_gguf_file(f, out);
    lcx_gguf_close(f);
    return st;
}
