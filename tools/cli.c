#include "cli.h"

#include <stdarg.h>
#include <string.h>

int lcx_cli_report(const char *cmd, lcx_status st) {
    fprintf(stderr, "lcextend %s: %s: %s\n", cmd, lcx_status_name(st), lcx_last_error());
    return LCX_EXIT_FAIL;
}

int lcx_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "lcextend %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'lcextend %s --help')\n", cmd);
    return LCX_EXIT_USAGE;
}

int lcx_cli_flag_value(int argc, char **argv, int *i, const char *name, const char **value, const char *cmd,
                       int *err) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) {
        lcx_cli_usage_error(cmd, "flag %s needs a value", name);
        *err = 1;
        *value = NULL;
        return 1;
    }
    *value = argv[++*i];
    return 1;
}
