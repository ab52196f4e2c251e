#!/usr/bin/env python3
"""Attention forward + backward on one GPU: PyTorch SDPA (flash backend, cuDNN backend) against lcextend's CUDA
op (bench_attention, built beside this script), on the shapes of issue 14: one sequence, causal, bf16,
head_dim 64 and 128, GQA, 4k-64k tokens.

usage: bench_attention.py [--lcx BUILD/bench/bench_attention] [--seqs 4096,8192,...] [--reps 10] [--scalar-too]
                          [--bwd-modes] [--bwd-keys64] [--fwd-rows64]

Per shape and implementation: the median over reps (after one warm-up) of the forward and of the backward in ms,
and TFLOP/s of the usual count (causal forward 2 seq^2 heads head_dim, backward 2.5 times that), one line each:
  impl SEQ HEADS KV_HEADS HEAD_DIM fwd_ms F bwd_ms B fwd_tflops X bwd_tflops Y
SDPA gets GQA natively (enable_gqa, torch >= 2.5) where the backend takes it; otherwise K/V are repeated to the
query heads before the timed region (said on the line as 'kv repeated'). A backend that refuses a shape prints
'unsupported' with torch's reason. Record the output in docs/benchmarks.md with the date, device and command."""
import argparse
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# (heads, kv_heads, head_dim): Llama-3.2-1B (32/8, 64), Llama-3.1-8B (32/8, 128), an MHA head_dim 128 shape
SHAPES = [(32, 8, 64), (32, 8, 128), (16, 16, 128)]


def flops(seq, heads, hd):
    return 2.0 * seq * seq * heads * hd  # causal: half of 4 seq^2 heads head_dim


def median_ms(fn, reps):
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    rest = sorted(times[1:])
    return rest[len(rest) // 2]


def sdpa(backend, name, seq, heads, kvh, hd, reps):
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.rand(1, heads, seq, hd, device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1
    k = torch.rand(1, kvh, seq, hd, device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1
    v = torch.rand(1, kvh, seq, hd, device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1
    note = ""
    with sdpa_kernel([backend]):
        try:
            kw = {"enable_gqa": True} if kvh != heads else {}
            qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
            F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, **kw).sum().backward()
        except (RuntimeError, TypeError):
            kw, note = {}, " kv repeated"
            k = k.repeat_interleave(heads // kvh, dim=1)
            v = v.repeat_interleave(heads // kvh, dim=1)
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        try:
            out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, **kw)
        except RuntimeError as e:
            print(f"{name} {seq} {heads} {kvh} {hd} unsupported: {str(e).splitlines()[0]}")
            return
        dout = torch.rand_like(out) * 2 - 1
        fwd = median_ms(lambda: F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, **kw), reps)
        bwd = median_ms(lambda: out.backward(dout, retain_graph=True), reps)
    f = flops(seq, heads, hd)
    print(f"{name} {seq} {heads} {kvh} {hd} fwd_ms {fwd:.3f} bwd_ms {bwd:.3f} fwd_tflops {f / fwd * 1e-9:.2f} "
          f"bwd_tflops {2.5 * f / bwd * 1e-9:.2f}{note}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lcx", help="path of bench_attention (lcextend's op); omitted: SDPA only")
    ap.add_argument("--seqs", default="4096,8192,16384,32768,65536")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--scalar-too", action="store_true",
                    help="also time lcextend's scalar kernels (LCX_CUDA_ATTN_SCALAR=1), printed as lcx_scalar")
    ap.add_argument("--bwd-modes", action="store_true",
                    help="also time lcextend's tensor-core backward in its other modes: P and dS as one bf16 term "
                         "(LCX_CUDA_ATTN_BWD_BF16=1, FlashAttention 2's precision) as lcx_bf16bwd, dQ fused into the "
                         "dK/dV pass (LCX_CUDA_ATTN_BWD_FUSED=1) as lcx_fused, both as lcx_bf16fused")
    ap.add_argument("--bwd-keys64", action="store_true",
                    help="also time lcextend's tensor-core backward with dK/dV blocks of 64 keys "
                         "(LCX_CUDA_ATTN_BWD_KEYS64=1, 4 warps) as lcx_keys64, against the default 128 (8 warps), "
                         "and both fused with P and dS in bf16 as lcx_bf16fused_keys64")
    ap.add_argument("--fwd-rows64", action="store_true",
                    help="also time lcextend's tensor-core forward in 64-row query blocks (LCX_CUDA_ATTN_FWD_ROWS64=1, "
                         "one 16-row tile per warp) as lcx_rows64, against the default 128 (two per warp)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_attention.py: no CUDA device", file=sys.stderr)
        return 77
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} cudnn {torch.backends.cudnn.version()}")
    for seq in (int(s) for s in args.seqs.split(",")):
        for heads, kvh, hd in SHAPES:
            sdpa(SDPBackend.FLASH_ATTENTION, "sdpa_flash", seq, heads, kvh, hd, args.reps)
            sdpa(SDPBackend.CUDNN_ATTENTION, "sdpa_cudnn", seq, heads, kvh, hd, args.reps)
            torch.cuda.empty_cache()
            # (label, the switches set to 1: LCX_CUDA_ATTN_<name>; every other one is 0)
            variants = [("lcx", ())]
            if args.bwd_modes:
                variants += [("lcx_bf16bwd", ("BWD_BF16",)), ("lcx_fused", ("BWD_FUSED",)),
                             ("lcx_bf16fused", ("BWD_BF16", "BWD_FUSED"))]
            if args.bwd_keys64:
                variants += [("lcx_keys64", ("BWD_KEYS64",)),
                             ("lcx_bf16fused_keys64", ("BWD_BF16", "BWD_FUSED", "BWD_KEYS64"))]
            if args.fwd_rows64:
                variants.append(("lcx_rows64", ("FWD_ROWS64",)))
            if args.scalar_too:
                variants.append(("lcx_scalar", ("SCALAR",)))
            for label, on in variants if args.lcx else ():
                env = dict(os.environ, **{f"LCX_CUDA_ATTN_{n}": "1" if n in on else "0"
                                          for n in ("SCALAR", "BWD_BF16", "BWD_FUSED", "BWD_KEYS64", "FWD_ROWS64")})
                r = subprocess.run([args.lcx, str(seq), str(heads), str(kvh), str(hd), str(args.reps)],
                                   capture_output=True, text=True, env=env)
                line = r.stdout.strip() if r.returncode == 0 else f"failed ({r.returncode}): {r.stderr.strip()}"
                print(f"{label} {line.removeprefix('attention ')}" if r.returncode == 0 else
                      f"{label} {seq} {heads} {kvh} {hd} {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
