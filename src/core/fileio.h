/* fileio: whole-file reads, read-only mappings and atomic writes (temp file, fsync, rename, fsync dir).
 * A crash at any moment leaves either the old file or the complete new one, never a torn file. */
#ifndef LCX_FILEIO_H
#define LCX_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

/* Inputs (docs/reliability.md "Inputs and outputs"): every input file is opened without blocking and must be
 * a regular file once open (a FIFO, device or directory is refused, never waited on). Symlinks are followed
 * (the Hugging Face cache links snapshots/<rev>/config.json to ../../blobs/<hash>) unless flags has LCX_IN_OWN:
 * a file of our own .lcx checkpoint (manifest, data, tokenizer files), which we never write as a symlink. */
#define LCX_IN_OWN 1
/* Open for reading: *fd (close it) and the file's size. */
lcx_status lcx_open_input(const char *path, int flags, int *fd, uint64_t *size);
/* Open, check and close; *size (may be NULL) gets the size. */
lcx_status lcx_check_input(const char *path, int flags, uint64_t *size);
/* An input that may be absent (a side file such as generation_config.json): *present 0 when nothing is there
 * (or a dangling link), 1 for a regular file; anything else there (a FIFO, a directory) is an error. */
lcx_status lcx_optional_input(const char *path, int flags, int *present);
/* Read a whole file into a NUL-terminated heap buffer; fails if larger than max_bytes. */
lcx_status lcx_read_input(const char *path, int flags, size_t max_bytes, char **buf, size_t *len);
lcx_status lcx_read_file(const char *path, size_t max_bytes, char **buf, size_t *len); /* flags 0 */

/* Read-only mapping of a whole file (size 0 allowed: map == NULL). */
typedef struct lcx_mapping {
    const uint8_t *data;
    size_t size;
} lcx_mapping;
lcx_status lcx_map_input(const char *path, int flags, lcx_mapping *m);
lcx_status lcx_map_file(const char *path, lcx_mapping *m); /* flags 0 */
void lcx_unmap(lcx_mapping *m); /* no-op on a zeroed mapping */

/* Atomic writer: bytes go to a temporary beside path (src/core/outpath.h names it); commit fsyncs, renames it
 * to path and fsyncs the directory; abort (or any failure) unlinks the temp file. lcx_atomic_open replaces
 * path (our own files inside a directory we own: `latest`, a manifest in a temporary checkpoint); a command's
 * output uses lcx_atomic_open_new, which refuses an existing path up front and claims it at commit without
 * ever replacing what appeared meanwhile (lcx_out_claim). */
typedef struct lcx_atomic_file {
    int fd;
    int noreplace;
    char *path;
    char *tmp_path;
} lcx_atomic_file;
lcx_status lcx_atomic_open(const char *path, lcx_atomic_file *af);
lcx_status lcx_atomic_open_new(const char *path, lcx_atomic_file *af);
lcx_status lcx_atomic_write(lcx_atomic_file *af, const void *buf, size_t n);
lcx_status lcx_atomic_commit(lcx_atomic_file *af);
void lcx_atomic_abort(lcx_atomic_file *af);
/* One-shot atomic write of a buffer. */
lcx_status lcx_write_file_atomic(const char *path, const void *buf, size_t n);
lcx_status lcx_write_file_new(const char *path, const void *buf, size_t n); /* never replaces */

/* fsync a directory (after creating/renaming entries in it). */
lcx_status lcx_fsync_dir(const char *dir);
/* Path helpers: join into a new heap string; 1 if path is an existing directory / regular file. */
char *lcx_path_join(const char *dir, const char *name);
int lcx_is_dir(const char *path);
int lcx_is_file(const char *path);
/* Best-effort removal of a directory that holds only plain files (an abandoned temporary output directory):
 * unlinks its entries, then the directory. Errors are ignored. */
void lcx_remove_flat_dir(const char *dir);

#endif
