/* lcextend score: mean next-token loss and perplexity of a checkpoint over a token-id sequence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/npy.h"
#include "src/core/outpath.h"
#include "src/model/model.h"

static const char *CMD = "score";

static void help(void) {
    printf("usage: lcextend score CKPT --ids FILE [--logits OUT.npy] [--chunk N] [--dtype f32|bf16]\n"
           "                      [--backend cpu|cuda]\n"
           "\n"
           "Run the model over one token sequence (positions 0..n-1) and print the mean next-token loss (natural\n"
           "log, over the n-1 predicted tokens) and the perplexity exp(loss). The output projection and the\n"
           "cross-entropy run in chunks of rows, so no n x vocab buffer exists unless --logits asks for it.\n"
           "\n"
           "CKPT   any checkpoint form: a Hugging Face model directory (config.json + safetensors, sharded or not),\n"
           "       a .safetensors file or model.safetensors.index.json (config.json beside it), an .lcx checkpoint\n"
           "       directory (any TP layout), or a .gguf file (F32/F16/BF16, Q8_0/Q4_0/Q4_1 dequantised)\n"
           "\n"
           "options:\n"
           "  --ids FILE        token ids as whitespace-separated integers (at least 2)\n"
           "  --logits OUT.npy  also write the logits as float32 [1, n, vocab] (.npy, like transformers' output; must not exist)\n"
           "  --chunk N         rows per loss chunk (default 256)\n"
           "  --dtype f32|bf16  store the weights as float32 (default) or bfloat16 (math stays float32)\n"
           "  --backend B       where the model runs: cpu (default) or cuda (a build with CUDA, a visible GPU)\n"
           "  --help            this help\n"
           "\n"
           "examples:\n"
           "  lcextend score tests/fixtures/models/llama_gqa --ids ids.txt\n"
           "  lcextend score ./Llama-3.2-1B --ids doc.ids --dtype bf16 --logits logits.npy\n"
           "  lcextend score run/checkpoints/step-000100 --ids doc.ids\n");
}

int lcx_cmd_score(int argc, char **argv) {
    const char *ckpt = NULL, *ids_path = NULL, *logits_path = NULL, *backend = "cpu";
    lcx_dtype dtype = LCX_F32;
    int64_t chunk = 256;
    const lcx_cli_flag flags[] = {
        LCX_FLAG_STR("--ids", ids_path),
        LCX_FLAG_STR("--logits", logits_path),
        LCX_FLAG_INT("--chunk", chunk, 1, INT32_MAX),
        LCX_FLAG_CHOICE("--dtype", dtype, lcx_cli_weight_dtypes),
        LCX_FLAG_STR("--backend", backend),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &ckpt, "one CKPT only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (!ckpt) return lcx_cli_usage_error(CMD, "missing CKPT");
    if (!ids_path) return lcx_cli_usage_error(CMD, "missing --ids FILE");
    const lcx_backend *be = NULL;
    if ((stop = lcx_cli_backend(CMD, backend, &be)) != LCX_CLI_RUN) return stop;

    int32_t *ids = NULL;
    int64_t n = 0;
    /* refused before any work, claimed without replacing at the end (docs/reliability.md "Outputs") */
    lcx_status st = logits_path ? lcx_out_absent(logits_path) : LCX_OK;
    if (st != LCX_OK) return lcx_cli_report(CMD, st);
    st = lcx_cli_read_ids(ids_path, &ids, &n);
    if (st != LCX_OK) return lcx_cli_report(CMD, st);
    if (n < 2) {
        free(ids);
        return lcx_cli_report(CMD, lcx_fail(LCX_ERR_INVALID, "%s: %lld token id(s): need at least 2 to score",
                                            ids_path, (long long)n));
    }
    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = dtype;
    o.max_tokens = n;
    o.loss_chunk = chunk;
    o.backend = be;
    lcx_model *m = NULL;
    float *logits = NULL;
    int rc = LCX_EXIT_OK;
    st = lcx_model_from_checkpoint(ckpt, &o, &m);
    if (st != LCX_OK) goto fail;
    int64_t V = lcx_model_config_of(m)->vocab_size;
    if (logits_path) {
        size_t cnt;
        if (!lcx_mul_size((size_t)n, (size_t)V, &cnt) || !lcx_mul_size(cnt, sizeof(float), &cnt) ||
            !(logits = malloc(cnt))) {
            st = lcx_fail(LCX_ERR_OOM, "no memory for %lld x %lld logits (--logits)", (long long)n, (long long)V);
            goto fail;
        }
    }
    lcx_batch b = {.n_seq = 1, .seq_len = n, .ids = ids};
    double loss_sum = 0;
    int64_t count = 0;
    st = lcx_model_forward(m, &b, logits, &loss_sum, &count);
    if (st != LCX_OK) {
        lcx_fail_context(st, "%s: ", ckpt);
        goto fail;
    }
    if (logits_path) {
        lcx_shape sh = {3, {1, (uint64_t)n, (uint64_t)V}};
        st = lcx_npy_write_f32(logits_path, logits, &sh);
        if (st != LCX_OK) goto fail;
    }
    double loss = loss_sum / (double)count;
    printf("tokens:     %lld (%lld predicted)\n", (long long)n, (long long)count);
    printf("loss:       %.6f\n", loss);
    printf("perplexity: %.6g\n", exp(loss));
    if (logits_path) printf("logits:     %s [1, %lld, %lld] float32\n", logits_path, (long long)n, (long long)V);
    LCX_TRY_GOTO(lcx_cli_flush_stdout(), fail);
    goto done;
fail:
    rc = lcx_cli_report(CMD, st);
done:
    free(logits);
    free(ids);
    lcx_model_free(m);
    return rc;
}
