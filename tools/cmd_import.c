/* lcextend import: HF directory / safetensors / GGUF -> .lcx checkpoint in a chosen layout. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_convert_common.h"
#include "commands.h"

static const char *CMD = "import";

static void help(void) {
    printf("usage: lcextend import SRC --out X.lcx [--tp N] [--cp M] [--dp K] [options]\n"
           "\n"
           "Convert a model into a native .lcx checkpoint directory, stored in the tensor-parallel layout N x M x K\n"
           "(each TP shard once; optimizer state is added later by training).\n"
           "\n"
           "SRC    a Hugging Face model directory (config.json + model.safetensors or a sharded index), an index\n"
           "       .json or a .safetensors file with config.json beside it, or a GGUF file (llama, qwen2, qwen3;\n"
           "       F32, F16, BF16 kept, Q8_0 / Q4_0 / Q4_1 dequantised to F32, llama q/k rows un-permuted, config.json\n"
           "       rebuilt from the metadata, tokenizer.* metadata kept as tokenizer.gguf)\n"
           "\n"
           "options:\n"
           "  --out PATH          checkpoint directory to create (must not exist)\n"
           "  --tp N, --cp M, --dp K   layout (default 1); heads, kv heads and FFN must divide by N\n"
           "  --codec C           raw | zstd (default, with byte shuffle) | zstd-noshuffle\n"
           "  --level L           zstd level (default 1)\n"
           "  --threads T         worker threads (default: CPUs, at most 8)\n"
           "  --max-memory SIZE   bound the workers' buffers (e.g. 4GB)\n"
           "  --quiet             no progress bar (it is shown only on a terminal anyway)\n"
           "\n"
           "examples:\n"
           "  lcextend import ./Llama-3.2-1B --out llama.lcx\n"
           "  lcextend import ./Llama-3.2-1B --out llama-tp4.lcx --tp 4 --cp 2\n"
           "  lcextend import model-q8_0.gguf --out model.lcx --codec raw\n");
}

int lcx_cmd_import(int argc, char **argv) {
    return lcx_cli_run_convert(CMD, argc, argv, help, lcx_import, "one SRC only", "missing SRC");
}
