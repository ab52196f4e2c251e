/* status: error codes and a thread-local detail message.
 *
 * Every library function that can fail returns an lcx_status. On failure it also records a one-line detail
 * message (what, where, why) readable with lcx_last_error() until the next failure on the same thread.
 * Only tools/ print messages and choose exit codes. A broken internal invariant is LCX_ASSERT (abort with
 * file:line); input from files, flags, environment or other ranks is never asserted, always checked. */
#ifndef LCX_STATUS_H
#define LCX_STATUS_H

#include <stddef.h>

typedef enum lcx_status {
    LCX_OK = 0,
    LCX_ERR_IO,          /* open/read/write/fsync/rename/mmap failed */
    LCX_ERR_FORMAT,      /* a file's bytes violate its format */
    LCX_ERR_INVALID,     /* bad argument, flag, shape or layout */
    LCX_ERR_UNSUPPORTED, /* valid, but not something we implement (dtype, architecture, feature) */
    LCX_ERR_OOM,         /* allocation failed */
    LCX_ERR_COMM,        /* MPI/NCCL failure or a peer rank failed */
    LCX_ERR_CUDA,        /* CUDA runtime / cuBLASLt error */
    LCX_ERR_NOT_FOUND,   /* a named thing (file, tensor, key) does not exist */
    LCX_ERR_INTERRUPTED, /* stopped on request (Ctrl-C) after saving */
    LCX_STATUS_COUNT
} lcx_status;

/* Short stable name of a code, e.g. "format error". Never NULL. */
const char *lcx_status_name(lcx_status st);

/* Detail message of the last failure on this thread ("" if none). */
const char *lcx_last_error(void);

/* Record a failure: sets the detail message (printf-style) and returns st, so `return lcx_fail(...)` works. */
lcx_status lcx_fail(lcx_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefix the current detail message with context ("model.safetensors: " + message). Returns st. */
lcx_status lcx_fail_context(lcx_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget the last error (tests use it). */
void lcx_clear_error(void);

/* ---- helper macros -------------------------------------------------------------------------------------- */

/* Return a formatted failure when cond holds. */
#define LCX_FAIL_IF(cond, st, ...)                                                                          \
    do {                                                                                                    \
        if (cond) return lcx_fail((st), __VA_ARGS__);                                                       \
    } while (0)

/* Propagate a failing status. */
#define LCX_TRY(expr)                                                                                       \
    do {                                                                                                    \
        lcx_status lcx_try_st_ = (expr);                                                                    \
        if (lcx_try_st_ != LCX_OK) return lcx_try_st_;                                                      \
    } while (0)

/* Propagate to a cleanup label: needs `lcx_status st` and a label in scope. */
#define LCX_TRY_GOTO(expr, label)                                                                           \
    do {                                                                                                    \
        st = (expr);                                                                                        \
        if (st != LCX_OK) goto label;                                                                       \
    } while (0)

/* Fail to a cleanup label with a message: needs `lcx_status st`. */
#define LCX_FAIL_GOTO(cond, code, label, ...)                                                               \
    do {                                                                                                    \
        if (cond) {                                                                                         \
            st = lcx_fail((code), __VA_ARGS__);                                                             \
            goto label;                                                                                     \
        }                                                                                                   \
    } while (0)

/* Internal invariant: aborts with file:line. Never for input validation. */
void lcx_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define LCX_ASSERT(cond) ((cond) ? (void)0 : lcx_assert_fail(#cond, __FILE__, __LINE__))

/* ---- overflow-checked size arithmetic (returns 0 on overflow, result in *out) ---------------------------- */
static inline int lcx_mul_size(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int lcx_add_size(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

#endif /* LCX_STATUS_H */
