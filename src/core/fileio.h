/* fileio: whole-file reads, read-only mappings and atomic writes (temp file, fsync, rename, fsync dir).
 * A crash at any moment leaves either the old file or the complete new one, never a torn file. */
#ifndef LCX_FILEIO_H
#define LCX_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "src/core/status.h"

/* Read a whole file into a NUL-terminated heap buffer; fails if larger than max_bytes. */
lcx_status lcx_read_file(const char *path, size_t max_bytes, char **buf, size_t *len);

/* Read-only mapping of a whole file (size 0 allowed: map == NULL). */
typedef struct lcx_mapping {
    const uint8_t *data;
    size_t size;
} lcx_mapping;
lcx_status lcx_map_file(const char *path, lcx_mapping *m);
void lcx_unmap(lcx_mapping *m); /* no-op on a zeroed mapping */

/* Atomic writer: bytes go to "<path>.tmp-<random>" in the same directory; commit fsyncs, renames over path
 * and fsyncs the directory; abort (or any failure) unlinks the temp file. */
typedef struct lcx_atomic_file {
    int fd;
    char *path;
    char *tmp_path;
} lcx_atomic_file;
lcx_status lcx_atomic_open(const char *path, lcx_atomic_file *af);
lcx_status lcx_atomic_write(lcx_atomic_file *af, const void *buf, size_t n);
lcx_status lcx_atomic_commit(lcx_atomic_file *af);
void lcx_atomic_abort(lcx_atomic_file *af);
/* One-shot atomic write of a buffer. */
lcx_status lcx_write_file_atomic(const char *path, const void *buf, size_t n);

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
