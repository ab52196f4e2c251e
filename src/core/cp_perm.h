/* cp_perm: the context-parallel token permutation — a global batch row (ids, targets, positions, or any tensor
 * with one row per token) to CP rank c's local order and back. Rank c holds chunks c and 2cp-1-c of 2cp
 * (src/core/layout.h lcx_cp_split_of); every token keeps its global position, which is what RoPE is given.
 * Targets are the global next-token targets permuted with their tokens (the target of a chunk's last token is
 * the first token of another rank's chunk, so targets are formed before the split, never after). Pure copies. */
#ifndef LCX_CP_PERM_H
#define LCX_CP_PERM_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

/* local[0 .. seq_len/cp) rows = rank c's rows of global[0 .. seq_len) in local order; a row is row_bytes bytes.
 * Fails (LCX_ERR_INVALID) on a bad split (lcx_cp_split_of), row_bytes 0 or overflow. */
lcx_status lcx_cp_scatter_rows(int64_t seq_len, int cp, int c, const void *global, void *local, size_t row_bytes);

/* The inverse: rank c's local rows into their places in global[0 .. seq_len) (other rows untouched), so calling
 * it for every rank gathers a tensor back into global order. Same failures. */
lcx_status lcx_cp_gather_rows(int64_t seq_len, int cp, int c, const void *local, void *global, size_t row_bytes);

/* Rank c's part of one sequence of a global batch: ids, targets and positions of seq_len tokens each, into
 * arrays of seq_len/cp in local order. targets may be NULL (no loss: targets_local untouched). positions NULL
 * means 0 .. seq_len-1, so pos_local gets the global positions (lcx_cp_positions); otherwise the given
 * positions are permuted unchanged. */
lcx_status lcx_cp_local_batch(int64_t seq_len, int cp, int c, const int32_t *ids, const int32_t *targets,
                              const int32_t *positions, int32_t *ids_local, int32_t *targets_local,
                              int32_t *pos_local);

/* Tokens each of cp ranks holds of a window of n tokens: n padded to the next multiple of 2 cp (the two chunks of
 * every rank equally long), divided by cp; n itself when cp <= 1. The padding goes after the window's tokens. */
int64_t lcx_cp_local_len(int64_t n, int cp);

/* Rank c's part of a window tokens[0 .. n) split over cp ranks (cp >= 2): the window padded to
 * lcx_cp_local_len(n, cp) x cp tokens with copies of its last token (after every real one: under the causal mask
 * the pad changes nothing before it), and rank c's lcx_cp_local_len(n, cp) rows of it in local order: their ids
 * and global positions (a position >= n is the pad). Fails as lcx_cp_split_of. */
lcx_status lcx_cp_local_window(int64_t n, int cp, int c, const int32_t *tokens, int32_t *ids_local,
                               int32_t *pos_local);

#endif /* LCX_CP_PERM_H */
