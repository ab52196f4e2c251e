#!/usr/bin/env python3
"""Hugging Face peer of bench/longest_context.sh (issue 15, item 5): the longest sequence one full training step of
transformers' LlamaForCausalLM reaches within a memory budget, with gradient checkpointing on (the transformers
user's way to long contexts) or off. Random weights and tokens, batch 1, SDPA attention, the step = forward with
labels (HF's loss over the whole [seq, vocab] logits), backward, clip_grad_norm_(1.0), AdamW.

Each length runs in a fresh subprocess, so one length's peak (or out-of-memory death) does not touch the next:
  cpu:  peak = the child's ru_maxrss (whole process: interpreter, torch, model, step), fits when <= budget;
  cuda: peak = torch.cuda.max_memory_allocated() (the allocator's high-water mark, the same quantity as our
        device allocator's), fits when the step finishes without OutOfMemoryError and the peak <= budget.
Search: START doubling until a length fails or MAX is reached, then bisection to a multiple of GRAIN, the same
search as bench/longest_context.sh. The baseline is the child's peak after its imports, before the model is
built (cpu: interpreter + torch + transformers, ~750 MiB of RSS; cuda: 0). With --over-baseline a length fits
when peak - baseline <= budget: on the CPU the weights, gradients, AdamW state and activations count, torch's
libraries do not (bench/longest_context.sh measures ours the same way: prediction + our 8 MiB baseline).

usage: longest_context_hf.py CONFIG.json [--device cpu|cuda] [--dtype f32|bf16] [--budget-mib N]
                             [--over-baseline] [--start 512] [--max 16384] [--grain 256] [--threads 1]
                             [--no-checkpointing]
prints one line per trial and then
  longest SEQ tokens  peak P MiB  baseline B MiB  (hf, checkpointing on|off, device, dtype)
Reference and benchmark script only: the toolkit never needs Python."""
import argparse
import json
import resource
import subprocess
import sys
import time


def one_step(args):
    """Child: build the model and run one step at args.seq; print a JSON line {ok, peak_mib, baseline_mib, secs}."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    def peak():
        if dev.type == "cuda":
            return torch.cuda.max_memory_allocated(dev) / 2**20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    dev = torch.device(args.device)
    baseline = peak()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    cfg = LlamaConfig.from_json_file(args.config)
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).to(device=dev, dtype=dtype).train()
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (1, args.seq), generator=torch.Generator().manual_seed(1)).to(dev)
    t0 = time.perf_counter()
    ok = True
    try:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
    except torch.cuda.OutOfMemoryError:
        ok = False
    print(json.dumps({"ok": ok, "peak_mib": peak(), "baseline_mib": baseline, "secs": time.perf_counter() - t0}),
          flush=True)


def trial(args, seq):
    """Parent: one length in a child process; (fits, peak MiB, baseline MiB, seconds)."""
    cmd = [sys.executable, __file__, args.config, "--one", str(seq), "--device", args.device, "--dtype", args.dtype,
           "--threads", str(args.threads)] + ([] if args.checkpointing else ["--no-checkpointing"])
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:  # killed (host out of memory) or crashed
        err = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        print(f"seq {seq:7d}  failed: {err}", flush=True)
        return False, 0.0, 0.0, 0.0
    r = json.loads(lines[-1])
    used = r["peak_mib"] - (r["baseline_mib"] if args.over_baseline else 0.0)
    fits = r["ok"] and (args.budget_mib <= 0 or used <= args.budget_mib)
    print(f"seq {seq:7d}  {'fits' if fits else 'over'}  peak {r['peak_mib']:.1f} MiB  baseline "
          f"{r['baseline_mib']:.1f} MiB  step {r['secs']:.1f} s{'' if r['ok'] else '  (out of memory)'}", flush=True)
    return fits, r["peak_mib"], r["baseline_mib"], r["secs"]


def search(args):
    best, best_r = 0, None
    seq = args.start
    while True:
        fits, *r = trial(args, seq)
        if not fits:
            lo, hi = best, seq
            break
        best, best_r = seq, r
        if seq >= args.max:
            lo = hi = seq
            break
        seq = min(seq * 2, args.max)
    while hi - lo > args.grain:
        mid = (lo + hi) // 2 // args.grain * args.grain
        if mid <= lo:
            break
        fits, *r = trial(args, mid)
        if fits:
            lo, best, best_r = mid, mid, r
        else:
            hi = mid
    mode = "on" if args.checkpointing else "off"
    if best_r is None:
        print(f"longest 0 tokens (nothing from {args.start} fits)  (hf, checkpointing {mode}, {args.device}, "
              f"{args.dtype})")
    else:
        print(f"longest {best} tokens  peak {best_r[0]:.1f} MiB  baseline {best_r[1]:.1f} MiB  step {best_r[2]:.1f} s  "
              f"(hf, checkpointing {mode}, {args.device}, {args.dtype})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--budget-mib", type=float, default=0.0, help="0: whatever the device holds")
    ap.add_argument("--over-baseline", action="store_true", help="count the peak above the child's baseline")
    ap.add_argument("--start", type=int, default=512)
    ap.add_argument("--max", type=int, default=16384)
    ap.add_argument("--grain", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-checkpointing", dest="checkpointing", action="store_false")
    ap.add_argument("--one", dest="seq", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.seq is not None:
        one_step(args)
    else:
        search(args)


if __name__ == "__main__":
    main()
