/* Tokenizers from GGUF metadata (tokenizer.ggml.*), built as the equivalent Hugging Face pipeline:
 *   gpt2:  byte-level BPE, merges from tokenizer.ggml.merges, split regex chosen by tokenizer.ggml.pre;
 *   llama: SentencePiece BPE: "▁" prepended to every text piece and spaces -> "▁" (what llama.cpp does),
 *          byte fallback to the <0xXX> tokens, and - unless the file carries merges - merges derived from the
 *          scores: every split of a normal token into two vocabulary tokens merges, and all merges producing
 *          tokens of equal score share one rank, so the highest-scoring, then leftmost, pair merges first, as in
 *          SentencePiece's BPE.
 * Control, user-defined and unknown tokens become added tokens (control/unknown special), matched in text like
 * llama.cpp with parse_special. The GGUF reader here only walks the key/value section. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "tok_internal.h"

enum { GT_U8, GT_I8, GT_U16, GT_I16, GT_U32, GT_I32, GT_F32, GT_BOOL, GT_STRING, GT_ARRAY, GT_U64, GT_I64, GT_F64 };
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static const char LLAMA3_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                                "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                               "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

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
    t->id_flags[id] |= 1 | (special ? 2 : 0);
    return LCX_OK;
}

static lcx_status add_pre_split(lcx_tokenizer *t, const char *re) {
    tok_pre p;
    memset(&p, 0, sizeof p);
    p.kind = PRE_SPLIT;
    p.behavior = SPLIT_ISOLATED;
    LCX_TRY(tok_regex_compile(re, strlen(re), 0, "GGUF pre-tokenizer", &p.re));
    t->pres = calloc(2, sizeof *t->pres);
    if (!t->pres) { pcre2_code_free(p.re); return lcx_fail(LCX_ERR_OOM, "pre-tokenizer"); }
    t->pres[0] = p;
    t->pres[1].kind = PRE_BYTELEVEL;
    t->n_pres = 2;
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
        const char *re = GPT2_RE;
        if (v->pre && (strcmp(v->pre, "llama-bpe") == 0 || strcmp(v->pre, "llama3") == 0 ||
                       strcmp(v->pre, "smaug-bpe") == 0))
            re = LLAMA3_RE;
        else if (v->pre && strcmp(v->pre, "qwen2") == 0) re = QWEN2_RE;
        else if (v->pre && strcmp(v->pre, "default") != 0 && strcmp(v->pre, "gpt2") != 0 &&
                 strcmp(v->pre, "gpt-2") != 0 && strcmp(v->pre, "smollm") != 0)
            LCX_FAIL_GOTO(1, LCX_ERR_UNSUPPORTED, fail, "%s: tokenizer.ggml.pre '%s' is not supported (llama-bpe, "
                          "qwen2, gpt2, smollm, default)", name, v->pre);
        LCX_TRY_GOTO(add_pre_split(t, re), fail);
        t->ignore_merges = re == LLAMA3_RE; /* llama.cpp: whole-word vocabulary hits for Llama 3 (HF: ignore_merges) */
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

/* ---- GGUF key/value section ------------------------------------------------------------------------------- */
typedef struct rd {
    const uint8_t *p;
    size_t n, off;
    const char *path;
} rd;

static lcx_status need(rd *r, size_t k, const char *what) {
    if (k > r->n - r->off)
        return lcx_fail(LCX_ERR_FORMAT, "%s: truncated at byte %zu reading %s", r->path, r->off, what);
    return LCX_OK;
}
static lcx_status get_u32(rd *r, uint32_t *v, const char *what) {
    LCX_TRY(need(r, 4, what));
    memcpy(v, r->p + r->off, 4);
    r->off += 4;
    return LCX_OK;
}
static lcx_status get_u64(rd *r, uint64_t *v, const char *what) {
    LCX_TRY(need(r, 8, what));
    memcpy(v, r->p + r->off, 8);
    r->off += 8;
    return LCX_OK;
}
static lcx_status get_str(rd *r, const char **s, size_t *len, const char *what) {
    uint64_t n;
    LCX_TRY(get_u64(r, &n, what));
    LCX_TRY(need(r, n, what));
    *s = (const char *)r->p + r->off;
    *len = (size_t)n;
    r->off += (size_t)n;
    return LCX_OK;
}
static size_t scalar_size(uint32_t t) {
    switch (t) {
    case GT_U8: case GT_I8: case GT_BOOL: return 1;
    case GT_U16: case GT_I16: return 2;
    case GT_U32: case GT_I32: case GT_F32: return 4;
    case GT_U64: case GT_I64: case GT_F64: return 8;
    default: return 0;
    }
}
static int64_t scalar_int(const uint8_t *p, uint32_t t) {
    switch (t) {
    case GT_U8: case GT_BOOL: return p[0];
    case GT_I8: return (int8_t)p[0];
    case GT_U16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case GT_I16: { int16_t x; memcpy(&x, p, 2); return x; }
    case GT_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case GT_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case GT_U64: { uint64_t x; memcpy(&x, p, 8); return x > INT64_MAX ? -1 : (int64_t)x; }
    case GT_I64: { int64_t x; memcpy(&x, p, 8); return x; }
    default: return -1;
    }
}

typedef struct strarr {
    const char **s;
    size_t *len;
    size_t n;
} strarr;

static lcx_status read_str_array(rd *r, uint64_t count, strarr *a, const char *key) {
    LCX_FAIL_IF(count > (r->n - r->off) / 8, LCX_ERR_FORMAT, "%s: %s: %llu strings cannot fit in the file", r->path, key,
                (unsigned long long)count);
    a->s = malloc((count ? count : 1) * sizeof *a->s);
    a->len = malloc((count ? count : 1) * sizeof *a->len);
    LCX_FAIL_IF(!a->s || !a->len, LCX_ERR_OOM, "%s", key);
    a->n = (size_t)count;
    for (uint64_t i = 0; i < count; i++) LCX_TRY(get_str(r, &a->s[i], &a->len[i], key));
    return LCX_OK;
}

lcx_status lcx_tokenizer_load_gguf(const char *path, lcx_tokenizer **out) {
    *out = NULL;
    lcx_mapping m;
    LCX_TRY(lcx_map_file(path, &m));
    rd r = {m.data, m.size, 0, path};
    lcx_gguf_vocab v;
    memset(&v, 0, sizeof v);
    v.bos_id = v.eos_id = v.unk_id = -1;
    v.add_bos = v.add_eos = v.add_space_prefix = -1;
    strarr toks = {0}, merges = {0};
    float *scores = NULL;
    int32_t *types = NULL;
    char *model = NULL, *pre = NULL;
    lcx_status st = LCX_OK;
    uint64_t n_scores = 0, n_types = 0;
    uint32_t magic, version;
    uint64_t n_tensors, n_kv;
    LCX_TRY_GOTO(get_u32(&r, &magic, "magic"), done);
    LCX_FAIL_GOTO(memcmp(&magic, "GGUF", 4) != 0, LCX_ERR_FORMAT, done, "%s: not a GGUF file (bad magic)", path);
    LCX_TRY_GOTO(get_u32(&r, &version, "version"), done);
    LCX_FAIL_GOTO(version != 2 && version != 3, LCX_ERR_UNSUPPORTED, done, "%s: GGUF version %u (2 and 3 are read)",
                  path, version);
    LCX_TRY_GOTO(get_u64(&r, &n_tensors, "tensor count"), done);
    LCX_TRY_GOTO(get_u64(&r, &n_kv, "key/value count"), done);
    for (uint64_t i = 0; i < n_kv; i++) {
        const char *key;
        size_t kl;
        uint32_t type;
        char kbuf[96];
        LCX_TRY_GOTO(get_str(&r, &key, &kl, "key"), done);
        snprintf(kbuf, sizeof kbuf, "%.*s", (int)(kl < 90 ? kl : 90), key);
        LCX_TRY_GOTO(get_u32(&r, &type, kbuf), done);
        int tk = kl > 16 && memcmp(key, "tokenizer.ggml.", 15) == 0;
        const char *sub = key + 15;
        size_t sl = tk ? kl - 15 : 0;
#define IS(name) (tk && sl == sizeof(name) - 1 && memcmp(sub, name, sl) == 0)
        if (type == GT_STRING) {
            const char *s;
            size_t len;
            LCX_TRY_GOTO(get_str(&r, &s, &len, kbuf), done);
            if (IS("model")) { free(model); model = strndup(s, len); LCX_FAIL_GOTO(!model, LCX_ERR_OOM, done, "model"); }
            if (IS("pre")) { free(pre); pre = strndup(s, len); LCX_FAIL_GOTO(!pre, LCX_ERR_OOM, done, "pre"); }
        } else if (type == GT_ARRAY) {
            uint32_t et;
            uint64_t count;
            LCX_TRY_GOTO(get_u32(&r, &et, kbuf), done);
            LCX_TRY_GOTO(get_u64(&r, &count, kbuf), done);
            if (et == GT_STRING) {
                strarr a = {0};
                st = read_str_array(&r, count, &a, kbuf);
                if (st == LCX_OK && IS("tokens")) { free(toks.s); free(toks.len); toks = a; }
                else if (st == LCX_OK && IS("merges")) { free(merges.s); free(merges.len); merges = a; }
                else { free(a.s); free(a.len); }
                LCX_TRY_GOTO(st, done);
            } else {
                size_t es = scalar_size(et), bytes;
                LCX_FAIL_GOTO(!es, LCX_ERR_FORMAT, done, "%s: %s: unsupported array element type %u", path, kbuf, et);
                LCX_FAIL_GOTO(!lcx_mul_size((size_t)count, es, &bytes) || count > SIZE_MAX / 8, LCX_ERR_FORMAT, done,
                              "%s: %s: array too large", path, kbuf);
                LCX_TRY_GOTO(need(&r, bytes, kbuf), done);
                const uint8_t *p = r.p + r.off;
                if (IS("scores")) {
                    LCX_FAIL_GOTO(et != GT_F32, LCX_ERR_FORMAT, done, "%s: %s: expected f32 elements", path, kbuf);
                    free(scores);
                    scores = malloc((count ? count : 1) * sizeof *scores);
                    LCX_FAIL_GOTO(!scores, LCX_ERR_OOM, done, "scores");
                    memcpy(scores, p, bytes);
                    n_scores = count;
                    for (uint64_t k = 0; k < count; k++)
                        LCX_FAIL_GOTO(!isfinite(scores[k]), LCX_ERR_FORMAT, done, "%s: %s[%llu] is not finite",
                                      path, kbuf, (unsigned long long)k);
                } else if (IS("token_type")) {
                    LCX_FAIL_GOTO(et != GT_I32 && et != GT_U32, LCX_ERR_FORMAT, done, "%s: %s: expected i32 elements",
                                  path, kbuf);
                    free(types);
                    types = malloc((count ? count : 1) * sizeof *types);
                    LCX_FAIL_GOTO(!types, LCX_ERR_OOM, done, "token types");
                    memcpy(types, p, bytes);
                    n_types = count;
                }
                r.off += bytes;
            }
        } else {
            size_t es = scalar_size(type);
            LCX_FAIL_GOTO(!es, LCX_ERR_FORMAT, done, "%s: %s: unknown value type %u", path, kbuf, type);
            LCX_TRY_GOTO(need(&r, es, kbuf), done);
            int64_t x = scalar_int(r.p + r.off, type);
            if (IS("bos_token_id")) v.bos_id = x;
            else if (IS("eos_token_id")) v.eos_id = x;
            else if (IS("unknown_token_id")) v.unk_id = x;
            else if (IS("add_bos_token")) v.add_bos = x != 0;
            else if (IS("add_eos_token")) v.add_eos = x != 0;
            else if (IS("add_space_prefix")) v.add_space_prefix = x != 0;
            r.off += es;
        }
#undef IS
    }
    LCX_FAIL_GOTO(!toks.n, LCX_ERR_FORMAT, done, "%s: no tokenizer.ggml.tokens", path);
    LCX_FAIL_GOTO(scores && n_scores != toks.n, LCX_ERR_FORMAT, done, "%s: tokenizer.ggml.scores has %llu entries for "
                  "%zu tokens", path, (unsigned long long)n_scores, toks.n);
    LCX_FAIL_GOTO(types && n_types != toks.n, LCX_ERR_FORMAT, done, "%s: tokenizer.ggml.token_type has %llu entries "
                  "for %zu tokens", path, (unsigned long long)n_types, toks.n);
    v.model = model;
    v.pre = pre;
    v.n_tokens = toks.n;
    v.tokens = toks.s;
    v.token_lens = toks.len;
    v.scores = scores;
    v.token_types = types;
    v.n_merges = merges.n;
    v.merges = merges.s;
    v.merge_lens = merges.len;
    (void)n_tensors;
    st = lcx_tokenizer_from_gguf(&v, path, out);
done:
    free(toks.s); free(toks.len); free(merges.s); free(merges.len);
    free(scores); free(types); free(model); free(pre);
    lcx_unmap(&m);
    return st;
}
