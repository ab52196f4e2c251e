/* throughput: the seconds of one optimizer step a layout's plan predicts (docs/plan.md "Throughput model"). */
#include <string.h>

#include "src/plan/plan_internal.h"

double lcx_plan_step_time(const lcx_plan_opts *o, const lcx_mem_model *m, int64_t dp, int64_t seq_len,
                          int64_t seqs_per_rank, uint64_t ring_per_step, const int *counts, lcx_plan_cost *out) {
    lcx_plan_cost c;
    memset(&c, 0, sizeof c);
    double R = o->dev_flops > 0 ? o->dev_flops : 400e12;
    double B = o->link_bytes_s > 0 ? o->link_bytes_s : 150e9;
    double Bh = o->host_bytes_s > 0 ? o->host_bytes_s : 25e9;
    double L = (double)m->n_layers, tp = (double)m->tp;
    /* recompute+offload layers rerun their forward like recompute ones and move the recompute bytes */
    double n_ro = counts[LCX_ACT_RECOMPUTE_OFFLOAD];
    double n_rec = counts[LCX_ACT_RECOMPUTE] + n_ro, n_off = counts[LCX_ACT_OFFLOAD];
    double tokens = (double)seqs_per_rank * (double)seq_len / (double)m->cp; /* per device per step */
    double layer_mm = (lcx_matmul_params(m) - (double)m->vocab * (double)m->hidden) / L;
    /* model FLOPs + the recomputed layers' extra forward (matmuls only: the attention is not rerun), over TP */
    c.compute = tokens * (lcx_flops_per_token(m, seq_len) + 2.0 * layer_mm * n_rec) / tp / R;
    /* two all-reduces of [tokens x H] per layer forward, two backward, two more per recomputed layer (ring), and
     * with distributed saved activations an all-gather of the input (half an all-reduce) per recomputed layer */
    double gathers = distributes(m) ? 0.5 * n_rec : 0;
    /* sequence parallelism: the reduce-scatters and all-gathers move what the all-reduces did, and the backward
     * all-gathers each norm's output again (two all-gathers a layer: one all-reduce) */
    if (seq_parallel(m)) gathers += L;
    if (m->tp > 1)
        c.tp = (4 * L + 2 * n_rec + gathers) * 2.0 * (tp - 1) / tp * tokens * (double)m->hidden * m->act_bytes / B;
    c.cp = (double)ring_per_step / B;
    double G = (double)(m->cp * dp); /* the gradient group: every rank holding the same shard */
    /* a reduce-scatter and an all-gather of fp32 gradients; ZeRO-1 all-gathers the stored weights instead */
    double gather_bytes = m->zero_shards > 1 ? m->weight_bytes : 4;
    if (G > 1) c.grad = (G - 1) / G * (double)m->n_params / tp * (4 + gather_bytes) / B;
    /* offload: each layer's kept activations go to the host and back; only what a layer's compute cannot hide */
    double xfer = 2.0 * tokens * lcx_mem_layer_keep(m) / Bh, layer_s = c.compute / L;
    if (xfer > layer_s) c.offload = n_off * (xfer - layer_s);
    double xfer_ro = 2.0 * tokens * lcx_mem_layer_recompute(m) / Bh;
    if (xfer_ro > layer_s) c.offload += n_ro * (xfer_ro - layer_s);
    c.total = c.compute + c.tp + c.cp + c.grad + c.offload;
    if (out) *out = c;
    return c.total;
}
