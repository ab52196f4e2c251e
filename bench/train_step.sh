#!/usr/bin/env bash
# Training-step benchmark: lcextend train-steps vs PyTorch + transformers on CPU, same ~10M-parameter Llama
# (bench/llama10m.json: 8 layers, hidden 256, 8 heads / 4 kv heads of 32, intermediate 688, vocab 8192, untied;
# 10.0M parameters), random weights and random tokens, batch 1, float32, one full step = forward, backward,
# chunked/HF loss, clip_grad_norm_(1.0), AdamW. Same thread count for both (OMP_NUM_THREADS, torch.set_num_threads,
# OpenBLAS follows OMP_NUM_THREADS) and the same OMP_WAIT_POLICY (passive by default: on a shared machine spinning
# OpenMP threads starve OpenBLAS's and torch's workers; set WAIT=active to compare the other way).
# Contenders alternate in every round; each reports the mean tokens/s of steps 2..N (wall clock, and over the
# process CPU time of the step: less sensitive to other jobs on a shared machine) and its peak RSS; the script
# prints the medians over rounds.
# usage: [ROUNDS=3] [STEPS=3] [THREADS=2] [SEQS="512 2048"] bench/train_step.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-3}
THREADS=${THREADS:-2}
SEQS=${SEQS:-"512 2048"}
WAIT=${WAIT:-passive}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
BIN="$BUILD/lcextend"
CFG="$HERE/llama10m.json"
[ -x "$BIN" ] || { echo "missing $BIN (build first)"; exit 1; }
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=$WAIT
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

field() { awk -v k="$2" '/^mean tokens\/s/ { for (i = 1; i <= NF; i++) if ($i == k) print $(i + 1) }' "$1"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "threads $THREADS, OMP_WAIT_POLICY=$WAIT, rounds $ROUNDS, steps $STEPS (mean of steps 2..N)"
for S in $SEQS; do
    for r in $(seq "$ROUNDS"); do
        "$BIN" train-steps --config "$CFG" --seq "$S" --steps "$STEPS" --policy keep >"$out/keep.$S.$r"
        "$BIN" train-steps --config "$CFG" --seq "$S" --steps "$STEPS" --policy recompute >"$out/rec.$S.$r"
        python3 "$HERE/train_step_torch.py" "$CFG" "$S" "$STEPS" "$THREADS" >"$out/torch.$S.$r" 2>/dev/null
    done
    for c in keep rec torch; do
        tps=$(for r in $(seq "$ROUNDS"); do field "$out/$c.$S.$r" tokens/s; done | median)
        rss=$(for r in $(seq "$ROUNDS"); do awk '/^mean tokens\/s/ { for (i = 1; i <= NF; i++) if ($i == "peak_rss") print $(i + 1) }' "$out/$c.$S.$r"; done | median)
        cpu=$(for r in $(seq "$ROUNDS"); do field "$out/$c.$S.$r" tokens/cpu-s; done | median)
        eval "cpu_$c=$cpu"
        all=$(for r in $(seq "$ROUNDS"); do field "$out/$c.$S.$r" tokens/s; done | tr '\n' ' ')
        eval "tps_$c=$tps"
        printf "seq %5s  %-22s tokens/s %8.1f (rounds: %s)  tokens/cpu-s %8.1f  peak RSS %7.1f MiB\n" "$S" \
            "$(case $c in keep) echo "lcextend keep";; rec) echo "lcextend recompute";; torch) echo "torch+transformers";; esac)" \
            "$tps" "$all" "$cpu" "$rss"
    done
    awk -v a="$tps_keep" -v b="$tps_torch" -v c="$tps_rec" -v s="$S" -v ca="$cpu_keep" -v cb="$cpu_torch" \
        -v cc="$cpu_rec" 'BEGIN { printf "seq %5s  ratio lcextend/torch, wall: keep %.2fx, recompute %.2fx; per CPU-second: keep %.2fx, recompute %.2fx\n", s, a / b, c / b, ca / cb, cc / cb }'
done
