/* run_common: see run_common.h. */
#include "src/pipeline/run_common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "formats/lcx.h"
#include "formats/tokdata.h"
#include "src/checkpoint/source.h"
#include "src/comm/run_ranks.h"
#include "src/convert/convert.h"
#include "src/core/fileio.h"
#include "src/core/units.h"
#include "src/eval/eval.h"
#include "src/eval/eval_run.h"
#include "src/train/train.h"

int lcx_tool_is_lcx(const char *path) {
    char *m = lcx_path_join(path, LCX_CKPT_MANIFEST);
    struct stat sb; /* anything named manifest.json: the .lcx reader refuses a FIFO or link there by name */
    int r = m && lcx_is_dir(path) && lstat(m, &sb) == 0;
    free(m);
    return r;
}

lcx_status lcx_tool_source_lcx(const char *src, const char *run_dir, char **lcx_dir) {
    *lcx_dir = NULL;
    LCX_FAIL_IF(!lcx_is_dir(src) && !lcx_is_file(src), LCX_ERR_NOT_FOUND, "%s: no such checkpoint", src);
    lcx_source_form form;
    LCX_TRY(lcx_source_detect(src, &form)); /* the loader's forms and its one-line errors */
    if (form == LCX_SOURCE_LCX) {
        *lcx_dir = strdup(src);
        LCX_FAIL_IF(!*lcx_dir, LCX_ERR_OOM, "out of memory");
        return LCX_OK;
    }
    char *out = lcx_path_join(run_dir, "import.lcx");
    LCX_FAIL_IF(!out, LCX_ERR_OOM, "out of memory");
    if (!lcx_tool_is_lcx(out)) {
        lcx_convert_opts o;
        lcx_convert_opts_default(&o);
        o.threads = 1;
        lcx_status st = lcx_import(src, out, &o);
        if (st != LCX_OK) {
            free(out);
            return st;
        }
    }
    *lcx_dir = out;
    return LCX_OK;
}

lcx_status lcx_tool_read_ids(const char *path, int32_t **ids, int64_t *n) {
    *ids = NULL;
    *n = 0;
    char *buf = NULL;
    size_t len = 0;
    LCX_TRY(lcx_read_file(path, (size_t)1 << 32, &buf, &len));
    size_t cap = 1024;
    int32_t *out = malloc(cap * sizeof *out);
    lcx_status st = LCX_OK;
    if (!out) {
        free(buf);
        return lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
    }
    int64_t k = 0;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        while (p < end && isspace((unsigned char)*p)) p++;
        if (p == end) break;
        const char *q = p;
        while (q < end && !isspace((unsigned char)*q)) q++;
        char word[32];
        size_t wl = (size_t)(q - p);
        int ok = wl > 0 && wl < sizeof word;
        int64_t v = -1;
        if (ok) {
            memcpy(word, p, wl);
            word[wl] = 0;
            ok = isdigit((unsigned char)word[0]) && lcx_parse_int(word, 0, INT32_MAX, &v) == LCX_OK; /* not "-0" */
        }
        if (!ok) {
            char shown[40];
            snprintf(shown, sizeof shown, "%.*s%s", (int)(wl < 24 ? wl : 24), p, wl < 24 ? "" : "...");
            for (char *c = shown; *c; c++)
                if (!isprint((unsigned char)*c)) *c = '?';
            st = lcx_fail(LCX_ERR_FORMAT, "%s: token %lld: '%s' is not a non-negative 32-bit integer", path,
                          (long long)k, shown);
            break;
        }
        if ((size_t)k == cap) {
            int32_t *grown = realloc(out, cap * 2 * sizeof *out);
            if (!grown) {
                st = lcx_fail(LCX_ERR_OOM, "%s: out of memory", path);
                break;
            }
            out = grown;
            cap *= 2;
        }
        out[k++] = (int32_t)v;
        p = q;
    }
    free(buf);
    if (st != LCX_OK) {
        free(out);
        return st;
    }
    *ids = out;
    *n = k;
    return LCX_OK;
}

lcx_status lcx_tool_ids_to_tokdata(const char *ids_path, const char *prefix, int64_t vocab) {
    int32_t *ids = NULL;
    int64_t n = 0;
    LCX_TRY(lcx_tool_read_ids(ids_path, &ids, &n));
    lcx_status st = LCX_OK;
    uint32_t *u = NULL;
    lcx_tokdata_writer w;
    memset(&w, 0, sizeof w);
    LCX_FAIL_GOTO(n < 2, LCX_ERR_INVALID, done, "%s: %lld token id(s): need at least 2", ids_path, (long long)n);
    u = malloc((size_t)n * 4);
    LCX_FAIL_GOTO(!u, LCX_ERR_OOM, done, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        LCX_FAIL_GOTO(ids[i] >= vocab, LCX_ERR_INVALID, done, "%s: token %lld: id %d is not below the vocabulary size %lld",
                      ids_path, (long long)i, ids[i], (long long)vocab);
        u[i] = (uint32_t)ids[i];
    }
    LCX_TRY_GOTO(lcx_tokdata_writer_open(&w, prefix, lcx_tokdata_dtype_for_vocab((size_t)vocab)), done);
    LCX_TRY_GOTO(lcx_tokdata_writer_add(&w, u, (size_t)n), done);
    st = lcx_tokdata_writer_commit(&w);
done:
    if (st != LCX_OK) lcx_tokdata_writer_abort(&w);
    free(ids);
    free(u);
    return st;
}

void lcx_tool_strv_free(char **v, int n) {
    if (!v) return;
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

lcx_status lcx_tool_ckpt_tokenizer_files(const char *dir, char ***paths, int *n) {
    *paths = NULL;
    *n = 0;
    lcx_ckpt *ck = NULL;
    LCX_TRY(lcx_ckpt_open(dir, &ck));
    int k = lcx_ckpt_tokenizer_file_count(ck);
    char **v = calloc((size_t)k + 1, sizeof *v);
    lcx_status st = LCX_OK;
    LCX_FAIL_GOTO(!v, LCX_ERR_OOM, done, "out of memory");
    for (int i = 0; i < k; i++) {
        v[i] = lcx_path_join(dir, lcx_ckpt_tokenizer_file(ck, i));
        if (!v[i]) {
            lcx_tool_strv_free(v, i);
            v = NULL;
            LCX_FAIL_GOTO(1, LCX_ERR_OOM, done, "out of memory");
        }
    }
    *paths = v;
    *n = k;
done:
    lcx_ckpt_free(ck);
    return st;
}

lcx_status lcx_tool_model_from_lcx(const char *dir, const lcx_model_config *cfg, const lcx_model_opts *opts,
                                   struct lcx_train_state *state, lcx_model **out) {
    *out = NULL;
    LCX_TRY(lcx_model_init(out, cfg, opts));
    lcx_status st = lcx_train_load(dir, *out, state);
    if (st != LCX_OK) {
        lcx_model_free(*out);
        *out = NULL;
    }
    return st;
}

lcx_status lcx_tool_run_dir_check(const char *out, int resume, char **latest) {
    *latest = NULL;
    if (resume) {
        LCX_FAIL_IF(!lcx_is_dir(out), LCX_ERR_NOT_FOUND, "%s: no such run directory to resume", out);
        lcx_status st = lcx_train_latest(out, latest);
        if (st == LCX_ERR_NOT_FOUND) lcx_fail_context(st, "--resume: %s has no checkpoint yet: ", out);
        return st;
    }
    char *ck = lcx_path_join(out, "checkpoints/" LCX_CKPT_LATEST);
    int exists = ck && lcx_is_file(ck);
    free(ck);
    LCX_FAIL_IF(exists, LCX_ERR_INVALID,
                "%s already holds a run (checkpoints/latest): add --resume, or choose another --out", out);
    return LCX_OK;
}

lcx_status lcx_tool_ids_open(const char *ids_path, const char *run_dir, int64_t vocab, lcx_tokdata *td) {
    char *prefix = lcx_path_join(run_dir, "ids");
    LCX_FAIL_IF(!prefix, LCX_ERR_OOM, "out of memory");
    lcx_status st = lcx_tool_ids_to_tokdata(ids_path, prefix, vocab);
    if (st == LCX_OK) st = lcx_tokdata_open(prefix, td);
    free(prefix);
    return st;
}

static void quiet_line(void *user, lcx_report_level level, const char *text) {
    const lcx_reporter *in = user;
    if (level == LCX_REPORT_RESULT || level == LCX_REPORT_WARN) lcx_report(in, level, "%s", text);
}

static void quiet_event(void *user, const char *name, const char *json) {
    lcx_report_event(user, name, "%s", json);
}

static void quiet_table(void *user, const lcx_table *t) { lcx_report_table(user, t); }

lcx_reporter lcx_tool_quiet_reporter(const lcx_reporter *inner) {
    /* the reporter API takes a mutable user pointer; the filter only reads through it */
    return (lcx_reporter){.line = quiet_line, .progress = NULL, .event = quiet_event, .table = quiet_table,
                          .user = (void *)inner};
}

lcx_status lcx_tool_data_open(const char *data, const char *const *more, int n_more, const double *weights,
                              lcx_tokdata *td, int *n_open) {
    *n_open = 0;
    LCX_FAIL_IF(n_more < 0 || 1 + n_more > LCX_MIX_MAX || (n_more && !weights), LCX_ERR_INVALID,
                "--data: %d sources (1 to %d; a mix needs --data-weights)", 1 + n_more, (int)LCX_MIX_MAX);
    for (int i = 0; i <= n_more; i++) {
        LCX_TRY(lcx_tokdata_open(i ? more[i - 1] : data, &td[i]));
        ++*n_open;
    }
    return LCX_OK;
}

lcx_mix_data lcx_tool_mix(const lcx_tokdata *td, int n, const double *weights) {
    lcx_mix_data mix = lcx_mix_single(&td[0]);
    mix.n = n;
    for (int i = 0; i < n && i < LCX_MIX_MAX; i++) {
        mix.td[i] = &td[i];
        mix.weight[i] = weights ? weights[i] : 1;
    }
    return mix;
}

json_t *lcx_tool_mix_info(const lcx_tokdata *td, int n, const double *weights) {
    if (n < 2 || !weights) return NULL;
    json_t *srcs = json_array();
    for (int i = 0; srcs && i < n; i++)
        json_array_append_new(srcs, json_pack("{s:s, s:f}", "data", td[i].prefix, "weight", weights[i]));
    return srcs;
}

lcx_status lcx_tool_ppl(const lcx_ppl_config *pc, const lcx_ppl_doc *docs, int64_t n_docs, lcx_model *m, int cp_rank,
                        int cp_size, lcx_comm *grad, int dp_rank, int dp_size, lcx_ppl_result *res) {
    const int cp = cp_size > 1 ? cp_size : 1;
    lcx_ppl_config shard = *pc;
    if (dp_size > 1 && grad) shard.shard = dp_rank, shard.n_shards = dp_size;
    lcx_train_cp_scorer sc = {m, cp > 1 ? cp_rank : 0, cp};
    LCX_TRY(lcx_ppl_eval(&shard, docs, n_docs, lcx_train_window_score_cp, &sc, res));
    /* the DP ranks' shards added up, one CP rank of each (they hold the same sums) */
    return shard.n_shards > 1 ? lcx_ppl_results_gather(grad, cp, res, pc->n_lengths) : LCX_OK;
}

lcx_status lcx_tool_validate(void *validation, lcx_model *m, double *loss, int64_t *tokens) {
    const lcx_tool_validation *v = validation;
    *loss = NAN;
    *tokens = 0;
    const int64_t len = v->seq_len;
    lcx_ppl_config pc;
    memset(&pc, 0, sizeof pc);
    pc.lengths = &len;
    pc.n_lengths = 1;
    pc.stride = 0; /* non-overlapping */
    pc.bos_id = v->bos;
    pc.short_docs = LCX_PPL_SHORT_SCORE;
    lcx_ppl_result res;
    LCX_TRY(lcx_tool_ppl(&pc, v->docs, v->n_docs, m, v->cp_rank, v->cp_size, v->grad, v->dp_rank, v->dp_size, &res));
    LCX_FAIL_IF(res.tokens == 0, LCX_ERR_INVALID, "validation: the held-out data has no token to score");
    *loss = res.mean_nll;
    *tokens = res.tokens;
    return LCX_OK;
}

void lcx_tool_warn_disk(const lcx_reporter *r, const char *dir, const lcx_disk_need *n) {
    const double need = (double)n->held * n->ckpt + n->import_bytes + n->export_bytes;
    struct statvfs v;
    char *at = strdup(dir);
    const int ok = at && statvfs(lcx_is_dir(dir) ? dir : dirname(at), &v) == 0;
    free(at);
    const double avail = ok ? (double)v.f_bavail * (double)v.f_frsize : 0;
    if (!ok || avail >= need) return;
    char b1[32], b2[32], b3[32], b4[32], ex[64] = "", im[64] = "";
    if (n->import_bytes > 0)
        snprintf(im, sizeof im, "%s the import of %s", n->export_bytes > 0 ? "," : " and",
                 lcx_format_bytes(n->import_bytes, b4, sizeof b4));
    if (n->export_bytes > 0)
        snprintf(ex, sizeof ex, " and the export of %s", lcx_format_bytes(n->export_bytes, b4, sizeof b4));
    lcx_report(r, LCX_REPORT_WARN, "%s: its filesystem has %s free, and the run may write up to %s more there (%lld "
               "checkpoint%s of %s at once%s%s, before zstd): free some, or --keep fewer", dir,
               lcx_format_bytes(avail, b1, sizeof b1), lcx_format_bytes(need, b2, sizeof b2), (long long)n->held,
               n->held == 1 ? "" : "s", lcx_format_bytes(n->ckpt, b3, sizeof b3), im, ex);
}

int64_t lcx_tool_run_checkpoints(const char *run_dir) {
    char *ckpts = lcx_path_join(run_dir, "checkpoints");
    const int64_t n = ckpts ? lcx_ckpt_count(ckpts) : 0;
    free(ckpts);
    return n;
}

const char *lcx_tool_layout_text(const lcx_model *m, const lcx_run_groups *g, int64_t seq_len, char *buf,
                                 size_t cap) {
    if (!cap) return buf;
    buf[0] = '\0';
    if (g->cpc) snprintf(buf, cap, " over CP %d (%lld tokens per rank)", g->cp, (long long)(seq_len / g->cp));
    if (g->tpc)
        snprintf(buf + strlen(buf), cap - strlen(buf), ", TP %d%s", g->tp,
                 lcx_model_sequence_parallel(m)    ? " (sequence parallel)"
                 : lcx_model_distributes_saved(m) ? " (saved activations distributed)"
                                                  : "");
    if (lcx_model_moment_shards(m) > 1)
        snprintf(buf + strlen(buf), cap - strlen(buf), ", ZeRO-1 over %d ranks", lcx_model_moment_shards(m));
    return buf;
}

const char *lcx_tool_mfu_text(double tflops, double peak_tflops, char *buf, size_t cap) {
    if (peak_tflops > 0) snprintf(buf, cap, ", MFU %.1f%% of %g TFLOP/s", 100.0 * tflops / peak_tflops, peak_tflops);
    else if (cap) buf[0] = '\0';
    return buf;
}
