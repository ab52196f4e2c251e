#include "src/core/status.h"

#include "src/core/report.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LCX_ERROR_CAP 1024

static _Thread_local char last_error[LCX_ERROR_CAP];

static const char *const status_names[LCX_STATUS_COUNT] = {
    [LCX_OK] = "ok",
    [LCX_ERR_IO] = "I/O error",
    [LCX_ERR_FORMAT] = "format error",
    [LCX_ERR_INVALID] = "invalid argument",
    [LCX_ERR_UNSUPPORTED] = "unsupported",
    [LCX_ERR_OOM] = "out of memory",
    [LCX_ERR_COMM] = "communication error",
    [LCX_ERR_CUDA] = "CUDA error",
    [LCX_ERR_NOT_FOUND] = "not found",
    [LCX_ERR_INTERRUPTED] = "interrupted",
};

const char *lcx_status_name(lcx_status st) {
    if ((unsigned)st >= LCX_STATUS_COUNT) return "unknown status";
    return status_names[st];
}

const char *lcx_last_error(void) { return last_error; }

void lcx_clear_error(void) { last_error[0] = '\0'; }

/* Messages are one line: a newline inside a detail (from a file name, say) would split a user-facing error. */
static void flatten_newlines(char *s) {
    for (; *s; s++)
        if (*s == '\n' || *s == '\r') *s = ' ';
}

lcx_status lcx_fail(lcx_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    flatten_newlines(last_error);
    return st;
}

lcx_status lcx_fail_context(lcx_status st, const char *fmt, ...) {
    char prefix[LCX_ERROR_CAP], old[LCX_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* Truncation is fine here: the message is capped at LCX_ERROR_CAP by design. */
    size_t n = strlen(prefix);
    memcpy(last_error, prefix, n + 1);
    if (n + 1 < sizeof last_error) {
        size_t room = sizeof last_error - n - 1, m = strnlen(old, room);
        memcpy(last_error + n, old, m);
        last_error[n + m] = '\0';
    }
    flatten_newlines(last_error);
    return st;
}

void lcx_assert_fail(const char *expr, const char *file, int line) {
    lcx_report_internal_error(expr, file, line); /* the one writer to the terminal is report.c */
    abort();
}
