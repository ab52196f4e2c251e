#!/usr/bin/env bash
# Issue 16 on a GPU in one command: SmolLM2-135M (8k) to 32k with the full recipe, and the evaluation that checks it.
#   usage: bench/smollm2_gpu.sh RESULTS [DEADLINE_S=560]
# Runs from the repository root on the GPU machine. The model and its data do not fit one device call (the tool
# carries 64 MiB; the GGUF alone is 94 MiB), so they come over first in parts, on the same warm machine:
#   here:   recipes/smollm2/get.sh build/smollm2
#           recipes/smollm2/make_data.sh build/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf build/smollm2/data
#           (cd build/smollm2 && ../../bench/carry.sh pack 20,44 SmolLM2-135M-Instruct.Q4_1.gguf data/train.bin \
#               data/train.idx data/heldout-kjv.txt data/heldout-lic.txt)      # parts at the root: .carry1..3
#   device: one call per part, back to back, each carrying its .carryN (the first with .gpu-debs too); the last
#           one runs this script, which joins the parts into .smollm2/ (bench/carry.sh unpack).
# Steps, each under a time limit, most valuable first; a later call with the machine still warm resumes where the
# last one stopped (the zero-shot sweep skips what it finished, the extension runs with --resume):
#   1. build lcextend for this card (bench/gpu_lib.sh);
#   2. the zero-shot table on the GPU: recipes/smollm2/compare_methods.sh with BACKEND=cuda (every method at 8k,
#      16k, 32k: perplexity on the held-out documents, passkey by log-likelihood), in .smollm2/zeroshot;
#   3. the extension: lcextend GGUF --to 32k --recipe smollm2-8k-32k --backend cuda (bf16 weights with fp32 master
#      weights, bf16 activations), evaluated before and after on
#      the held-out KJV (perplexity, passkey 4 trials x 5 depths, greedy; the passkey also after stage 1, at 8k
#      and 16k: --stage-passkey), exported to HF and GGUF;
#   4. the extended model under the zero-shot protocol (the same documents, lengths and passkey cells as step 2),
#      so base and extended are in one table: .smollm2/zeroshot/extended-*.json;
#   5. the multi-key passkey (4 named keys in the common-licenses texts, eval --needles --haystack) for every
#      zero-shot method and the extended model, last as the least needed.
# RESULTS gets summary.txt, logs.tgz and results.tgz (the JSON, text tables and pictures). Not a test.
set -uo pipefail
RESULTS=${1:?usage: $0 RESULTS [DEADLINE_S]}
DEADLINE=${2:-560}
B=build-gpu
S=.smollm2
G=$S/SmolLM2-135M-Instruct.Q4_1.gguf
# shellcheck source=bench/gpu_lib.sh
source bench/gpu_lib.sh
finish() {
    tar czf "$RESULTS/results.tgz" --exclude='*.lcx' --exclude='*.safetensors' --exclude='*.gguf' \
        --exclude='*.bin' -C "$S" zeroshot run 2>/dev/null
    pack
}
if [ ! -f "$G" ]; then
    step unpack 60 "bench/carry.sh unpack $S" || { summary "no model: stop"; finish; exit 1; }
fi
gpu_build $B lcextend || { summary "build failed: stop"; finish; exit 1; }
export OMP_NUM_THREADS=8
mkdir -p $S/zeroshot
[ -d $S/zeroshot/data ] || cp -r $S/data $S/zeroshot/data
step zeroshot 240 "BACKEND=cuda TRIALS=4 NEEDLES=0 recipes/smollm2/compare_methods.sh $G $S/zeroshot $B"
resume=""
[ -d $S/run ] && resume=--resume
step extend 300 "$B/lcextend $G --to 32k --recipe smollm2-8k-32k --data $S/data/train \
    --eval-data $S/zeroshot/heldout --passkey 4 --stage-passkey --backend cuda --dtype bf16 --activations bf16 \
    --gguf --out $S/run $resume"
if [ -d $S/run/hf ]; then
    step extended_ppl 60 "$B/lcextend eval $S/run/hf --backend cuda --data $S/zeroshot/heldout \
        --lengths 8192,16384,32768 --truncate --series extended --json $S/zeroshot/extended-ppl.json \
        --quiet > $S/zeroshot/extended-ppl.txt"
    step extended_passkey 90 "$B/lcextend eval $S/run/hf --backend cuda --passkey 4 \
        --passkey-lengths 8192,16384,32768 --depths 0,0.5,1 --mode loglik --series extended \
        --json $S/zeroshot/extended-passkey.json --passkey-svg $S/zeroshot/extended-passkey.svg \
        --quiet > $S/zeroshot/extended-passkey.txt"
fi
step zeroshot_needles 120 "BACKEND=cuda TRIALS=4 NEEDLES=4 recipes/smollm2/compare_methods.sh $G $S/zeroshot $B"
if [ -d $S/run/hf ]; then
    step extended_needles 60 "$B/lcextend eval $S/run/hf --backend cuda --passkey 4 \
        --passkey-lengths 8192,16384,32768 --depths 0,0.5,1 --mode loglik --needles 4 \
        --haystack $S/zeroshot/data/heldout-lic.txt --series extended --json $S/zeroshot/extended-needles.json \
        --passkey-svg $S/zeroshot/extended-needles.svg --quiet > $S/zeroshot/extended-needles.txt"
fi
summary "total $(( $(date +%s) - T0 )) s"
finish
