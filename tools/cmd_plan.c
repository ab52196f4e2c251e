/* lcextend plan: print the staged extension plan for a checkpoint (what `lcextend CKPT --to N --dry-run` shows). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "formats/hf_config.h"
#include "src/plan/recipe.h"
#include "src/plan/plan.h"
#include "src/core/units.h"

static const char *CMD = "plan";

static void help(void) {
    printf("usage: lcextend plan CKPT --to N [--recipe NAME|FILE] [--method M] [--json] [layout options]\n"
           "\n"
           "Print the staged context-extension plan for a checkpoint without doing any work: per stage the\n"
           "sequence length, rope config (type, factor, theta, new max_position_embeddings), steps, tokens,\n"
           "batch, learning-rate schedule, activation policy, evaluation lengths, and estimates of peak memory\n"
           "per device, model FLOPs and time (formulas in docs/plan.md). Errors (target too short, not reachable\n"
           "by the recipe, does not fit the memory budget, ...) are reported before anything runs.\n"
           "\n"
           "CKPT   a Hugging Face model directory (its config.json is read) or a config.json file\n"
           "\n"
           "options:\n"
           "  --to N              target context length: 131072, 128k, 1m (k = 1024, m = 1048576)\n"
           "  --recipe R          built-in recipe name or a YAML file (default yarn-x2); built in:");
    for (size_t i = 0; i < lcx_recipe_builtin_count(); i++) printf(" %s", lcx_recipe_builtin_name(i));
    printf("\n"
           "  --method M          override the recipe's rope method: yarn, pi, abf, ntk, llama3, longrope\n"
           "  --tp N, --cp N, --dp N   parallel layout (default 1 each); lengths must be multiples of 2 x CP\n"
           "  --memory SIZE       memory budget per device, e.g. 80G, 24GiB, 512M (binary units); activation\n"
           "                      'auto' then keeps as many layers as fit, and a plan that does not fit fails\n"
           "  --tokens-per-s X    training throughput (tokens/s, all devices) for time estimates\n"
           "  --fp32              fp32 weights and activations (CPU backend) instead of bf16 + fp32 master\n"
           "  --loss-chunk N      tokens per chunk of the chunked loss (default 4096)\n"
           "  --json              print one JSON object instead of the table\n"
           "  --help              this help\n"
           "\n"
           "examples:\n"
           "  lcextend plan ./Llama-3.1-8B-base --to 128k\n"
           "  lcextend plan ./Llama-3.1-8B-base --to 128k --recipe llama3-8k-128k --tp 8 --cp 4 --memory 80G\n"
           "  lcextend plan ./tiny --to 2048 --recipe tiny-demo --fp32 --tokens-per-s 1000\n"
           "  lcextend plan ./model --to 64k --recipe my-recipe.yaml --method pi --json\n");
}

/* "80G", "24GiB", "512M", "1073741824" -> bytes (binary units). */
static int parse_bytes(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v <= 0 || strpbrk(s, "xXnN")) return -1;
    double mult = 1;
    switch (*end) {
    case 'K': case 'k': mult = 1024.0, end++; break;
    case 'M': case 'm': mult = 1048576.0, end++; break;
    case 'G': case 'g': mult = 1073741824.0, end++; break;
    case 'T': case 't': mult = 1099511627776.0, end++; break;
    default: break;
    }
    if (mult > 1 && !strcmp(end, "iB")) end += 2;
    else if (mult > 1 && *end == 'B') end++;
    else if (mult == 1 && *end == 'B') end++;
    if (*end) return -1;
    *out = v * mult;
    return 0;
}

static int parse_count(const char *s, int64_t max, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < 1 || v > max || *s == '+' || *s == ' ') return -1;
    *out = v;
    return 0;
}

int lcx_cmd_plan(int argc, char **argv) {
    const char *path = NULL, *to = NULL, *recipe = "yarn-x2", *method = NULL, *val = NULL;
    int as_json = 0, err = 0;
    lcx_plan_opts o;
    lcx_plan_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return LCX_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--fp32")) {
            o.weight_bytes = o.act_bytes = 4;
        } else if (lcx_cli_flag_value(argc, argv, &i, "--to", &to, CMD, &err) ||
                   lcx_cli_flag_value(argc, argv, &i, "--recipe", &recipe, CMD, &err) ||
                   lcx_cli_flag_value(argc, argv, &i, "--method", &method, CMD, &err)) {
            if (err) return LCX_EXIT_USAGE;
        } else if (lcx_cli_flag_value(argc, argv, &i, "--tp", &val, CMD, &err) ||
                   lcx_cli_flag_value(argc, argv, &i, "--cp", &val, CMD, &err) ||
                   lcx_cli_flag_value(argc, argv, &i, "--dp", &val, CMD, &err)) {
            if (err) return LCX_EXIT_USAGE;
            int64_t *dst = a[2] == 't' ? &o.tp : a[2] == 'c' ? &o.cp : &o.dp;
            if (parse_count(val, 65536, dst) != 0)
                return lcx_cli_usage_error(CMD, "flag %.4s: '%s' is not a count from 1 to 65536", a, val);
        } else if (lcx_cli_flag_value(argc, argv, &i, "--memory", &val, CMD, &err)) {
            if (err) return LCX_EXIT_USAGE;
            if (parse_bytes(val, &o.mem_budget) != 0)
                return lcx_cli_usage_error(CMD, "flag --memory: '%s' is not a size (e.g. 80G, 24GiB, 512M)", val);
        } else if (lcx_cli_flag_value(argc, argv, &i, "--tokens-per-s", &val, CMD, &err)) {
            if (err) return LCX_EXIT_USAGE;
            char *end;
            errno = 0;
            o.tokens_per_s = strtod(val, &end);
            if (end == val || *end || errno || !isfinite(o.tokens_per_s) || o.tokens_per_s <= 0)
                return lcx_cli_usage_error(CMD, "flag --tokens-per-s: '%s' is not a positive number", val);
        } else if (lcx_cli_flag_value(argc, argv, &i, "--loss-chunk", &val, CMD, &err)) {
            if (err) return LCX_EXIT_USAGE;
            if (lcx_parse_length(val, INT64_C(1) << 34, &o.loss_chunk) != LCX_OK)
                return lcx_cli_usage_error(CMD, "flag --loss-chunk: %s", lcx_last_error());
        } else if (lcx_cli_operand(CMD, a, "CKPT", &path)) {
            return LCX_EXIT_USAGE;
        }
    }
    if (!path) return lcx_cli_usage_error(CMD, "missing CKPT");
    if (!to) return lcx_cli_usage_error(CMD, "missing --to N (the target context length)");
    if (lcx_parse_length(to, INT64_C(1) << 34, &o.target) != LCX_OK)
        return lcx_cli_usage_error(CMD, "flag --to: %s", lcx_last_error());
    if (method) {
        if (lcx_rope_method_parse(method, &o.method) != LCX_OK)
            return lcx_cli_usage_error(CMD, "flag --method: %s", lcx_last_error());
        if (o.method == LCX_EXTEND_DYNAMIC)
            return lcx_cli_usage_error(CMD, "flag --method: dynamic is for evaluation only, not for training");
        o.has_method = 1;
    }

    /* CKPT: a directory holding config.json, or the config.json itself */
    struct stat sb;
    char *cfg_path = NULL;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path) + sizeof "/config.json";
        cfg_path = malloc(n);
        if (!cfg_path) return lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "out of memory"));
        snprintf(cfg_path, n, "%s/config.json", path);
    } else {
        cfg_path = strdup(path);
        if (!cfg_path) return lcx_cli_report(CMD, lcx_fail(LCX_ERR_OOM, "out of memory"));
    }
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    lcx_recipe *r = NULL;
    lcx_plan *p = NULL;
    lcx_status st = lcx_config_load(cfg_path, &cfg);
    free(cfg_path);
    if (st == LCX_OK) st = lcx_recipe_open(recipe, 2 * o.cp, &r);
    if (st == LCX_OK) st = lcx_plan_build(&cfg, r, &o, &p);
    if (st == LCX_OK) {
        if (as_json) {
            json_t *j = lcx_plan_json(p);
            char *s = j ? lcx_json_dumps_hf(j) : NULL; /* sorted keys, shortest round-trip floats */
            json_decref(j);
            if (!s) st = lcx_fail(LCX_ERR_OOM, "out of memory");
            else printf("%s\n", s);
            free(s);
        } else {
            lcx_plan_print(p, stdout);
        }
    }
    lcx_plan_free(p);
    lcx_recipe_free(r);
    lcx_config_free(&cfg);
    if (st != LCX_OK) return lcx_cli_report(CMD, st);
    lcx_status fst = lcx_cli_flush_stdout();
    return fst == LCX_OK ? LCX_EXIT_OK : lcx_cli_report(CMD, fst);
}
