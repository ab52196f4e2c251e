/* extend_plan: the plan of an extension run, its time estimate and the checks it allows before any work
 * (src/pipeline/extend_job.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "src/core/clock.h"
#include "src/pipeline/extend_job.h"

/* The float32 GEMM rate of the CPU backend's matmul (the path training takes: split over the OpenMP team). */
static double measure_gflops(void) {
    enum { N = 256 };
    lcx_exec *x = NULL;
    if (lcx_exec_create(lcx_backend_cpu(), &x) != LCX_OK) return 0;
    float *a = malloc(sizeof(float) * N * N * 3);
    if (!a) {
        lcx_exec_free(x);
        return 0;
    }
    for (int i = 0; i < N * N * 3; i++) a[i] = (float)((i * 7) % 13) * 0.01f;
    lcx_matmul_args g = {0};
    g.m = g.n = g.k = N, g.batch = 1, g.alpha = 1.0f, g.beta = 0.0f;
    g.a_dtype = g.b_dtype = LCX_F32, g.a = a, g.b = a + N * N, g.c = a + 2 * N * N;
    double t0 = lcx_clock_s(), t = 0;
    int reps = 0;
    do {
        if (x->be->matmul(x, &g) != LCX_OK) break; /* float32: no scratch needed */
        reps++;
        t = lcx_clock_s() - t0;
    } while (t < 0.1);
    free(a);
    lcx_exec_free(x);
    return reps > 0 ? 2.0 * N * N * N * reps / t / 1e9 : 0;
}

/* Fill the plan's times from model FLOPs at a third of the measured sgemm rate (a training step's kernels are
 * not all sgemm; docs/extend.md). */
static void estimate_times(lcx_plan *p, double gflops) {
    p->total_time_s = 0;
    for (int i = 0; i < p->n_stages; i++) {
        p->stages[i].time_s = p->stages[i].flops / (gflops * 1e9 / 3.0);
        p->total_time_s += p->stages[i].time_s;
    }
}

/* The plan as RESULT lines: lcx_plan_print renders into memory, one report per line. */
static lcx_status report_plan(const lcx_plan *p, const lcx_reporter *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    LCX_FAIL_IF(!f, LCX_ERR_OOM, "out of memory");
    lcx_plan_print(p, f);
    if (fclose(f) != 0 || !text) {
        free(text);
        return lcx_fail(LCX_ERR_OOM, "out of memory");
    }
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lcx_report(r, LCX_REPORT_RESULT, "%s", line);
        if (!nl) break;
        line = nl + 1;
    }
    free(text);
    return LCX_OK;
}

lcx_status extend_plan(extend_job *job, int measure) {
    const lcx_backend *be = job->o->backend ? job->o->backend : lcx_backend_cpu();
    const int on_cpu = be == lcx_backend_cpu();
    lcx_plan_opts po = job->o->plan;
    po.backend = on_cpu ? LCX_MEM_CPU : LCX_MEM_CUDA; /* the memory model counts the arena of the backend that runs */
    po.keep_checkpoints = job->o->keep;                /* the disk estimate's checkpoints held at once */
    LCX_TRY(lcx_plan_build(&job->cfg, job->recipe, &po, &job->plan));
    lcx_plan *p = job->plan;
    /* the measured rate is the CPU backend's: it says nothing of another backend's, which gets no estimate */
    double gf = measure && on_cpu && job->o->plan.tokens_per_s <= 0 ? measure_gflops() : 0;
    if (gf > 0) estimate_times(p, gf);
    LCX_TRY(report_plan(p, job->r));
    if (gf > 0)
        lcx_report(job->r, LCX_REPORT_RESULT,
                   "time estimate: model FLOPs at a third of this machine's sgemm rate (%.1f GFLOP/s); "
                   "--tokens-per-s X overrides", gf);
    if (!on_cpu)
        lcx_report(job->r, LCX_REPORT_RESULT, "backend: %s%s", be->name,
                   job->o->plan.tokens_per_s > 0 ? ""
                                                 : " (no time estimate: this machine's sgemm rate is the CPU's; "
                                                   "--tokens-per-s X gives one)");
    lcx_run_event(job->r, "plan",
                 json_pack("{s:I, s:i, s:s, s:f, s:s}", "target", (json_int_t)p->target, "stages", p->n_stages,
                           "recipe", p->recipe_name ? p->recipe_name : job->o->recipe, "total_tokens",
                           (double)p->total_tokens, "backend", be->name));
    return LCX_OK;
}

lcx_status extend_check_passkey_fit(const extend_job *job) {
    if (job->pk_trials <= 0 || !job->etok || !job->plan) return LCX_OK;
    const int n = job->plan->n_stages;
    for (int i = job->o->stage_passkey ? 0 : n - 1; i < n; i++) { /* --stage-passkey: every stage's lengths */
        const lcx_plan_stage *ps = &job->plan->stages[i];
        lcx_passkey_config pk = {.lengths = ps->eval_lengths, .n_lengths = ps->n_eval, .needles = job->o->needles,
                                 .haystack = job->hay, .haystack_len = job->hay_len};
        lcx_status st = lcx_eval_check_passkey(&pk, job->etok, lcx_eval_bos(job->etok, &job->cfg));
        if (st == LCX_OK) continue;
        if (i == n - 1) return lcx_fail_context(st, "the last stage's eval lengths (--passkey 0 turns the test off): ");
        return lcx_fail_context(st, "stage %d's eval lengths (--stage-passkey): ", i + 1);
    }
    return LCX_OK;
}
