/* problems: what is wrong with a checkpoint's tensors as one line — "2 missing: a, b; 1 unexpected: c; 1 wrong
 * shape: d [4, 4] (expected [4, 8])" — a few names per kind plus a count, so every checkpoint matcher (catalog,
 * source) reports all problems at once, in the same words. */
#ifndef LCX_PROBLEMS_H
#define LCX_PROBLEMS_H

#include <stddef.h>

enum { LCX_PROBLEM_MISSING, LCX_PROBLEM_EXTRA, LCX_PROBLEM_SHAPE, LCX_PROBLEM_DTYPE, LCX_PROBLEM_KINDS };
#define LCX_PROBLEM_SHOW 4 /* names shown per kind */

typedef struct lcx_problems {
    size_t count[LCX_PROBLEM_KINDS];
    char shown[LCX_PROBLEM_KINDS][LCX_PROBLEM_SHOW][256]; /* printable copies (names are file data) */
} lcx_problems;

/* Record one problem of a kind, described printf-style (zero-initialise the set first). */
void lcx_problems_add(lcx_problems *ps, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t lcx_problems_total(const lcx_problems *ps);
/* The one-line list into out (truncated to cap). */
void lcx_problems_format(const lcx_problems *ps, char *out, size_t cap);

#endif
