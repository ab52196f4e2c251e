/* tokdata: Megatron-LM indexed datasets (PREFIX.bin + PREFIX.idx), byte-compatible with
 * megatron/core/datasets/indexed_dataset.py (IndexedDatasetBuilder / _IndexWriter, version 1).
 *
 * PREFIX.idx, little-endian:  "MMIDIDX\0\0" | u64 version = 1 | u8 dtype code | u64 sequence count S |
 *   u64 document-index count D (= documents + 1) | i32 sizes[S] (tokens) | i64 pointers[S] (byte offsets in .bin) |
 *   i64 document_indices[D] (0, then the end sequence of each document).
 * PREFIX.bin: the sequences' tokens back to back in the dtype.
 * Megatron's preprocessing writes one sequence per document; multimodal files (an i8 mode per sequence after
 * document_indices) are refused as unsupported.
 *
 * Reading maps both files and checks every count, offset and size against the file sizes before use. Writing
 * goes to temporary files renamed into place on commit (fileio's atomic writer), .bin first, then .idx. */
#ifndef LCX_FORMATS_TOKDATA_H
#define LCX_FORMATS_TOKDATA_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/fileio.h"
#include "src/core/status.h"

/* Megatron's DType codes. */
typedef enum lcx_tokdata_dtype {
    LCX_TOKDATA_U8 = 1,
    LCX_TOKDATA_I8 = 2,
    LCX_TOKDATA_I16 = 3,
    LCX_TOKDATA_I32 = 4,
    LCX_TOKDATA_I64 = 5,
    LCX_TOKDATA_F64 = 6,
    LCX_TOKDATA_F32 = 7,
    LCX_TOKDATA_U16 = 8,
} lcx_tokdata_dtype;

/* Bytes per element (0 for an unknown code) and the name ("uint16", ...; "?" if unknown). */
size_t lcx_tokdata_dtype_size(int code);
const char *lcx_tokdata_dtype_name(int code);
/* Megatron's choice for a vocabulary size: uint16 below 65500 tokens, int32 otherwise. */
lcx_tokdata_dtype lcx_tokdata_dtype_for_vocab(size_t vocab_size);

typedef struct lcx_tokdata {
    char *prefix;
    lcx_mapping idx, bin;
    int dtype;
    size_t itemsize;
    uint64_t n_seqs;  /* S */
    uint64_t n_docs;  /* D - 1 */
    uint64_t n_tokens;
    size_t off_sizes, off_ptrs, off_docs; /* byte offsets of the arrays in idx */
} lcx_tokdata;

/* Open PREFIX.idx + PREFIX.bin read-only (mmap) and validate them. */
lcx_status lcx_tokdata_open(const char *prefix, lcx_tokdata *td);
void lcx_tokdata_close(lcx_tokdata *td); /* zeroed or NULL: no-op */

/* Length (tokens) and byte offset of sequence i (i < n_seqs; asserted). */
uint64_t lcx_tokdata_seq_len(const lcx_tokdata *td, uint64_t i);
uint64_t lcx_tokdata_seq_ptr(const lcx_tokdata *td, uint64_t i);
/* Sequences [*first, *end) of document d (d < n_docs; asserted). */
void lcx_tokdata_doc_seqs(const lcx_tokdata *td, uint64_t d, uint64_t *first, uint64_t *end);
/* Tokens [start, start+n) of sequence i converted to u32 ids; fails on a range past the sequence end, a float
 * dtype, or a negative / >= 2^32 value. */
lcx_status lcx_tokdata_read(const lcx_tokdata *td, uint64_t i, uint64_t start, uint64_t n, uint32_t *out);

/* Writer: one sequence per document, like Megatron's preprocess_data.py. */
typedef struct lcx_tokdata_writer {
    lcx_atomic_file bin;
    char *idx_path;
    int dtype;
    size_t itemsize;
    int32_t *sizes;      /* [n_seqs] */
    uint64_t n_seqs, cap;
    uint64_t bin_bytes;
    uint8_t *buf;        /* write buffer */
    size_t buf_n, buf_cap;
    int open;
    int noreplace; /* writer_create */
} lcx_tokdata_writer;

lcx_status lcx_tokdata_writer_open(lcx_tokdata_writer *w, const char *prefix, lcx_tokdata_dtype dtype);
/* The same for a command's output (lcextend tokenize): PREFIX.bin and PREFIX.idx must not exist, and neither
 * replaces anything that appears meanwhile (src/core/outpath.h). writer_open replaces: files we own (a run's
 * ids in its run directory). */
lcx_status lcx_tokdata_writer_create(lcx_tokdata_writer *w, const char *prefix, lcx_tokdata_dtype dtype);
/* Append a document of n ids (ids must fit the dtype; n < 2^31). */
lcx_status lcx_tokdata_writer_add(lcx_tokdata_writer *w, const uint32_t *ids, size_t n);
/* Write the .idx and move both files into place. The writer is closed afterwards (success or not). */
lcx_status lcx_tokdata_writer_commit(lcx_tokdata_writer *w);
/* Discard everything written (no-op on a closed or zeroed writer). */
void lcx_tokdata_writer_abort(lcx_tokdata_writer *w);

#endif
