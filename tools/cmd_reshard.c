/* lcextend reshard: .lcx in any layout -> .lcx in any other, training state included. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_convert_common.h"
#include "commands.h"

static const char *CMD = "reshard";

static void help(void) {
    printf("usage: lcextend reshard X.lcx --tp A --cp B [--dp C] --out Y.lcx [options]\n"
           "\n"
           "Rewrite a checkpoint for another tensor/context/data-parallel layout. Every tensor of every role is\n"
           "carried over (parameters once per TP shard, optimizer moments in their parameter's box), with the\n"
           "model config, training state and tokenizer files. Streams one tensor (or, under --max-memory, a\n"
           "chunk of rows) per worker thread: peak memory is about 2 x the largest tensor per thread.\n"
           "\n"
           "options:\n"
           "  --out PATH          checkpoint directory to create (must not exist)\n"
           "  --tp A, --cp B, --dp C   target layout (default 1)\n"
           "  --codec C           raw | zstd (default, with byte shuffle) | zstd-noshuffle\n"
           "  --level L           zstd level (default 1)\n"
           "  --threads T         worker threads (default: CPUs, at most 8)\n"
           "  --max-memory SIZE   bound on the workers' buffers (e.g. 8GB): fewer threads, then row chunks\n"
           "  --quiet             no progress bar\n"
           "\n"
           "examples:\n"
           "  lcextend reshard run/step-001000 --tp 4 --out step-1000-tp4.lcx\n"
           "  lcextend reshard model-tp2cp2.lcx --tp 4 --cp 1 --out model-tp4.lcx --codec raw\n"
           "  lcextend reshard big.lcx --tp 8 --out big-tp8.lcx --max-memory 16GB --threads 4\n");
}

int lcx_cmd_reshard(int argc, char **argv) {
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
        if (lcx_cli_flag_value(argc, argv, &i, "--out", &out, CMD, &err) ||
            lcx_cli_convert_flag(CMD, argc, argv, &i, &o, &quiet, &err)) {
            if (err) return LCX_EXIT_USAGE;
            continue;
        }
        if (a[0] == '-' && a[1]) return lcx_cli_usage_error(CMD, "unknown flag '%s'", a);
        if (src) return lcx_cli_usage_error(CMD, "unexpected argument '%s' (one checkpoint only)", a);
        src = a;
    }
    if (!src) return lcx_cli_usage_error(CMD, "missing the checkpoint to reshard");
    if (!out) return lcx_cli_usage_error(CMD, "missing --out");
    lcx_cli_bar bar;
    lcx_cli_bar_init(&bar, quiet, "tensors");
    o.progress = lcx_cli_progress;
    o.progress_user = &bar;
    lcx_status st = lcx_reshard(src, out, &o);
    lcx_cli_bar_end(&bar);
    if (st != LCX_OK) return lcx_cli_report(CMD, st);
    if (!quiet) fprintf(stderr, "wrote %s (tp %d, cp %d, dp %d)\n", out, o.tp, o.cp, o.dp);
    return LCX_EXIT_OK;
}
