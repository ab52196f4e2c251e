/* Megatron indexed datasets: files written by megatron-core's IndexedDatasetBuilder (tests/fixtures/gen_tokdata.py)
 * read back with the tokens given by the generator's formulas; our writer reproduces those files byte for byte
 * (so Megatron reads ours); truncated / mismatched / corrupted files fail with clear messages. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "formats/tokdata.h"
#include "src/core/fileio.h"
#include "test_util.h"

#define FX LCX_SOURCE_DIR "/tests/fixtures/tokdata/"
#define N_DOCS 57

/* The formulas of gen_tokdata.py. */
static uint32_t doc_len(uint32_t d) { return d % 19 == 5 ? 0 : (d * 37 + 11) % 101; }
static uint32_t tok(uint32_t d, uint32_t k, uint32_t vocab) { return (d * 7919 + k * 131 + (d * k) % 17) % vocab; }

static int files_equal(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    if (lcx_read_file(a, 1 << 26, &x, &nx) != LCX_OK) return 0;
    if (lcx_read_file(b, 1 << 26, &y, &ny) != LCX_OK) { free(x); return 0; }
    int eq = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return eq;
}

static void check_megatron(const char *name, uint32_t vocab, int dtype) {
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s%s", FX, name);
    lcx_tokdata td;
    CHECK_OK(lcx_tokdata_open(prefix, &td));
    CHECK(td.dtype == dtype);
    CHECK(td.n_docs == N_DOCS);
    CHECK(td.n_seqs == N_DOCS);
    uint64_t total = 0;
    uint32_t buf[128];
    for (uint32_t d = 0; d < N_DOCS && td.n_docs == N_DOCS; d++) {
        uint64_t first, end;
        lcx_tokdata_doc_seqs(&td, d, &first, &end);
        CHECK(first == d && end == d + 1);
        CHECK(lcx_tokdata_seq_len(&td, d) == doc_len(d));
        CHECK_OK(lcx_tokdata_read(&td, d, 0, doc_len(d), buf));
        int ok = 1;
        for (uint32_t k = 0; k < doc_len(d); k++) ok &= buf[k] == tok(d, k, vocab);
        CHECK_MSG(ok, "%s document %u tokens differ", name, d);
        total += doc_len(d);
    }
    CHECK(td.n_tokens == total);
    if (td.n_seqs > 2) {
        CHECK_FAILS(lcx_tokdata_read(&td, 1, 0, lcx_tokdata_seq_len(&td, 1) + 1, buf), LCX_ERR_INVALID, "past the end");
    }
    lcx_tokdata_close(&td);

    /* our writer -> the same bytes as Megatron's */
    char ours[512], a[600], b[600];
    snprintf(ours, sizeof ours, "%s/tokdata_%s", LCX_BINARY_DIR, name);
    lcx_tokdata_writer w;
    CHECK_OK(lcx_tokdata_writer_open(&w, ours, (lcx_tokdata_dtype)dtype));
    for (uint32_t d = 0; d < N_DOCS; d++) {
        for (uint32_t k = 0; k < doc_len(d); k++) buf[k] = tok(d, k, vocab);
        CHECK_OK(lcx_tokdata_writer_add(&w, buf, doc_len(d)));
    }
    CHECK_OK(lcx_tokdata_writer_commit(&w));
    snprintf(a, sizeof a, "%s.bin", ours); snprintf(b, sizeof b, "%s.bin", prefix);
    CHECK_MSG(files_equal(a, b), "%s.bin differs from Megatron's", name);
    snprintf(a, sizeof a, "%s.idx", ours); snprintf(b, sizeof b, "%s.idx", prefix);
    CHECK_MSG(files_equal(a, b), "%s.idx differs from Megatron's", name);
}

/* Copy the u16 fixture to prefix with the .idx/.bin edited by fn. */
static void write_variant(const char *prefix, size_t idx_keep, size_t bin_keep, size_t poke_at, uint8_t poke) {
    char *idx, *bin, p[600];
    size_t ni, nb;
    if (lcx_read_file(FX "u16.idx", 1 << 20, &idx, &ni) != LCX_OK) return;
    if (lcx_read_file(FX "u16.bin", 1 << 20, &bin, &nb) != LCX_OK) { free(idx); return; }
    if (poke_at < ni) idx[poke_at] = (char)poke;
    snprintf(p, sizeof p, "%s.idx", prefix);
    CHECK_OK(lcx_write_file_atomic(p, idx, idx_keep < ni ? idx_keep : ni));
    snprintf(p, sizeof p, "%s.bin", prefix);
    CHECK_OK(lcx_write_file_atomic(p, bin, bin_keep < nb ? bin_keep : nb));
    free(idx);
    free(bin);
}

static void check_errors(void) {
    const char *v = LCX_BINARY_DIR "/tokdata_bad";
    lcx_tokdata td;
    size_t all = (size_t)-1;
    write_variant(v, 20, all, all, 0);
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "shorter than the 34-byte header");
    write_variant(v, 1000, all, all, 0);
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "truncated or mismatched");
    write_variant(v, all, 5000, all, 0);
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "tokdata_bad.bin: 5000 bytes, but");
    write_variant(v, all, all, 0, 'X');
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "not a Megatron index");
    write_variant(v, all, all, 9, 2);
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_UNSUPPORTED, "version 2");
    write_variant(v, all, all, 17, 9);
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "unknown dtype code 9");
    write_variant(v, all, all, 18, 58); /* sequence count 57 -> 58 */
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "need");
    write_variant(v, all, all, 34, 0xFF); /* first size's low byte: pointers no longer back to back */
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "back to back");
    write_variant(v, all, all, 37, 0x80); /* first size negative */
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "negative size");
    write_variant(v, all, all, 34 + 12 * 57 + 8, 7); /* document_indices[1] = 7 > [2] = 2 */
    CHECK_FAILS(lcx_tokdata_open(v, &td), LCX_ERR_FORMAT, "out of order");
    CHECK_FAILS(lcx_tokdata_open(LCX_BINARY_DIR "/no_such_dataset", &td), LCX_ERR_NOT_FOUND, "no_such_dataset.idx");
    /* writer: ids must fit the dtype */
    lcx_tokdata_writer w;
    uint32_t big = 70000;
    CHECK_OK(lcx_tokdata_writer_open(&w, v, LCX_TOKDATA_U16));
    CHECK_FAILS(lcx_tokdata_writer_add(&w, &big, 1), LCX_ERR_INVALID, "does not fit");
    lcx_tokdata_writer_abort(&w);
    CHECK(lcx_tokdata_dtype_for_vocab(65499) == LCX_TOKDATA_U16);
    CHECK(lcx_tokdata_dtype_for_vocab(65500) == LCX_TOKDATA_I32);
}

int main(void) {
    check_megatron("u16", 65000, LCX_TOKDATA_U16);
    check_megatron("i32", 150000, LCX_TOKDATA_I32);
    check_errors();
    return test_summary("test_tokdata");
}
