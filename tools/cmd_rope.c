/* lcextend rope: show a checkpoint's rope (per-pair frequencies, what scaling did to each pair), or write a
 * zero-shot extended copy of an HF directory (new rope fields in config.json, weights linked or copied). */
#define _GNU_SOURCE /* linkat */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "formats/hf_config.h"
#include "src/checkpoint/source.h"
#include "src/core/fileio.h"
#include "src/rope/rope.h"
#include "src/core/units.h"

static const char *CMD = "rope";

static void help(void) {
    printf("usage: lcextend rope CKPT --show [--seq N] [--json]\n"
           "       lcextend rope CKPT --to N [--method M] [--theta X] [--short-factor LIST --long-factor LIST]\n"
           "                         --out DIR\n"
           "\n"
           "--show prints the rope of a Hugging Face checkpoint as transformers resolves it: type, theta, rotary\n"
           "dim, attention factor, and per rotary pair k the inverse frequency, the wavelength 2*pi/inv_freq, the\n"
           "unscaled inverse frequency theta^(-2k/d) and their ratio (scale), and the pair's state: kept (scale 1),\n"
           "interpolated (scale = factor), blended (between 1 and factor: yarn/llama3 ramps), scaled (other,\n"
           "e.g. dynamic NTK or longrope per-pair factors). Dynamic and longrope depend on the sequence length.\n"
           "\n"
           "--to writes a zero-shot extended copy of CKPT into DIR: config.json with the new rope fields\n"
           "(legacy rope_scaling form; factors against the original pretraining length, see docs/rope.md),\n"
           "every other file (safetensors shards, index, tokenizer files, generation_config.json) hard-linked\n"
           "when CKPT and DIR are on one filesystem, copied otherwise; the weights are not changed. Output is built\n"
           "in DIR.tmp-XXXXXX and renamed at the end; an existing DIR is refused. Hard links share the data with\n"
           "the source: edit the files of either copy only by replacing them.\n"
           "\n"
           "CKPT   a Hugging Face model directory (config.json + safetensors); for --show any checkpoint form (a\n"
           "       .safetensors file or index with config.json beside it, an .lcx directory, a .gguf file: its\n"
           "       metadata) or a config.json\n"
           "\n"
           "options:\n"
           "  --show              print the rope (default: text)\n"
           "  --seq N             sequence length for --show (default max_position_embeddings; k/m suffixes ok)\n"
           "  --json              --show as one JSON object\n"
           "  --to N              new context length (k/m suffixes ok)\n"
           "  --method M          yarn (default), pi, ntk, abf, llama3, longrope, dynamic\n"
           "  --theta X           new rope theta (required by abf)\n"
           "  --short-factor L    longrope: comma-separated per-pair factors (rotary dim / 2 of them)\n"
           "  --long-factor L     longrope: same, used past the original length\n"
           "  --out DIR           output directory (must not exist)\n"
           "  --help              this help\n"
           "\n"
           "examples:\n"
           "  lcextend rope ./Llama-3.1-8B --show\n"
           "  lcextend rope ./Llama-3.1-8B --show --seq 128k --json\n"
           "  lcextend rope ./Llama-3.2-1B --to 32k --method yarn --out ./Llama-3.2-1B-yarn32k\n"
           "  lcextend rope ./Mistral-7B --to 32k --method abf --theta 1e6 --out ./Mistral-7B-abf\n");
}

static void on_warn(void *user, const char *msg) {
    (void)user;
    fprintf(stderr, "lcextend %s: warning: %s\n", CMD, msg);
}

/* The config of CKPT, any checkpoint form or a config .json (src/checkpoint/source.h, config only); *cfg and
 * *cfg_path point into *src (close it after). */
static lcx_status load_config(const char *ckpt, lcx_source **src, lcx_model_config **cfg, const char **cfg_path) {
    LCX_TRY(lcx_source_open(ckpt, LCX_SOURCE_CONFIG_FILE, src));
    LCX_FAIL_IF(!(*src)->has_config, LCX_ERR_NOT_FOUND, "%s: no config.json beside it", ckpt);
    *cfg = &(*src)->cfg;
    *cfg_path = (*src)->config_path;
    return LCX_OK;
}

/* ---- --show ------------------------------------------------------------------------------------------------ */

static const char *pair_state(const lcx_rope_plan *plan, double scale) {
    if (fabs(scale - 1.0) <= 1e-6) return "kept";
    int has_factor = plan->type == LCX_ROPE_LINEAR || plan->type == LCX_ROPE_YARN || plan->type == LCX_ROPE_LLAMA3;
    if (has_factor && fabs(scale - plan->factor) <= 1e-5 * plan->factor) return "interpolated";
    if (has_factor && scale > 1.0 && scale < plan->factor) return "blended";
    return "scaled";
}

static int show(const char *ckpt, int64_t seq, int as_json) {
    lcx_source *src = NULL;
    lcx_model_config *cp = NULL;
    const char *cfg_path = NULL;
    json_t *out = NULL;
    float *inv = NULL, *inv0 = NULL;
    int rc = LCX_EXIT_OK;
    lcx_status st = load_config(ckpt, &src, &cp, &cfg_path);
    if (st != LCX_OK) goto fail;
    const lcx_model_config cfg = *cp;
    lcx_rope_plan plan, plan0;
    st = lcx_rope_plan_init(&plan, &cfg.rope, cfg.head_dim, cfg.max_position_embeddings, on_warn, NULL);
    if (st != LCX_OK) {
        lcx_fail_context(st, "%s: ", cfg_path);
        goto fail;
    }
    if (seq <= 0) seq = cfg.max_position_embeddings;
    /* The unscaled reference: same theta and rotary dim, type default. */
    lcx_rope_params p0;
    lcx_rope_params_default(&p0);
    p0.theta = cfg.rope.theta;
    p0.partial_rotary_factor = cfg.rope.partial_rotary_factor;
    st = lcx_rope_plan_init(&plan0, &p0, cfg.head_dim, cfg.max_position_embeddings, NULL, NULL);
    if (st != LCX_OK) goto fail;
    inv = malloc((size_t)plan.n_pairs * sizeof *inv);
    inv0 = malloc((size_t)plan.n_pairs * sizeof *inv0);
    if (!inv || !inv0) {
        st = lcx_fail(LCX_ERR_OOM, "out of memory");
        goto fail;
    }
    double attn = 1;
    st = lcx_rope_inv_freq(&plan, seq, inv, &attn);
    if (st == LCX_OK) st = lcx_rope_inv_freq(&plan0, seq, inv0, NULL);
    if (st != LCX_OK) goto fail;
    const double two_pi = 6.283185307179586;
    int has_orig = plan.type == LCX_ROPE_YARN || plan.type == LCX_ROPE_LONGROPE || plan.type == LCX_ROPE_LLAMA3;
    if (as_json) {
        out = json_object();
        json_t *pairs = json_array();
        if (!out || !pairs) {
            json_decref(pairs);
            st = lcx_fail(LCX_ERR_OOM, "out of memory");
            goto fail;
        }
        json_object_set_new(out, "config", json_string(cfg_path));
        json_object_set_new(out, "rope_type", json_string(lcx_rope_type_name(plan.type)));
        json_object_set_new(out, "rope_theta", json_real(plan.theta));
        json_object_set_new(out, "head_dim", json_integer(plan.head_dim));
        json_object_set_new(out, "rotary_dim", json_integer(plan.rot_dim));
        json_object_set_new(out, "n_pairs", json_integer(plan.n_pairs));
        json_object_set_new(out, "max_position_embeddings", json_integer(plan.max_pos));
        json_object_set_new(out, "original_max_position_embeddings",
                            has_orig ? json_integer(plan.original_max) : json_null());
        json_object_set_new(out, "factor", json_real(plan.factor));
        json_object_set_new(out, "seq_len", json_integer(seq));
        json_object_set_new(out, "attention_factor", json_real(attn));
        for (int64_t k = 0; k < plan.n_pairs; k++) {
            double scale = (double)inv0[k] / (double)inv[k];
            json_t *e = json_pack("{s:I, s:f, s:f, s:f, s:f, s:s}", "pair", (json_int_t)k, "inv_freq", (double)inv[k],
                                  "inv_freq_unscaled", (double)inv0[k], "wavelength", two_pi / (double)inv[k],
                                  "scale", scale, "state", pair_state(&plan, scale));
            if (!e || json_array_append_new(pairs, e) != 0) {
                json_decref(pairs);
                st = lcx_fail(LCX_ERR_OOM, "out of memory");
                goto fail;
            }
        }
        json_object_set_new(out, "pairs", pairs);
        char *txt = json_dumps(out, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        if (!txt) {
            st = lcx_fail(LCX_ERR_OOM, "out of memory");
            goto fail;
        }
        printf("%s\n", txt);
        free(txt);
    } else {
        char b[32];
        printf("config:            %s\n", cfg_path);
        printf("rope_type:         %s\n", lcx_rope_type_name(plan.type));
        printf("theta:             %.17g\n", plan.theta);
        printf("rotary_dim:        %lld (head_dim %lld, %lld pairs)\n", (long long)plan.rot_dim,
               (long long)plan.head_dim, (long long)plan.n_pairs);
        printf("max_positions:     %lld\n", (long long)plan.max_pos);
        if (has_orig) printf("original_max:      %lld\n", (long long)plan.original_max);
        printf("factor:            %.17g\n", plan.factor);
        printf("seq_len:           %s\n", lcx_format_length(seq, b, sizeof b));
        printf("attention_factor:  %.17g\n", attn);
        printf("%5s  %-15s  %-15s  %-15s  %-12s  %s\n", "pair", "inv_freq", "unscaled", "wavelength", "scale",
               "state");
        for (int64_t k = 0; k < plan.n_pairs; k++) {
            double scale = (double)inv0[k] / (double)inv[k];
            printf("%5lld  %-15.9g  %-15.9g  %-15.9g  %-12.7g  %s\n", (long long)k, (double)inv[k], (double)inv0[k],
                   two_pi / (double)inv[k], scale, pair_state(&plan, scale));
        }
    }
    LCX_TRY_GOTO(lcx_cli_flush_stdout(), fail);
    goto done;
fail:
    rc = lcx_cli_report(CMD, st);
done:
    json_decref(out);
    free(inv);
    free(inv0);
    lcx_source_close(src);
    return rc;
}

/* ---- --to -------------------------------------------------------------------------------------------------- */

static lcx_status copy_file(const char *from, const char *to) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    LCX_FAIL_IF(in < 0, LCX_ERR_IO, "%s: cannot open: %s", from, strerror(errno));
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        return lcx_fail(LCX_ERR_IO, "%s: cannot create: %s", to, strerror(e));
    }
    lcx_status st = LCX_OK;
    static char buf[1 << 20];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            st = lcx_fail(LCX_ERR_IO, "%s: read failed: %s", from, strerror(errno));
            break;
        }
        if (r == 0) break;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                st = lcx_fail(LCX_ERR_IO, "%s: write failed: %s", to, strerror(errno));
                break;
            }
            off += w;
        }
        if (st != LCX_OK) break;
    }
    if (st == LCX_OK && fsync(out) != 0) st = lcx_fail(LCX_ERR_IO, "%s: fsync failed: %s", to, strerror(errno));
    if (close(out) != 0 && st == LCX_OK) st = lcx_fail(LCX_ERR_IO, "%s: close failed: %s", to, strerror(errno));
    close(in);
    return st;
}

/* Hard-link (following a symlinked source, as in an HF cache snapshot) or copy every regular file of src other
 * than config.json into tmp. Subdirectories are skipped with a warning. */
static lcx_status link_files(const char *src, const char *tmp, int *n_linked, int *n_copied) {
    DIR *d = opendir(src);
    LCX_FAIL_IF(!d, LCX_ERR_IO, "%s: cannot list: %s", src, strerror(errno));
    lcx_status st = LCX_OK;
    struct dirent *e;
    while (st == LCX_OK && (e = readdir(d))) {
        const char *nm = e->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..") || !strcmp(nm, "config.json")) continue;
        char *from = lcx_path_join(src, nm), *to = lcx_path_join(tmp, nm);
        struct stat sb;
        if (!from || !to) {
            st = lcx_fail(LCX_ERR_OOM, "out of memory");
        } else if (stat(from, &sb) != 0) {
            st = lcx_fail(LCX_ERR_IO, "%s: cannot stat: %s", from, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "lcextend %s: warning: %s: subdirectory not copied\n", CMD, from);
        } else if (!S_ISREG(sb.st_mode)) {
            fprintf(stderr, "lcextend %s: warning: %s: not a regular file, not copied\n", CMD, from);
        } else if (linkat(AT_FDCWD, from, AT_FDCWD, to, AT_SYMLINK_FOLLOW) == 0) {
            (*n_linked)++;
        } else if (errno == EXDEV || errno == EPERM || errno == EMLINK || errno == ENOTSUP || errno == EACCES) {
            st = copy_file(from, to);
            if (st == LCX_OK) (*n_copied)++;
        } else {
            st = lcx_fail(LCX_ERR_IO, "%s: cannot link into %s: %s", from, tmp, strerror(errno));
        }
        free(from);
        free(to);
    }
    closedir(d);
    return st;
}

static lcx_status extend(const char *ckpt, const lcx_rope_extend *req, const char *out) {
    lcx_source *src = NULL;
    lcx_model_config *cp = NULL;
    const char *cfg_path = NULL;
    char *tmp = NULL, *path = NULL, *parent = NULL;
    lcx_status st = LCX_OK;
    struct stat sb;
    /* the copy links the directory's files and rewrites config.json: an HF directory only */
    lcx_source_form form = LCX_SOURCE_HF_DIR;
    int other = lcx_source_detect(ckpt, &form) == LCX_OK && (form == LCX_SOURCE_LCX || form == LCX_SOURCE_GGUF);
    LCX_FAIL_IF(!lcx_is_dir(ckpt) || other, LCX_ERR_INVALID, "%s: --to needs a Hugging Face model directory%s", ckpt,
                other ? " (export an .lcx or GGUF with lcextend export --format hf first)" : "");
    LCX_FAIL_IF(lstat(out, &sb) == 0, LCX_ERR_INVALID, "%s: already exists (refusing to overwrite)", out);
    LCX_TRY(load_config(ckpt, &src, &cp, &cfg_path));
    lcx_model_config cfg = *cp; /* the source's (rewritten here, freed with it) */

    lcx_rope_params np;
    int64_t new_max = 0;
    st = lcx_rope_plan_extension(&cfg.rope, cfg.head_dim, cfg.max_position_embeddings, req, &np, &new_max, on_warn,
                                 NULL);
    if (st != LCX_OK) {
        lcx_fail_context(st, "%s: ", cfg_path);
        goto done;
    }
    cfg.rope = np;
    cfg.max_position_embeddings = new_max;
    st = lcx_rope_export(&cfg.rope, cfg.head_dim, new_max, cfg.json, on_warn, NULL);
    if (st != LCX_OK) goto done;
    if (cfg.sliding_window > 0 && cfg.sliding_window < req->target)
        fprintf(stderr, "lcextend %s: warning: sliding_window %lld is shorter than the new length %lld\n", CMD,
                (long long)cfg.sliding_window, (long long)req->target);

    /* DIR.tmp-XXXXXX next to DIR, renamed into place at the end. */
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') n--;
    tmp = malloc(n + 16);
    LCX_FAIL_GOTO(!tmp, LCX_ERR_OOM, done, "out of memory");
    memcpy(tmp, out, n);
    strcpy(tmp + n, ".tmp-XXXXXX");
    if (!mkdtemp(tmp)) {
        free(tmp);
        tmp = NULL;
        LCX_FAIL_GOTO(1, LCX_ERR_IO, done, "%s: cannot create a temporary directory next to it: %s", out,
                      strerror(errno));
    }
    int n_linked = 0, n_copied = 0;
    LCX_TRY_GOTO(link_files(ckpt, tmp, &n_linked, &n_copied), done);
    path = lcx_path_join(tmp, "config.json");
    LCX_FAIL_GOTO(!path, LCX_ERR_OOM, done, "out of memory");
    LCX_TRY_GOTO(lcx_config_write(&cfg, path), done);
    mode_t um = umask(0); /* mkdtemp made it 0700; give it the mode a plain mkdir would have */
    umask(um);
    LCX_FAIL_GOTO(chmod(tmp, 0777 & ~um) != 0, LCX_ERR_IO, done, "%s: chmod failed: %s", tmp, strerror(errno));
    LCX_TRY_GOTO(lcx_fsync_dir(tmp), done);
    LCX_FAIL_GOTO(lstat(out, &sb) == 0, LCX_ERR_INVALID, done, "%s: already exists (refusing to overwrite)", out);
    LCX_FAIL_GOTO(rename(tmp, out) != 0, LCX_ERR_IO, done, "%s: cannot rename %s into place: %s", out, tmp,
                  strerror(errno));
    free(tmp);
    tmp = NULL;
    parent = strdup(out);
    LCX_FAIL_GOTO(!parent, LCX_ERR_OOM, done, "out of memory");
    char *slash = strrchr(parent, '/');
    if (!slash) strcpy(parent, ".");
    else if (slash == parent) parent[1] = 0;
    else *slash = 0;
    st = lcx_fsync_dir(parent);
    if (st != LCX_OK) goto done;

    char b1[32], b2[32];
    printf("wrote %s: rope %s", out, cfg.rope.type);
    if (cfg.rope.has_factor) printf(" factor %.17g", cfg.rope.factor);
    if (cfg.rope.has_original_max) printf(" original %s", lcx_format_length(cfg.rope.original_max_position_embeddings, b1, sizeof b1));
    printf(", theta %.17g, max_position_embeddings %s; %d file(s) linked, %d copied, config.json rewritten\n",
           cfg.rope.theta, lcx_format_length(new_max, b2, sizeof b2), n_linked, n_copied);
    st = lcx_cli_flush_stdout();
done:
    if (tmp) lcx_remove_flat_dir(tmp);
    free(tmp);
    free(path);
    free(parent);
    lcx_source_close(src);
    return st;
}

int lcx_cmd_rope(int argc, char **argv) {
    const char *ckpt = NULL, *method = NULL, *out = NULL;
    int do_show = 0, as_json = 0;
    int64_t seq = 0; /* 0: max_position_embeddings */
    static double sf[LCX_ROPE_MAX_PAIRS], lf[LCX_ROPE_MAX_PAIRS];
    lcx_rope_extend req;
    memset(&req, 0, sizeof req);
    const lcx_cli_flag flags[] = {
        LCX_FLAG_SWITCH("--show", do_show),
        LCX_FLAG_SWITCH("--json", as_json),
        LCX_FLAG_LENGTH("--seq", seq, 1, LCX_CONFIG_MAX_POSITIONS),
        LCX_FLAG_LENGTH("--to", req.target, 1, LCX_CONFIG_MAX_POSITIONS),
        LCX_FLAG_STR("--method", method),
        LCX_FLAG_POSITIVE("--theta", req.theta),
        LCX_FLAG_REALS("--short-factor", sf, req.n_short_factor, LCX_ROPE_MAX_PAIRS, -DBL_MAX, DBL_MAX),
        LCX_FLAG_REALS("--long-factor", lf, req.n_long_factor, LCX_ROPE_MAX_PAIRS, -DBL_MAX, DBL_MAX),
        LCX_FLAG_STR("--out", out),
    };
    const lcx_cli_spec spec = {CMD, help, flags, LCX_CLI_COUNT(flags), &ckpt, "one CKPT only"};
    int stop = lcx_cli_parse(&spec, argc, argv);
    if (stop != LCX_CLI_RUN) return stop;
    const int has_factors = req.n_short_factor > 0 || req.n_long_factor > 0;
    if (!ckpt) return lcx_cli_usage_error(CMD, "missing CKPT");
    if (do_show == !!req.target) return lcx_cli_usage_error(CMD, "give exactly one of --show and --to N");
    if (do_show) {
        if (method || req.theta > 0 || out || has_factors)
            return lcx_cli_usage_error(CMD, "--method/--theta/--out/--short-factor/--long-factor go with --to, not --show");
        return show(ckpt, seq, as_json);
    }
    if (seq || as_json) return lcx_cli_usage_error(CMD, "--seq/--json go with --show, not --to");
    if (!out) return lcx_cli_usage_error(CMD, "missing --out DIR");

    req.method = LCX_EXTEND_YARN;
    if (method && lcx_rope_method_parse(method, &req.method) != LCX_OK)
        return lcx_cli_usage_error(CMD, "--method: %s", lcx_last_error());
    if (req.theta > 0) {
        if (req.method != LCX_EXTEND_ABF) return lcx_cli_usage_error(CMD, "--theta goes with --method abf");
    } else if (req.method == LCX_EXTEND_ABF) {
        return lcx_cli_usage_error(CMD, "--method abf needs --theta X");
    }
    if (has_factors && req.method != LCX_EXTEND_LONGROPE)
        return lcx_cli_usage_error(CMD, "--short-factor/--long-factor go with --method longrope");
    if (req.method == LCX_EXTEND_LONGROPE) {
        if (!req.n_short_factor || !req.n_long_factor)
            return lcx_cli_usage_error(CMD, "--method longrope needs --short-factor and --long-factor");
        req.short_factor = sf;
        req.long_factor = lf;
    }
    lcx_status st = extend(ckpt, &req, out);
    return st == LCX_OK ? LCX_EXIT_OK : lcx_cli_report(CMD, st);
}
