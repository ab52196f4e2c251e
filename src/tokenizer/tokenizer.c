/* tokenizer.json loading (jansson), common construction steps and queries. Encoding is in tok_encode.c,
 * decoding in tok_decode.c, GGUF vocabularies in tok_gguf.c. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"
#include "src/tokenizer/tok_internal.h"

void lcx_tok_ids_free(lcx_tok_ids *v) {
    if (!v) return;
    free(v->ids);
    memset(v, 0, sizeof *v);
}

lcx_status lcx_tok_ids_push(lcx_tok_ids *v, uint32_t id) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 256;
        uint32_t *p = realloc(v->ids, nc * sizeof *p);
        if (!p) return lcx_fail(LCX_ERR_OOM, "token id list of %zu", nc);
        v->ids = p;
        v->cap = nc;
    }
    v->ids[v->n++] = id;
    return LCX_OK;
}

void lcx_tokenizer_free(lcx_tokenizer *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n_ids; i++) free(t->id_str[i]);
    free(t->id_str); free(t->id_len); free(t->id_flags);
    tok_strmap_free(&t->vocab);
    tok_pairmap_free(&t->merges);
    for (size_t i = 0; i < t->n_added; i++) { free(t->added[i].content); free(t->added[i].decoded); }
    free(t->dec_over);
    free(t->added);
    tok_trie_free(&t->trie_raw);
    tok_trie_free(&t->trie_norm);
    for (size_t i = 0; i < t->n_norms; i++) { free(t->norms[i].a); free(t->norms[i].b); }
    free(t->norms);
    for (size_t i = 0; i < t->n_pres; i++) pcre2_code_free(t->pres[i].re);
    free(t->pres);
    for (size_t i = 0; i < t->n_decs; i++) { free(t->decs[i].a); free(t->decs[i].b); }
    free(t->decs);
    free(t->tmpl_pre); free(t->tmpl_post);
    pcre2_code_free(t->word_re);
    free(t->name);
    free(t);
}

static char *dupn(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* Record the string of an id (for decoding and queries). */
lcx_status tok_set_id(lcx_tokenizer *t, uint32_t id, const char *s, size_t len) {
    if (id >= t->id_limit) /* callers check first and name the entry; this keeps the table bounded */
        return lcx_fail(LCX_ERR_FORMAT, "%s: token id %u is not below %zu, the number of entries", t->name, id,
                        t->id_limit);
    if (id >= t->n_ids) {
        size_t nn = t->n_ids ? t->n_ids : 1024;
        while (nn <= id) nn *= 2;
        if (nn > t->id_limit) nn = t->id_limit;
        char **ps = realloc(t->id_str, nn * sizeof *ps);
        if (ps) t->id_str = ps;
        uint32_t *pl = realloc(t->id_len, nn * sizeof *pl);
        if (pl) t->id_len = pl;
        uint8_t *pf = realloc(t->id_flags, nn);
        if (pf) t->id_flags = pf;
        if (!ps || !pl || !pf) return lcx_fail(LCX_ERR_OOM, "id table");
        for (size_t i = t->n_ids; i < nn; i++) { t->id_str[i] = NULL; t->id_len[i] = 0; t->id_flags[i] = 0; }
        t->n_ids = nn;
    }
    char *c = dupn(s, len);
    if (!c) return lcx_fail(LCX_ERR_OOM, "token string");
    free(t->id_str[id]);
    t->id_str[id] = c;
    t->id_len[id] = (uint32_t)len;
    return LCX_OK;
}

/* Key of a vocabulary string in the model map: for byte-level pipelines the raw bytes its chars stand for.
 * Returns 0 if the string cannot occur as (part of) a word (a char outside the byte alphabet). */
static int vocab_key(const lcx_tokenizer *t, const char *s, size_t len, char *out, size_t *out_len) {
    if (!t->byte_level) {
        memcpy(out, s, len);
        *out_len = len;
        return 1;
    }
    size_t o = 0;
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < len;) {
        size_t adv;
        if (tok_utf8_len(u[i]) > len - i) return 0;
        int b = tok_cp_to_byte(tok_utf8_decode(u + i, &adv));
        if (b < 0) return 0;
        out[o++] = (char)b;
        i += adv;
    }
    *out_len = o;
    return 1;
}

static lcx_status vocab_put(lcx_tokenizer *t, const char *s, size_t len, uint32_t id) {
    char stack[256], *buf = len <= sizeof stack ? stack : malloc(len);
    if (!buf) return lcx_fail(LCX_ERR_OOM, "vocabulary");
    size_t kl;
    lcx_status st = LCX_OK;
    if (vocab_key(t, s, len, buf, &kl)) st = tok_strmap_put(&t->vocab, buf, kl, id);
    if (buf != stack) free(buf);
    return st;
}

static int vocab_lookup(const lcx_tokenizer *t, const char *s, size_t len, uint32_t *id) {
    char stack[256], *buf = len <= sizeof stack ? stack : malloc(len);
    if (!buf) return 0;
    size_t kl;
    int ok = vocab_key(t, s, len, buf, &kl) && tok_strmap_get(&t->vocab, buf, kl, id);
    if (buf != stack) free(buf);
    return ok;
}

lcx_status tok_add_merge(lcx_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, uint32_t rank,
                         const char *where) {
    uint32_t ia, ib, inew;
    if (!vocab_lookup(t, a, alen, &ia))
        return lcx_fail(LCX_ERR_FORMAT, "%s: token '%.*s' is not in the vocabulary", where, (int)alen, a);
    if (!vocab_lookup(t, b, blen, &ib))
        return lcx_fail(LCX_ERR_FORMAT, "%s: token '%.*s' is not in the vocabulary", where, (int)blen, b);
    size_t n;
    if (!lcx_add_size(alen, blen, &n)) return lcx_fail(LCX_ERR_FORMAT, "%s: too long", where);
    char *cat = malloc(n + 1);
    if (!cat) return lcx_fail(LCX_ERR_OOM, "merge");
    memcpy(cat, a, alen);
    memcpy(cat + alen, b, blen);
    int ok = vocab_lookup(t, cat, n, &inew);
    if (!ok) {
        lcx_status st = lcx_fail(LCX_ERR_FORMAT, "%s: merged token '%.*s' is not in the vocabulary", where,
                                 (int)n, cat);
        free(cat);
        return st;
    }
    free(cat);
    return tok_pairmap_put(&t->merges, ia, ib, rank, inew);
}

/* ---- JSON helpers ----------------------------------------------------------------------------------------- */
typedef struct jctx {
    const char *file;
} jctx;

static lcx_status jstr(const jctx *c, json_t *o, const char *key, const char *where, const char **s, size_t *len,
                       int required) {
    *s = NULL;
    *len = 0;
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) return lcx_fail(LCX_ERR_FORMAT, "%s: %s: missing string '%s'", c->file, where, key);
        return LCX_OK;
    }
    if (!json_is_string(v)) return lcx_fail(LCX_ERR_FORMAT, "%s: %s.%s: expected a string", c->file, where, key);
    *s = json_string_value(v);
    *len = json_string_length(v);
    return LCX_OK;
}

static lcx_status jbool(const jctx *c, json_t *o, const char *key, const char *where, int dflt, int *out) {
    *out = dflt;
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return LCX_OK;
    if (!json_is_boolean(v)) return lcx_fail(LCX_ERR_FORMAT, "%s: %s.%s: expected true or false", c->file, where, key);
    *out = json_is_true(v);
    return LCX_OK;
}

static const char *jtype(json_t *o) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

/* The start of each component parser (normalizer, pre-tokenizer, post-processor, decoder): null or absent is no
 * component (*type stays NULL); otherwise an object with a string 'type', returned in *type. */
static lcx_status component_type(const jctx *c, json_t *n, const char *where, const char **type) {
    *type = NULL;
    if (!n || json_is_null(n)) return LCX_OK;
    if (!json_is_object(n)) return lcx_fail(LCX_ERR_FORMAT, "%s: %s: expected an object or null", c->file, where);
    *type = jtype(n);
    if (!*type) return lcx_fail(LCX_ERR_FORMAT, "%s: %s: missing 'type'", c->file, where);
    return LCX_OK;
}

/* A component of type "Sequence": each member of its array n[key] through parse, in order, named
 * "where.key[i]" in errors. */
typedef lcx_status (*component_fn)(lcx_tokenizer *t, const jctx *c, json_t *n, const char *where);
static lcx_status parse_sequence(lcx_tokenizer *t, const jctx *c, json_t *n, const char *where, const char *key,
                                 component_fn parse) {
    json_t *arr = json_object_get(n, key);
    if (!json_is_array(arr)) return lcx_fail(LCX_ERR_FORMAT, "%s: %s.%s: expected an array", c->file, where, key);
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        char w[128];
        snprintf(w, sizeof w, "%s.%s[%zu]", where, key, i);
        LCX_TRY(parse(t, c, e, w));
    }
    return LCX_OK;
}

/* ---- normalizer ------------------------------------------------------------------------------------------- */
static lcx_status add_norm(lcx_tokenizer *t, tok_norm n) {
    tok_norm *p = realloc(t->norms, (t->n_norms + 1) * sizeof *p);
    if (!p) return lcx_fail(LCX_ERR_OOM, "normalizers");
    t->norms = p;
    t->norms[t->n_norms++] = n;
    return LCX_OK;
}

static lcx_status parse_normalizer(lcx_tokenizer *t, const jctx *c, json_t *n, const char *where) {
    const char *type = NULL;
    LCX_TRY(component_type(c, n, where, &type));
    if (!type) return LCX_OK;
    if (strcmp(type, "Sequence") == 0) return parse_sequence(t, c, n, where, "normalizers", parse_normalizer);
    tok_norm nm = {0};
    const char *s = NULL;
    size_t len = 0;
    if (strcmp(type, "Prepend") == 0) {
        LCX_TRY(jstr(c, n, "prepend", where, &s, &len, 1));
        nm.kind = NORM_PREPEND;
        nm.a = dupn(s, len); nm.alen = len;
        if (!nm.a) return lcx_fail(LCX_ERR_OOM, "normalizer");
        return add_norm(t, nm);
    }
    if (strcmp(type, "Replace") == 0) {
        json_t *pat = json_object_get(n, "pattern");
        json_t *ps = json_object_get(pat, "String");
        if (!json_is_string(ps))
            return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s: only Replace with a String pattern is supported", c->file, where);
        LCX_TRY(jstr(c, n, "content", where, &s, &len, 1));
        nm.kind = NORM_REPLACE;
        nm.a = dupn(json_string_value(ps), json_string_length(ps)); nm.alen = json_string_length(ps);
        nm.b = dupn(s, len); nm.blen = len;
        if (!nm.a || !nm.b) { free(nm.a); free(nm.b); return lcx_fail(LCX_ERR_OOM, "normalizer"); }
        return add_norm(t, nm);
    }
    if (strcmp(type, "NFC") == 0) {
        nm.kind = NORM_NFC;
        return add_norm(t, nm);
    }
    return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s: normalizer type '%s' is not supported (supported: Sequence, "
                    "Prepend, Replace, NFC)", c->file, where, type);
}

/* ---- pre-tokenizer ---------------------------------------------------------------------------------------- */
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static lcx_status add_pre(lcx_tokenizer *t, tok_pre p) {
    tok_pre *n = realloc(t->pres, (t->n_pres + 1) * sizeof *n);
    if (!n) { pcre2_code_free(p.re); return lcx_fail(LCX_ERR_OOM, "pre-tokenizers"); }
    t->pres = n;
    t->pres[t->n_pres++] = p;
    return LCX_OK;
}

static lcx_status parse_behavior(const jctx *c, json_t *n, const char *where, tok_split_behavior *b) {
    const char *s = NULL;
    size_t len = 0;
    LCX_TRY(jstr(c, n, "behavior", where, &s, &len, 1));
    if (strcmp(s, "Removed") == 0) *b = SPLIT_REMOVED;
    else if (strcmp(s, "Isolated") == 0) *b = SPLIT_ISOLATED;
    else if (strcmp(s, "MergedWithPrevious") == 0) *b = SPLIT_MERGED_PREV;
    else if (strcmp(s, "MergedWithNext") == 0) *b = SPLIT_MERGED_NEXT;
    else if (strcmp(s, "Contiguous") == 0) *b = SPLIT_CONTIGUOUS;
    else return lcx_fail(LCX_ERR_FORMAT, "%s: %s.behavior: unknown value '%s'", c->file, where, s);
    return LCX_OK;
}

static lcx_status parse_prepend_scheme(const jctx *c, json_t *n, const char *where, tok_prepend_scheme *sch) {
    const char *s = NULL;
    size_t len = 0;
    int aps;
    LCX_TRY(jstr(c, n, "prepend_scheme", where, &s, &len, 0));
    LCX_TRY(jbool(c, n, "add_prefix_space", where, 1, &aps));
    *sch = PREPEND_ALWAYS;
    if (s) {
        if (strcmp(s, "always") == 0) *sch = PREPEND_ALWAYS;
        else if (strcmp(s, "first") == 0) *sch = PREPEND_FIRST;
        else if (strcmp(s, "never") == 0) *sch = PREPEND_NEVER;
        else return lcx_fail(LCX_ERR_FORMAT, "%s: %s.prepend_scheme: unknown value '%s'", c->file, where, s);
    }
    if (!aps) *sch = PREPEND_NEVER; /* legacy add_prefix_space: false */
    return LCX_OK;
}

static lcx_status metaspace_repl(const jctx *c, json_t *n, const char *where, char *out, size_t *olen) {
    *olen = 0;
    const char *s = NULL;
    size_t len = 0;
    LCX_TRY(jstr(c, n, "replacement", where, &s, &len, 1));
    if (len == 0 || len > 4 || tok_utf8_len((uint8_t)s[0]) != len)
        return lcx_fail(LCX_ERR_FORMAT, "%s: %s.replacement: must be one character", c->file, where);
    memcpy(out, s, len);
    *olen = len;
    return LCX_OK;
}

static lcx_status parse_pre(lcx_tokenizer *t, const jctx *c, json_t *n, const char *where) {
    const char *type = NULL;
    LCX_TRY(component_type(c, n, where, &type));
    if (!type) return LCX_OK;
    if (t->byte_level)
        return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s: pre-tokenizers after ByteLevel are not supported", c->file, where);
    tok_pre p;
    memset(&p, 0, sizeof p);
    if (strcmp(type, "Sequence") == 0) return parse_sequence(t, c, n, where, "pretokenizers", parse_pre);
    if (strcmp(type, "Split") == 0) {
        json_t *pat = json_object_get(n, "pattern");
        json_t *rs = json_object_get(pat, "Regex"), *ss = json_object_get(pat, "String");
        if (!json_is_string(rs) && !json_is_string(ss))
            return lcx_fail(LCX_ERR_FORMAT, "%s: %s.pattern: expected {\"Regex\": ...} or {\"String\": ...}", c->file, where);
        json_t *ps = json_is_string(rs) ? rs : ss;
        char w[160];
        snprintf(w, sizeof w, "%s: %s.pattern", c->file, where);
        LCX_TRY(tok_regex_compile(json_string_value(ps), json_string_length(ps), ps == ss, w, &p.re));
        p.kind = PRE_SPLIT;
        lcx_status st = parse_behavior(c, n, where, &p.behavior);
        if (st == LCX_OK) st = jbool(c, n, "invert", where, 0, &p.invert);
        if (st != LCX_OK) { pcre2_code_free(p.re); return st; }
        return add_pre(t, p);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        int use_regex;
        LCX_TRY(jbool(c, n, "add_prefix_space", where, 1, &p.add_prefix_space));
        LCX_TRY(jbool(c, n, "use_regex", where, 1, &use_regex));
        if (use_regex) LCX_TRY(tok_regex_compile(GPT2_PATTERN, sizeof GPT2_PATTERN - 1, 0, "ByteLevel", &p.re));
        p.kind = PRE_BYTELEVEL;
        LCX_TRY(add_pre(t, p));
        t->byte_level = 1;
        return LCX_OK;
    }
    if (strcmp(type, "Metaspace") == 0) {
        p.kind = PRE_METASPACE;
        LCX_TRY(metaspace_repl(c, n, where, p.repl, &p.repl_len));
        LCX_TRY(parse_prepend_scheme(c, n, where, &p.scheme));
        LCX_TRY(jbool(c, n, "split", where, 1, &p.split));
        return add_pre(t, p);
    }
    if (strcmp(type, "Digits") == 0) {
        p.kind = PRE_DIGITS;
        LCX_TRY(jbool(c, n, "individual_digits", where, 0, &p.individual_digits));
        /* Rust's char::is_numeric: any Unicode number (Nd, Nl, No), not just ASCII digits */
        LCX_TRY(tok_regex_compile("\\p{N}", 5, 0, "Digits", &p.re));
        p.behavior = p.individual_digits ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS;
        return add_pre(t, p);
    }
    return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s: pre-tokenizer type '%s' is not supported (supported: Sequence, "
                    "Split, ByteLevel, Metaspace, Digits)", c->file, where, type);
}

/* ---- model ------------------------------------------------------------------------------------------------ */
static lcx_status parse_model(lcx_tokenizer *t, const jctx *c, json_t *m) {
    if (!json_is_object(m)) return lcx_fail(LCX_ERR_FORMAT, "%s: model: expected an object", c->file);
    const char *type = jtype(m);
    if (type && strcmp(type, "BPE") != 0)
        return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: model: type '%s' is not supported (only BPE)", c->file, type);
    json_t *d = json_object_get(m, "dropout");
    if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0))
        return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: model.dropout: BPE dropout is not supported", c->file);
    const char *s = NULL;
    size_t len = 0;
    LCX_TRY(jstr(c, m, "continuing_subword_prefix", "model", &s, &len, 0));
    if (s && len) return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: model.continuing_subword_prefix is not supported", c->file);
    LCX_TRY(jstr(c, m, "end_of_word_suffix", "model", &s, &len, 0));
    if (s && len) return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: model.end_of_word_suffix is not supported", c->file);
    LCX_TRY(jbool(c, m, "fuse_unk", "model", 0, &t->fuse_unk));
    LCX_TRY(jbool(c, m, "byte_fallback", "model", 0, &t->byte_fallback));
    LCX_TRY(jbool(c, m, "ignore_merges", "model", 0, &t->ignore_merges));

    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_object(vocab)) return lcx_fail(LCX_ERR_FORMAT, "%s: model.vocab: expected an object", c->file);
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach(vocab, key, klen, v) { /* keylen: a token may contain a NUL byte */
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1ll << 31))
            return lcx_fail(LCX_ERR_FORMAT, "%s: model.vocab['%s']: expected an id in [0, 2^31)", c->file, key);
        uint32_t id = (uint32_t)json_integer_value(v);
        if (id >= t->id_limit)
            return lcx_fail(LCX_ERR_FORMAT, "%s: model.vocab['%s']: id %u is not below %zu, the number of vocabulary "
                            "and added-token entries (the limit on ids)", c->file, key, id, t->id_limit);
        if (id < t->n_ids && t->id_str[id])
            return lcx_fail(LCX_ERR_FORMAT, "%s: model.vocab: id %u is used by both '%s' and '%s'", c->file, id,
                            t->id_str[id], key);
        LCX_TRY(tok_set_id(t, id, key, klen));
        LCX_TRY(vocab_put(t, key, klen, id));
    }
    LCX_TRY(jstr(c, m, "unk_token", "model", &s, &len, 0));
    t->unk_id = TOK_NONE;
    if (s) {
        uint32_t id;
        if (!tok_strmap_get(&t->vocab, s, len, &id) && !vocab_lookup(t, s, len, &id))
            return lcx_fail(LCX_ERR_FORMAT, "%s: model.unk_token '%s' is not in the vocabulary", c->file, s);
        t->unk_id = id;
    }

    json_t *merges = json_object_get(m, "merges");
    if (!json_is_array(merges)) return lcx_fail(LCX_ERR_FORMAT, "%s: model.merges: expected an array", c->file);
    size_t i;
    json_t *e;
    json_array_foreach(merges, i, e) {
        char where[192];
        snprintf(where, sizeof where, "%s: model.merges[%zu]", c->file, i);
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(e)) { /* legacy "a b" */
            a = json_string_value(e);
            size_t n = json_string_length(e);
            const char *sp = memchr(a, ' ', n);
            if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - a)))
                return lcx_fail(LCX_ERR_FORMAT, "%s: '%s' is not two tokens separated by one space", where, a);
            al = (size_t)(sp - a);
            b = sp + 1;
            bl = n - al - 1;
        } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
                   json_is_string(json_array_get(e, 1))) {
            a = json_string_value(json_array_get(e, 0)); al = json_string_length(json_array_get(e, 0));
            b = json_string_value(json_array_get(e, 1)); bl = json_string_length(json_array_get(e, 1));
        } else {
            return lcx_fail(LCX_ERR_FORMAT, "%s: expected \"a b\" or [\"a\", \"b\"]", where);
        }
        LCX_TRY(tok_add_merge(t, a, al, b, bl, (uint32_t)i, where));
    }
    return LCX_OK;
}

/* ---- added tokens ----------------------------------------------------------------------------------------- */
static lcx_status parse_added(lcx_tokenizer *t, const jctx *c, json_t *arr) {
    if (!arr || json_is_null(arr)) return LCX_OK;
    if (!json_is_array(arr)) return lcx_fail(LCX_ERR_FORMAT, "%s: added_tokens: expected an array", c->file);
    size_t n = json_array_size(arr), i;
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) return lcx_fail(LCX_ERR_OOM, "added tokens");
    json_t *e;
    json_array_foreach(arr, i, e) {
        char w[64];
        snprintf(w, sizeof w, "added_tokens[%zu]", i);
        if (!json_is_object(e)) return lcx_fail(LCX_ERR_FORMAT, "%s: %s: expected an object", c->file, w);
        json_t *idv = json_object_get(e, "id");
        if (!json_is_integer(idv) || json_integer_value(idv) < 0 || json_integer_value(idv) >= (1ll << 31))
            return lcx_fail(LCX_ERR_FORMAT, "%s: %s.id: expected an id in [0, 2^31)", c->file, w);
        const char *s;
        size_t len;
        LCX_TRY(jstr(c, e, "content", w, &s, &len, 1));
        tok_added *a = &t->added[t->n_added];
        a->id = (uint32_t)json_integer_value(idv);
        LCX_TRY(jbool(c, e, "special", w, 0, &a->special));
        LCX_TRY(jbool(c, e, "single_word", w, 0, &a->single_word));
        LCX_TRY(jbool(c, e, "lstrip", w, 0, &a->lstrip));
        LCX_TRY(jbool(c, e, "rstrip", w, 0, &a->rstrip));
        LCX_TRY(jbool(c, e, "normalized", w, !a->special, &a->normalized));
        a->content = dupn(s, len);
        if (!a->content) return lcx_fail(LCX_ERR_OOM, "added token");
        a->len = len;
        t->n_added++;
        if (a->id >= t->id_limit)
            return lcx_fail(LCX_ERR_FORMAT, "%s: %s.id: %u is not below %zu, the number of vocabulary and added-token "
                            "entries (the limit on ids)", c->file, w, a->id, t->id_limit);
        /* An added token may shadow a model token of the same id: decoding uses the added content, like
         * tokenizers does. */
        LCX_TRY(tok_set_id(t, a->id, s, len));
        t->id_flags[a->id] |= TOK_ID_ADDED | (a->special ? TOK_ID_SPECIAL : 0);
    }
    return LCX_OK;
}

/* ---- post-processor --------------------------------------------------------------------------------------- */
static lcx_status push_u32(uint32_t **arr, size_t *n, uint32_t v) {
    uint32_t *p = realloc(*arr, (*n + 1) * sizeof *p);
    if (!p) return lcx_fail(LCX_ERR_OOM, "template");
    *arr = p;
    p[(*n)++] = v;
    return LCX_OK;
}

static lcx_status parse_post(lcx_tokenizer *t, const jctx *c, json_t *n, const char *where) {
    const char *type = NULL;
    LCX_TRY(component_type(c, n, where, &type));
    if (!type) return LCX_OK;
    if (strcmp(type, "Sequence") == 0) return parse_sequence(t, c, n, where, "processors", parse_post);
    if (strcmp(type, "ByteLevel") == 0) return LCX_OK; /* offsets only */
    if (strcmp(type, "TemplateProcessing") != 0)
        return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s: post-processor type '%s' is not supported (supported: "
                        "TemplateProcessing, ByteLevel, Sequence)", c->file, where, type);
    if (t->n_tmpl_pre || t->n_tmpl_post)
        return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s: more than one TemplateProcessing", c->file, where);
    json_t *single = json_object_get(n, "single"), *specials = json_object_get(n, "special_tokens");
    if (!json_is_array(single)) return lcx_fail(LCX_ERR_FORMAT, "%s: %s.single: expected an array", c->file, where);
    int seen_a = 0;
    size_t i;
    json_t *e;
    json_array_foreach(single, i, e) {
        json_t *sp = json_object_get(e, "SpecialToken"), *sq = json_object_get(e, "Sequence");
        if (json_is_object(sq)) {
            if (seen_a) return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s.single: $A twice", c->file, where);
            seen_a = 1;
            continue;
        }
        if (!json_is_object(sp))
            return lcx_fail(LCX_ERR_FORMAT, "%s: %s.single[%zu]: expected SpecialToken or Sequence", c->file, where, i);
        const char *name;
        size_t nl;
        LCX_TRY(jstr(c, sp, "id", "SpecialToken", &name, &nl, 1));
        json_t *st = json_object_get(specials, name);
        json_t *ids = json_object_get(st, "ids");
        if (!json_is_array(ids))
            return lcx_fail(LCX_ERR_FORMAT, "%s: %s.special_tokens: no entry with ids for '%s'", c->file, where, name);
        size_t k;
        json_t *idv;
        json_array_foreach(ids, k, idv) {
            if (!json_is_integer(idv) || json_integer_value(idv) < 0 || json_integer_value(idv) >= (1ll << 31))
                return lcx_fail(LCX_ERR_FORMAT, "%s: %s.special_tokens['%s'].ids: bad id", c->file, where, name);
            if ((uint64_t)json_integer_value(idv) >= t->id_limit) /* it would be written out as a token */
                return lcx_fail(LCX_ERR_FORMAT, "%s: %s.special_tokens['%s'].ids: %lld is not below %zu, the number "
                                "of vocabulary and added-token entries (the limit on ids)", c->file, where, name,
                                (long long)json_integer_value(idv), t->id_limit);
            if (seen_a) LCX_TRY(push_u32(&t->tmpl_post, &t->n_tmpl_post, (uint32_t)json_integer_value(idv)));
            else LCX_TRY(push_u32(&t->tmpl_pre, &t->n_tmpl_pre, (uint32_t)json_integer_value(idv)));
        }
    }
    if (!seen_a) return lcx_fail(LCX_ERR_FORMAT, "%s: %s.single: no $A sequence", c->file, where);
    return LCX_OK;
}

/* ---- decoder ---------------------------------------------------------------------------------------------- */
static lcx_status add_dec(lcx_tokenizer *t, tok_dec d) {
    tok_dec *p = realloc(t->decs, (t->n_decs + 1) * sizeof *p);
    if (!p) { free(d.a); free(d.b); return lcx_fail(LCX_ERR_OOM, "decoders"); }
    t->decs = p;
    t->decs[t->n_decs++] = d;
    return LCX_OK;
}

static lcx_status parse_dec(lcx_tokenizer *t, const jctx *c, json_t *n, const char *where) {
    const char *type = NULL;
    LCX_TRY(component_type(c, n, where, &type));
    if (!type) return LCX_OK;
    t->has_decoder = 1;
    tok_dec d;
    memset(&d, 0, sizeof d);
    const char *s = NULL;
    size_t len = 0;
    if (strcmp(type, "Sequence") == 0) return parse_sequence(t, c, n, where, "decoders", parse_dec);
    if (strcmp(type, "ByteLevel") == 0) { d.kind = DEC_BYTELEVEL; return add_dec(t, d); }
    if (strcmp(type, "ByteFallback") == 0) { d.kind = DEC_BYTEFALLBACK; return add_dec(t, d); }
    if (strcmp(type, "Fuse") == 0) { d.kind = DEC_FUSE; return add_dec(t, d); }
    if (strcmp(type, "Replace") == 0) {
        json_t *ps = json_object_get(json_object_get(n, "pattern"), "String");
        if (!json_is_string(ps))
            return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s: only Replace with a String pattern is supported", c->file, where);
        LCX_TRY(jstr(c, n, "content", where, &s, &len, 1));
        d.kind = DEC_REPLACE;
        d.a = dupn(json_string_value(ps), json_string_length(ps)); d.alen = json_string_length(ps);
        d.b = dupn(s, len); d.blen = len;
        if (!d.a || !d.b) { free(d.a); free(d.b); return lcx_fail(LCX_ERR_OOM, "decoder"); }
        return add_dec(t, d);
    }
    if (strcmp(type, "Strip") == 0) {
        LCX_TRY(jstr(c, n, "content", where, &s, &len, 1));
        if (len == 0 || tok_utf8_len((uint8_t)s[0]) != len)
            return lcx_fail(LCX_ERR_FORMAT, "%s: %s.content: must be one character", c->file, where);
        json_t *a = json_object_get(n, "start"), *b = json_object_get(n, "stop");
        if (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 || json_integer_value(b) < 0)
            return lcx_fail(LCX_ERR_FORMAT, "%s: %s: start/stop must be non-negative integers", c->file, where);
        d.kind = DEC_STRIP;
        d.a = dupn(s, len); d.alen = len;
        if (!d.a) return lcx_fail(LCX_ERR_OOM, "decoder");
        d.start = (size_t)json_integer_value(a);
        d.stop = (size_t)json_integer_value(b);
        return add_dec(t, d);
    }
    if (strcmp(type, "Metaspace") == 0) {
        char r[8];
        size_t rl;
        LCX_TRY(metaspace_repl(c, n, where, r, &rl));
        LCX_TRY(parse_prepend_scheme(c, n, where, &d.scheme));
        d.kind = DEC_METASPACE;
        d.a = dupn(r, rl); d.alen = rl;
        if (!d.a) return lcx_fail(LCX_ERR_OOM, "decoder");
        return add_dec(t, d);
    }
    return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: %s: decoder type '%s' is not supported (supported: Sequence, "
                    "ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace)", c->file, where, type);
}

/* ---- finishing -------------------------------------------------------------------------------------------- */
static int is_special_content(const lcx_tokenizer *t, const char *s, size_t n) {
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].special && t->added[i].len == n && memcmp(t->added[i].content, s, n) == 0) return 1;
    return 0;
}

int tok_id_added_cmp(const void *x, const void *y) {
    uint32_t a = ((const tok_id_added *)x)->id, b = ((const tok_id_added *)y)->id;
    return (a > b) - (a < b);
}

/* What decode writes for each added token, and which ones skip_special drops: tokenizers drops a token when the
 * string it decodes as is a special token's content (so a special token whose normalized form differs stays). */
static lcx_status decode_forms(lcx_tokenizer *t) {
    size_t n = 0;
    for (size_t i = 0; i < t->n_added; i++) n += t->added[i].decoded != NULL;
    t->dec_over = malloc((n ? n : 1) * sizeof *t->dec_over);
    if (!t->dec_over) return lcx_fail(LCX_ERR_OOM, "tokenizer");
    t->n_dec_over = 0;
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        uint8_t *f = &t->id_flags[a->id];
        *f &= (uint8_t)~(TOK_ID_DECODES_NORMALIZED | TOK_ID_SKIPPED);
        if (a->decoded) {
            *f |= TOK_ID_DECODES_NORMALIZED;
            t->dec_over[t->n_dec_over++] = (tok_id_added){a->id, (uint32_t)i};
            if (is_special_content(t, a->decoded, a->decoded_len)) *f |= TOK_ID_SKIPPED;
        } else if (a->special) {
            *f |= TOK_ID_SKIPPED;
        }
    }
    qsort(t->dec_over, t->n_dec_over, sizeof *t->dec_over, tok_id_added_cmp);
    return LCX_OK;
}

lcx_status tok_finish(lcx_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        t->byte_sym[b] = TOK_NONE;
        t->byte_fallback_id[b] = TOK_NONE;
        uint32_t id;
        char key[1] = {(char)b};
        if (t->byte_level && tok_strmap_get(&t->vocab, key, 1, &id)) t->byte_sym[b] = id;
        char fb[8];
        snprintf(fb, sizeof fb, "<0x%02X>", b);
        if (vocab_lookup(t, fb, 6, &id)) t->byte_fallback_id[b] = id;
        if (b < 128) t->ascii_id[b] = !t->byte_level && tok_strmap_get(&t->vocab, key, 1, &id) ? id : TOK_NONE;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        if (!a->normalized || t->n_norms == 0) {
            LCX_TRY(tok_trie_add(a->normalized ? &t->trie_norm : &t->trie_raw, a->content, a->len, (int32_t)i));
        } else {
            /* A normalized added token is matched in normalized text by its normalized form, and decodes as it. */
            char *norm = NULL;
            size_t nl = 0;
            LCX_TRY(tok_normalize_string(t, a->content, a->len, &norm, &nl));
            lcx_status st = tok_trie_add(&t->trie_norm, norm, nl, (int32_t)i);
            if (st == LCX_OK && (nl != a->len || memcmp(norm, a->content, nl) != 0)) {
                a->decoded = norm;
                a->decoded_len = nl;
                norm = NULL;
            }
            free(norm);
            LCX_TRY(st);
        }
    }
    LCX_TRY(decode_forms(t));
    /* Can words be cut before a "▁" that follows another character? Only if every "▁" of every token is in
     * the token's leading run of "▁" (true for SentencePiece vocabularies), "▁" is a token, and no whole-word
     * lookup applies. */
    uint32_t meta_id;
    /* "▁" itself must be a token: an unknown "▁" could fuse with unknown characters across the cut */
    t->split_meta = !t->byte_level && !t->ignore_merges && tok_strmap_get(&t->vocab, "\xE2\x96\x81", 3, &meta_id);
    for (size_t id = 0; t->split_meta && id < t->n_ids; id++) {
        const char *s = t->id_str[id];
        size_t n = t->id_len[id], lead = 0;
        if (!s) continue;
        while (lead + 3 <= n && memcmp(s + lead, "\xE2\x96\x81", 3) == 0) lead += 3;
        for (size_t k = lead; k + 3 <= n; k++)
            if (memcmp(s + k, "\xE2\x96\x81", 3) == 0) { t->split_meta = 0; break; }
    }
    /* A word character for single_word checks: Unicode \w as the Rust regex crate defines it. */
    static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
    LCX_TRY(tok_regex_compile(word, sizeof word - 1, 0, "word", &t->word_re));
    if (t->bos_id < 0 && t->n_tmpl_pre) t->bos_id = t->tmpl_pre[0];
    if (t->eos_id < 0) {
        static const char *const names[] = {"<|end_of_text|>", "</s>", "<|endoftext|>", "<|im_end|>", "<eos>",
                                            "<|eot_id|>"};
        for (size_t k = 0; k < sizeof names / sizeof names[0] && t->eos_id < 0; k++)
            for (size_t i = 0; i < t->n_added; i++)
                if (t->added[i].special && strcmp(t->added[i].content, names[k]) == 0) {
                    t->eos_id = t->added[i].id;
                    break;
                }
    }
    return LCX_OK;
}

static lcx_status from_json_doc(lcx_tokenizer *t, const jctx *c, json_t *root) {
    if (!json_is_object(root)) return lcx_fail(LCX_ERR_FORMAT, "%s: top level is not a JSON object", c->file);
    json_t *model = json_object_get(root, "model");
    if (!model) return lcx_fail(LCX_ERR_FORMAT, "%s: missing 'model'", c->file);
    LCX_TRY(parse_pre(t, c, json_object_get(root, "pre_tokenizer"), "pre_tokenizer"));
    LCX_TRY(parse_normalizer(t, c, json_object_get(root, "normalizer"), "normalizer"));
    /* Every id has an entry, so no id is needed at or above the entry count: this bounds the id table by the
     * file's size, not by the largest number written in it. */
    json_t *vocab = json_is_object(model) ? json_object_get(model, "vocab") : NULL;
    json_t *added = json_object_get(root, "added_tokens");
    t->id_limit = (json_is_object(vocab) ? json_object_size(vocab) : 0) + (json_is_array(added) ? json_array_size(added) : 0);
    LCX_TRY(parse_model(t, c, model));
    LCX_TRY(parse_added(t, c, json_object_get(root, "added_tokens")));
    LCX_TRY(parse_post(t, c, json_object_get(root, "post_processor"), "post_processor"));
    LCX_TRY(parse_dec(t, c, json_object_get(root, "decoder"), "decoder"));
    return tok_finish(t);
}

lcx_tokenizer *tok_alloc(const char *name) {
    lcx_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->name = dupn(name, strlen(name));
    t->unk_id = TOK_NONE;
    t->bos_id = -1;
    t->eos_id = -1;
    if (!t->name) { free(t); return NULL; }
    return t;
}

lcx_status lcx_tokenizer_from_json(const char *json, size_t len, const char *name, lcx_tokenizer **out) {
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!root)
        return lcx_fail(LCX_ERR_FORMAT, "%s: invalid JSON at line %d, column %d: %s", name, err.line, err.column,
                        err.text);
    lcx_tokenizer *t = tok_alloc(name);
    if (!t) { json_decref(root); return lcx_fail(LCX_ERR_OOM, "tokenizer"); }
    jctx c = {name};
    lcx_status st = from_json_doc(t, &c, root);
    json_decref(root);
    if (st != LCX_OK) { lcx_tokenizer_free(t); return st; }
    *out = t;
    return LCX_OK;
}

lcx_status lcx_tokenizer_load(const char *path, lcx_tokenizer **out) {
    char *buf;
    size_t len = 0;
    *out = NULL;
    LCX_TRY(lcx_read_file(path, (size_t)1 << 30, &buf, &len));
    lcx_status st = lcx_tokenizer_from_json(buf, len, path, out);
    free(buf);
    return st;
}

lcx_status lcx_tokenizer_open(const char *path, lcx_tokenizer **out) {
    size_t n = strlen(path);
    if (n >= 5 && strcmp(path + n - 5, ".gguf") == 0) return lcx_tokenizer_load_gguf(path, out);
    if (lcx_is_dir(path)) {
        char *p = lcx_path_join(path, "tokenizer.json");
        if (!p) return lcx_fail(LCX_ERR_OOM, "path");
        lcx_status st = lcx_tokenizer_load(p, out);
        free(p);
        return st;
    }
    return lcx_tokenizer_load(path, out);
}

/* ---- queries ---------------------------------------------------------------------------------------------- */
size_t lcx_tokenizer_vocab_size(const lcx_tokenizer *t) {
    size_t n = t->n_ids;
    while (n && !t->id_str[n - 1]) n--;
    return n;
}

int64_t lcx_tokenizer_token_id(const lcx_tokenizer *t, const char *s, size_t len) {
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && memcmp(t->added[i].content, s, len) == 0) return t->added[i].id;
    uint32_t id;
    if (vocab_lookup(t, s, len, &id)) return id;
    return -1;
}

const char *lcx_tokenizer_token(const lcx_tokenizer *t, uint32_t id, size_t *len) {
    if (id >= t->n_ids || !t->id_str[id]) return NULL;
    if (len) *len = t->id_len[id];
    return t->id_str[id];
}

int lcx_tokenizer_is_special(const lcx_tokenizer *t, uint32_t id) {
    return id < t->n_ids && (t->id_flags[id] & TOK_ID_SPECIAL);
}
int64_t lcx_tokenizer_bos_id(const lcx_tokenizer *t) { return t->bos_id; }
int64_t lcx_tokenizer_eos_id(const lcx_tokenizer *t) { return t->eos_id; }
void lcx_tokenizer_set_eos_id(lcx_tokenizer *t, int64_t id) { t->eos_id = id; }
