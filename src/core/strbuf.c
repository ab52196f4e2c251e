/* strbuf: see strbuf.h. Capacity doubles from 256 bytes. */
#include "src/core/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for `extra` more bytes plus the NUL. */
static int reserve(lcx_strbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (extra > SIZE_MAX - b->len - 1) return b->oom = 1, 0;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return b->oom = 1, 0;
        cap *= 2;
    }
    char *p = realloc(b->s, cap);
    if (!p) return b->oom = 1, 0;
    b->s = p;
    b->cap = cap;
    return 1;
}

int lcx_strbuf_put(lcx_strbuf *b, const void *data, size_t n) {
    if (!reserve(b, n)) return 0;
    if (n) memcpy(b->s + b->len, data, n);
    b->len += n;
    b->s[b->len] = '\0';
    return 1;
}

int lcx_strbuf_str(lcx_strbuf *b, const char *str) { return lcx_strbuf_put(b, str, strlen(str)); }

int lcx_strbuf_printf(lcx_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return b->oom = 1, 0;
    if (!reserve(b, (size_t)n)) return 0;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 1;
}

void lcx_strbuf_free(lcx_strbuf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}

char *lcx_printable(const char *s, char *buf, size_t cap) {
    if (cap == 0) return buf;
    size_t n = strlen(s), i;
    for (i = 0; i < n && i + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    buf[i] = 0;
    if (i < n && cap >= 4) memcpy(buf + cap - 4, "...", 4);
    return buf;
}
