/* recipe: every shipped recipe parses (from the source tree and from the copies embedded in the library), the
 * broken recipes of tests/attack/recipes/ fail with the hand-derived "FILE:LINE: ..." message, values and
 * defaults resolve as recipes/README.md says, and lcx_parse_length's strict rules. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/plan/recipe.h"
#include "src/core/fileio.h"
#include "src/core/units.h"
#include "test_util.h"

static void test_parse_length(void) {
    int64_t v = 0;
    CHECK_OK(lcx_parse_length("32768", 0, &v));
    CHECK(v == 32768);
    CHECK_OK(lcx_parse_length("32k", 0, &v));
    CHECK(v == 32768);
    CHECK_OK(lcx_parse_length("128k", 0, &v));
    CHECK(v == 131072); /* Llama 3.1: max_position_embeddings 131072 */
    CHECK_OK(lcx_parse_length("128K", 0, &v));
    CHECK(v == 131072);
    CHECK_OK(lcx_parse_length("1m", 0, &v));
    CHECK(v == 1048576);
    CHECK_OK(lcx_parse_length("2M", 0, &v));
    CHECK(v == 2097152);
    CHECK_OK(lcx_parse_length("1", 0, &v));
    CHECK(v == 1);
    CHECK_OK(lcx_parse_length("9223372036854775807", 0, &v));
    CHECK(v == INT64_MAX);
    CHECK_FAILS(lcx_parse_length("9223372036854775808", 0, &v), LCX_ERR_INVALID, "too large");
    CHECK_FAILS(lcx_parse_length("9007199254740992k", 0, &v), LCX_ERR_INVALID, "too large"); /* 2^53 * 1024 */
    CHECK_FAILS(lcx_parse_length("9007199254740992m", 0, &v), LCX_ERR_INVALID, "too large");
    CHECK_FAILS(lcx_parse_length("12kk", 0, &v), LCX_ERR_INVALID, "'12kk' is not a length");
    CHECK_FAILS(lcx_parse_length("-5", 0, &v), LCX_ERR_INVALID, "'-5' is not a length");
    CHECK_FAILS(lcx_parse_length("+5", 0, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length("0", 0, &v), LCX_ERR_INVALID, "must be positive");
    CHECK_FAILS(lcx_parse_length("0k", 0, &v), LCX_ERR_INVALID, "must be positive");
    CHECK_FAILS(lcx_parse_length("", 0, &v), LCX_ERR_INVALID, "empty");
    CHECK_FAILS(lcx_parse_length("k", 0, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length("1.5k", 0, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length("1e6", 0, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length(" 32k", 0, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length("32k ", 0, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length("32kb", 0, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length("0x10", 0, &v), LCX_ERR_INVALID, "not a length");
    CHECK_FAILS(lcx_parse_length("2k", 1024, &v), LCX_ERR_INVALID, "above the limit 1024");
    CHECK_OK(lcx_parse_length("1k", 1024, &v));
    char buf[32];
    CHECK(!strcmp(lcx_format_length(131072, buf, sizeof buf), "128k"));
    CHECK(!strcmp(lcx_format_length(1048576, buf, sizeof buf), "1m"));
    CHECK(!strcmp(lcx_format_length(3 << 20, buf, sizeof buf), "3m"));
    CHECK(!strcmp(lcx_format_length(1000, buf, sizeof buf), "1000"));
    CHECK(!strcmp(lcx_format_length(49152, buf, sizeof buf), "48k"));
}

/* Every recipes/<name>.yaml parses, and the library embeds exactly these files, byte for byte. */
static void test_shipped(void) {
    const char *dir = LCX_SOURCE_DIR "/recipes";
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return;
    size_t n_files = 0;
    int seen_default = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".yaml") != 0) continue;
        n_files++;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        lcx_recipe *r = NULL;
        CHECK_OK(lcx_recipe_load(path, 32, &r)); /* divisor 32 = CP 16 */
        if (!r) continue;
        CHECK(r->n_stages >= 1);
        CHECK(strlen(r->description) > 0);
        char stem[256];
        snprintf(stem, sizeof stem, "%.*s", (int)(n - 5), e->d_name);
        CHECK_MSG(!strcmp(r->name, stem), "%s: name '%s' differs from the file name", path, r->name);
        if (!strcmp(stem, "yarn-x2")) seen_default = 1;
        for (size_t i = 0; i < r->n_stages; i++) {
            lcx_recipe_stage s;
            lcx_recipe_stage_resolve(r, i, &s);
            CHECK(s.steps > 0 || s.tokens > 0);
            CHECK(s.lr_peak > 0 && s.lr_min <= s.lr_peak);
        }
        /* the embedded copy */
        int found = 0;
        for (size_t i = 0; i < lcx_recipe_builtin_count(); i++) {
            if (strcmp(lcx_recipe_builtin_name(i), stem) != 0) continue;
            found = 1;
            size_t len = 0;
            const char *text = lcx_recipe_builtin_text(i, &len);
            char *file = NULL;
            size_t flen = 0;
            CHECK_OK(lcx_read_file(path, 1 << 20, &file, &flen));
            CHECK_MSG(file && len == flen && !memcmp(text, file, len), "%s: embedded copy differs", stem);
            CHECK(text[len] == '\0');
            free(file);
        }
        CHECK_MSG(found, "%s is not embedded", stem);
        lcx_recipe *b = NULL;
        CHECK_OK(lcx_recipe_open(stem, 32, &b));
        if (b) {
            char label[300];
            snprintf(label, sizeof label, "builtin:%s", stem);
            CHECK(!strcmp(b->label, label));
            CHECK(b->n_stages == r->n_stages);
        }
        lcx_recipe_free(b);
        lcx_recipe_free(r);
    }
    closedir(d);
    CHECK(n_files >= 5);
    CHECK(lcx_recipe_builtin_count() == n_files);
    CHECK(seen_default);
}

/* tests/attack/recipes/expected.tsv: NAME \t LINE \t FRAGMENT */
static void test_attacks(void) {
    const char *dir = LCX_SOURCE_DIR "/tests/attack/recipes";
    char path[1024];
    snprintf(path, sizeof path, "%s/expected.tsv", dir);
    char *tsv = NULL;
    size_t len = 0;
    CHECK_OK(lcx_read_file(path, 1 << 20, &tsv, &len));
    if (!tsv) return;
    int cases = 0;
    for (char *line = strtok(tsv, "\n"); line; line = strtok(NULL, "\n")) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        CHECK(t1 && t2);
        if (!t1 || !t2) continue;
        *t1 = *t2 = 0;
        int want_line = atoi(t1 + 1);
        const char *frag = t2 + 1;
        char file[1024], prefix[1100];
        snprintf(file, sizeof file, "%s/%s", dir, line);
        snprintf(prefix, sizeof prefix, "%s:%d: ", file, want_line);
        lcx_recipe *r = NULL;
        lcx_clear_error();
        lcx_status st = lcx_recipe_load(file, 8, &r);
        const char *msg = lcx_last_error();
        CHECK_MSG(st == LCX_ERR_FORMAT, "%s: expected a format error, got %s", line, lcx_status_name(st));
        CHECK_MSG(!strncmp(msg, prefix, strlen(prefix)), "%s: message does not start with '%s': %s", line, prefix,
                  msg);
        CHECK_MSG(strstr(msg, frag) != NULL, "%s: message lacks '%s': %s", line, frag, msg);
        CHECK_MSG(!strchr(msg, '\n'), "%s: message is not one line", line);
        CHECK(r == NULL);
        lcx_recipe_free(r);
        cases++;
    }
    free(tsv);
    CHECK(cases >= 12);
    printf("%d bad recipes checked\n", cases);
}

static lcx_recipe *parse(const char *text, int64_t divisor) {
    lcx_recipe *r = NULL;
    lcx_status st = lcx_recipe_parse("t.yaml", text, strlen(text), divisor, &r);
    CHECK_MSG(st == LCX_OK, "parse failed: %s", lcx_last_error());
    return r;
}

/* Values and the stage > defaults > built-in precedence, by hand from recipes/README.md. */
static void test_values(void) {
    const char *text =
        "name: demo\n"                                                    /* 1 */
        "description: a test\n"                                           /* 2 */
        "defaults:\n"                                                     /* 3 */
        "  method: abf\n"                                                 /* 4 */
        "  theta: {per_doubling: 4}\n"                                    /* 5 */
        "  steps: 100\n"                                                  /* 6 */
        "  lr: {peak: 1e-4, schedule: cosine, min_lr: 1e-5}\n"            /* 7 */
        "  tokens_per_batch: \"1m\"\n"                                    /* 8 */
        "  eval_lengths: [4k, 8k]\n"                                      /* 9 */
        "  activation: [keep, recompute]\n"                               /* 10 */
        "stages:\n"                                                       /* 11 */
        "  - seq_len: 16k\n"                                              /* 12 */
        "    tokens: 1.5e9\n"                                             /* 13 */
        "    lr: 3e-5\n"                                                  /* 14 */
        "  - seq_len: 32K\n"                                              /* 15 */
        "    method: yarn\n"                                              /* 16 */
        "    factor: 8\n"                                                 /* 17 */
        "    grad_accum: 4\n"                                             /* 18 */
        "    eval_stride: window\n"                                       /* 19 */
        "    activation: offload\n"                                       /* 20 */
        "    seed: 7\n"                                                   /* 21 */
        "  - seq_len: target\n"                                           /* 22 */
        "    method: llama3\n"                                            /* 23 */
        "    low_freq_factor: 2\n"                                        /* 24 */
        "    high_freq_factor: 8\n"                                       /* 25 */
        "    clip_norm: 0\n"                                              /* 26 */
        "    weight_decay: 0.1\n"                                         /* 27 */
        "    save_interval: 25\n"                                         /* 28 */
        "    attention_mask: document\n";                                 /* 29 */
    lcx_recipe *r = parse(text, 8);
    if (!r) return;
    CHECK(!strcmp(r->name, "demo") && !strcmp(r->description, "a test"));
    CHECK(r->n_stages == 3);
    lcx_recipe_stage s;
    lcx_recipe_stage_resolve(r, 0, &s);
    CHECK(s.seq_kind == LCX_SEQ_VALUE && s.seq_len == 16384);
    CHECK(s.method == LCX_EXTEND_ABF && s.theta_kind == LCX_THETA_PER_DOUBLING && s.theta == 4);
    CHECK(s.tokens == 1500000000 && s.steps == 0); /* the stage's tokens replace the defaults' steps */
    CHECK(s.lr_peak == 3e-5);                       /* scalar shorthand sets only the peak ... */
    CHECK(s.lr_schedule == LCX_LR_COSINE && s.lr_min == 1e-5); /* ... the rest comes from defaults */
    CHECK(s.lr_warmup == 20);                       /* built-in */
    CHECK(s.tokens_per_batch == 1048576);
    CHECK(s.grad_accum == 0);                       /* built-in auto */
    CHECK(!s.eval_auto && s.n_eval == 2 && s.eval_lengths[0] == 4096 && s.eval_lengths[1] == 8192);
    CHECK(s.eval_stride == 256);
    CHECK(s.n_activation == 2 && s.activation_list[0] == LCX_ACT_KEEP && s.activation_list[1] == LCX_ACT_RECOMPUTE);
    CHECK(s.clip_norm == 1.0 && s.weight_decay == 0.0 && s.seed == 0 && s.save_interval == 0);
    CHECK(s.line[LCX_RF_TOKENS] == 13 && s.line[LCX_RF_LR_PEAK] == 14 && s.line[LCX_RF_LR_MIN] == 7);
    CHECK(s.line[LCX_RF_LR_WARMUP] == 0 && s.line_start == 12);
    lcx_recipe_stage_resolve(r, 1, &s);
    CHECK(s.seq_len == 32768 && s.method == LCX_EXTEND_YARN && !s.factor_auto && s.factor == 8);
    CHECK(s.steps == 100 && s.tokens == 0);
    CHECK(s.lr_peak == 1e-4);
    CHECK(s.grad_accum == 4 && s.eval_stride == 0 && s.seed == 7);
    CHECK(s.n_activation == 0 && s.activation == LCX_ACT_OFFLOAD);
    CHECK(s.line[LCX_RF_FACTOR] == 17 && s.line[LCX_RF_STEPS] == 6);
    lcx_recipe_stage_resolve(r, 2, &s);
    CHECK(s.seq_kind == LCX_SEQ_TARGET && s.method == LCX_EXTEND_LLAMA3);
    CHECK(s.low_freq_factor == 2 && s.high_freq_factor == 8);
    CHECK(s.clip_norm == 0 && s.weight_decay == 0.1 && s.save_interval == 25);
    CHECK(s.doc_mask == 1 && s.line[LCX_RF_ATTENTION_MASK] == 29);
    lcx_recipe_stage_resolve(r, 1, &s);
    CHECK(s.doc_mask == 0 && s.line[LCX_RF_ATTENTION_MASK] == 0); /* built-in: causal */
    lcx_recipe_free(r);

    /* a bare recipe: built-in defaults, name from the label's stem */
    lcx_recipe *b = NULL;
    const char *bare = "stages:\n  - {seq_len: auto, steps: 40}\n";
    CHECK_OK(lcx_recipe_parse("dir/my-recipe.yml", bare, strlen(bare), 1, &b));
    if (b) {
        CHECK(!strcmp(b->name, "my-recipe") && !strcmp(b->description, ""));
        lcx_recipe_stage_resolve(b, 0, &s);
        CHECK(s.seq_kind == LCX_SEQ_AUTO && s.method == LCX_EXTEND_YARN && s.factor_auto);
        CHECK(s.lr_peak == 2e-5 && s.lr_warmup == 20 && s.lr_schedule == LCX_LR_CONSTANT);
        CHECK(s.eval_auto && s.eval_stride == 256 && s.activation == LCX_ACT_AUTO && s.clip_norm == 1.0);
    }
    lcx_recipe_free(b);

    /* longrope lists; an alias and a comment do not confuse the line numbers */
    const char *lr = "defaults: &d\n  method: longrope\n  short_factor: [1, 1.5]\n  long_factor: [2, 4]\n"
                     "stages:\n  # first\n  - {seq_len: 8k, steps: 10}\n";
    lcx_recipe *l = parse(lr, 1);
    if (l) {
        lcx_recipe_stage_resolve(l, 0, &s);
        CHECK(s.n_short_factor == 2 && s.short_factor[1] == 1.5 && s.n_long_factor == 2 && s.long_factor[1] == 4);
        CHECK(s.line_start == 7);
    }
    lcx_recipe_free(l);

    /* wsd: the decay keys inherit like the other lr.* keys; the built-in fraction is 0.2, cosine */
    const char *w = "defaults:\n  lr: {schedule: wsd, decay_fraction: 0.1}\nstages:\n"
                    "  - {seq_len: 8k, steps: 10, lr: {decay_type: 1-sqrt}}\n"
                    "  - {seq_len: 16k, steps: 10, lr: {schedule: constant}}\n";
    lcx_recipe *wr = parse(w, 1);
    if (wr) {
        lcx_recipe_stage_resolve(wr, 0, &s);
        CHECK(s.lr_schedule == LCX_LR_WSD && s.lr_decay_fraction == 0.1 && s.lr_decay_type == LCX_DECAY_SQRT);
        CHECK(s.line[LCX_RF_LR_DECAY_FRACTION] == 2 && s.line[LCX_RF_LR_DECAY_TYPE] == 4);
        lcx_recipe_stage_resolve(wr, 1, &s); /* the defaults' fraction is not an error for a constant stage */
        CHECK(s.lr_schedule == LCX_LR_CONSTANT);
    }
    lcx_recipe_free(wr);
    lcx_recipe_stage bd;
    lcx_recipe_builtin_defaults(&bd);
    CHECK(bd.lr_decay_fraction == 0.2 && bd.lr_decay_type == LCX_DECAY_COSINE);
}

static void test_open(void) {
    lcx_recipe *r = NULL;
    CHECK_FAILS(lcx_recipe_open("no-such-recipe", 1, &r), LCX_ERR_NOT_FOUND, "yarn-x2");
    CHECK_FAILS(lcx_recipe_open("/nonexistent/x.yaml", 1, &r), LCX_ERR_NOT_FOUND, "/nonexistent/x.yaml");
    CHECK(r == NULL);
    /* a divisor the shipped llama3 stages (multiples of 16k) do not meet */
    CHECK_FAILS(lcx_recipe_open("llama3-8k-128k", 3, &r), LCX_ERR_FORMAT, "builtin:llama3-8k-128k:");
    /* an error in a builtin names it like a file */
    CHECK(strstr(lcx_last_error(), "key 'seq_len': 16384 is not a multiple of 3") != NULL);
}

int main(void) {
    test_parse_length();
    test_shipped();
    test_attacks();
    test_values();
    test_open();
    return test_summary("test_recipe");
}
