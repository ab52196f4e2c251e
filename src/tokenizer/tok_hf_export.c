/* Hugging Face tokenizer files from GGUF tokenizer metadata, so that an HF export of a GGUF checkpoint is complete:
 * tokenizer.json describes the same pipeline lcx_tokenizer_from_gguf builds (and llama.cpp runs) and
 * tokenizer_config.json carries bos/eos/unk/pad, add_bos/add_eos and the chat template.
 *
 * gpt2 (byte-level BPE): [Digits(individual)] + Split(regex, Isolated) per regex + ByteLevel(no regex), the
 * byte-level decoder, the GGUF's tokens (already in the byte alphabet, like HF's vocab) and merges ("a b", HF's
 * own string form). SentencePiece ("llama") vocabularies are not written: their merges would have to be derived
 * from scores, and HF's BPE cannot express ties between merges of equal score, so the ids could differ; the
 * caller warns. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "formats/gguf.h"
#include "src/tokenizer/tok_internal.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 };

/* Set obj[key] = v, taking the reference; false on failure. */
static int put(json_t *obj, const char *key, json_t *v) { return v && json_object_set_new(obj, key, v) == 0; }

/* json_pack's "o" steals its argument even when packing fails, so every builder below returns a new value or
 * NULL and leaks nothing either way. */
static json_t *byte_level(int add_prefix_space, int trim_offsets, int use_regex) {
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", add_prefix_space,
                     "trim_offsets", trim_offsets, "use_regex", use_regex);
}

static json_t *pre_tokenizer(const tok_gguf_split *sp) {
    json_t *seq = json_array();
    int ok = seq != NULL;
    if (ok && sp->digits)
        ok = json_array_append_new(seq, json_pack("{s:s, s:b}", "type", "Digits", "individual_digits", 1)) == 0;
    for (int k = 0; ok && k < sp->n_regex; k++)
        ok = json_array_append_new(seq, json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex",
                                                  sp->regex[k], "behavior", "Isolated", "invert", 0)) == 0;
    if (ok) ok = json_array_append_new(seq, byte_level(0, 1, 0)) == 0;
    if (!ok) {
        json_decref(seq);
        return NULL;
    }
    return json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", seq);
}

static json_t *special_token(const lcx_gguf_vocab *v, int64_t id, int type_id) {
    return json_pack("{s:{s:s%, s:i}}", "SpecialToken", "id", v->tokens[id], v->token_lens[id], "type_id", type_id);
}

/* One sequence of the template: [bos] $X [eos]. */
static int template_part(json_t *arr, const lcx_gguf_vocab *v, int64_t bos, int64_t eos, const char *seq, int type) {
    int ok = bos < 0 || json_array_append_new(arr, special_token(v, bos, type)) == 0;
    ok = ok && json_array_append_new(arr, json_pack("{s:{s:s, s:i}}", "Sequence", "id", seq, "type_id", type)) == 0;
    return ok && (eos < 0 || json_array_append_new(arr, special_token(v, eos, type)) == 0);
}

/* TemplateProcessing adding bos and/or eos around every sequence (null when neither is added). */
static json_t *post_processor(const lcx_gguf_vocab *v, int add_bos, int add_eos) {
    if (!add_bos && !add_eos) return json_null();
    int64_t bos = add_bos ? v->bos_id : -1, eos = add_eos ? v->eos_id : -1;
    json_t *single = json_array(), *pair = json_array(), *specials = json_object();
    int ok = single && pair && specials && template_part(single, v, bos, eos, "A", 0) &&
             template_part(pair, v, bos, eos, "A", 0) && template_part(pair, v, bos, eos, "B", 1);
    for (int w = 0; ok && w < 2; w++) {
        int64_t id = w ? eos : bos;
        if (id < 0) continue;
        const char *s = v->tokens[id];
        size_t len = v->token_lens[id];
        json_t *e = json_pack("{s:s%, s:[I], s:[s%]}", "id", s, len, "ids", (json_int_t)id, "tokens", s, len);
        ok = e && json_object_setn_new(specials, s, len, e) == 0;
    }
    if (!ok) {
        json_decref(single);
        json_decref(pair);
        json_decref(specials);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:o, s:o}", "type", "TemplateProcessing", "single", single, "pair", pair,
                     "special_tokens", specials);
}

static json_t *added_tokens(const lcx_gguf_vocab *v) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < v->n_tokens; i++) {
        int32_t type = v->token_types ? v->token_types[i] : TT_NORMAL;
        if (type != TT_CONTROL && type != TT_UNKNOWN && type != TT_USER) continue;
        json_t *a = json_pack("{s:I, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i, "content", v->tokens[i],
                              v->token_lens[i], "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized",
                              type == TT_USER, "special", type != TT_USER);
        if (json_array_append_new(arr, a) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* The BPE model: every token but the unused ones (gaps that GGUF writers fill), merges as "a b". A string that
 * occurs twice keeps its first id, as llama.cpp's text -> id map does. */
static json_t *bpe_model(const lcx_gguf_vocab *v, int ignore_merges) {
    json_t *vocab = json_object(), *merges = json_array();
    int ok = vocab && merges;
    for (size_t i = 0; ok && i < v->n_tokens; i++) {
        if (v->token_types && v->token_types[i] == TT_UNUSED) continue;
        char *key = strndup(v->tokens[i], v->token_lens[i]);
        ok = key && strlen(key) == v->token_lens[i]; /* a NUL inside a token cannot be a JSON object key here */
        if (ok && !json_object_get(vocab, key)) ok = put(vocab, key, json_integer((json_int_t)i));
        free(key);
    }
    for (size_t i = 0; ok && i < v->n_merges; i++)
        ok = json_array_append_new(merges, json_stringn(v->merges[i], v->merge_lens[i])) == 0;
    if (!ok) {
        json_decref(vocab);
        json_decref(merges);
        return NULL;
    }
    return json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout", "unk_token",
                     "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
                     "ignore_merges", ignore_merges, "vocab", vocab, "merges", merges);
}

static json_t *tokenizer_config(const struct lcx_gguf_file *f, const lcx_gguf_vocab *v, int add_bos, int add_eos,
                                int64_t max_length) {
    json_t *c = json_object();
    int ok = c && put(c, "add_bos_token", json_boolean(add_bos)) && put(c, "add_eos_token", json_boolean(add_eos)) &&
             put(c, "clean_up_tokenization_spaces", json_false()) &&
             put(c, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    if (ok && max_length > 0) ok = put(c, "model_max_length", json_integer(max_length));
    static const char *const names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    int64_t pad = -1;
    if (lcx_gguf_find_kv(f, "tokenizer.ggml.padding_token_id") &&
        lcx_gguf_get_i64(f, "tokenizer.ggml.padding_token_id", &pad) != LCX_OK)
        pad = -1; /* a bad padding id is left out, as the tokenizer itself ignores it */
    int64_t ids[4] = {v->bos_id, v->eos_id, v->unk_id, pad};
    for (int k = 0; ok && k < 4; k++)
        if (ids[k] >= 0 && (uint64_t)ids[k] < v->n_tokens)
            ok = put(c, names[k], json_stringn(v->tokens[ids[k]], v->token_lens[ids[k]]));
    char *tmpl = NULL;
    if (ok && lcx_gguf_find_kv(f, "tokenizer.chat_template") &&
        lcx_gguf_get_str_dup(f, "tokenizer.chat_template", &tmpl) == LCX_OK)
        ok = put(c, "chat_template", json_string(tmpl));
    free(tmpl);
    if (!ok) json_decref(c);
    return ok ? c : NULL;
}

lcx_status lcx_tokenizer_hf_from_gguf(const struct lcx_gguf_file *f, int64_t model_max_length,
                                      struct json_t **tokenizer_json, struct json_t **tokenizer_config_json) {
    *tokenizer_json = *tokenizer_config_json = NULL;
    lcx_gguf_vocab v;
    LCX_TRY(tok_gguf_vocab_read(f, &v));
    /* Only what our own GGUF tokenizer accepts is written: the same checks, the same refusals. */
    lcx_tokenizer *t = NULL;
    lcx_status st = lcx_tokenizer_from_gguf(&v, f->path, &t);
    lcx_tokenizer_free(t);
    if (st != LCX_OK) goto done;
    tok_gguf_split sp;
    LCX_FAIL_GOTO(strcmp(v.model, "gpt2") != 0 || !tok_gguf_split_of(v.pre, &sp), LCX_ERR_UNSUPPORTED, done,
                  "%s: tokenizer.ggml.model '%s': only byte-level BPE (gpt2) vocabularies are written as "
                  "tokenizer.json", f->path, v.model);
    int add_bos = v.add_bos > 0, add_eos = v.add_eos > 0; /* gpt2 adds neither unless the file says so */
    json_t *root = json_pack("{s:s, s:n, s:n, s:o, s:n, s:o, s:o, s:o, s:o}", "version", "1.0", "truncation",
                             "padding", "added_tokens", added_tokens(&v), "normalizer", "pre_tokenizer",
                             pre_tokenizer(&sp), "post_processor", post_processor(&v, add_bos, add_eos), "decoder",
                             byte_level(1, 1, 1), "model", bpe_model(&v, sp.ignore_merges));
    json_t *cfg = root ? tokenizer_config(f, &v, add_bos, add_eos, model_max_length) : NULL;
    if (!cfg) {
        json_decref(root);
        st = lcx_fail(LCX_ERR_OOM, "%s: tokenizer.json: out of memory (or a token with a NUL byte)", f->path);
        goto done;
    }
    *tokenizer_json = root;
    *tokenizer_config_json = cfg;
done:
    tok_gguf_vocab_free(&v);
    return st;
}
