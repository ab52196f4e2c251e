/* extend_job: the state of one lcx_extend_run (src/pipeline/extend.h), shared by the files that run its parts:
 * extend.c (the order of the parts, import, resume, export), extend_plan.c (plan and time estimate),
 * extend_stage.c (one training stage and its evaluation). */
#ifndef LCX_PIPELINE_EXTEND_JOB_H
#define LCX_PIPELINE_EXTEND_JOB_H

#include <jansson.h>

#include "formats/tokdata.h"
#include "src/train/mix.h"
#include "src/checkpoint/source.h"
#include "src/eval/eval_run.h"
#include "src/pipeline/extend.h"
#include "src/pipeline/run_report.h"
#include "src/train/train.h"

typedef struct extend_job {
    const lcx_extend_options *o;
    const lcx_reporter *r;   /* everything the run says */
    lcx_reporter train_r;    /* what training and the evaluations' progress say: r, less what quiet drops */
    lcx_source *input;       /* CKPT through the one loader (src/checkpoint/source.h): config, tokenizer */
    lcx_model_config cfg;    /* the input's config (input's: not freed on its own) */
    lcx_model_config scfg;   /* the current stage's config (the input's with the stage's rope) */
    lcx_recipe *recipe;
    lcx_plan *plan;
    lcx_model *m;            /* the training model of the current stage */
    lcx_tokdata td[LCX_MIX_MAX], ed; /* training data (a data mix's sources, td_open of them) and held-out data */
    int td_open, ed_open;
    int pk_trials;           /* resolved passkey trials (o->passkey_trials with -1 decided) */
    char *hay;               /* o->haystack's text (NULL without one) */
    size_t hay_len;
    int full_eval;           /* before/after evaluation: with eval_data, or with passkey trials > 0 alone */
    char *out, *src, *latest;
    int resume_stage, resume_done; /* --resume: latest's stage (0-based) and whether it finished; -1, 0 without */
    int64_t resume_step;           /* its steps done in that stage */
    char **tok;              /* tokenizer files carried into every checkpoint */
    int n_tok;
    json_t *run_info;        /* stored with every checkpoint: what run this is */
    lcx_tokenizer *etok;     /* the input's tokenizer: BOS of the evaluation windows, passkey prompts */
    int32_t bos;
    lcx_ppl_doc *docs;       /* the held-out documents (point into doc_store) */
    int32_t *doc_store;
    int64_t n_docs;
    char *mpath, *eval_dir, *before_json, *after_json, *pk_before, *pk_after;
    lcx_ppl_result *fres;    /* the before/after perplexities */
    lcx_eval_spec es;        /* the before/after evaluation: the last stage's eval lengths and stride */
    lcx_train_state state;
    const char *load_from;   /* the checkpoint the next stage starts from */
    lcx_run_groups grp;      /* the job's groups (lcx_extend_options.ranks, as lcx_run_ranks_resolve makes them) */
    int synced;              /* a failure already went through an agreement point: no more collectives */
    const lcx_reporter *all_r; /* the caller's reporter, for a fatal message from any rank */
    lcx_reporter lead_r;     /* r on the lead, silent elsewhere */
    char *peer_saved;        /* not the lead: RUN's latest checkpoint after a stage (the lead's save) */
} extend_job;

/* extend.c */
/* An agreement point of the ranks (lcx_comm_agree); a failure, this rank's or another's, is then known to all. */
lcx_status extend_sync(extend_job *job, lcx_status st);
/* --stage-passkey: the passkey test of stage i's saved result at the stage's eval lengths (every stage but the
 * last, which the after-evaluation tests), on the before/after evaluation's ranks with a forward-only model
 * (the stage's training model is freed first) -> RUN/eval/passkey-stageN.json (lcextend eval's JSON) and .svg;
 * kept from an earlier run of RUN: not run again. */
lcx_status extend_stage_passkey(extend_job *job, int i);

/* extend_plan.c */
/* Build the plan from job->cfg; estimate times from this machine when measure and no tokens_per_s; report it. */
lcx_status extend_plan(extend_job *job, int measure);
/* Refuse passkey lengths (the last stage's eval lengths) a prompt cannot fit, before any work. */
lcx_status extend_check_passkey_fit(const extend_job *job);

/* extend_stage.c */
/* cfg with the stage's rope (lcx_rope_export into a copy of config.json). */
lcx_status extend_stage_config(const lcx_model_config *in, const lcx_plan_stage *ps, lcx_model_config *out);
/* Stage i: build its model, load weights (and optimizer/position when continuing it), train, evaluate. */
lcx_status extend_stage_run(extend_job *job, int i, int first);
/* A stage's perplexities: reported, appended to metrics.jsonl, RUN/eval/stageN.json, RUN/eval/ppl.svg redrawn. */
lcx_status extend_record_stage_eval(extend_job *job, int stage, int64_t seq_len, const lcx_ppl_config *pc,
                                    const lcx_ppl_result *res);

#endif
