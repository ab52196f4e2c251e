#include "cmd_convert_common.h"

#include <stdio.h>

#include "cli.h"

/* --codec: the codec and byte filter each word stands for (the word's value indexes this). */
static const lcx_cli_word CODECS[] = {{"raw", 0}, {"zstd", 1}, {"zstd-noshuffle", 2}, {NULL, 0}};
static const struct {
    lcx_codec codec;
    lcx_filter filter;
} CODEC_SETTINGS[] = {{LCX_CODEC_RAW, LCX_FILTER_NONE}, {LCX_CODEC_ZSTD, LCX_FILTER_SHUFFLE},
                      {LCX_CODEC_ZSTD, LCX_FILTER_NONE}};

int lcx_cli_run_convert(const char *cmd, int argc, char **argv, void (*help)(void), lcx_convert_fn convert,
                        const char *one_only, const char *missing) {
    const char *src = NULL, *out = NULL;
    lcx_convert_opts o;
    lcx_convert_opts_default(&o);
    int quiet = 0, codec = -1;
    const lcx_cli_flag flags[] = {
        LCX_FLAG_STR("--out", out),
        LCX_FLAG_INT("--tp", o.tp, 1, 4096),
        LCX_FLAG_INT("--cp", o.cp, 1, 4096),
        LCX_FLAG_INT("--dp", o.dp, 1, 4096),
        LCX_FLAG_CHOICE("--codec", codec, CODECS),
        LCX_FLAG_INT("--level", o.write.level, -7, 22),
        LCX_FLAG_INT("--threads", o.threads, 1, 256),
        LCX_FLAG_SIZE("--max-memory", o.max_memory, LCX_BYTES_DECIMAL),
        LCX_FLAG_SWITCH("--quiet", quiet),
        LCX_FLAG_SWITCH("-q", quiet),
    };
    const lcx_cli_spec spec = {cmd, help, flags, LCX_CLI_COUNT(flags), &src, one_only};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (codec >= 0) {
        o.write.codec = CODEC_SETTINGS[codec].codec;
        o.write.filter = CODEC_SETTINGS[codec].filter;
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
