/* tokenizer: Hugging Face `tokenizer.json` BPE tokenizers and GGUF tokenizer metadata, id-for-id identical to
 * the `tokenizers` library.
 *
 * Supported pipelines (anything else is refused with LCX_ERR_UNSUPPORTED naming the component):
 *   - byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM): normalizer NFC (optional), pre_tokenizer Split(Regex) /
 *     ByteLevel / Digits (optionally in a Sequence, ByteLevel last), decoder ByteLevel;
 *   - SentencePiece-style BPE (Llama 2, Mistral, TinyLlama): normalizer Prepend("▁") + Replace(" ", "▁") or
 *     pre_tokenizer Metaspace, byte_fallback <0xXX> tokens, fuse_unk, decoder Replace/ByteFallback/Fuse/Strip
 *     or Metaspace;
 *   - added tokens (special or not; single_word, lstrip, rstrip, normalized), post-processor TemplateProcessing
 *     (single sequence), ByteLevel, Sequence of those.
 * Regexes are compiled with PCRE2 (UTF + UCP + JIT); `\s`/`\S` are rewritten to the Unicode White_Space set
 * so they mean what they mean in Oniguruma, the engine `tokenizers` uses (PCRE2's `\s` also takes U+180E).
 *
 * Input text that is not valid UTF-8 is first repaired exactly like Python's
 * `bytes.decode("utf-8", errors="replace")` (each maximal ill-formed subpart becomes U+FFFD), since
 * `tokenizers` only ever sees such a repaired string. Valid UTF-8 is tokenized as is.
 *
 * A loaded lcx_tokenizer is immutable and may be shared by threads; each thread encodes through its own
 * lcx_tok_encoder (regex match data, scratch buffers, a word cache). */
#ifndef LCX_TOKENIZER_H
#define LCX_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

typedef struct lcx_tokenizer lcx_tokenizer;
typedef struct lcx_tok_encoder lcx_tok_encoder;

/* A growable list of token ids (caller owns; zero-initialize, free with lcx_tok_ids_free). */
typedef struct lcx_tok_ids {
    uint32_t *ids; /* [n] */
    size_t n, cap;
} lcx_tok_ids;
void lcx_tok_ids_free(lcx_tok_ids *v);
lcx_status lcx_tok_ids_push(lcx_tok_ids *v, uint32_t id);

/* Load a tokenizer.json file. `path` names the file in error messages. */
lcx_status lcx_tokenizer_load(const char *path, lcx_tokenizer **out);
/* Same from an in-memory JSON document; `name` is used in error messages. */
lcx_status lcx_tokenizer_from_json(const char *json, size_t len, const char *name, lcx_tokenizer **out);
void lcx_tokenizer_free(lcx_tokenizer *tok);

/* GGUF tokenizer metadata (`tokenizer.ggml.*`), as plain arrays; strings need not be NUL-terminated. */
typedef struct lcx_gguf_vocab {
    const char *model;            /* tokenizer.ggml.model: "gpt2" or "llama" */
    const char *pre;              /* tokenizer.ggml.pre (may be NULL): picks the split regex for gpt2 */
    size_t n_tokens;
    const char *const *tokens;    /* [n_tokens] tokenizer.ggml.tokens */
    const size_t *token_lens;     /* [n_tokens] */
    const float *scores;          /* [n_tokens] tokenizer.ggml.scores, may be NULL (gpt2) */
    const int32_t *token_types;   /* [n_tokens] tokenizer.ggml.token_type, may be NULL (1 normal, 2 unknown,
                                     3 control, 4 user-defined, 5 unused, 6 byte) */
    size_t n_merges;
    const char *const *merges;    /* [n_merges] "a b", tokenizer.ggml.merges (gpt2; llama may have them too) */
    const size_t *merge_lens;     /* [n_merges] */
    int64_t bos_id, eos_id, unk_id; /* -1 when absent */
    int add_bos, add_eos;         /* tokenizer.ggml.add_bos_token / add_eos_token (-1 absent: model default) */
    int add_space_prefix;         /* tokenizer.ggml.add_space_prefix (llama; -1 absent: true) */
} lcx_gguf_vocab;
/* Build a tokenizer equivalent to llama.cpp's for that vocabulary (gpt2: byte-level BPE with the split
 * regex chosen by `pre`; llama: SentencePiece BPE with "▁", byte fallback and merges ranked by score). */
lcx_status lcx_tokenizer_from_gguf(const lcx_gguf_vocab *v, const char *name, lcx_tokenizer **out);
/* Open a GGUF file (formats/gguf.h: the whole file is validated, tensor data is not read) and build the
 * tokenizer from its tokenizer.ggml.* metadata. */
lcx_status lcx_tokenizer_load_gguf(const char *path, lcx_tokenizer **out);
/* The same from an already-open GGUF file (e.g. the checkpoint being imported); errors name f->path and the key.
 * The tokenizer copies what it needs: f may be closed afterwards. */
struct lcx_gguf_file;
lcx_status lcx_tokenizer_from_gguf_file(const struct lcx_gguf_file *f, lcx_tokenizer **out);
/* Hugging Face tokenizer.json and tokenizer_config.json (as JSON values the caller owns) describing the same
 * tokenizer as f's tokenizer.ggml.* metadata, for an HF export of a GGUF checkpoint: byte-level BPE (gpt2) only;
 * a SentencePiece vocabulary gives LCX_ERR_UNSUPPORTED naming the file. model_max_length <= 0 leaves it out. */
struct json_t;
lcx_status lcx_tokenizer_hf_from_gguf(const struct lcx_gguf_file *f, int64_t model_max_length,
                                      struct json_t **tokenizer_json, struct json_t **tokenizer_config_json);
/* Load by file name: *.gguf via lcx_tokenizer_load_gguf, a directory via DIR/tokenizer.json, else JSON. */
lcx_status lcx_tokenizer_open(const char *path, lcx_tokenizer **out);

/* Per-thread encoding state. */
lcx_status lcx_tok_encoder_init(const lcx_tokenizer *tok, lcx_tok_encoder **out);
void lcx_tok_encoder_free(lcx_tok_encoder *enc);

/* Encode `len` bytes of text, APPENDING ids to *out. add_special: apply the post-processor template (BOS/EOS)
 * like `tokenizers`' add_special_tokens=True. */
lcx_status lcx_tok_encode(lcx_tok_encoder *enc, const char *text, size_t len, int add_special, lcx_tok_ids *out);
/* One-shot convenience (creates a temporary encoder). */
lcx_status lcx_tokenizer_encode(const lcx_tokenizer *tok, const char *text, size_t len, int add_special,
                                lcx_tok_ids *out);

/* Decode ids to text like `tokenizers`' decode(ids, skip_special_tokens). *text is a NUL-terminated heap
 * string (free()), *len its length. Unknown ids are skipped, as `tokenizers` does. */
lcx_status lcx_tokenizer_decode(const lcx_tokenizer *tok, const uint32_t *ids, size_t n, int skip_special,
                                char **text, size_t *len);

/* Vocabulary: size (max id + 1), id of a token string (-1 if none), string of an id (NULL if none). */
size_t lcx_tokenizer_vocab_size(const lcx_tokenizer *tok);
int64_t lcx_tokenizer_token_id(const lcx_tokenizer *tok, const char *token, size_t len);
const char *lcx_tokenizer_token(const lcx_tokenizer *tok, uint32_t id, size_t *len);
/* 1 if id is an added token marked special. */
int lcx_tokenizer_is_special(const lcx_tokenizer *tok, uint32_t id);
/* BOS/EOS ids (-1 when unknown). BOS comes from the post-processor template (or GGUF metadata); EOS from
 * GGUF metadata, or the first special added token among the usual end-of-text names. Overridable. */
int64_t lcx_tokenizer_bos_id(const lcx_tokenizer *tok);
int64_t lcx_tokenizer_eos_id(const lcx_tokenizer *tok);
void lcx_tokenizer_set_eos_id(lcx_tokenizer *tok, int64_t id);

/* Repair text to valid UTF-8 like Python's errors="replace" (maximal subparts -> U+FFFD). Returns 1 and
 * a heap copy in *out if anything was replaced, 0 (and *out = NULL) if the input was already valid, -1 on
 * allocation failure. */
int lcx_utf8_repair(const char *s, size_t len, char **out, size_t *out_len);

#endif
