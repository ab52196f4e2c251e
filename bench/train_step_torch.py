#!/usr/bin/env python3
"""PyTorch peer of `lcextend train-steps` for bench/train_step.sh: the same Llama config (config.json), random
weights, random token ids, one full training step per iteration = forward with labels (HF shift, mean loss),
backward, clip_grad_norm_(1.0), torch.optim.AdamW (norms/biases without decay), zero_grad. float32 on CPU.

usage: train_step_torch.py CONFIG.json SEQ STEPS THREADS [--device cuda] [--dtype bf16] [--checkpointing]
                           [--peak-tflops P]
Prints one line per step (tokens/s) and a final 'mean tokens/s X (steps 2..N)  max peak_rss Y MiB' line in the
same format as lcextend train-steps (peak RSS = ru_maxrss of this process; tokens/cpu-s = tokens over the
process CPU time of the step, all threads). On a GPU (issue 14's 1B-shaped step against transformers with SDPA
and gradient checkpointing): `--device cuda --dtype bf16 --checkpointing`, and the final line adds
peak_alloc (torch.cuda.max_memory_allocated, MiB) and, with --peak-tflops (989 for H100/H200 SXM bf16 dense),
MFU = model FLOPs per step (6 x parameters x tokens + 12 x layers x hidden x seq^2 / 2 for causal attention
forward and backward, the usual count; recomputation not counted) / step time / peak."""
import argparse
import resource
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("seq", type=int)
    ap.add_argument("steps", type=int)
    ap.add_argument("threads", type=int)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--checkpointing", action="store_true", help="gradient_checkpointing_enable()")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="device peak for MFU (0: not printed)")
    a = ap.parse_args()
    cfg_path, seq, steps, threads = a.config, a.seq, a.steps, a.threads
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    cfg = LlamaConfig.from_json_file(cfg_path)
    if a.checkpointing:
        cfg.use_cache = False
    model = LlamaForCausalLM(cfg).to(device=dev, dtype=torch.bfloat16 if a.dtype == "bf16" else torch.float32)
    model.train()
    if a.checkpointing:
        model.gradient_checkpointing_enable()
    named = list(model.named_parameters())
    n_params = sum(p.numel() for _, p in named)
    opt = torch.optim.AdamW([{"params": [p for _, p in named if p.ndim >= 2], "weight_decay": 0.01},
                             {"params": [p for _, p in named if p.ndim < 2], "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    flops = 6.0 * n_params * seq + 12.0 * cfg.num_hidden_layers * cfg.hidden_size * seq * seq / 2
    tps, ctps, mfu = [], [], []
    for s in range(steps):
        ids = torch.randint(0, cfg.vocab_size, (1, seq), generator=g).to(dev)
        if cuda:
            torch.cuda.synchronize(dev)
        t0, c0 = time.perf_counter(), time.process_time()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(dev)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(f"step {s + 1}/{steps}  loss {out.loss.item():.6f}  grad_norm {gn.item():.4f}  time {dt:.3f} s  "
              f"cpu {dc:.3f} s  tokens/s {seq / dt:.1f}  peak_rss {rss:.1f} MiB", flush=True)
        if s > 0 or steps == 1:
            tps.append(seq / dt)
            ctps.append(seq / dc)
            if a.peak_tflops > 0:
                mfu.append(flops / dt / (a.peak_tflops * 1e12))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    extra = ""
    if cuda:
        extra += f"  peak_alloc {torch.cuda.max_memory_allocated(dev) / 2**20:.1f} MiB"
    if mfu:
        extra += f"  mfu {100 * sum(mfu) / len(mfu):.1f}%"
    print(f"mean tokens/s {sum(tps) / len(tps):.1f} (steps 2..N)  max peak_rss {rss:.1f} MiB  "
          f"tokens/cpu-s {sum(ctps) / len(ctps):.1f}  attn {model.config._attn_implementation}  "
          f"checkpointing {'on' if a.checkpointing else 'off'}  params {n_params}{extra}")


if __name__ == "__main__":
    main()
