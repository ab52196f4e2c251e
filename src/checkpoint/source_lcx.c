/* source: an .lcx checkpoint directory — config from the manifest, `param` tensors matched against the table
 * (other roles, e.g. optimizer state, are left alone), tokenizer files as side files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint/problems.h"
#include "src/checkpoint/source_internal.h"
#include "src/core/fileio.h"

static lcx_shape shape_of(const lcx_ckpt_tensor *t) {
    lcx_shape sh = {0};
    sh.ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) sh.dims[d] = t->shape[d];
    return sh;
}

static lcx_status match(lcx_source *s) {
    const lcx_param_table *pt = &s->params;
    LCX_TRY(lcx_source_alloc_tensors(s));
    lcx_problems ps;
    memset(&ps, 0, sizeof ps);
    char s1[160], s2[160];
    for (size_t i = 0; i < pt->n; i++) {
        const lcx_param_spec *p = &pt->params[i];
        const lcx_ckpt_tensor *t = lcx_ckpt_find(s->ckpt, p->name, "param");
        if (!t) {
            lcx_problems_add(&ps, LCX_PROBLEM_MISSING, "%s", p->name);
            continue;
        }
        lcx_shape sh = shape_of(t);
        if (!lcx_shape_equal(&sh, &p->shape)) {
            lcx_problems_add(&ps, LCX_PROBLEM_SHAPE, "%s %s (expected %s)", p->name, lcx_shape_str(&sh, s1, sizeof s1),
                             lcx_shape_str(&p->shape, s2, sizeof s2));
            continue;
        }
        if (!lcx_dtype_is_float_loadable(t->dtype)) {
            lcx_problems_add(&ps, LCX_PROBLEM_DTYPE, "%s %s", p->name, lcx_dtype_name(t->dtype));
            continue;
        }
        s->tensor_of[i] = (lcx_source_tensor){
            .name = t->name, .stored = t->dtype, .dtype = t->dtype, .bytes = p->numel * t->es, .ref = t};
    }
    for (int k = 0; k < lcx_ckpt_tensor_count(s->ckpt); k++) {
        const lcx_ckpt_tensor *t = lcx_ckpt_tensor_at(s->ckpt, k);
        if (strcmp(t->role, "param") == 0 && !lcx_param_table_find(pt, t->name))
            lcx_problems_add(&ps, LCX_PROBLEM_EXTRA, "%s", t->name);
    }
    if (lcx_problems_total(&ps)) {
        char list[1800];
        lcx_problems_format(&ps, list, sizeof list);
        return lcx_fail(LCX_ERR_FORMAT, "%s: tensors do not match %s (%s, %lld layers): %s", s->path, s->config_path,
                        lcx_arch_name(s->cfg.arch), (long long)s->cfg.num_hidden_layers, list);
    }
    s->matched = 1;
    return LCX_OK;
}

lcx_status lcx_source_open_lcx(lcx_source *s, unsigned flags) {
    LCX_TRY(lcx_ckpt_open(s->path, &s->ckpt));
    const char *tok_json = NULL, *tok_gguf = NULL;
    for (int i = 0; i < lcx_ckpt_tokenizer_file_count(s->ckpt); i++) {
        const char *f = lcx_ckpt_tokenizer_file(s->ckpt, i);
        if (!strcmp(f, "tokenizer.json")) tok_json = f;
        if (!strcmp(f, "tokenizer.gguf")) tok_gguf = f;
        LCX_TRY(lcx_source_add_side_file(s, lcx_path_join(s->path, f)));
    }
    /* tokenizer.json (an HF import) before tokenizer.gguf (a GGUF import's tokenizer KVs); neither: the directory,
     * whose missing tokenizer.json lcx_tokenizer_open then names */
    s->tokenizer_path = tok_json || tok_gguf ? lcx_path_join(s->path, tok_json ? tok_json : tok_gguf) : strdup(s->path);
    LCX_FAIL_IF(!s->tokenizer_path, LCX_ERR_OOM, "%s: out of memory", s->path);
    const json_t *j = lcx_ckpt_model_config(s->ckpt);
    if (!json_is_object(j)) return LCX_OK; /* saved without a config: tensors only */
    s->config_path = lcx_path_join(s->path, LCX_CKPT_MANIFEST);
    LCX_FAIL_IF(!s->config_path, LCX_ERR_OOM, "%s: out of memory", s->path);
    char label[4096];
    snprintf(label, sizeof label, "%s model_config", s->config_path); /* as lcx_train_ckpt_config names it */
    LCX_TRY(lcx_source_config_from_json(s, j, label));
    return flags & LCX_SOURCE_CONFIG_ONLY ? LCX_OK : match(s);
}
