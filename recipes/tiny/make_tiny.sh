#!/usr/bin/env bash
# Rebuild the embedded tiny model (recipes/tiny/model) and its held-out data (recipes/tiny/data) from scratch:
#   1. the King James Bible from Debian's bible-kjv-text, one document per book; held out: Proverbs, Luke, Romans
#   2. train.jsonl (books + 1500 synthetic passkey documents) and a byte-level BPE tokenizer.json (vocab 2048)
#      with Hugging Face `tokenizers` (the only Python step; everything after it is lcextend)
#   3. lcextend tokenize both splits
#   4. lcextend train from random init (config.json) at sequence length 256, then a second cosine cycle
#   5. lcextend export the final checkpoint as a bf16 HF directory, in two safetensors shards < 2 MB
# usage: recipes/tiny/make_tiny.sh [WORKDIR]   (env LCEXTEND: the binary, default build/lcextend;
#        STEPS, STEPS2: optimizer steps of the two phases, default 420 and 240). Writes recipes/tiny/model and recipes/tiny/data (replacing them).
# Numbers of the committed build are in recipes/tiny/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
lcx=${LCEXTEND:-build/lcextend}
steps=${STEPS:-420}
steps2=${STEPS2:-240}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$work"

"$here/split_kjv.sh" "$work/kjv"
python3 "$here/make_corpus.py" "$work/kjv" "$work/corpus" 2048
for s in train heldout; do
    "$lcx" tokenize --tokenizer "$work/corpus/tokenizer.json" --input "$work/corpus/$s.jsonl" \
        --output "$work/corpus/$s" --eos '<|end_of_text|>' --threads 2
done

rm -rf "$work/run"
time "$lcx" train --config "$here/config.json" --data "$work/corpus/train" --seq 256 --batch 4 --steps "$steps" \
    --lr 2e-3 --min-lr 2e-4 --warmup 30 --wd 0.1 --seed 1611 --save-every 100 \
    --tokenizer "$work/corpus/tokenizer.json" --out "$work/run"

# Phase 2: a second cosine cycle from the phase-1 weights (fresh AdamW), which is how the committed model was
# made (the first run's budget was set before its loss curve was known).
rm -rf "$work/run2"
time "$lcx" train "$work/run/checkpoints/$(cat "$work/run/checkpoints/latest")" --data "$work/corpus/train" \
    --seq 256 --batch 4 --steps "$steps2" --lr 1e-3 --min-lr 1e-4 --warmup 10 --wd 0.1 --seed 1612 \
    --save-every 80 --tokenizer "$work/corpus/tokenizer.json" --out "$work/run2"

ckpt="$work/run2/checkpoints/$(cat "$work/run2/checkpoints/latest")"
rm -rf "$work/model"
"$lcx" export "$ckpt" --format hf --out "$work/model" --dtype bf16 --shard-size 1900KB --quiet
printf '{\n  "bos_token_id": 0,\n  "eos_token_id": 1,\n  "do_sample": false\n}\n' >"$work/model/generation_config.json"

rm -rf "$here/model" "$here/data"
mkdir -p "$here/data"
cp -r "$work/model" "$here/model"
cp "$work/corpus/heldout.bin" "$work/corpus/heldout.idx" "$here/data/"
cat "$work/run/metrics.jsonl" "$work/run2/metrics.jsonl" >"$here/data/train_metrics.jsonl"
du -ab "$here/model" "$here/data"
