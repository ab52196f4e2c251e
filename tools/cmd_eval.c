/* lcextend eval: perplexity by context length (sliding window) and passkey retrieval of a checkpoint, as a
 * table, JSON and SVG pictures. The protocol is docs/evaluation-protocol.md; this file only wires flags, data,
 * tokenizer and model into src/eval. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "formats/tokdata.h"
#include "src/eval/eval.h"
#include "src/checkpoint/catalog.h"
#include "src/eval/eval_model.h"
#include "src/eval/eval_run.h"
#include "src/core/fileio.h"
#include "src/model/model.h"
#include "src/tokenizer/tokenizer.h"

static const char *CMD = "eval";
enum { MAX_LIST = 64, MAX_COMPARE = 16 };

static void help(void) {
    printf("usage: lcextend eval CKPT (--data PREFIX | --text FILE) [options]\n"
           "       lcextend eval CKPT --passkey N [options]\n"
           "\n"
           "Perplexity by context length with a sliding window (each token scored once, BOS starting every\n"
           "window when the tokenizer has one) and passkey retrieval accuracy per length x depth; the exact\n"
           "protocol is docs/evaluation-protocol.md. Prints tables; --json / --svg / --passkey-svg save them.\n"
           "\n"
           "CKPT   a Hugging Face model directory (config.json + safetensors); its tokenizer.json is used unless\n"
           "       --tokenizer says otherwise\n"
           "\n"
           "data (perplexity):\n"
           "  --data PREFIX       a tokenized dataset PREFIX.bin/.idx (lcextend tokenize); one document each; a\n"
           "                      leading BOS of a document is dropped (the window adds its own)\n"
           "  --text FILE         a plain-text file, encoded as one document with the tokenizer\n"
           "  --lengths L,L,...   window lengths in tokens, BOS included (k = 1024); default: the model's\n"
           "                      context, then powers of two up to --to\n"
           "  --to N              with the default lengths: the largest length (default: the model's context)\n"
           "  --stride S          sliding-window stride in tokens (default 256; 0 = non-overlapping windows)\n"
           "  --short skip|score  documents shorter than a window: skipped (default) or scored as one window\n"
           "\n"
           "passkey:\n"
           "  --passkey N         N trials per (length, depth) cell (default 0: no passkey test)\n"
           "  --passkey-lengths L,...  prompt lengths (default: the perplexity lengths)\n"
           "  --depths D,D,...    key depths in [0, 1] (default 0,0.25,0.5,0.75,1)\n"
           "  --mode greedy|loglik|both  greedy decode of the key (default) and/or key log-likelihood rank\n"
           "  --distractors K     loglik: keys compared against (default 4: chance is 20%%)\n"
           "  --seed N            key seed (default 1)\n"
           "\n"
           "output:\n"
           "  --json OUT          {\"checkpoint\", \"perplexity\": {...}, \"passkey\": {...}}\n"
           "  --svg OUT           perplexity vs length; one line for this run plus one per --compare file\n"
           "  --compare FILE      an earlier --json output to draw in the same picture (repeatable)\n"
           "  --series NAME       this run's name in JSON and legend (default: CKPT's last path component)\n"
           "  --passkey-svg OUT   passkey heat map (greedy mode, else loglik)\n"
           "\n"
           "model:\n"
           "  --tokenizer PATH    tokenizer.json, a directory holding one, or a .gguf file\n"
           "  --dtype f32|bf16    weights stored as float32 (default) or bfloat16\n"
           "  --chunk N           rows per logits chunk (default 256)\n"
           "  --quiet             no progress lines on stderr\n"
           "\n"
           "examples:\n"
           "  lcextend eval recipes/tiny/model --data recipes/tiny/data/heldout --lengths 256,512,1024,2048\n"
           "  lcextend eval out/stage2 --data val --to 32k --stride 32k --passkey 5 --json stage2.json \\\n"
           "      --svg ppl.svg --compare base.json --passkey-svg passkey.svg\n");
}

static lcx_status load_text_doc(const char *path, lcx_tokenizer *tok, int64_t vocab, lcx_ppl_doc **docs_out,
                                int64_t *n_out, int32_t **store_out) {
    char *buf = NULL;
    size_t len = 0;
    LCX_TRY(lcx_read_file(path, (size_t)1 << 32, &buf, &len));
    lcx_tok_ids v;
    memset(&v, 0, sizeof v);
    lcx_status st = lcx_tokenizer_encode(tok, buf, len, 0, &v);
    free(buf);
    if (st != LCX_OK) return lcx_fail_context(st, "%s: ", path);
    int32_t *store = malloc((v.n + 1) * sizeof *store);
    lcx_ppl_doc *docs = calloc(1, sizeof *docs);
    if (!store || !docs) {
        st = lcx_fail(LCX_ERR_OOM, "%s: no memory for %zu tokens", path, v.n);
    } else {
        for (size_t i = 0; i < v.n && st == LCX_OK; i++) {
            if ((int64_t)v.ids[i] >= vocab)
                st = lcx_fail(LCX_ERR_INVALID, "%s: token id %u is outside the model's vocabulary (%lld)", path,
                              v.ids[i], (long long)vocab);
            else
                store[i] = (int32_t)v.ids[i];
        }
    }
    if (st == LCX_OK) {
        docs[0].tokens = store;
        docs[0].n = (int64_t)v.n;
        *docs_out = docs;
        *n_out = 1;
        *store_out = store;
    } else {
        free(store);
        free(docs);
    }
    lcx_tok_ids_free(&v);
    return st;
}

/* The last path component of path into buf[256]. */
static const char *base_name(const char *path, char *buf) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/') s--;
    size_t k = n - s < 255 ? n - s : 255;
    memcpy(buf, path + s, k);
    buf[k] = 0;
    return buf;
}

static const lcx_cli_word SHORT_DOCS[] = {{"skip", 0}, {"score", 0}, {NULL, 0}};
static const lcx_cli_word PASSKEY_MODES[] = {{"greedy", 0}, {"loglik", 0}, {"both", 0}, {NULL, 0}};

int lcx_cmd_eval(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL, *text = NULL, *tok_path = NULL, *json_out = NULL, *svg_out = NULL,
               *pk_svg = NULL, *series = NULL, *mode = "greedy", *shortd = "skip";
    const char *compare[MAX_COMPARE];
    int n_compare = 0, quiet = 0;
    int64_t lengths[MAX_LIST], pk_lengths[MAX_LIST], to = 0, stride = 256, chunk = 256, seed = 1;
    int n_lengths = 0, n_pk_lengths = 0, n_depths = 5, trials = 0, distractors = 4;
    double depths[MAX_LIST] = {0, 0.25, 0.5, 0.75, 1};
    lcx_dtype dtype = LCX_F32;
    const int64_t max_len = INT64_C(1) << 24;
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--quiet", quiet),
        LCX_FLAG_STR("--data", data),
        LCX_FLAG_STR("--text", text),
        LCX_FLAG_LENGTHS("--lengths", lengths, n_lengths, MAX_LIST, 2, max_len),
        LCX_FLAG_LENGTH("--to", to, 2, max_len),
        LCX_FLAG_LENGTH("--stride", stride, 0, max_len),
        LCX_FLAG_WORD("--short", shortd, SHORT_DOCS),
        LCX_FLAG_INT("--passkey", trials, 0, 100000),
        LCX_FLAG_LENGTHS("--passkey-lengths", pk_lengths, n_pk_lengths, MAX_LIST, 2, max_len),
        LCX_FLAG_REALS("--depths", depths, n_depths, MAX_LIST, 0, 1),
        LCX_FLAG_WORD("--mode", mode, PASSKEY_MODES),
        LCX_FLAG_INT("--distractors", distractors, 1, 1000),
        LCX_FLAG_INT("--seed", seed, 0, INT32_MAX),
        LCX_FLAG_STR("--json", json_out),
        LCX_FLAG_STR("--svg", svg_out),
        LCX_FLAG_STR("--passkey-svg", pk_svg),
        LCX_FLAG_STRS("--compare", compare, n_compare, MAX_COMPARE),
        LCX_FLAG_STR("--series", series),
        LCX_FLAG_STR("--tokenizer", tok_path),
        LCX_FLAG_CHOICE("--dtype", dtype, lcx_cli_weight_dtypes),
        LCX_FLAG_INT("--chunk", chunk, 1, 1 << 20),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &ckpt, "one CKPT only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (!ckpt) return lcx_cli_usage_error(CMD, "missing CKPT");
    if (data && text) return lcx_cli_usage_error(CMD, "--data and --text exclude each other");
    if (!data && !text && trials == 0)
        return lcx_cli_usage_error(CMD, "nothing to evaluate: give --data PREFIX or --text FILE, and/or --passkey N");
    if (svg_out && !data && !text) return lcx_cli_usage_error(CMD, "--svg draws perplexity: needs --data or --text");
    if (pk_svg && trials == 0) return lcx_cli_usage_error(CMD, "--passkey-svg needs --passkey N");
    char series_buf[256], cmp_names[MAX_COMPARE][256];
    if (!series) series = base_name(ckpt, series_buf);

    lcx_status st = LCX_OK;
    int rc = LCX_EXIT_OK;
    lcx_model_config cfg;
    lcx_tokenizer *tok = NULL;
    lcx_model *m = NULL;
    lcx_ppl_doc *docs = NULL;
    int32_t *store = NULL;
    int64_t n_docs = 0;
    lcx_ppl_result *res = NULL, *cmp_res[MAX_COMPARE] = {0};
    int cmp_n[MAX_COMPARE] = {0};
    char *cmp_series[MAX_COMPARE] = {0};
    lcx_passkey_result pk;
    memset(&pk, 0, sizeof pk);
    json_t *root = NULL;
    char *svg = NULL;
    double *xs = NULL, *ys = NULL;

    {
        lcx_catalog *cat = NULL;
        st = lcx_catalog_open(ckpt, &cat);
        if (st == LCX_OK && !cat->has_config)
            st = lcx_fail(LCX_ERR_NOT_FOUND, "%s: no config.json: evaluation needs a model directory", ckpt);
        if (st == LCX_OK) cfg = cat->cfg;
        lcx_catalog_close(cat);
        if (st != LCX_OK) goto fail;
    }
    int64_t orig = cfg.rope.has_original_max ? cfg.rope.original_max_position_embeddings : cfg.max_position_embeddings;
    if (n_lengths == 0) {
        st = lcx_eval_default_lengths(orig, to > orig ? to : orig, lengths, MAX_LIST, &n_lengths);
        if (st != LCX_OK) goto fail;
    }
    if (n_pk_lengths == 0) {
        memcpy(pk_lengths, lengths, sizeof lengths);
        n_pk_lengths = n_lengths;
    }

    /* The tokenizer: needed for text, passkey and BOS; optional with --data (BOS then from config.json). */
    {
        const char *tp = tok_path ? tok_path : ckpt;
        st = lcx_tokenizer_open(tp, &tok);
        if (st != LCX_OK) {
            if (tok_path || text || trials > 0) {
                lcx_fail_context(st, "tokenizer (give --tokenizer PATH): ");
                goto fail;
            }
            tok = NULL;
            st = LCX_OK;
        }
    }
    int32_t bos = lcx_eval_bos(tok, &cfg);
    int modes = strcmp(mode, "greedy") == 0 ? LCX_PASSKEY_GREEDY
                : strcmp(mode, "loglik") == 0 ? LCX_PASSKEY_LOGLIK : LCX_PASSKEY_GREEDY | LCX_PASSKEY_LOGLIK;
    lcx_eval_spec es = {
        .label = ckpt, .series = series, .data_name = data ? data : text,
        .ppl = {lengths, n_lengths, stride, bos, strcmp(shortd, "score") == 0 ? LCX_PPL_SHORT_SCORE : LCX_PPL_SHORT_SKIP, 0},
        .pk = {pk_lengths, n_pk_lengths, depths, n_depths, trials, distractors, modes, (uint64_t)seed},
        .quiet = quiet};

    if (data) st = lcx_eval_load_docs(data, bos, cfg.vocab_size, &docs, &n_docs, &store);
    else if (text) st = load_text_doc(text, tok, cfg.vocab_size, &docs, &n_docs, &store);
    if (st != LCX_OK) goto fail;
    es.docs = docs;
    es.n_docs = n_docs;

    lcx_model_opts o;
    memset(&o, 0, sizeof o);
    o.param_dtype = dtype;
    o.max_tokens = lcx_eval_max_tokens(&es);
    o.loss_chunk = chunk;
    st = lcx_model_from_checkpoint(ckpt, &o, &m);
    if (st != LCX_OK) goto fail;
    res = calloc((size_t)n_lengths + 1, sizeof *res);
    if (!res) {
        st = lcx_fail(LCX_ERR_OOM, "no memory");
        goto fail;
    }
    lcx_terminal term;
    lcx_reporter rep = lcx_cli_reporter(&term, quiet);
    st = lcx_eval_run(&es, m, tok, res, &pk, &root, &rep);
    if (st != LCX_OK) goto fail;
    if (trials > 0 && pk_svg) {
        int md = (modes & LCX_PASSKEY_GREEDY) ? LCX_PASSKEY_GREEDY : LCX_PASSKEY_LOGLIK;
        char title[300];
        snprintf(title, sizeof title, "passkey retrieval (%s): %s", md == LCX_PASSKEY_GREEDY ? "greedy" : "loglik", series);
        st = lcx_svg_passkey_heatmap(&pk, md, title, &svg);
        if (st == LCX_OK) st = lcx_svg_write(pk_svg, svg);
        free(svg);
        svg = NULL;
        if (st != LCX_OK) goto fail;
    }
    if (svg_out) {
        lcx_plot_series ser[MAX_COMPARE + 1];
        int ns = 0;
        for (int c = 0; c < n_compare; c++) {
            json_error_t je;
            json_t *j = json_load_file(compare[c], JSON_REJECT_DUPLICATES, &je);
            if (!j) {
                st = lcx_fail(LCX_ERR_FORMAT, "%s: line %d column %d: %s", compare[c], je.line, je.column, je.text);
                goto fail;
            }
            json_t *pj = json_object_get(j, "perplexity");
            if (!pj) {
                json_decref(j);
                st = lcx_fail(LCX_ERR_FORMAT, "%s: no 'perplexity' object (not an lcextend eval --json output)", compare[c]);
                goto fail;
            }
            st = lcx_ppl_from_json(pj, compare[c], &cmp_res[c], &cmp_n[c], &cmp_series[c]);
            json_decref(j);
            if (st != LCX_OK) goto fail;
        }
        size_t total = (size_t)n_lengths;
        for (int c = 0; c < n_compare; c++) total += (size_t)cmp_n[c];
        xs = malloc(total * sizeof *xs);
        ys = malloc(total * sizeof *ys);
        if (!xs || !ys) {
            st = lcx_fail(LCX_ERR_OOM, "no memory");
            goto fail;
        }
        size_t at = 0;
        for (int c = 0; c <= n_compare; c++) {
            const lcx_ppl_result *r = c < n_compare ? cmp_res[c] : res;
            int n = c < n_compare ? cmp_n[c] : n_lengths;
            ser[ns].name = c < n_compare ? (cmp_series[c] ? cmp_series[c] : base_name(compare[c], cmp_names[c])) : series;
            ser[ns].x = xs + at;
            ser[ns].y = ys + at;
            ser[ns].n = n;
            for (int k = 0; k < n; k++, at++) {
                xs[at] = (double)r[k].length;
                ys[at] = r[k].ppl;
            }
            ns++;
        }
        st = lcx_svg_ppl_plot(ser, ns, "perplexity vs context length", &svg);
        if (st == LCX_OK) st = lcx_svg_write(svg_out, svg);
        if (st != LCX_OK) goto fail;
    }
    if (json_out) {
        st = lcx_eval_json_write(json_out, root);
        if (st != LCX_OK) goto fail;
    }
    LCX_TRY_GOTO(lcx_cli_flush_stdout(), fail);
    goto done;
fail:
    rc = lcx_cli_report(CMD, st);
done:
    free(svg);
    free(xs);
    free(ys);
    json_decref(root);
    for (int c = 0; c < MAX_COMPARE; c++) {
        free(cmp_res[c]);
        free(cmp_series[c]);
    }
    lcx_passkey_result_free(&pk);
    free(res);
    free(docs);
    free(store);
    lcx_model_free(m);
    lcx_tokenizer_free(tok);
    return rc;
}
