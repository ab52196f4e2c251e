/* npy: NumPy .npy files of little-endian float32 in C order (what `score --logits` writes and the parity tests
 * read). Format 1.0/2.0 headers (3.0 read too); anything else (other dtypes, Fortran order, big-endian) is refused by the reader
 * with a message naming the file. */
#ifndef LCX_FORMATS_NPY_H
#define LCX_FORMATS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"
#include "src/core/tensor.h"

/* Write data (numel of shape floats) as an '<f4' array, atomically; like every output a user names, an existing
 * path (file, symlink, anything) is refused, never replaced (src/core/outpath.h). */
lcx_status lcx_npy_write_f32(const char *path, const float *data, const lcx_shape *shape);
/* Streaming form for data produced in pieces: open with the final shape, append rows, commit. */
typedef struct lcx_npy_writer lcx_npy_writer;
lcx_status lcx_npy_writer_open(const char *path, const lcx_shape *shape, lcx_npy_writer **out);
lcx_status lcx_npy_writer_append(lcx_npy_writer *w, const float *data, size_t n);
lcx_status lcx_npy_writer_commit(lcx_npy_writer *w); /* checks every element was written; frees w */
void lcx_npy_writer_abort(lcx_npy_writer *w);        /* NULL ok; removes the temp file, frees w */

/* Read an '<f4' C-order array: *data (malloc'd, caller frees) and its shape. */
lcx_status lcx_npy_read_f32(const char *path, float **data, lcx_shape *shape);

#endif
