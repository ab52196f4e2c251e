/* lcextend inspect: what a checkpoint holds — architecture, sizes, parameter count, dtypes, bytes, rope. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"
#include "formats/lcx.h"
#include "src/checkpoint/catalog.h"
#include "src/checkpoint/source.h"

static const char *CMD = "inspect";

static void help(void) {
    printf("usage: lcextend inspect PATH [--json]\n"
           "\n"
           "Show what a checkpoint holds: architecture, layers, hidden size, heads / kv heads, head_dim,\n"
           "intermediate size, vocab, parameter count (tied embeddings counted once), dtype breakdown, bytes,\n"
           "rope type / theta / factor and the context it implies, max_position_embeddings.\n"
           "The tensors are checked against the config: missing, unexpected, mis-shaped or non-float tensors\n"
           "are an error (exit 1).\n"
           "\n"
           "PATH   any checkpoint form (docs/formats.md \"Checkpoint forms\"):\n"
           "       a Hugging Face model directory (config.json + model.safetensors or a sharded index),\n"
           "       a model.safetensors.index.json, or one .safetensors file (config.json beside it is used\n"
           "       when present; otherwise only tensors, dtypes and bytes are shown), a native .lcx checkpoint\n"
           "       directory (layout, stage, step, tensors per role, stored vs raw bytes, compression ratio),\n"
           "       or a .gguf file (config from its metadata, bytes per ggml type, tokenizer model)\n"
           "\n"
           "options:\n"
           "  --json   print one JSON object instead of text\n"
           "  --help   this help\n"
           "\n"
           "examples:\n"
           "  lcextend inspect ./Llama-3.2-1B\n"
           "  lcextend inspect ./Qwen3-0.6B/model.safetensors --json\n"
           "  lcextend inspect ./big-model/model.safetensors.index.json\n"
           "  lcextend inspect run/step-001000 --json\n"
           "  lcextend inspect SmolLM2-135M-Instruct.Q4_1.gguf\n");
}

/* 1234567 -> "1.23M" style for human output. */
static const char *human(double x, char *buf, size_t cap) {
    static const char *units[] = {"", "K", "M", "B", "T"};
    int u = 0;
    while (x >= 1000 && u < 4) x /= 1000, u++;
    if (u == 0) snprintf(buf, cap, "%.0f", x);
    else snprintf(buf, cap, "%.2f%s", x, units[u]);
    return buf;
}

/* The config lines of every form that has one (parameters counted as transformers' num_parameters()). */
static void print_config(const lcx_model_config *m, uint64_t n_parameters) {
    char b1[32];
    printf("arch:                    %s (%s)\n", lcx_arch_name(m->arch), lcx_arch_class(m->arch));
    printf("layers:                  %lld\n", (long long)m->num_hidden_layers);
    printf("hidden:                  %lld\n", (long long)m->hidden_size);
    printf("heads / kv heads:        %lld / %lld\n", (long long)m->num_attention_heads,
           (long long)m->num_key_value_heads);
    printf("head_dim:                %lld%s\n", (long long)m->head_dim, m->head_dim_explicit ? "" : " (hidden/heads)");
    printf("intermediate:            %lld\n", (long long)m->intermediate_size);
    printf("vocab:                   %lld\n", (long long)m->vocab_size);
    printf("tied embeddings:         %s\n", m->tie_word_embeddings ? "yes" : "no");
    printf("biases:                  q/k/v %s, o %s, mlp %s%s\n", m->qkv_bias ? "yes" : "no",
           m->o_bias ? "yes" : "no", m->mlp_bias ? "yes" : "no", m->qk_norm ? "; q/k norm" : "");
    printf("config dtype:            %s\n",
           m->dtype == LCX_BF16 ? "bfloat16" : m->dtype == LCX_F16 ? "float16" : "float32");
    printf("parameters:              %llu (%s)\n", (unsigned long long)n_parameters,
           human((double)n_parameters, b1, sizeof b1));
}

static void print_rope(const lcx_model_config *m) {
    const lcx_rope_params *r = &m->rope;
    printf("rope:                    %s, theta %.12g", r->type, r->theta);
    if (r->partial_rotary_factor != 1.0) printf(", partial %g", r->partial_rotary_factor);
    if (r->has_factor) printf(", factor %g", r->factor);
    if (r->has_original_max) printf(", original %lld", (long long)r->original_max_position_embeddings);
    printf(" -> context %lld\n", (long long)lcx_rope_implied_context(m));
    printf("max_position_embeddings: %lld\n", (long long)m->max_position_embeddings);
    if (m->sliding_window > 0) printf("sliding_window:          %lld\n", (long long)m->sliding_window);
}

static void print_text(const lcx_catalog *c) {
    char b1[32], b2[32];
    printf("path:                    %s\n", c->path);
    if (c->has_config) {
        const lcx_model_config *m = &c->cfg;
        printf("config:                  %s\n", c->config_path);
        print_config(m, c->n_parameters);
    } else {
        printf("config:                  none (tensors only)\n");
        printf("elements:                %llu (%s)\n", (unsigned long long)c->n_parameters,
               human((double)c->n_parameters, b1, sizeof b1));
    }
    printf("tensors:                 %llu in %zu file%s\n", (unsigned long long)c->n_tensors, c->set->n_files,
           c->set->n_files == 1 ? "" : "s");
    printf("bytes:                   %llu (%s)\n", (unsigned long long)c->total_bytes,
           lcx_format_bytes((double)c->total_bytes, b2, sizeof b2));
    for (int dt = 0; dt < LCX_DTYPE_COUNT; dt++) {
        const lcx_dtype_stat *s = &c->dtypes[dt];
        if (!s->tensors) continue;
        printf("  %-6s %6llu tensors %15llu elements %15llu bytes\n", lcx_dtype_name((lcx_dtype)dt),
               (unsigned long long)s->tensors, (unsigned long long)s->elements, (unsigned long long)s->bytes);
    }
    if (c->has_config) {
        const lcx_model_config *m = &c->cfg;
        print_rope(m);
        if (c->lm_head_tied) printf("note: lm_head.weight is stored but equals the tied embedding\n");
        if (c->n_ignored) printf("note: %zu rotary inv_freq buffers ignored\n", c->n_ignored);
    } else {
        for (size_t i = 0; i < c->set->n_tensors; i++) {
            const lcx_st_tensor *t = c->set->tensors[i];
            char shape[160];
            printf("  %-60s %-5s %s\n", t->name, lcx_dtype_name(t->dtype), lcx_shape_str(&t->shape, shape, sizeof shape));
        }
    }
}

/* A .lcx checkpoint as one JSON object: layout, training position, config summary, per-role totals, ratio. */
static json_t *lcx_summary(lcx_ckpt *ck) {
    int tp, cp, dp;
    const char *kv;
    lcx_ckpt_layout(ck, &tp, &cp, &dp, &kv);
    json_t *j = json_object(), *roles = json_object(), *toks = json_array();
    json_object_set_new(j, "path", json_string(lcx_ckpt_dir(ck)));
    json_object_set_new(j, "format", json_string(LCX_CKPT_FORMAT));
    json_object_set_new(j, "layout", json_pack("{s:i, s:i, s:i, s:s}", "tp", tp, "cp", cp, "dp", dp, "kv_layout", kv));
    const json_t *ts = lcx_ckpt_training_state(ck), *cfg = lcx_ckpt_model_config(ck);
    static const char *const ts_keys[] = {"recipe", "stage", "step", "tokens", "tokens_seen", "lr", "attention_mask"};
    for (size_t k = 0; k < sizeof ts_keys / sizeof ts_keys[0]; k++) {
        json_t *v = json_is_object(ts) ? json_object_get(ts, ts_keys[k]) : NULL;
        if (v) json_object_set(j, ts_keys[k], v);
    }
    const json_t *mix = json_is_object(ts) ? json_object_get(json_object_get(ts, "run"), "data_mix") : NULL;
    if (json_is_array(mix)) json_object_set(j, "data_mix", (json_t *)mix); /* the sources and weights as given */
    static const char *const cfg_keys[] = {"model_type", "num_hidden_layers", "hidden_size", "num_attention_heads",
                                           "num_key_value_heads", "vocab_size", "max_position_embeddings"};
    for (size_t k = 0; k < sizeof cfg_keys / sizeof cfg_keys[0]; k++) {
        json_t *v = json_is_object(cfg) ? json_object_get(cfg, cfg_keys[k]) : NULL;
        if (v) json_object_set(j, cfg_keys[k], v);
    }
    unsigned long long raw = 0, stored = 0, pieces = 0;
    for (int i = 0; i < lcx_ckpt_tensor_count(ck); i++) {
        const lcx_ckpt_tensor *t = lcx_ckpt_tensor_at(ck, i);
        json_t *r = json_object_get(roles, t->role);
        if (!r) {
            r = json_pack("{s:I, s:I, s:I, s:I}", "tensors", (json_int_t)0, "elements", (json_int_t)0, "raw_bytes",
                          (json_int_t)0, "stored_bytes", (json_int_t)0);
            json_object_set_new(roles, t->role, r);
        }
        unsigned long long el = 1, rb = 0, sb = 0;
        for (int d = 0; d < t->ndim; d++) el *= t->shape[d];
        for (int p = 0; p < t->n_pieces; p++) rb += t->pieces[p].raw_length, sb += t->pieces[p].length;
        pieces += (unsigned long long)t->n_pieces;
        raw += rb, stored += sb;
        static const char *const f[] = {"tensors", "elements", "raw_bytes", "stored_bytes"};
        unsigned long long add[] = {1, el, rb, sb};
        for (int k = 0; k < 4; k++)
            json_object_set_new(r, f[k], json_integer(json_integer_value(json_object_get(r, f[k])) + (json_int_t)add[k]));
    }
    for (int i = 0; i < lcx_ckpt_tokenizer_file_count(ck); i++) json_array_append_new(toks, json_string(lcx_ckpt_tokenizer_file(ck, i)));
    json_object_set_new(j, "num_tensors", json_integer(lcx_ckpt_tensor_count(ck)));
    json_object_set_new(j, "num_pieces", json_integer((json_int_t)pieces));
    json_object_set_new(j, "num_files", json_integer(lcx_ckpt_file_count(ck)));
    json_object_set_new(j, "raw_bytes", json_integer((json_int_t)raw));
    json_object_set_new(j, "stored_bytes", json_integer((json_int_t)stored));
    json_object_set_new(j, "compression_ratio", json_real(stored ? (double)raw / (double)stored : 1.0));
    json_object_set_new(j, "roles", roles);
    json_object_set_new(j, "tokenizer_files", toks);
    return j;
}

static int inspect_lcx(lcx_ckpt *ck, const char *path, int as_json) {
    json_t *j = lcx_summary(ck);
    if (as_json) {
        char *s = lcx_json_dumps_hf(j);
        if (s) printf("%s\n", s);
        free(s);
    } else {
        char b1[32], b2[32];
        json_t *l = json_object_get(j, "layout");
        printf("path:                    %s (.lcx checkpoint)\n", path);
        printf("layout:                  tp %lld x cp %lld x dp %lld, kv heads %s\n",
               (long long)json_integer_value(json_object_get(l, "tp")), (long long)json_integer_value(json_object_get(l, "cp")),
               (long long)json_integer_value(json_object_get(l, "dp")), json_string_value(json_object_get(l, "kv_layout")));
        const char *keys[] = {"model_type", "num_hidden_layers", "hidden_size", "num_attention_heads",
                              "num_key_value_heads", "vocab_size", "max_position_embeddings", "recipe", "stage", "step",
                              "tokens", "tokens_seen", "lr", "attention_mask", "data_mix"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            json_t *v = json_object_get(j, keys[k]);
            if (!v) continue;
            /* 9 digits: a rate reads 0.0003, not 0.00029999999999999997 */
            char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(9));
            char label[40];
            snprintf(label, sizeof label, "%s:", keys[k]);
            printf("%-24s %s\n", label, s ? s : "?");
            free(s);
        }
        if (!json_object_get(j, "step")) printf("step:                    none (no training state)\n");
        printf("tensors:                 %lld (%lld pieces in %lld files)\n",
               (long long)json_integer_value(json_object_get(j, "num_tensors")),
               (long long)json_integer_value(json_object_get(j, "num_pieces")),
               (long long)json_integer_value(json_object_get(j, "num_files")));
        const char *role;
        json_t *r;
        json_object_foreach(json_object_get(j, "roles"), role, r) {
            printf("  %-8s %6lld tensors %15lld elements %15lld bytes\n", role,
                   (long long)json_integer_value(json_object_get(r, "tensors")),
                   (long long)json_integer_value(json_object_get(r, "elements")),
                   (long long)json_integer_value(json_object_get(r, "raw_bytes")));
        }
        printf("bytes:                   %s raw, %s stored, compression ratio %.3f\n",
               lcx_format_bytes((double)json_integer_value(json_object_get(j, "raw_bytes")), b1, sizeof b1),
               lcx_format_bytes((double)json_integer_value(json_object_get(j, "stored_bytes")), b2, sizeof b2),
               json_real_value(json_object_get(j, "compression_ratio")));
        size_t i;
        json_t *v;
        printf("tokenizer files:        ");
        json_array_foreach(json_object_get(j, "tokenizer_files"), i, v) printf(" %s", json_string_value(v));
        printf("%s\n", json_array_size(json_object_get(j, "tokenizer_files")) ? "" : " none");
    }
    json_decref(j);
    lcx_status fst = lcx_cli_flush_stdout();
    return fst == LCX_OK ? LCX_EXIT_OK : lcx_cli_report(CMD, fst);
}

/* An HF directory, .safetensors file or shard index: the catalog's view. */
static int inspect_hf(const lcx_catalog *c, int as_json) {
    if (as_json) {
        json_t *j = lcx_catalog_summary_json(c);
        char *s = j ? lcx_json_dumps_hf(j) : NULL; /* sorted keys, shortest round-trip floats */
        json_decref(j);
        if (!s) return lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "%s: out of memory", c->path));
        printf("%s\n", s);
        free(s);
    } else {
        print_text(c);
    }
    lcx_status fst = lcx_cli_flush_stdout();
    return fst == LCX_OK ? LCX_EXIT_OK : lcx_cli_report(CMD, fst);
}

/* A GGUF: its config (from the metadata), per ggml type totals, tokenizer model. */
static int inspect_gguf(const lcx_source *src, int as_json) {
    json_t *j = lcx_source_gguf_summary_json(src);
    if (!j) return lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "%s: out of memory", src->path));
    if (as_json) {
        char *s = lcx_json_dumps_hf(j);
        if (s) printf("%s\n", s);
        free(s);
    } else {
        char b[32];
        printf("path:                    %s (GGUF v%lld)\n", src->path,
               (long long)json_integer_value(json_object_get(j, "gguf_version")));
        printf("config:                  from the GGUF metadata\n");
        print_config(&src->cfg, src->params.total_numel);
        uint64_t total = (uint64_t)json_integer_value(json_object_get(j, "total_bytes"));
        printf("tensors:                 %lld in 1 file\n", (long long)json_integer_value(json_object_get(j, "num_tensors")));
        printf("bytes:                   %llu (%s)\n", (unsigned long long)total,
               lcx_format_bytes((double)total, b, sizeof b));
        const char *type;
        json_t *e;
        json_object_foreach(json_object_get(j, "ggml_types"), type, e) {
            printf("  %-6s %6lld tensors %15lld elements %15lld bytes\n", type,
                   (long long)json_integer_value(json_object_get(e, "tensors")),
                   (long long)json_integer_value(json_object_get(e, "elements")),
                   (long long)json_integer_value(json_object_get(e, "bytes")));
        }
        print_rope(&src->cfg);
        json_t *tk = json_object_get(j, "tokenizer");
        printf("tokenizer:               %s\n", json_is_string(tk) ? json_string_value(tk) : "none");
    }
    json_decref(j);
    lcx_status fst = lcx_cli_flush_stdout();
    return fst == LCX_OK ? LCX_EXIT_OK : lcx_cli_report(CMD, fst);
}

int lcx_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int as_json = 0;
    const lcx_cli_flag flags[] = {LCX_FLAG_SWITCH("--json", as_json)};
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &path, "one PATH only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    if (!path) return lcx_cli_usage_error(CMD, "missing PATH");
    lcx_source *src = NULL; /* every form through the one loader: tensors checked against the config */
    lcx_status st = lcx_source_open(path, 0, &src);
    if (st != LCX_OK) return lcx_cli_report(CMD, st);
    int rc = src->form == LCX_SOURCE_LCX ? inspect_lcx(src->ckpt, path, as_json)
             : src->form == LCX_SOURCE_GGUF ? inspect_gguf(src, as_json)
                                            : inspect_hf(src->catalog, as_json);
    lcx_source_close(src);
    return rc;
}
