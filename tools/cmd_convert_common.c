#include "cmd_convert_common.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

int lcx_cli_convert_flag(const char *cmd, int argc, char **argv, int *i, lcx_convert_opts *o, int *quiet, int *err) {
    const char *v = NULL;
    if (!strcmp(argv[*i], "--quiet") || !strcmp(argv[*i], "-q")) {
        *quiet = 1;
        return 1;
    }
    static const char *const int_flags[] = {"--tp", "--cp", "--dp", "--level", "--threads"};
    for (size_t k = 0; k < sizeof int_flags / sizeof int_flags[0]; k++) {
        if (!lcx_cli_flag_value(argc, argv, i, int_flags[k], &v, cmd, err)) continue;
        if (*err) return 1;
        int x = 0;
        int ok = k == 3 ? lcx_cli_int(cmd, int_flags[k], v, -7, 22, &x)
                        : lcx_cli_int(cmd, int_flags[k], v, 1, k == 4 ? 256 : 4096, &x);
        if (!ok) {
            *err = 1;
            return 1;
        }
        if (k == 0) o->tp = x;
        else if (k == 1) o->cp = x;
        else if (k == 2) o->dp = x;
        else if (k == 3) o->write.level = x;
        else o->threads = x;
        return 1;
    }
    if (lcx_cli_flag_value(argc, argv, i, "--codec", &v, cmd, err)) {
        if (*err) return 1;
        if (!strcmp(v, "raw")) o->write.codec = LCX_CODEC_RAW, o->write.filter = LCX_FILTER_NONE;
        else if (!strcmp(v, "zstd")) o->write.codec = LCX_CODEC_ZSTD, o->write.filter = LCX_FILTER_SHUFFLE;
        else if (!strcmp(v, "zstd-noshuffle")) o->write.codec = LCX_CODEC_ZSTD, o->write.filter = LCX_FILTER_NONE;
        else {
            lcx_cli_usage_error(cmd, "--codec '%s': expected raw, zstd or zstd-noshuffle", v);
            *err = 1;
        }
        return 1;
    }
    if (lcx_cli_flag_value(argc, argv, i, "--max-memory", &v, cmd, err)) {
        if (*err) return 1;
        if (lcx_parse_size(v, &o->max_memory) != LCX_OK || o->max_memory == 0) {
            lcx_cli_usage_error(cmd, "--max-memory '%s': expected a size like 4GB or 512MiB", v);
            *err = 1;
        }
        return 1;
    }
    return 0;
}

int lcx_cli_run_convert(const char *cmd, int argc, char **argv, void (*help)(void), lcx_convert_fn convert,
                        const char *one_only, const char *missing) {
    const char *src = NULL, *out = NULL;
    lcx_convert_opts o;
    lcx_convert_opts_default(&o);
    int quiet = 0, err = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return LCX_EXIT_OK;
        }
        if (lcx_cli_flag_value(argc, argv, &i, "--out", &out, cmd, &err) ||
            lcx_cli_convert_flag(cmd, argc, argv, &i, &o, &quiet, &err)) {
            if (err) return LCX_EXIT_USAGE;
            continue;
        }
        if (a[0] == '-' && a[1]) return lcx_cli_usage_error(cmd, "unknown flag '%s'", a);
        if (src) return lcx_cli_usage_error(cmd, "unexpected argument '%s' (%s)", a, one_only);
        src = a;
    }
    if (!src) return lcx_cli_usage_error(cmd, "%s", missing);
    if (!out) return lcx_cli_usage_error(cmd, "missing --out");
    lcx_cli_bar bar;
    lcx_cli_bar_init(&bar, quiet, "tensors");
    o.progress = lcx_cli_progress;
    o.progress_user = &bar;
    lcx_status st = convert(src, out, &o);
    lcx_cli_bar_end(&bar);
    if (st != LCX_OK) return lcx_cli_report(cmd, st);
    if (!quiet) fprintf(stderr, "wrote %s (tp %d, cp %d, dp %d)\n", out, o.tp, o.cp, o.dp);
    return LCX_EXIT_OK;
}
