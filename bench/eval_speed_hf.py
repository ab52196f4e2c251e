#!/usr/bin/env python3
"""transformers peer of `lcextend eval --stride 0` for bench/eval_speed.sh: perplexity of an HF directory on a
text file with non-overlapping windows of L tokens (no BOS added: the tokenizer's own template), float32 on the
CPU, SDPA attention, torch.no_grad. Tokens come from AutoTokenizer on the same text (tests/fixtures/
check_hf_tokenizer.py shows they equal lcextend's for an lcextend export). The last, shorter window is scored
too, as lcextend scores it (its --short only concerns documents shorter than one window).

usage: eval_speed_hf.py DIR TEXT L THREADS
Prints 'ppl X tokens N seconds S tokens/s R peak_rss M MiB' (tokens = tokens scored; seconds = the passes only,
not the load; peak RSS = ru_maxrss of this process)."""
import math
import resource
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    d, text, L, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(d)
    with open(text, encoding="utf-8") as f:
        ids = tok(f.read())["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="sdpa").eval()
    nll, n = 0.0, 0
    t0 = time.perf_counter()
    with torch.no_grad():
        for b in range(0, len(ids), L):
            w = ids[b:b + L]
            if len(w) < 2:
                break
            x = torch.tensor([w])
            loss = model(input_ids=x, labels=x).loss.item()  # mean over the len(w) - 1 predicted tokens
            nll += loss * (len(w) - 1)
            n += len(w) - 1
    s = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"ppl {math.exp(nll / n):.4f} tokens {n} seconds {s:.2f} tokens/s {n / s:.1f} peak_rss {rss:.0f} MiB")


if __name__ == "__main__":
    main()
