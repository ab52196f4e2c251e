#!/usr/bin/env python3
"""Tokenization throughput: `lcextend tokenize` vs Hugging Face `tokenizers` (encode_batch), same run, same threads.

    python3 bench/bench_tokenize.py --lcextend BUILD/lcextend [--threads 2] [--mb 50] [--repeat 3]

Builds a >= 50 MB JSON-lines corpus (deterministic: the mixed-document generator of tests/fixtures/gen_tokenizer.py
over the KJV text, prose/code/CJK/emoji/digits/whitespace, ~20% of documents with invalid UTF-8), then for each
fixture tokenizer (bytelevel.json = Llama-3-style byte-level BPE, spm.json = Llama-2-style):
  - ours: the whole CLI run (read + JSON parse + tokenize + EOS + write .bin/.idx), wall clock;
  - HF:   tokenizer.encode_batch(texts) only (texts already parsed into memory), RAYON_NUM_THREADS = threads.
Best of --repeat runs each. Also checks that both produce the same ids for every document.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))


def corpus(path, mb):
    if os.path.exists(path) and os.path.getsize(path) >= mb * 1_000_000:
        return
    import gen_tokenizer as g

    docs = g.make_docs(2024, g.kjv_text(), mb * 1_000_000 * 1.02)
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d.decode("utf-8", errors="replace")}, ensure_ascii=False) + "\n")


def hf_run(tok_path, texts, threads, repeat):
    code = f"""
import json, os, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file({tok_path!r})
texts = [json.loads(l)["text"] for l in open({texts!r}, encoding="utf-8")]
best = 1e9
for _ in range({repeat}):
    t0 = time.perf_counter(); enc = tok.encode_batch(texts, add_special_tokens=True); best = min(best, time.perf_counter() - t0)
eos = tok.token_to_id("<|end_of_text|>") if tok.token_to_id("<|end_of_text|>") is not None else tok.token_to_id("</s>")
import array
a = array.array("H")
for e in enc:
    a.extend(e.ids); a.append(eos)
sys.stdout.buffer.write(json.dumps({{"s": best}}).encode() + b"\\n")
open({texts!r} + ".hf.u16", "wb").write(a.tobytes())
"""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True).stdout
    return json.loads(out.decode().splitlines()[-1])["s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lcextend", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    a = ap.parse_args()
    path = os.path.join(a.workdir, f"lcx_bench_tokenize_{a.mb}mb.jsonl")
    corpus(path, a.mb)
    size = os.path.getsize(path)
    import tokenizers

    print(f"corpus: {path}, {size / 1e6:.1f} MB; threads {a.threads}; tokenizers {tokenizers.__version__}")
    for name in ["bytelevel", "spm"]:
        tok = os.path.join(ROOT, "tests", "fixtures", "tokenizer", name + ".json")
        prefix = os.path.join(a.workdir, "lcx_bench_" + name)
        ours = 1e9
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            subprocess.run([a.lcextend, "tokenize", "--tokenizer", tok, "--input", path, "--output", prefix,
                            "--threads", str(a.threads), "--quiet", "--dtype", "uint16"], check=True)
            ours = min(ours, time.perf_counter() - t0)
        hf = hf_run(tok, path, a.threads, a.repeat)
        same = open(prefix + ".bin", "rb").read() == open(path + ".hf.u16", "rb").read()
        print(f"{name:10s} ours {size / 1e6 / ours:7.2f} MB/s ({ours:.2f} s)   HF {size / 1e6 / hf:7.2f} MB/s "
              f"({hf:.2f} s)   ratio {hf / ours:.2f}x   identical ids: {same}")


if __name__ == "__main__":
    main()
