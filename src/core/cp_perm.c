#include "src/core/cp_perm.h"

#include <string.h>

#include "src/core/layout.h"

/* Byte offsets of rank c's two chunks in global order and the chunk size in bytes. */
static lcx_status chunks_of(int64_t seq_len, int cp, int c, size_t row_bytes, size_t start[2], size_t *bytes) {
    lcx_cp_split s;
    LCX_TRY(lcx_cp_split_of(seq_len, cp, c, &s));
    LCX_FAIL_IF(row_bytes == 0, LCX_ERR_INVALID, "cp permutation of rows of 0 bytes");
    size_t total;
    LCX_FAIL_IF(!lcx_mul_size((size_t)seq_len, row_bytes, &total), LCX_ERR_INVALID,
                "cp permutation of %lld rows of %zu bytes overflows", (long long)seq_len, row_bytes);
    *bytes = (size_t)s.chunk_len * row_bytes;
    for (int i = 0; i < 2; i++) start[i] = (size_t)s.start[i] * row_bytes;
    return LCX_OK;
}

lcx_status lcx_cp_scatter_rows(int64_t seq_len, int cp, int c, const void *global, void *local, size_t row_bytes) {
    size_t start[2] = {0, 0}, n = 0; /* set by chunks_of; gcc -O3 cannot see it */
    LCX_TRY(chunks_of(seq_len, cp, c, row_bytes, start, &n));
    for (int i = 0; i < 2; i++) memcpy((char *)local + i * n, (const char *)global + start[i], n);
    return LCX_OK;
}

lcx_status lcx_cp_gather_rows(int64_t seq_len, int cp, int c, const void *local, void *global, size_t row_bytes) {
    size_t start[2] = {0, 0}, n = 0; /* set by chunks_of; gcc -O3 cannot see it */
    LCX_TRY(chunks_of(seq_len, cp, c, row_bytes, start, &n));
    for (int i = 0; i < 2; i++) memcpy((char *)global + start[i], (const char *)local + i * n, n);
    return LCX_OK;
}

lcx_status lcx_cp_local_batch(int64_t seq_len, int cp, int c, const int32_t *ids, const int32_t *targets,
                              const int32_t *positions, int32_t *ids_local, int32_t *targets_local,
                              int32_t *pos_local) {
    LCX_FAIL_IF(seq_len > INT32_MAX, LCX_ERR_INVALID, "sequence of %lld tokens: positions are int32",
                (long long)seq_len);
    LCX_TRY(lcx_cp_scatter_rows(seq_len, cp, c, ids, ids_local, sizeof *ids));
    if (targets) LCX_TRY(lcx_cp_scatter_rows(seq_len, cp, c, targets, targets_local, sizeof *targets));
    if (positions) return lcx_cp_scatter_rows(seq_len, cp, c, positions, pos_local, sizeof *positions);
    /* The token's global index is its position (the same list as lcx_cp_positions, in int32). */
    lcx_cp_split s;
    LCX_TRY(lcx_cp_split_of(seq_len, cp, c, &s));
    for (int64_t i = 0; i < 2 * s.chunk_len; i++) pos_local[i] = (int32_t)(s.start[i / s.chunk_len] + i % s.chunk_len);
    return LCX_OK;
}

int64_t lcx_cp_local_len(int64_t n, int cp) {
    if (cp <= 1) return n;
    const int64_t unit = 2 * (int64_t)cp;
    return (n + unit - 1) / unit * unit / cp;
}

lcx_status lcx_cp_local_window(int64_t n, int cp, int c, const int32_t *tokens, int32_t *ids_local,
                               int32_t *pos_local) {
    LCX_FAIL_IF(n < 1, LCX_ERR_INVALID, "cp window of %lld tokens", (long long)n);
    lcx_cp_split s;
    LCX_TRY(lcx_cp_split_of(lcx_cp_local_len(n, cp) * cp, cp, c, &s));
    for (int64_t i = 0; i < 2 * s.chunk_len; i++) {
        const int64_t p = s.start[i / s.chunk_len] + i % s.chunk_len;
        pos_local[i] = (int32_t)p;
        ids_local[i] = tokens[p < n ? p : n - 1];
    }
    return LCX_OK;
}
