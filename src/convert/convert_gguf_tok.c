/* GGUF export: tokenizer.ggml.* metadata from a Hugging Face tokenizer.json, so that llama.cpp can run the file.
 * Byte-level BPE (GPT-2 / Llama 3 / Qwen2 / SmolLM style) is written as model "gpt2" with the llama.cpp
 * pre-tokenizer name whose split regexes are the tokenizer.json's pre_tokenizer; tokens are every id up to the
 * model's vocab_size (gaps as unused "[PAD<id>]", which llama.cpp's converter also writes), added tokens with their
 * raw content, typed control (special, or "<|...|>") or user-defined; merges as "a b". SentencePiece-style BPE
 * (Llama 2, Mistral: byte_fallback, "▁" for spaces) is written as model "llama" with per-token scores, which
 * tokenizer.json does not have: a token's score is minus the rank of the first merge that makes it, so llama.cpp's
 * SentencePiece tokenizer (best-scoring adjacent pair first) replays the merges in tokenizer.json's order. Anything
 * else is left out with a warning: the caller then writes only bos/eos ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/convert/convert_internal.h"
#include "formats/gguf.h"
#include "src/core/fileio.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };
#define SPM_SPACE "\xE2\x96\x81" /* U+2581, SentencePiece's space */

/* Split regexes of tokenizer.json files and the llama.cpp pre-tokenizer that splits the same way. */
static const struct { const char *pattern, *pre; } SPLIT_PRES[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     "qwen2"},
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt-2"},
};

static void warnf(const lcx_convert_opts *o, const char *fmt, const char *a, const char *b) {
    if (!o->warn) return;
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a, b);
    o->warn(o->warn_user, msg);
}

static int jtrue(const json_t *obj, const char *key, int dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static const char *jtype(const json_t *n) {
    return json_is_object(n) ? json_string_value(json_object_get(n, "type")) : NULL;
}

/* llama.cpp pre-tokenizer name for a byte-level pre_tokenizer, or NULL (with *why) if it has none. */
static const char *pre_name(const json_t *pre, const char **why) {
    const json_t *list[8];
    size_t n = 0;
    *why = "an unrecognised pre_tokenizer";
    if (jtype(pre) && !strcmp(jtype(pre), "Sequence")) {
        const json_t *arr = json_object_get(pre, "pretokenizers");
        if (!json_is_array(arr) || json_array_size(arr) > 8) return NULL;
        for (size_t i = 0; i < json_array_size(arr); i++) list[n++] = json_array_get(arr, i);
    } else if (pre) {
        list[n++] = pre;
    }
    if (n == 0 || !jtype(list[n - 1]) || strcmp(jtype(list[n - 1]), "ByteLevel") != 0) {
        *why = "no ByteLevel pre-tokenizer";
        return NULL;
    }
    const json_t *bl = list[n - 1];
    if (jtrue(bl, "add_prefix_space", 1)) {
        *why = "ByteLevel add_prefix_space, which llama.cpp does not do";
        return NULL;
    }
    int bl_regex = jtrue(bl, "use_regex", 1);
    if (n == 1 && bl_regex) return "gpt-2";
    /* Digits(individual) then the GPT-2 split: llama.cpp's "\p{N}" + GPT-2 regex family (SmolLM, StarCoder) */
    if (n == 2 && bl_regex && !strcmp(jtype(list[0]) ? jtype(list[0]) : "", "Digits") &&
        jtrue(list[0], "individual_digits", 0))
        return "smollm";
    if (n == 2 && !bl_regex && jtype(list[0]) && !strcmp(jtype(list[0]), "Split")) {
        const json_t *s = list[0];
        const char *rx = json_string_value(json_object_get(json_object_get(s, "pattern"), "Regex"));
        const char *beh = json_string_value(json_object_get(s, "behavior"));
        if (!rx || !beh || strcmp(beh, "Isolated") != 0 || jtrue(s, "invert", 0)) return NULL;
        for (size_t i = 0; i < sizeof SPLIT_PRES / sizeof SPLIT_PRES[0]; i++)
            if (!strcmp(rx, SPLIT_PRES[i].pattern)) return SPLIT_PRES[i].pre;
        *why = "a Split regex llama.cpp has no pre-tokenizer for";
    }
    return NULL;
}

/* add_bos / add_eos from the post-processor's single-sequence template (a TemplateProcessing, possibly inside a
 * Sequence): a special token before / after $A. Sets *bos_id to the leading token's id. */
static void template_specials(const json_t *pp, int *add_bos, int *add_eos, int64_t *bos_id) {
    if (!pp) return;
    if (jtype(pp) && !strcmp(jtype(pp), "Sequence")) {
        const json_t *arr = json_object_get(pp, "processors");
        for (size_t i = 0; i < json_array_size(arr); i++)
            template_specials(json_array_get(arr, i), add_bos, add_eos, bos_id);
        return;
    }
    if (!jtype(pp) || strcmp(jtype(pp), "TemplateProcessing") != 0) return;
    const json_t *single = json_object_get(pp, "single"), *specials = json_object_get(pp, "special_tokens");
    size_t n = json_array_size(single);
    if (n == 0) return;
    for (int end = 0; end < 2; end++) {
        const json_t *st = json_object_get(json_array_get(single, end ? n - 1 : 0), "SpecialToken");
        if (!st) continue;
        const char *name = json_string_value(json_object_get(st, "id"));
        const json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
        if (json_array_size(ids) != 1 || !json_is_integer(json_array_get(ids, 0))) continue;
        if (end) *add_eos = 1;
        else *add_bos = 1, *bos_id = json_integer_value(json_array_get(ids, 0));
    }
}

/* "a b" from a merges entry (a string already in that form, or a [a, b] pair whose spaces llama.cpp's converter
 * writes as U+0120); heap string in *out, NULL if the entry is malformed. */
static char *merge_string(const json_t *m) {
    if (json_is_string(m)) return strdup(json_string_value(m));
    if (!json_is_array(m) || json_array_size(m) != 2) return NULL;
    const char *p[2];
    size_t len = 2;
    for (int k = 0; k < 2; k++) {
        p[k] = json_string_value(json_array_get(m, k));
        if (!p[k]) return NULL;
        len += strlen(p[k]) * 2; /* a space grows to two bytes */
    }
    char *s = malloc(len), *o = s;
    if (!s) return NULL;
    for (int k = 0; k < 2; k++) {
        if (k) *o++ = ' ';
        for (const char *c = p[k]; *c; c++) {
            if (*c == ' ') *o++ = (char)0xC4, *o++ = (char)0xA0;
            else *o++ = *c;
        }
    }
    *o = 0;
    return s;
}

/* SentencePiece-style pipeline llama.cpp's "llama" tokenizer reproduces: "▁" prepended (normalizer Prepend or
 * Metaspace), spaces -> "▁", no other pre-tokenization. *prefix: whether "▁" is prepended. NULL or why not. */
static const char *spm_style(const json_t *root, int *prefix, int *metaspace) {
    const json_t *norm = json_object_get(root, "normalizer"), *pre = json_object_get(root, "pre_tokenizer");
    *prefix = 0;
    if (jtype(norm) && !strcmp(jtype(norm), "Sequence") && (!pre || json_is_null(pre))) {
        int replace = 0;
        const json_t *arr = json_object_get(norm, "normalizers");
        for (size_t i = 0; i < json_array_size(arr); i++) {
            const json_t *n = json_array_get(arr, i);
            const char *t = jtype(n) ? jtype(n) : "";
            const char *pp = json_string_value(json_object_get(n, "prepend"));
            const char *pat = json_string_value(json_object_get(json_object_get(n, "pattern"), "String"));
            const char *rep = json_string_value(json_object_get(n, "content"));
            if (!strcmp(t, "Prepend") && pp && !strcmp(pp, SPM_SPACE) && i == 0) *prefix = 1;
            else if (!strcmp(t, "Replace") && pat && rep && !strcmp(pat, " ") && !strcmp(rep, SPM_SPACE)) replace = 1;
            else return "a normalizer other than Prepend(\"\u2581\") + Replace(\" \", \"\u2581\")";
        }
        return replace ? NULL : "spaces are not replaced by \u2581";
    }
    if ((!norm || json_is_null(norm)) && jtype(pre) && !strcmp(jtype(pre), "Metaspace")) {
        const char *r = json_string_value(json_object_get(pre, "replacement"));
        const char *scheme = json_string_value(json_object_get(pre, "prepend_scheme"));
        if (!r || strcmp(r, SPM_SPACE) != 0 || jtrue(pre, "split", 1)) return "a Metaspace that splits words";
        *prefix = scheme ? strcmp(scheme, "never") != 0 : jtrue(pre, "add_prefix_space", 1);
        *metaspace = 1;
        return NULL;
    }
    return "neither a Prepend/Replace normalizer nor a Metaspace pre-tokenizer";
}

/* Number of UTF-8 characters in s. */
static size_t tok_utf8_len_of(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((uint8_t)*s & 0xC0) != 0x80;
    return n;
}

static int is_byte_token(const char *s) {
    static const char hex[] = "0123456789ABCDEFabcdef";
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' && strchr(hex, s[3]) && strchr(hex, s[4]);
}

static int looks_special(const char *s) {
    size_t n = strlen(s);
    return n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>");
}

lcx_status cv_gguf_tokenizer_kvs(const char *path, int64_t vocab_size, int64_t *bos_id, lcx_gguf_writer *w,
                                 const lcx_convert_opts *o, int *written) {
    *written = 0;
    json_error_t err;
    char *text = NULL;
    size_t len = 0;
    LCX_TRY(lcx_read_input(path, 0, (size_t)1 << 30, &text, &len)); /* the input opener: regular files only */
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    LCX_FAIL_IF(!root, LCX_ERR_FORMAT, "%s: line %d column %d: %s", path, err.line, err.column, err.text);
    lcx_status st = LCX_OK;
    char **tokens = NULL, **merges = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    size_t n_merges = 0, n_tok = vocab_size > 0 ? (size_t)vocab_size : 0;
    json_t *seen = json_object();
    int spm = 0, prefix = 0, metaspace = 0;
    int64_t unk = -1;

    const json_t *model = json_object_get(root, "model");
    const char *why = NULL, *pre = NULL;
    const char *dec = jtype(json_object_get(root, "decoder"));
    if (!jtype(model) || strcmp(jtype(model), "BPE") != 0) why = "the model is not BPE";
    else if (jtrue(model, "byte_fallback", 0)) spm = 1, why = spm_style(root, &prefix, &metaspace);
    else if (!dec || strcmp(dec, "ByteLevel") != 0) why = "neither byte-level nor SentencePiece-style BPE";
    if (why) {
        warnf(o, "GGUF export: %s: tokenizer not written (%s); llama.cpp will not load the file without one", path,
              why);
        goto done;
    }
    if (metaspace && prefix)
        warnf(o, "GGUF export: %s: Metaspace prepend_scheme%s: llama.cpp prepends \"\u2581\" to every text (also "
              "one that starts with a space, and after special tokens), like SentencePiece; Hugging Face does not",
              path, "");
    const json_t *norm = json_object_get(root, "normalizer");
    if (!spm) {
        if (norm && !json_is_null(norm) && !(jtype(norm) && !strcmp(jtype(norm), "NFC"))) {
            warnf(o, "GGUF export: %s: tokenizer not written (normalizer '%s' has no llama.cpp equivalent)", path,
                  jtype(norm) ? jtype(norm) : "?");
            goto done;
        }
        if (norm && !json_is_null(norm))
            warnf(o, "GGUF export: %s: the NFC normalizer has no GGUF key (llama.cpp tokenizes text as given%s)", path,
                  "");
        pre = pre_name(json_object_get(root, "pre_tokenizer"), &why);
        if (!pre) {
            pre = "default";
            warnf(o, "GGUF export: %s: %s: tokenizer.ggml.pre = \"default\", llama.cpp will split text differently",
                  path, why);
        }
    }

    const json_t *vocab = json_object_get(model, "vocab");
    const json_t *added = json_object_get(root, "added_tokens");
    LCX_FAIL_GOTO(!json_is_object(vocab), LCX_ERR_FORMAT, done, "%s: model.vocab: expected an object", path);
    LCX_FAIL_GOTO(n_tok == 0 || n_tok > (1u << 30), LCX_ERR_INVALID, done, "GGUF export: vocab_size %lld",
                  (long long)vocab_size);
    tokens = calloc(n_tok, sizeof *tokens);
    types = calloc(n_tok, sizeof *types);
    scores = calloc(n_tok, sizeof *scores);
    LCX_FAIL_GOTO(!tokens || !types || !scores || !seen, LCX_ERR_OOM, done, "out of memory");
    const char *k;
    json_t *v;
    const char *unk_s = json_string_value(json_object_get(model, "unk_token"));
    json_object_foreach((json_t *)vocab, k, v) {
        json_int_t id = json_integer_value(v);
        LCX_FAIL_GOTO(!json_is_integer(v) || id < 0, LCX_ERR_FORMAT, done, "%s: model.vocab['%s']: bad id", path, k);
        if ((uint64_t)id >= n_tok) {
            char b[32];
            snprintf(b, sizeof b, "%lld", (long long)id);
            warnf(o, "GGUF export: %s: tokenizer not written (token id %s is past the model's vocab_size)", path, b);
            goto done;
        }
        free(tokens[id]);
        tokens[id] = strdup(k);
        types[id] = spm && is_byte_token(k) ? TT_BYTE : TT_NORMAL;
        if (spm && unk_s && !strcmp(k, unk_s)) types[id] = TT_UNKNOWN, unk = id;
        LCX_FAIL_GOTO(!tokens[id], LCX_ERR_OOM, done, "out of memory");
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        const char *c = json_string_value(json_object_get(a, "content"));
        json_int_t id = json_integer_value(json_object_get(a, "id"));
        LCX_FAIL_GOTO(!c || !json_is_integer(json_object_get(a, "id")) || id < 0, LCX_ERR_FORMAT, done,
                      "%s: added_tokens[%zu]: needs content and id", path, i);
        if ((uint64_t)id >= n_tok) {
            warnf(o, "GGUF export: %s: tokenizer not written (added token '%s' is past the model's vocab_size)", path,
                  c);
            goto done;
        }
        if (id == unk) continue; /* <unk> stays the unknown token */
        free(tokens[id]);
        tokens[id] = strdup(c); /* raw text: llama.cpp matches control / user-defined tokens unmapped */
        types[id] = jtrue(a, "special", 0) || looks_special(c) ? TT_CONTROL : TT_USER;
        LCX_FAIL_GOTO(!tokens[id], LCX_ERR_OOM, done, "out of memory");
        if (jtrue(a, "lstrip", 0) || jtrue(a, "rstrip", 0) || jtrue(a, "single_word", 0))
            warnf(o, "GGUF export: %s: added token '%s': lstrip / rstrip / single_word have no GGUF key (llama.cpp "
                  "matches the bare token)", path, c);
    }
    for (size_t i = 0; i < n_tok; i++) {
        if (!tokens[i]) {
            char b[40];
            snprintf(b, sizeof b, "[PAD%zu]", i);
            tokens[i] = strdup(b);
            types[i] = TT_UNUSED;
            LCX_FAIL_GOTO(!tokens[i], LCX_ERR_OOM, done, "out of memory");
        }
        /* llama.cpp requires distinct token strings */
        if (json_object_get(seen, tokens[i])) {
            warnf(o, "GGUF export: %s: tokenizer not written (token '%s' appears twice)", path, tokens[i]);
            goto done;
        }
        json_object_set_new(seen, tokens[i], json_true());
    }
    const json_t *mj = json_object_get(model, "merges");
    n_merges = json_array_size(mj);
    if (n_merges) {
        merges = calloc(n_merges, sizeof *merges);
        LCX_FAIL_GOTO(!merges, LCX_ERR_OOM, done, "out of memory");
        for (size_t i = 0; i < n_merges; i++) {
            merges[i] = merge_string(json_array_get(mj, i));
            LCX_FAIL_GOTO(!merges[i], LCX_ERR_FORMAT, done, "%s: model.merges[%zu]: expected \"a b\" or [a, b]", path,
                          i);
        }
    }
    if (spm) {
        /* scores: -(rank of the first merge making the token); tokens no merge makes keep 0 (single characters,
         * bytes, specials: llama.cpp only scores a pair by the token it merges into) or, if longer, rank last */
        uint8_t *made = calloc(n_tok, 1);
        LCX_FAIL_GOTO(!made, LCX_ERR_OOM, done, "out of memory");
        for (size_t i = 0; i < n_merges; i++) {
            char *sp = strchr(merges[i], ' ');
            if (!sp) continue;
            memmove(sp, sp + 1, strlen(sp + 1) + 1); /* "a b" -> "ab": merges are not written for "llama" */
            json_int_t id = json_integer_value(json_object_get(vocab, merges[i]));
            if (json_object_get(vocab, merges[i]) && (uint64_t)id < n_tok && !made[id])
                made[id] = 1, scores[id] = -(float)i;
        }
        for (size_t i = 0; i < n_tok; i++)
            if (!made[i] && types[i] == TT_NORMAL && strlen(tokens[i]) > 1 && tok_utf8_len_of(tokens[i]) > 1)
                scores[i] = -(float)(n_merges + i);
        free(made);
        n_merges = 0;
    }
    int add_bos = 0, add_eos = 0;
    int64_t tmpl_bos = -1;
    template_specials(json_object_get(root, "post_processor"), &add_bos, &add_eos, &tmpl_bos);
    if (*bos_id < 0 && tmpl_bos >= 0 && (uint64_t)tmpl_bos < n_tok) *bos_id = tmpl_bos;

    LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2"), done);
    if (pre) LCX_TRY_GOTO(lcx_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre), done);
    LCX_TRY_GOTO(lcx_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tokens, NULL, n_tok),
                 done);
    if (spm) LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "tokenizer.ggml.scores", LCX_GGUF_F32, scores, n_tok), done);
    LCX_TRY_GOTO(lcx_gguf_writer_add_array(w, "tokenizer.ggml.token_type", LCX_GGUF_I32, types, n_tok), done);
    if (n_merges)
        LCX_TRY_GOTO(lcx_gguf_writer_add_str_array(w, "tokenizer.ggml.merges", (const char *const *)merges, NULL,
                                                   n_merges),
                     done);
    if (spm) {
        LCX_TRY_GOTO(lcx_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", prefix), done);
        if (unk >= 0) LCX_TRY_GOTO(lcx_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk), done);
    }
    LCX_TRY_GOTO(lcx_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", add_bos), done);
    LCX_TRY_GOTO(lcx_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", add_eos), done);
    *written = 1;
done:
    for (size_t i = 0; tokens && i < n_tok; i++) free(tokens[i]);
    for (size_t i = 0; merges && i < json_array_size(json_object_get(model, "merges")); i++) free(merges[i]);
    free(tokens);
    free(merges);
    free(types);
    free(scores);
    json_decref(seen);
    json_decref(root);
    return st;
}
