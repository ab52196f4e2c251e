#!/usr/bin/env bash
# Rebuild the embedded tiny model (recipes/tiny/model) and its held-out data (recipes/tiny/data) from scratch:
#   1. the King James Bible from Debian's bible-kjv-text, one document per book; held out: Proverbs, Luke, Romans
#   2. train.jsonl (books + 4000 synthetic passkey documents) and a byte-level BPE tokenizer.json (vocab 2048)
#      with Hugging Face `tokenizers` (the only Python step; everything after it is lcextend); a second corpus
#      with 12000 passkey documents for phase 2, tokenized with the same tokenizer
#   3. lcextend tokenize the splits
#   4. lcextend train from random init (config.json) at sequence length 256, then a second cosine cycle on the
#      passkey-heavier corpus
#   5. lcextend export the final checkpoint as a bf16 HF directory, in two safetensors shards < 2 MB
# usage: recipes/tiny/make_tiny.sh [WORKDIR]   (env LCEXTEND: the binary, default build/lcextend;
#        STEPS, STEPS2: optimizer steps of the two phases, default 3000 and 1500). Writes recipes/tiny/model and
#        recipes/tiny/data (replacing them).
# Numbers of the committed build are in recipes/tiny/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
lcx=${LCEXTEND:-build/lcextend}
steps=${STEPS:-3000}
steps2=${STEPS2:-1500}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$work"

"$here/split_kjv.sh" "$work/kjv"
python3 "$here/make_corpus.py" "$work/kjv" "$work/corpus" 2048 4000
python3 "$here/make_corpus.py" "$work/kjv" "$work/corpus2" 2048 12000 "$work/corpus/tokenizer.json"
for c in corpus/train corpus/heldout corpus2/train; do
    "$lcx" tokenize --tokenizer "$work/corpus/tokenizer.json" --input "$work/$c.jsonl" \
        --output "$work/$c" --eos '<|end_of_text|>' --threads 2
done

rm -rf "$work/run"
time "$lcx" train --config "$here/config.json" --data "$work/corpus/train" --seq 256 --batch 4 --steps "$steps" \
    --lr 2e-3 --min-lr 1e-4 --warmup 50 --wd 0.1 --seed 1611 --save-every 500 \
    --tokenizer "$work/corpus/tokenizer.json" --out "$work/run"

# Phase 2: a second cosine cycle from the phase-1 weights (fresh AdamW) on a corpus with three times the passkey
# documents (the retrieval task had not been learned; it still is not: recipes/tiny/README.md).
rm -rf "$work/run2"
time "$lcx" train "$work/run/checkpoints/$(cat "$work/run/checkpoints/latest")" --data "$work/corpus2/train" \
    --seq 256 --batch 4 --steps "$steps2" --lr 1e-3 --min-lr 1e-4 --warmup 20 --wd 0.1 --seed 1612 \
    --save-every 500 --tokenizer "$work/corpus/tokenizer.json" --out "$work/run2"

ckpt="$work/run2/checkpoints/$(cat "$work/run2/checkpoints/latest")"
rm -rf "$work/model"
"$lcx" export "$ckpt" --format hf --out "$work/model" --dtype bf16 --shard-size 1900KB --quiet
printf '{\n  "bos_token_id": 0,\n  "eos_token_id": 1,\n  "do_sample": false\n}\n' >"$work/model/generation_config.json"

rm -rf "$here/model" "$here/data"
mkdir -p "$here/data"
cp -r "$work/model" "$here/model"
cp "$work/corpus/heldout.bin" "$work/corpus/heldout.idx" "$here/data/"
# the loss curve of both phases, one line per step (phase, step, loss, lr, grad_norm: small enough to bundle)
cat "$work/run/metrics.jsonl" "$work/run2/metrics.jsonl" | python3 -c '
import json, sys
phase, last = 1, 0
for line in sys.stdin:
    m = json.loads(line)
    if "loss" not in m:
        continue
    if m["step"] < last:
        phase += 1
    last = m["step"]
    print(json.dumps({"phase": phase, "step": m["step"], "loss": round(m["loss"], 4), "lr": float("%.4g" % m["lr"]),
                      "grad_norm": round(m["grad_norm"], 3)}))' >"$here/data/train_metrics.jsonl"
du -ab "$here/model" "$here/data"
