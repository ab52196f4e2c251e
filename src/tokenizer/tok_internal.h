/* Internals shared by the tokenizer sources (tokenizer.c, tok_*.c). Not a public API. */
#ifndef LCX_TOK_INTERNAL_H
#define LCX_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>

#include "src/core/strbuf.h"
#include "src/tokenizer/tokenizer.h"

#define TOK_NONE UINT32_MAX

/* ---- string -> u32 hash map (keys are copied into the map's arena) -------------------------------------- */
typedef struct tok_strmap {
    uint64_t *hash;   /* [cap] 0 = empty slot */
    uint32_t *koff;   /* [cap] key offset in arena */
    uint32_t *klen;   /* [cap] */
    uint32_t *val;    /* [cap] */
    size_t cap, count;
    char *arena;
    size_t arena_len, arena_cap;
} tok_strmap;
lcx_status tok_strmap_put(tok_strmap *m, const char *k, size_t len, uint32_t val); /* overwrites */
int tok_strmap_get(const tok_strmap *m, const char *k, size_t len, uint32_t *val);
void tok_strmap_free(tok_strmap *m);

/* ---- (u32,u32) -> (rank,new_id) map for BPE merges ------------------------------------------------------- */
typedef struct tok_pairmap {
    uint64_t *key;  /* [cap] UINT64_MAX = empty */
    uint32_t *rank; /* [cap] */
    uint32_t *id;   /* [cap] */
    size_t cap, count;
} tok_pairmap;
lcx_status tok_pairmap_put(tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);
static inline uint64_t tok_pair_hash(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL; k ^= k >> 33;
    return k;
}
static inline int tok_pairmap_get(const tok_pairmap *m, uint32_t a, uint32_t b, uint32_t *rank, uint32_t *id) {
    if (!m->cap) return 0;
    uint64_t k = ((uint64_t)a << 32) | b;
    size_t mask = m->cap - 1, i = (size_t)tok_pair_hash(k) & mask;
    for (;;) {
        if (m->key[i] == k) { *rank = m->rank[i]; *id = m->id[i]; return 1; }
        if (m->key[i] == UINT64_MAX) return 0;
        i = (i + 1) & mask;
    }
}
void tok_pairmap_free(tok_pairmap *m);

/* ---- added tokens and their matcher --------------------------------------------------------------------- */
typedef struct tok_added {
    char *content; size_t len;
    uint32_t id;
    int special, single_word, lstrip, rstrip, normalized;
    /* a normalized token's normalized form where the normalizer changes it, NULL otherwise: what it decodes as
     * (tokenizers >= 0.23 decodes that form, so that the decoder inverts what the normalizer did) */
    char *decoded; size_t decoded_len;
} tok_added;

/* Byte trie over a set of added tokens; leftmost-longest matching like aho-corasick's LeftmostLongest. */
typedef struct tok_trie_node {
    uint32_t first_child, next_sibling; /* 0 = none (node 0 is the root) */
    int32_t added;                      /* index into tok->added, -1 if no token ends here */
    uint8_t byte;
} tok_trie_node;
typedef struct tok_trie {
    tok_trie_node *nodes;
    size_t n, cap;
    uint8_t first[256]; /* bytes that start a pattern */
} tok_trie;

/* ---- pipeline components -------------------------------------------------------------------------------- */
typedef enum { NORM_PREPEND, NORM_REPLACE, NORM_NFC } tok_norm_kind;
typedef struct tok_norm {
    tok_norm_kind kind;
    char *a; size_t alen; /* prepend string | replace pattern */
    char *b; size_t blen; /* replace content */
} tok_norm;

typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS } tok_split_behavior;
typedef enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE, PRE_DIGITS } tok_pre_kind;
typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } tok_prepend_scheme;
typedef struct tok_pre {
    tok_pre_kind kind;
    pcre2_code *re;                 /* SPLIT, BYTELEVEL with use_regex */
    tok_split_behavior behavior;
    int invert;
    int add_prefix_space;           /* BYTELEVEL */
    char repl[8]; size_t repl_len;  /* METASPACE replacement char (UTF-8) */
    tok_prepend_scheme scheme;      /* METASPACE */
    int split;                      /* METASPACE */
    int individual_digits;          /* DIGITS */
} tok_pre;

typedef enum { DEC_BYTELEVEL, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_METASPACE } tok_dec_kind;
typedef struct tok_dec {
    tok_dec_kind kind;
    char *a; size_t alen;   /* replace pattern | strip content | metaspace replacement */
    char *b; size_t blen;   /* replace content */
    size_t start, stop;     /* strip counts */
    tok_prepend_scheme scheme;
} tok_dec;

typedef struct tok_id_added {
    uint32_t id, added; /* an id and the index of its added token */
} tok_id_added;

enum {
    TOK_ID_ADDED = 1,
    TOK_ID_SPECIAL = 2,
    TOK_ID_DECODES_NORMALIZED = 4, /* decodes as its added token's `decoded` (dec_over) */
    TOK_ID_SKIPPED = 8, /* dropped by decode(skip_special): its decoded string is a special token's content */
};

struct lcx_tokenizer {
    char *name;
    /* id -> token string as written in the vocabulary (for decoding); NULL where no token has that id */
    char **id_str;
    uint32_t *id_len;
    uint8_t *id_flags;  /* TOK_ID_* */
    size_t n_ids;
    size_t id_limit;    /* ids must be below this (the file's entry count): the table above is sized by ids */
    /* BPE model */
    tok_strmap vocab;   /* model vocab; for byte-level pipelines keyed by the raw bytes the token stands for */
    tok_pairmap merges;
    int byte_level;     /* pre-tokenizer ends with ByteLevel: words are raw bytes */
    uint32_t byte_sym[256];      /* byte-level: id of the one-byte token (TOK_NONE if absent) */
    uint32_t byte_fallback_id[256]; /* <0xXX> ids (TOK_NONE if absent) */
    uint32_t ascii_id[128];      /* not byte-level: id of each one-character ASCII token (TOK_NONE if absent) */
    int split_meta;     /* words may be cut before every "▁" that follows another character: no token has a "▁"
                           outside its leading run of "▁", so no merge can cross such a cut (speed only) */
    int byte_fallback, fuse_unk, ignore_merges;
    uint32_t unk_id;    /* TOK_NONE if no unk token */
    /* added tokens */
    tok_added *added; size_t n_added;
    tok_trie trie_raw, trie_norm;  /* non-normalized / normalized added tokens */
    tok_id_added *dec_over; size_t n_dec_over; /* the TOK_ID_DECODES_NORMALIZED ids and their added tokens, by id */
    /* pipeline */
    tok_norm *norms; size_t n_norms;
    tok_pre *pres; size_t n_pres;
    tok_dec *decs; size_t n_decs;
    int has_decoder;
    uint32_t *tmpl_pre, *tmpl_post; size_t n_tmpl_pre, n_tmpl_post; /* ids around $A (add_special) */
    int64_t bos_id, eos_id;
    pcre2_code *word_re; /* single_word check: a word character */
};

/* UTF-8 helpers */
size_t tok_utf8_len(uint8_t lead); /* 1..4 by lead byte (assumes valid text) */
uint32_t tok_utf8_decode(const uint8_t *s, size_t *adv);
size_t tok_utf8_encode(uint32_t cp, char *out);
int tok_is_whitespace(uint32_t cp);
/* tokenizers' Replace with a String pattern: each non-overlapping occurrence of a, left to right, appended to out
 * as b, the rest as it is. An empty pattern matches at every character boundary, as a regex's empty match does
 * (and Python's str.replace): "ab" -> "XaXbX", and empty text stays empty. Returns 0 when out of memory. */
int tok_replace_all(const char *s, size_t n, const char *a, size_t alen, const char *b, size_t blen, lcx_strbuf *out);

/* Byte-level alphabet (GPT-2 bytes_to_unicode): byte -> code point, and the reverse (-1 if not one). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);

/* Compile a tokenizers (Oniguruma) regex with PCRE2: UTF, UCP, \s/\S rewritten to White_Space, JIT. */
lcx_status tok_regex_compile(const char *pattern, size_t len, int literal, const char *what, pcre2_code **out);

/* Trie */
lcx_status tok_trie_add(tok_trie *t, const char *s, size_t len, int32_t added);
void tok_trie_free(tok_trie *t);

/* BPE: encode one word (after pre-tokenization), appending ids. Scratch lives in the encoder. */
typedef struct tok_bpe_scratch {
    uint32_t *c; int32_t *prev, *next; uint32_t *len; size_t cap;
    uint64_t *heap; /* min-heap of rank << 32 | pos */
    size_t heap_n, heap_cap;
} tok_bpe_scratch;
lcx_status tok_bpe_word(const lcx_tokenizer *tok, tok_bpe_scratch *sc, const char *w, size_t len,
                        lcx_tok_ids *out);
void tok_bpe_scratch_free(tok_bpe_scratch *sc);

/* Builders used by the JSON and GGUF loaders. */
lcx_status tok_set_id(lcx_tokenizer *tok, uint32_t id, const char *s, size_t len);
lcx_tokenizer *tok_alloc(const char *name);
int tok_id_added_cmp(const void *a, const void *b); /* tok_id_added by id, for qsort and bsearch */
lcx_status tok_finish(lcx_tokenizer *tok); /* byte tables, tries, regexes, bos/eos guesses */
/* Apply the normalizers to a string (heap result). */
lcx_status tok_normalize_string(const lcx_tokenizer *tok, const char *s, size_t len, char **out, size_t *out_len);
lcx_status tok_add_merge(lcx_tokenizer *tok, const char *a, size_t alen, const char *b, size_t blen,
                         uint32_t rank, const char *where);

/* ---- GGUF vocabularies (tok_gguf.c) ----------------------------------------------------------------------- */
/* How a gpt2-model GGUF splits text before byte-level BPE, from tokenizer.ggml.pre: the split regexes, applied in
 * turn (each splits the pieces of the one before, matches kept: HF's Split Isolated), whether digits are split off
 * one by one first, and whether whole-word vocabulary hits skip the merges. */
typedef struct tok_gguf_split {
    const char *const *regex;
    int n_regex;
    int digits, ignore_merges;
} tok_gguf_split;
/* 0 when `pre` is not a pre-tokenizer we know (NULL is the GPT-2 default). */
int tok_gguf_split_of(const char *pre, tok_gguf_split *out);
/* The tokenizer.ggml.* keys of an open GGUF as an lcx_gguf_vocab whose arrays the caller releases with
 * tok_gguf_vocab_free (values are checked where they are read: types, lengths, finite scores). */
lcx_status tok_gguf_vocab_read(const struct lcx_gguf_file *f, lcx_gguf_vocab *v);
void tok_gguf_vocab_free(lcx_gguf_vocab *v);

#endif
