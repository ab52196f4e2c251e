/* npy: float32 .npy reader and writer (NumPy format 1.0 / 2.0). */
#include "formats/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/fileio.h"

struct lcx_npy_writer {
    lcx_atomic_file af;
    uint64_t want, done;
};

/* Header for format 1.0 (2.0 when it does not fit in 65535 bytes, never for sane shapes). */
static lcx_status header(const lcx_shape *shape, char *buf, size_t cap, size_t *len) {
    char dims[LCX_MAX_DIMS * 24 + 8] = "";
    size_t o = 0;
    for (int i = 0; i < shape->ndim; i++)
        o += (size_t)snprintf(dims + o, sizeof dims - o, "%llu%s", (unsigned long long)shape->dims[i],
                              shape->ndim == 1 ? "," : (i + 1 < shape->ndim ? ", " : ""));
    char dict[sizeof dims + 80];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
    size_t total = 10 + (size_t)n + 1; /* magic(6) ver(2) len(2) dict '\n' */
    size_t padded = (total + 63) & ~(size_t)63;
    LCX_FAIL_IF(padded > cap || padded - 10 > 65535, LCX_ERR_INVALID, "npy: shape too long for a header");
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((padded - 10) & 0xff);
    buf[9] = (char)((padded - 10) >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', padded - total);
    buf[padded - 1] = '\n';
    *len = padded;
    return LCX_OK;
}

lcx_status lcx_npy_writer_open(const char *path, const lcx_shape *shape, lcx_npy_writer **out) {
    *out = NULL;
    uint64_t numel;
    LCX_FAIL_IF(lcx_shape_numel(shape, &numel) != LCX_OK, LCX_ERR_INVALID, "%s: shape too large", path);
    char h[1024];
    size_t hl = 0;
    LCX_TRY(header(shape, h, sizeof h, &hl));
    lcx_npy_writer *w = calloc(1, sizeof *w);
    LCX_FAIL_IF(!w, LCX_ERR_OOM, "npy: out of memory");
    lcx_status st = lcx_atomic_open_new(path, &w->af); /* an output path the user named: never replaced */
    if (st == LCX_OK) st = lcx_atomic_write(&w->af, h, hl);
    if (st != LCX_OK) {
        if (w->af.path) lcx_atomic_abort(&w->af);
        free(w);
        return st;
    }
    w->want = numel;
    *out = w;
    return LCX_OK;
}

lcx_status lcx_npy_writer_append(lcx_npy_writer *w, const float *data, size_t n) {
    LCX_FAIL_IF(w->done + n > w->want, LCX_ERR_INVALID, "npy: more data than the shape holds");
    LCX_TRY(lcx_atomic_write(&w->af, data, n * sizeof(float))); /* host is little-endian (x86-64, arm64) */
    w->done += n;
    return LCX_OK;
}

lcx_status lcx_npy_writer_commit(lcx_npy_writer *w) {
    lcx_status st;
    if (w->done != w->want) {
        lcx_atomic_abort(&w->af);
        st = lcx_fail(LCX_ERR_INVALID, "npy: %llu of %llu elements written", (unsigned long long)w->done,
                      (unsigned long long)w->want);
    } else {
        st = lcx_atomic_commit(&w->af);
    }
    free(w);
    return st;
}

void lcx_npy_writer_abort(lcx_npy_writer *w) {
    if (!w) return;
    lcx_atomic_abort(&w->af);
    free(w);
}

lcx_status lcx_npy_write_f32(const char *path, const float *data, const lcx_shape *shape) {
    lcx_npy_writer *w;
    LCX_TRY(lcx_npy_writer_open(path, shape, &w));
    lcx_status st = lcx_npy_writer_append(w, data, (size_t)(w->want));
    if (st != LCX_OK) {
        lcx_npy_writer_abort(w);
        return st;
    }
    return lcx_npy_writer_commit(w);
}

lcx_status lcx_npy_read_f32(const char *path, float **data, lcx_shape *shape) {
    *data = NULL;
    char *buf = NULL;
    size_t len = 0;
    LCX_TRY(lcx_read_file(path, (size_t)1 << 34, &buf, &len));
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0, LCX_ERR_FORMAT, done, "%s: not a .npy file", path);
    size_t hl, start;
    LCX_FAIL_GOTO(buf[6] < 1 || buf[6] > 3, LCX_ERR_UNSUPPORTED, done, "%s: .npy format version %d (1 to 3 read)",
                  path, buf[6]);
    if (buf[6] == 1) hl = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8, start = 10;
    else {
        LCX_FAIL_GOTO(len < 12, LCX_ERR_FORMAT, done, "%s: truncated .npy header", path);
        hl = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8 | (size_t)(unsigned char)buf[10] << 16 |
             (size_t)(unsigned char)buf[11] << 24;
        start = 12;
    }
    LCX_FAIL_GOTO(hl > len - start, LCX_ERR_FORMAT, done, "%s: truncated .npy header", path);
    char *h = malloc(hl + 1);
    LCX_FAIL_GOTO(!h, LCX_ERR_OOM, done, "npy: out of memory");
    memcpy(h, buf + start, hl);
    h[hl] = 0;
    int ok = strstr(h, "'descr': '<f4'") && strstr(h, "'fortran_order': False");
    char *sp = strstr(h, "'shape': (");
    memset(shape, 0, sizeof *shape);
    if (ok && sp) {
        char *p = sp + 10;
        while (*p && *p != ')') {
            char *e;
            unsigned long long v = *p >= '0' && *p <= '9' ? strtoull(p, &e, 10) : 0; /* strtoull takes "-1" */
            if (*p < '0' || *p > '9' || shape->ndim == LCX_MAX_DIMS) { ok = 0; break; }
            shape->dims[shape->ndim++] = v;
            p = e;
            while (*p == ',' || *p == ' ') p++;
        }
        if (*p != ')') ok = 0;
    } else {
        ok = 0;
    }
    free(h);
    LCX_FAIL_GOTO(!ok, LCX_ERR_UNSUPPORTED, done, "%s: only little-endian float32 C-order .npy is supported", path);
    uint64_t n;
    LCX_FAIL_GOTO(lcx_shape_numel(shape, &n) != LCX_OK || n > (len - start - hl) / 4 ||
                      n * 4 != len - start - hl,
                  LCX_ERR_FORMAT, done, "%s: data size does not match the shape", path);
    *data = malloc(n * 4 + 1);
    LCX_FAIL_GOTO(!*data, LCX_ERR_OOM, done, "npy: out of memory");
    memcpy(*data, buf + start + hl, n * 4);
done:
    free(buf);
    return st;
}
