/* mix: training samples drawn from several datasets in set proportions (a data mix, as Megatron's blended
 * dataset), e.g. long documents for the new context beside short ones that keep the short-context skills.
 *
 * Each source is a sampler of its own (src/train/sampler.h: its documents, shuffles and stream), source i seeded
 * with lcx_mix_seed(seed, i). Whole samples come from one source: sample k (0-based over the mix) comes from the
 * source whose count lags its share most, the i that maximises w_i (k + 1) - n_i (n_i: samples drawn from it so
 * far; ties to the lower i), so after any k samples every n_i is within 1 of w_i k. The choice depends on the
 * counts only, so the sources' cursors are the whole state: saving them and seeking a new mix over the same data,
 * weights and config to them continues exactly. One source with weight 1 is its sampler, sample for sample. */
#ifndef LCX_MIX_H
#define LCX_MIX_H

#include <stdint.h>

#include "formats/tokdata.h"
#include "src/core/status.h"
#include "src/train/sampler.h"

enum { LCX_MIX_MAX = 8 }; /* sources in one mix */

/* The sources and their weights (> 0; normalised to sum 1 by lcx_mix_init). */
typedef struct lcx_mix_data {
    int n;
    const lcx_tokdata *td[LCX_MIX_MAX];
    double weight[LCX_MIX_MAX];
} lcx_mix_data;

typedef struct lcx_mix_cursor {
    int n;
    lcx_sampler_cursor src[LCX_MIX_MAX]; /* each source's; src[i].samples: samples drawn from source i */
} lcx_mix_cursor;

typedef struct lcx_mix lcx_mix;

/* One dataset, weight 1. */
lcx_mix_data lcx_mix_single(const lcx_tokdata *td);

/* The seed of source i's sampler: seed itself for source 0 (a one-source mix shuffles as its sampler alone). */
uint64_t lcx_mix_seed(uint64_t seed, int i);

/* Borrows the datasets (keep them open while the mix lives). cfg applies to every source (cfg->seed is mixed per
 * source by lcx_mix_seed). Fails on no source, more than LCX_MIX_MAX, a weight that is not a positive finite
 * number, or a source with nothing to draw. */
lcx_status lcx_mix_init(const lcx_mix_data *data, const lcx_sampler_config *cfg, lcx_mix **out);
void lcx_mix_free(lcx_mix *m);

/* Next sample as lcx_sampler_next (out[0 .. seq_len], doc [seq_len] or NULL); *src (may be NULL) gets the
 * source it came from. */
lcx_status lcx_mix_next(lcx_mix *m, uint32_t *out, int32_t *doc, int *src);

lcx_mix_cursor lcx_mix_tell(const lcx_mix *m);
/* Continue from a saved cursor (as many sources as the mix; each checked against its data and config). */
lcx_status lcx_mix_seek(lcx_mix *m, const lcx_mix_cursor *c);

/* The normalised weight of source i. */
double lcx_mix_weight(const lcx_mix *m, int i);

#endif
