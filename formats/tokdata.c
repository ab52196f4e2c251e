/* Megatron-LM indexed dataset reader (mmap, validated) and writer. */
#include "formats/tokdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/core/outpath.h"

static const uint8_t MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
#define HEADER_BYTES 34u /* magic 9 + version 8 + dtype 1 + counts 16 */

size_t lcx_tokdata_dtype_size(int code) {
    switch (code) {
    case LCX_TOKDATA_U8: case LCX_TOKDATA_I8: return 1;
    case LCX_TOKDATA_I16: case LCX_TOKDATA_U16: return 2;
    case LCX_TOKDATA_I32: case LCX_TOKDATA_F32: return 4;
    case LCX_TOKDATA_I64: case LCX_TOKDATA_F64: return 8;
    default: return 0;
    }
}

const char *lcx_tokdata_dtype_name(int code) {
    static const char *const names[] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
    return code >= 1 && code <= 8 ? names[code] : "?";
}

lcx_tokdata_dtype lcx_tokdata_dtype_for_vocab(size_t vocab_size) {
    return vocab_size < 65500 ? LCX_TOKDATA_U16 : LCX_TOKDATA_I32;
}

static uint64_t rd_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian host (x86-64, aarch64) */
    return v;
}
static int32_t rd_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static char *with_ext(const char *prefix, const char *ext) {
    size_t n = strlen(prefix), e = strlen(ext);
    char *p = malloc(n + e + 1);
    if (!p) return NULL;
    memcpy(p, prefix, n);
    memcpy(p + n, ext, e + 1);
    return p;
}

void lcx_tokdata_close(lcx_tokdata *td) {
    if (!td) return;
    lcx_unmap(&td->idx);
    lcx_unmap(&td->bin);
    free(td->prefix);
    memset(td, 0, sizeof *td);
}

static lcx_status validate(lcx_tokdata *td, const char *ip, const char *bp) {
    const uint8_t *d = td->idx.data;
    size_t n = td->idx.size;
    LCX_FAIL_IF(n < HEADER_BYTES, LCX_ERR_FORMAT, "%s: %zu bytes, shorter than the %u-byte header (truncated?)", ip, n,
                HEADER_BYTES);
    LCX_FAIL_IF(memcmp(d, MAGIC, 9) != 0, LCX_ERR_FORMAT, "%s: not a Megatron index (magic is not MMIDIDX\\0\\0)", ip);
    uint64_t version = rd_u64(d + 9);
    LCX_FAIL_IF(version != 1, LCX_ERR_UNSUPPORTED, "%s: index version %llu (only 1 is supported)", ip,
                (unsigned long long)version);
    td->dtype = d[17];
    td->itemsize = lcx_tokdata_dtype_size(td->dtype);
    LCX_FAIL_IF(!td->itemsize, LCX_ERR_FORMAT, "%s: unknown dtype code %d", ip, td->dtype);
    td->n_seqs = rd_u64(d + 18);
    uint64_t n_doc_idx = rd_u64(d + 26);
    LCX_FAIL_IF(n_doc_idx == 0, LCX_ERR_FORMAT, "%s: document index count is 0 (must start with 0)", ip);
    size_t a, b, c, want;
    if (!lcx_mul_size(td->n_seqs, 12, &a) || !lcx_mul_size(n_doc_idx, 8, &b) || !lcx_add_size(a, b, &c) ||
        !lcx_add_size(c, HEADER_BYTES, &want))
        return lcx_fail(LCX_ERR_FORMAT, "%s: counts overflow (sequences %llu, document indices %llu)", ip,
                        (unsigned long long)td->n_seqs, (unsigned long long)n_doc_idx);
    if (n != want) {
        if (n == want + td->n_seqs && td->n_seqs)
            return lcx_fail(LCX_ERR_UNSUPPORTED, "%s: multimodal index (sequence modes) is not supported", ip);
        return lcx_fail(LCX_ERR_FORMAT, "%s: %zu bytes, but %llu sequences and %llu document indices need %zu "
                        "(truncated or mismatched)", ip, n, (unsigned long long)td->n_seqs,
                        (unsigned long long)n_doc_idx, want);
    }
    td->n_docs = n_doc_idx - 1;
    td->off_sizes = HEADER_BYTES;
    td->off_ptrs = HEADER_BYTES + (size_t)td->n_seqs * 4;
    td->off_docs = td->off_ptrs + (size_t)td->n_seqs * 8;
    uint64_t expect_ptr = 0, tokens = 0;
    for (uint64_t i = 0; i < td->n_seqs; i++) {
        int32_t sz = rd_i32(d + td->off_sizes + 4 * i);
        uint64_t ptr = rd_u64(d + td->off_ptrs + 8 * i);
        LCX_FAIL_IF(sz < 0, LCX_ERR_FORMAT, "%s: sequence %llu has negative size %d", ip, (unsigned long long)i, sz);
        LCX_FAIL_IF(ptr != expect_ptr, LCX_ERR_FORMAT, "%s: sequence %llu starts at byte %llu, expected %llu "
                    "(sequences must be back to back)", ip, (unsigned long long)i, (unsigned long long)ptr,
                    (unsigned long long)expect_ptr);
        expect_ptr += (uint64_t)sz * td->itemsize;
        tokens += (uint64_t)sz;
    }
    LCX_FAIL_IF(td->bin.size != expect_ptr, LCX_ERR_FORMAT, "%s: %zu bytes, but %s describes %llu tokens x %zu bytes "
                "= %llu bytes (truncated or mismatched)", bp, td->bin.size, ip, (unsigned long long)tokens,
                td->itemsize, (unsigned long long)expect_ptr);
    td->n_tokens = tokens;
    uint64_t prev = 0;
    for (uint64_t i = 0; i < n_doc_idx; i++) {
        uint64_t v = rd_u64(d + td->off_docs + 8 * i);
        LCX_FAIL_IF(i == 0 && v != 0, LCX_ERR_FORMAT, "%s: document_indices[0] is %llu, must be 0", ip,
                    (unsigned long long)v);
        LCX_FAIL_IF(v < prev || v > td->n_seqs, LCX_ERR_FORMAT, "%s: document_indices[%llu] = %llu is out of order "
                    "or past the %llu sequences", ip, (unsigned long long)i, (unsigned long long)v,
                    (unsigned long long)td->n_seqs);
        prev = v;
    }
    LCX_FAIL_IF(prev != td->n_seqs, LCX_ERR_FORMAT, "%s: last document index %llu != sequence count %llu", ip,
                (unsigned long long)prev, (unsigned long long)td->n_seqs);
    return LCX_OK;
}

lcx_status lcx_tokdata_open(const char *prefix, lcx_tokdata *td) {
    memset(td, 0, sizeof *td);
    char *ip = with_ext(prefix, ".idx"), *bp = with_ext(prefix, ".bin");
    td->prefix = with_ext(prefix, "");
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!ip || !bp || !td->prefix, LCX_ERR_OOM, done, "path");
    LCX_TRY_GOTO(lcx_map_file(ip, &td->idx), done);
    LCX_TRY_GOTO(lcx_map_file(bp, &td->bin), done);
    st = validate(td, ip, bp);
done:
    free(ip);
    free(bp);
    if (st != LCX_OK) lcx_tokdata_close(td);
    return st;
}

uint64_t lcx_tokdata_seq_len(const lcx_tokdata *td, uint64_t i) {
    LCX_ASSERT(i < td->n_seqs);
    return (uint64_t)rd_i32(td->idx.data + td->off_sizes + 4 * i);
}

uint64_t lcx_tokdata_seq_ptr(const lcx_tokdata *td, uint64_t i) {
    LCX_ASSERT(i < td->n_seqs);
    return rd_u64(td->idx.data + td->off_ptrs + 8 * i);
}

void lcx_tokdata_doc_seqs(const lcx_tokdata *td, uint64_t d, uint64_t *first, uint64_t *end) {
    LCX_ASSERT(d < td->n_docs);
    *first = rd_u64(td->idx.data + td->off_docs + 8 * d);
    *end = rd_u64(td->idx.data + td->off_docs + 8 * (d + 1));
}

lcx_status lcx_tokdata_read(const lcx_tokdata *td, uint64_t i, uint64_t start, uint64_t n, uint32_t *out) {
    LCX_FAIL_IF(i >= td->n_seqs, LCX_ERR_INVALID, "%s: sequence %llu of %llu", td->prefix, (unsigned long long)i,
                (unsigned long long)td->n_seqs);
    uint64_t len = lcx_tokdata_seq_len(td, i);
    LCX_FAIL_IF(start > len || n > len - start, LCX_ERR_INVALID, "%s: tokens [%llu, +%llu) past the end of sequence "
                "%llu (%llu tokens)", td->prefix, (unsigned long long)start, (unsigned long long)n,
                (unsigned long long)i, (unsigned long long)len);
    const uint8_t *p = td->bin.data + lcx_tokdata_seq_ptr(td, i) + start * td->itemsize;
    switch (td->dtype) {
    case LCX_TOKDATA_U8:
        for (uint64_t k = 0; k < n; k++) out[k] = p[k];
        return LCX_OK;
    case LCX_TOKDATA_U16:
        for (uint64_t k = 0; k < n; k++) out[k] = (uint32_t)p[2 * k] | (uint32_t)p[2 * k + 1] << 8;
        return LCX_OK;
    case LCX_TOKDATA_I8: case LCX_TOKDATA_I16: case LCX_TOKDATA_I32: case LCX_TOKDATA_I64:
        for (uint64_t k = 0; k < n; k++) {
            int64_t v;
            if (td->dtype == LCX_TOKDATA_I8) v = (int8_t)p[k];
            else if (td->dtype == LCX_TOKDATA_I16) { int16_t x; memcpy(&x, p + 2 * k, 2); v = x; }
            else if (td->dtype == LCX_TOKDATA_I32) { int32_t x; memcpy(&x, p + 4 * k, 4); v = x; }
            else memcpy(&v, p + 8 * k, 8);
            LCX_FAIL_IF(v < 0 || v > (int64_t)UINT32_MAX, LCX_ERR_FORMAT, "%s.bin: sequence %llu token %llu is %lld, "
                        "not a token id", td->prefix, (unsigned long long)i, (unsigned long long)(start + k), (long long)v);
            out[k] = (uint32_t)v;
        }
        return LCX_OK;
    default:
        return lcx_fail(LCX_ERR_UNSUPPORTED, "%s.idx: dtype %s holds no token ids", td->prefix,
                        lcx_tokdata_dtype_name(td->dtype));
    }
}

/* ---- writer ----------------------------------------------------------------------------------------------- */
static lcx_status writer_open(lcx_tokdata_writer *w, const char *prefix, lcx_tokdata_dtype dtype, int noreplace) {
    memset(w, 0, sizeof *w);
    w->noreplace = noreplace;
    w->dtype = dtype;
    w->itemsize = lcx_tokdata_dtype_size(dtype);
    if (!w->itemsize || dtype == LCX_TOKDATA_F32 || dtype == LCX_TOKDATA_F64)
        return lcx_fail(LCX_ERR_INVALID, "%s: dtype code %d cannot hold token ids", prefix, (int)dtype);
    char *bp = with_ext(prefix, ".bin");
    w->idx_path = with_ext(prefix, ".idx");
    w->buf_cap = 1 << 20;
    w->buf = malloc(w->buf_cap);
    if (!bp || !w->idx_path || !w->buf) {
        free(bp); free(w->idx_path); free(w->buf);
        memset(w, 0, sizeof *w);
        return lcx_fail(LCX_ERR_OOM, "tokdata writer");
    }
    /* Both outputs must be new (checked before any work); each is claimed without replacing at commit. */
    lcx_status st = noreplace ? lcx_out_absent(w->idx_path) : LCX_OK;
    if (st == LCX_OK) st = noreplace ? lcx_atomic_open_new(bp, &w->bin) : lcx_atomic_open(bp, &w->bin);
    free(bp);
    if (st != LCX_OK) { free(w->idx_path); free(w->buf); memset(w, 0, sizeof *w); return st; }
    w->open = 1;
    return LCX_OK;
}

lcx_status lcx_tokdata_writer_open(lcx_tokdata_writer *w, const char *prefix, lcx_tokdata_dtype dtype) {
    return writer_open(w, prefix, dtype, 0);
}

lcx_status lcx_tokdata_writer_create(lcx_tokdata_writer *w, const char *prefix, lcx_tokdata_dtype dtype) {
    return writer_open(w, prefix, dtype, 1);
}

static lcx_status flush(lcx_tokdata_writer *w) {
    if (!w->buf_n) return LCX_OK;
    lcx_status st = lcx_atomic_write(&w->bin, w->buf, w->buf_n);
    w->buf_n = 0;
    return st;
}

lcx_status lcx_tokdata_writer_add(lcx_tokdata_writer *w, const uint32_t *ids, size_t n) {
    LCX_FAIL_IF(!w->open, LCX_ERR_INVALID, "tokdata writer is not open");
    LCX_FAIL_IF(n > INT32_MAX, LCX_ERR_INVALID, "%s: a document of %zu tokens (Megatron sizes are int32)", w->idx_path, n);
    uint64_t maxv = w->dtype == LCX_TOKDATA_U8 ? 0xFF : w->dtype == LCX_TOKDATA_I8 ? 0x7F
                  : w->dtype == LCX_TOKDATA_I16 ? 0x7FFF : w->dtype == LCX_TOKDATA_U16 ? 0xFFFF
                  : w->dtype == LCX_TOKDATA_I32 ? 0x7FFFFFFF : UINT32_MAX;
    if (w->n_seqs == w->cap) {
        uint64_t nc = w->cap ? w->cap * 2 : 1024;
        int32_t *p = realloc(w->sizes, nc * sizeof *p);
        LCX_FAIL_IF(!p, LCX_ERR_OOM, "tokdata sizes");
        w->sizes = p;
        w->cap = nc;
    }
    for (size_t k = 0; k < n; k++) {
        LCX_FAIL_IF(ids[k] > maxv, LCX_ERR_INVALID, "token id %u does not fit the dataset dtype %s", ids[k],
                    lcx_tokdata_dtype_name(w->dtype));
        if (w->buf_n + 8 > w->buf_cap) LCX_TRY(flush(w));
        uint8_t *o = w->buf + w->buf_n;
        uint64_t v = ids[k];
        for (size_t b = 0; b < w->itemsize; b++) o[b] = (uint8_t)(v >> (8 * b)); /* little-endian, zero-extended */
        w->buf_n += w->itemsize;
    }
    w->sizes[w->n_seqs++] = (int32_t)n;
    w->bin_bytes += (uint64_t)n * w->itemsize;
    return LCX_OK;
}

void lcx_tokdata_writer_abort(lcx_tokdata_writer *w) {
    if (!w || !w->open) return;
    lcx_atomic_abort(&w->bin);
    free(w->sizes); free(w->idx_path); free(w->buf);
    memset(w, 0, sizeof *w);
}

lcx_status lcx_tokdata_writer_commit(lcx_tokdata_writer *w) {
    LCX_FAIL_IF(!w->open, LCX_ERR_INVALID, "tokdata writer is not open");
    lcx_status st = flush(w);
    uint8_t *idx = NULL;
    size_t S = (size_t)w->n_seqs, D = S + 1, len = HEADER_BYTES + 12 * S + 8 * D;
    if (st == LCX_OK) {
        idx = malloc(len);
        if (!idx) st = lcx_fail(LCX_ERR_OOM, "index of %zu bytes", len);
    }
    if (st == LCX_OK) {
        uint64_t v;
        memcpy(idx, MAGIC, 9);
        v = 1; memcpy(idx + 9, &v, 8);
        idx[17] = (uint8_t)w->dtype;
        v = S; memcpy(idx + 18, &v, 8);
        v = D; memcpy(idx + 26, &v, 8);
        uint8_t *p = idx + HEADER_BYTES;
        if (S) memcpy(p, w->sizes, 4 * S);
        p += 4 * S;
        int64_t ptr = 0;
        for (size_t i = 0; i < S; i++) { memcpy(p + 8 * i, &ptr, 8); ptr += (int64_t)w->sizes[i] * (int64_t)w->itemsize; }
        p += 8 * S;
        for (size_t i = 0; i < D; i++) { int64_t x = (int64_t)i; memcpy(p + 8 * i, &x, 8); }
        char *bin_path = strdup(w->bin.path);
        if (!bin_path) st = lcx_fail(LCX_ERR_OOM, "out of memory");
        if (st == LCX_OK) st = lcx_atomic_commit(&w->bin);
        else lcx_atomic_abort(&w->bin);
        w->open = 0; /* the bin file is committed or (on failure) already removed by the atomic writer */
        if (st == LCX_OK) {
            st = w->noreplace ? lcx_write_file_new(w->idx_path, idx, len)
                              : lcx_write_file_atomic(w->idx_path, idx, len);
            if (st != LCX_OK && w->noreplace) unlink(bin_path); /* no half dataset: the .bin we just claimed goes too */
        }
        free(bin_path);
    }
    free(idx);
    if (w->open) lcx_atomic_abort(&w->bin);
    free(w->sizes); free(w->idx_path); free(w->buf);
    memset(w, 0, sizeof *w);
    return st;
}
