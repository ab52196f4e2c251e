/* strbuf: appends across many reallocations equal the same text built independently with snprintf into a big
 * fixed buffer; embedded NULs; the NUL terminator; free resets. */
#include <stdio.h>
#include <string.h>

#include "src/core/strbuf.h"
#include "test_util.h"

int main(void) {
    static char want[1 << 20];
    size_t wl = 0;
    lcx_strbuf b = {0};
    CHECK(lcx_strbuf_put(&b, "", 0) && b.s && b.s[0] == '\0' && b.len == 0); /* empty append: a valid string */
    for (int i = 0; i < 20000; i++) {
        char word[32];
        int n = snprintf(word, sizeof word, "w%d,", i * 7919 % 100003);
        if (i % 3 == 0) {
            CHECK(lcx_strbuf_str(&b, word));
        } else if (i % 3 == 1) {
            CHECK(lcx_strbuf_put(&b, word, (size_t)n));
        } else {
            CHECK(lcx_strbuf_printf(&b, "w%d,", i * 7919 % 100003));
        }
        memcpy(want + wl, word, (size_t)n);
        wl += (size_t)n;
    }
    CHECK(lcx_strbuf_put(&b, "a\0b", 3)); /* bytes, NUL included */
    memcpy(want + wl, "a\0b", 3);
    wl += 3;
    CHECK(b.len == wl && b.cap > b.len && !b.oom);
    CHECK(memcmp(b.s, want, wl) == 0);
    CHECK(b.s[b.len] == '\0');
    lcx_strbuf_free(&b);
    CHECK(b.s == NULL && b.len == 0 && b.cap == 0 && !b.oom);
    lcx_strbuf_free(&b); /* zeroed: no-op */
    /* an earlier failure is sticky: nothing more is appended */
    lcx_strbuf c = {0};
    CHECK(lcx_strbuf_str(&c, "x"));
    c.oom = 1;
    CHECK(!lcx_strbuf_str(&c, "y") && !lcx_strbuf_printf(&c, "%d", 5) && c.len == 1 && strcmp(c.s, "x") == 0);
    lcx_strbuf_free(&c);
    return test_summary("test_strbuf");
}
