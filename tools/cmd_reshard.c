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
    return lcx_cli_run_convert(CMD, argc, argv, help, lcx_reshard, "one checkpoint only", "missing the checkpoint to reshard");
}
