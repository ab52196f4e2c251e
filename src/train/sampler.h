/* sampler: packed training sequences from a Megatron indexed dataset (formats/tokdata.h).
 *
 * Each epoch lists the eligible documents (at least min_doc_tokens tokens), every document with at least
 * long_doc_tokens tokens long_doc_repeat times (upsampling: long-context training wants long documents), and
 * shuffles that list with a PRNG seeded by (seed, epoch). The documents are read back to back in that order
 * (each followed by eos_id when >= 0, for data written without EOS) as one endless token stream that runs on
 * into the next epoch. Sample k is stream tokens [k*L, k*L + L] (L + 1 tokens: inputs are the first L,
 * targets the last L), so consecutive samples share one token, as in Megatron's GPTDataset.
 *
 * The cursor (epoch, position in the epoch's list, offset in that document, samples drawn) is all the state:
 * saving it and seeking a new sampler over the same data and config to it continues exactly. Same data, config
 * and seed give the same samples on every machine. */
#ifndef LCX_SAMPLER_H
#define LCX_SAMPLER_H

#include <stdint.h>

#include "formats/tokdata.h"
#include "src/core/status.h"

typedef struct lcx_sampler_config {
    uint64_t seq_len;         /* L >= 1 */
    uint64_t seed;
    uint64_t min_doc_tokens;  /* shorter documents are never drawn (0: all non-empty documents) */
    uint64_t long_doc_tokens; /* documents at least this long ... (0: no upsampling) */
    uint32_t long_doc_repeat; /* ... are listed this many times per epoch (>= 1) */
    int64_t eos_id;           /* >= 0: token appended after every document; -1: none (the data has EOS) */
} lcx_sampler_config;

typedef struct lcx_sampler_cursor {
    uint64_t epoch;   /* epoch of the next token */
    uint64_t pos;     /* index into that epoch's shuffled document list */
    uint64_t offset;  /* token offset inside that document (its EOS counted) */
    uint64_t samples; /* samples drawn so far */
} lcx_sampler_cursor;

typedef struct lcx_sampler lcx_sampler;

/* The sampler borrows td (keep it open while the sampler lives). */
lcx_status lcx_sampler_init(const lcx_tokdata *td, const lcx_sampler_config *cfg, lcx_sampler **out);
void lcx_sampler_free(lcx_sampler *s);

/* Next sample: out[0 .. seq_len] (seq_len + 1 ids). doc (NULL: not wanted) [seq_len]: for each input token the
 * index in the sample of its document's first token, 0 for a document that began in an earlier sample (the
 * document starts of a document mask, lcx_batch.doc_start). */
lcx_status lcx_sampler_next(lcx_sampler *s, uint32_t *out, int32_t *doc);

lcx_sampler_cursor lcx_sampler_tell(const lcx_sampler *s);
/* Continue from a saved cursor (checked against this data and config). */
lcx_status lcx_sampler_seek(lcx_sampler *s, const lcx_sampler_cursor *c);

/* Per epoch: number of list entries and tokens (EOS included). */
uint64_t lcx_sampler_epoch_entries(const lcx_sampler *s);
uint64_t lcx_sampler_epoch_tokens(const lcx_sampler *s);
/* Document index at position pos of epoch e's list (pos < epoch entries; asserted). */
uint64_t lcx_sampler_doc_at(lcx_sampler *s, uint64_t epoch, uint64_t pos);

#endif
