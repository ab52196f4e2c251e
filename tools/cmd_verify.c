/* lcextend verify: check that a .lcx checkpoint loads (config, tensor set and shapes) and every piece's checksum. */
#include <stdio.h>

#include "cli.h"
#include "commands.h"
#include "formats/lcx.h"
#include "src/checkpoint/source.h"

static const char *CMD = "verify";

static void help(void) {
    printf("usage: lcextend verify X.lcx\n"
           "\n"
           "Check a native checkpoint: the manifest's consistency (types, shapes, boxes inside shapes, no\n"
           "overlapping pieces, parameters covered exactly once, offsets inside files of the recorded size,\n"
           "tokenizer files present), that it loads as a model (its model config passes the same checks as\n"
           "import's, every parameter the config implies is stored with its shape, nothing extra), then read\n"
           "every piece and check its XXH3 checksum (and zstd's frame checksum and length). Exit 0 when\n"
           "everything holds, 1 naming the first problem.\n"
           "\n"
           "examples:\n"
           "  lcextend verify run/step-001000\n"
           "  lcextend verify llama.lcx && echo ok\n");
}

int lcx_cmd_verify(int argc, char **argv) {
    const char *path = NULL;
    const lcx_cli_spec spec = {CMD, help, NULL, 0, &path, "one checkpoint only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (!path) return lcx_cli_usage_error(CMD, "missing the checkpoint to verify");
    lcx_ckpt *ck = NULL;
    lcx_status st = lcx_ckpt_open(path, &ck);
    if (st == LCX_OK) st = lcx_source_check_lcx(path); /* loadable: config and tensor set, before the long part */
    if (st == LCX_OK) st = lcx_ckpt_verify(ck);
    if (st != LCX_OK) {
        lcx_ckpt_free(ck);
        return lcx_cli_report(CMD, st);
    }
    unsigned long long pieces = 0, stored = 0;
    for (int i = 0; i < lcx_ckpt_tensor_count(ck); i++) {
        const lcx_ckpt_tensor *t = lcx_ckpt_tensor_at(ck, i);
        pieces += (unsigned long long)t->n_pieces;
        for (int p = 0; p < t->n_pieces; p++) stored += t->pieces[p].length;
    }
    printf("ok: %s: %d tensors, %llu pieces, %llu stored bytes in %d files, all checksums match\n", path,
           lcx_ckpt_tensor_count(ck), pieces, stored, lcx_ckpt_file_count(ck));
    lcx_ckpt_free(ck);
    return LCX_EXIT_OK;
}
