#!/usr/bin/env python3
"""PyTorch peer of `lcextend train-steps` for bench/train_step.sh: the same Llama config (config.json), random
weights, random token ids, one full training step per iteration = forward with labels (HF shift, mean loss),
backward, clip_grad_norm_(1.0), torch.optim.AdamW (norms/biases without decay), zero_grad. float32 on CPU.

usage: train_step_torch.py CONFIG.json SEQ STEPS THREADS
Prints one line per step (tokens/s) and a final 'mean tokens/s X (steps 2..N)  max peak_rss Y MiB' line in the
same format as lcextend train-steps (peak RSS = ru_maxrss of this process; tokens/cpu-s = tokens over the
process CPU time of the step, all threads)."""
import resource
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    cfg_path, seq, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    cfg = LlamaConfig.from_json_file(cfg_path)
    model = LlamaForCausalLM(cfg).float().train()
    named = list(model.named_parameters())
    opt = torch.optim.AdamW([{"params": [p for _, p in named if p.ndim >= 2], "weight_decay": 0.01},
                             {"params": [p for _, p in named if p.ndim < 2], "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    tps, ctps = [], []
    for s in range(steps):
        ids = torch.randint(0, cfg.vocab_size, (1, seq), generator=g)
        t0, c0 = time.perf_counter(), time.process_time()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(f"step {s + 1}/{steps}  loss {out.loss.item():.6f}  grad_norm {gn.item():.4f}  time {dt:.3f} s  "
              f"cpu {dc:.3f} s  tokens/s {seq / dt:.1f}  peak_rss {rss:.1f} MiB", flush=True)
        if s > 0 or steps == 1:
            tps.append(seq / dt)
            ctps.append(seq / dc)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"mean tokens/s {sum(tps) / len(tps):.1f} (steps 2..N)  max peak_rss {rss:.1f} MiB  "
          f"tokens/cpu-s {sum(ctps) / len(ctps):.1f}  attn {model.config._attn_implementation}")


if __name__ == "__main__":
    main()
