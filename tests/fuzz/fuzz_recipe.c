/* libFuzzer target: lcx_recipe_parse on arbitrary bytes, then lcx_plan_build of a parsed recipe for a small model
 * at a few targets. Checks beyond "no crash": a failure is one line starting with the label and returns no
 * recipe; a parsed recipe satisfies the documented invariants; a plan's stages end at the target with increasing
 * lengths (multiples of 2 x CP with CP 2). Seed corpora: recipes/ and tests/attack/recipes/ (e.g. `fuzz_recipe
 * recipes tests/attack/recipes`). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hf_config.h"
#include "src/plan/recipe.h"
#include "src/plan/plan.h"

static void require(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz_recipe: invariant broken: %s\n", what);
        abort();
    }
}

static const char *CFG = "{\"model_type\": \"llama\", \"vocab_size\": 64, \"hidden_size\": 16, \"intermediate_size\": 32,"
                         " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"num_key_value_heads\": 1,"
                         " \"max_position_embeddings\": 256}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lcx_recipe *r = NULL;
    lcx_status st = lcx_recipe_parse("fuzz.yaml", (const char *)data, size, 4, &r);
    if (st != LCX_OK) {
        const char *m = lcx_last_error();
        require(r == NULL, "no recipe on failure");
        require(!strncmp(m, "fuzz.yaml", 9), "message names the source");
        require(!strchr(m, '\n'), "one-line message");
        return 0;
    }
    require(r->n_stages >= 1 && r->n_stages <= LCX_RECIPE_MAX_STAGES, "stage count");
    require(r->name && r->description, "name and description");
    int64_t prev = 0;
    for (size_t i = 0; i < r->n_stages; i++) {
        lcx_recipe_stage s;
        lcx_recipe_stage_resolve(r, i, &s);
        require(s.steps > 0 || s.tokens > 0, "budget");
        require(s.lr_peak > 0 && s.lr_min >= 0 && s.lr_min <= s.lr_peak, "lr");
        require(s.seq_kind == LCX_SEQ_VALUE || i + 1 == r->n_stages, "auto/target last");
        if (s.seq_kind == LCX_SEQ_VALUE) {
            require(s.seq_len > prev && s.seq_len % 4 == 0, "lengths increase, divisible");
            prev = s.seq_len;
        }
        require(s.factor_auto || s.factor >= 1, "factor");
    }
    lcx_model_config cfg;
    if (lcx_config_parse("cfg.json", CFG, strlen(CFG), &cfg) == LCX_OK) {
        const int64_t targets[] = {512, 1000, 4096, 131072};
        for (size_t t = 0; t < 2 * sizeof targets / sizeof targets[0]; t++) {
            lcx_plan_opts o;
            lcx_plan_opts_default(&o);
            o.target = targets[t / 2];
            o.cp = t % 2 ? 2 : 1; /* with CP every length is a multiple of 2 x CP */
            lcx_plan *p = NULL;
            if (lcx_plan_build(&cfg, r, &o, &p) == LCX_OK) {
                require(p->n_stages >= 1 && p->stages[p->n_stages - 1].seq_len == o.target, "ends at target");
                for (int i = 0; i < p->n_stages; i++) {
                    require(i == 0 || p->stages[i].seq_len > p->stages[i - 1].seq_len, "plan lengths increase");
                    require(o.cp == 1 || p->stages[i].seq_len % (2 * o.cp) == 0, "lengths divisible by 2 x CP");
                }
                json_decref(lcx_plan_json(p));
            } else {
                require(p == NULL && !strchr(lcx_last_error(), '\n'), "plan failure");
            }
            lcx_plan_free(p);
        }
        lcx_config_free(&cfg);
    }
    lcx_recipe_free(r);
    return 0;
}
