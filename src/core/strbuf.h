/* strbuf: a growing, always NUL-terminated text buffer. An allocation failure is sticky (oom = 1; later appends
 * do nothing), so a writer can append freely and check once at the end. Zero-initialise to start. */
#ifndef LCX_STRBUF_H
#define LCX_STRBUF_H

#include <stddef.h>

typedef struct lcx_strbuf {
    char *s;    /* NULL until the first append */
    size_t len; /* bytes before the terminating NUL */
    size_t cap;
    int oom;    /* an allocation failed: s holds what was appended before */
} lcx_strbuf;

/* Append n bytes of data (may hold NULs). Returns 1, or 0 once oom is set. n = 0 still allocates, so s is a
 * valid empty string afterwards. */
int lcx_strbuf_put(lcx_strbuf *b, const void *data, size_t n);
/* Append a NUL-terminated string. */
int lcx_strbuf_str(lcx_strbuf *b, const char *str);
/* Append printf-formatted text. */
int lcx_strbuf_printf(lcx_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Release the text and zero the buffer (a zeroed buffer is a no-op). */
void lcx_strbuf_free(lcx_strbuf *b);

/* Copy s into buf for an error message: control bytes (newlines...), DEL and non-ASCII bytes become '?', and
 * the text is cut to cap-1 bytes ("..." marks a cut). Keeps error messages on one printable line. */
char *lcx_printable(const char *s, char *buf, size_t cap);

#endif
