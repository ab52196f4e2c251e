/* What a training step asks of the host, counted on a table of the CPU kernels whose every wait for a queue
 * (copy_d2h, sync, event_sync) and every allocation (alloc, host_alloc) is counted. On a GPU each wait stops the
 * host from queueing ahead and each allocation (cudaMalloc, cudaMallocHost) synchronises the device, so a step
 * whose count grows with the layers or the micro-batches would leave the GPU idle between kernels. For models of
 * 2 and 6 layers, 1 and 3 micro-batches, under keep, recompute, offload and recompute+offload, f32 and bf16:
 *   - after the first step, a step allocates nothing;
 *   - a step waits for the queue the same number of times whatever the layers and micro-batches, and that number
 *     is small (at most MAX_WAITS: the step's results, read once, the queue's end after AdamW, and with offload one
 *     more wait at the step's end, for the marks that time the fetches, lcx_offload_wait_collect).
 * Reference: the counts of the smallest model (2 layers, 1 micro-batch) under the same policy. */
#include <omp.h>
#include <string.h>

#include "formats/hf_config.h"
#include "kernels/backend.h"
#include "src/model/model.h"
#include "test_util.h"

static size_t n_waits, n_allocs;
#define CPU (lcx_backend_cpu())
static lcx_status c_sync(lcx_exec *x) { return n_waits++, CPU->sync(x); }
static lcx_status c_event_sync(lcx_event *e) { return n_waits++, CPU->event_sync(e); }
static lcx_status c_copy_d2h(lcx_exec *x, void *d, const void *s, size_t b) {
    return n_waits++, CPU->copy_d2h(x, d, s, b);
}
static lcx_status c_alloc(size_t b, void **out) { return n_allocs++, CPU->alloc(b, out); }
static lcx_status c_host_alloc(size_t b, void **out) { return n_allocs++, CPU->host_alloc(b, out); }

/* The CPU table with the waits and allocations counted. */
static const lcx_backend *counting_backend(void) {
    static lcx_backend t;
    if (!t.name) {
        t = *CPU;
        t.name = "cpu-counted";
        t.sync = c_sync, t.event_sync = c_event_sync, t.copy_d2h = c_copy_d2h;
        t.alloc = c_alloc, t.host_alloc = c_host_alloc;
    }
    return &t;
}

enum { MAX_WAITS = 4, STEPS = 3, SEQ = 16 };

typedef struct counts {
    size_t waits, allocs;
} counts;

/* Steps 2..STEPS of a fresh model (layers, micro-batches, policy, activation dtype): the most waits and allocations
 * of any of them. Returns 0 if the model could not run. */
static int run(int layers, int n_micro, lcx_act_policy pol, lcx_dtype adt, counts *out) {
    lcx_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    CHECK_OK(lcx_config_load(LCX_SOURCE_DIR "/tests/fixtures/models/llama_gqa/config.json", &cfg));
    cfg.num_hidden_layers = layers;
    lcx_model_opts o = {.training = 1, .max_tokens = SEQ, .loss_chunk = 5, .policy = pol, .act_dtype = adt,
                        .backend = counting_backend()};
    lcx_model *m = NULL;
    int ok = 0;
    CHECK_OK(lcx_model_init(&m, &cfg, &o));
    if (m) CHECK_OK(lcx_model_init_random(m, 7, 0.02));
    int32_t ids[3][SEQ];
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < SEQ; t++) ids[b][t] = (int32_t)((t * 37 + b * 11) % cfg.vocab_size);
    lcx_batch batch[3] = {{.n_seq = 1, .seq_len = SEQ, .ids = ids[0]},
                          {.n_seq = 1, .seq_len = SEQ, .ids = ids[1]},
                          {.n_seq = 1, .seq_len = SEQ, .ids = ids[2]}};
    lcx_adamw_opts ao = lcx_adamw_opts_default();
    memset(out, 0, sizeof *out);
    for (int s = 0; m && s < STEPS; s++) {
        const size_t w0 = n_waits, a0 = n_allocs;
        lcx_step_result r;
        lcx_status st = lcx_model_train_step(m, batch, n_micro, &ao, &r);
        CHECK_OK(st);
        if (st != LCX_OK) break;
        if (s > 0) {
            if (n_waits - w0 > out->waits) out->waits = n_waits - w0;
            if (n_allocs - a0 > out->allocs) out->allocs = n_allocs - a0;
        }
        ok = s == STEPS - 1;
    }
    lcx_model_free(m);
    lcx_config_free(&cfg);
    return ok;
}

int main(void) {
    omp_set_num_threads(1); /* the counts do not depend on threads; tiny ops on a shared core wait in barriers */
    const lcx_act_policy pols[] = {LCX_ACT_KEEP, LCX_ACT_RECOMPUTE, LCX_ACT_OFFLOAD, LCX_ACT_RECOMPUTE_OFFLOAD};
    const lcx_dtype dts[] = {LCX_F32, LCX_BF16};
    for (size_t d = 0; d < 2; d++)
        for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
            counts ref;
            if (!run(2, 1, pols[p], dts[d], &ref)) continue;
            for (int layers = 2; layers <= 6; layers += 4)
                for (int micro = 1; micro <= 3; micro += 2) {
                    counts c;
                    if (!run(layers, micro, pols[p], dts[d], &c)) continue;
                    printf("%s %s: %d layers, %d micro-batches: %zu waits, %zu allocations a step\n",
                           lcx_act_policy_name(pols[p]), lcx_dtype_name(dts[d]), layers, micro, c.waits, c.allocs);
                    CHECK_MSG(c.allocs == 0, "%s, %d layers, %d micro-batches: %zu allocations in a step",
                              lcx_act_policy_name(pols[p]), layers, micro, c.allocs);
                    CHECK_MSG(c.waits == ref.waits, "%s, %d layers, %d micro-batches: %zu waits, %zu with 2 layers "
                              "and 1 micro-batch", lcx_act_policy_name(pols[p]), layers, micro, c.waits, ref.waits);
                    CHECK_MSG(c.waits <= MAX_WAITS, "%s: %zu waits a step", lcx_act_policy_name(pols[p]), c.waits);
                }
        }
    return test_summary("test_model_host_syncs");
}
