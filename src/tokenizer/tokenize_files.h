/* tokenize_files: text or JSON-lines files -> a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx), one
 * sequence per document, exactly as Hugging Face `tokenizers` encodes them, on all cores (docs/tokenize.md).
 *
 * Documents are cut from the memory-mapped inputs batch by batch, encoded in parallel and written in input
 * order, so memory stays bounded for any input size and the output does not depend on the thread count. */
#ifndef LCX_TOKENIZE_FILES_H
#define LCX_TOKENIZE_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "formats/tokdata.h"
#include "src/core/report.h"
#include "src/core/status.h"

typedef enum { LCX_INPUT_AUTO, LCX_INPUT_TEXT, LCX_INPUT_JSONL } lcx_input_format;

typedef struct lcx_tokenize_options {
    const char *tokenizer;      /* tokenizer.json, a directory holding one, or a .gguf */
    const char *const *inputs;  /* n_inputs files */
    size_t n_inputs;
    const char *output;         /* PREFIX: PREFIX.bin and PREFIX.idx are created (never replaced) */
    lcx_input_format format;    /* AUTO: jsonl for *.jsonl / *.json, text otherwise */
    int blank_line_split;       /* text: documents are blocks separated by blank lines (else one per file) */
    const char *field;          /* jsonl: the string field holding the text (NULL: "text") */
    const char *eos;            /* end-of-document token: its text or a numeric id; NULL: the tokenizer's */
    int no_eos;                 /* 1: append nothing */
    int no_special;             /* 1: no post-processor template (no BOS) */
    int dtype;                  /* -1: Megatron's choice for the vocabulary, else an lcx_tokdata_dtype */
    int threads;                /* <= 0: all cores */
} lcx_tokenize_options;

typedef struct lcx_tokenize_result {
    uint64_t documents, tokens, bytes;
    double seconds;
    int threads;
    lcx_tokdata_dtype dtype;
    int bad_option; /* on failure, 1 when an option is at fault (eos not a token, dtype too small for the
                       vocabulary, no EOS to be found): the program answers it as a usage error */
} lcx_tokenize_result;

/* Tokenize o->inputs into o->output. Reports progress (input MB) and, as a NOTE, the summary line
 * "tokenized N documents, X MB -> T tokens (uint16) in S s, R MB/s, K threads: PREFIX.bin/.idx". On failure
 * nothing is left at PREFIX and the error names the file (and line, for JSON lines). */
lcx_status lcx_tokenize_files(const lcx_tokenize_options *o, const lcx_reporter *r, lcx_tokenize_result *res);

#endif
