#!/usr/bin/env bash
# The longest context one full training step reaches on the CPU within a resident-memory budget, per activation
# policy, measured and as the planner's memory model predicts it (issue 15, docs/benchmarks.md).
# Model: bench/llama10m.json (10.0M parameters, fp32 weights and activations, random weights and tokens, batch 1,
# loss chunk 256). A length "trains" when `lcextend train-steps --steps 1` (forward, backward, loss, clipping,
# AdamW) exits 0 with a peak RSS (/usr/bin/time %M, the whole process) within BUDGET. Search: lengths from START
# doubling until one fails or MAX is reached, then bisection to a multiple of GRAIN.
# Prediction: train-steps prints the plan memory model's bytes for its length and policy (weights, grads, AdamW,
# activations, workspace, logits, and the offload host pool, which is ordinary memory on the CPU; `--steps 0`
# prints it without training); the process's own baseline (binary, libraries, OpenMP/BLAS buffers) is the
# measured peak minus that prediction at START. The plan's longest length is the same doubling and bisection on
# prediction + baseline <= BUDGET, with --steps 0 (no training: seconds).
# POLICIES entries are POLICY or POLICY:TILE (--mlp-tile TILE); POLICY auto is the planner's per-layer split for
# the budget (train-steps --policy auto --memory BUDGET, less the process baseline where peak RSS is measured, and
# --host-memory HOST_BUDGET MiB when given). One thread by default: other jobs share the cores.
# On a GPU (BACKEND=cuda; issue 15's "longest context on one GPU", against bench/longest_context_hf.py): the figure
# is the backend's allocator high-water mark (train-steps' last line, MEASURE=hwm, the default there) against a
# BUDGET of device memory (default: the card's), the model CFG (e.g. bench/llama1b.json) in DTYPE (bf16 weights and
# activations by default there). MEASURE=hwm on the CPU runs the same path against the CPU backend's allocations.
# usage: [BUDGET=384] (MiB) [THREADS=1] [START=512] [MAX=16384] [GRAIN=256] [POLICIES="..."]
#        [BACKEND=cpu|cuda] [MEASURE=rss|hwm] [CFG=bench/llama10m.json] [DTYPE=f32|bf16] [HOST_BUDGET=MiB]
#        bench/longest_context.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
BACKEND=${BACKEND:-cpu}
if [ "$BACKEND" = cpu ]; then MEASURE=${MEASURE:-rss} DTYPE=${DTYPE:-f32}; else MEASURE=${MEASURE:-hwm} DTYPE=${DTYPE:-bf16}; fi
if [ -z "${BUDGET:-}" ] && [ "$BACKEND" = cuda ]; then
    BUDGET=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
fi
BUDGET=${BUDGET:-384}
THREADS=${THREADS:-1}
START=${START:-512}
MAX=${MAX:-16384}
GRAIN=${GRAIN:-256}
POLICIES=${POLICIES:-"keep recompute recompute:1k offload recompute+offload recompute+offload:1k"}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN="$BUILD/lcextend"
CFG=${CFG:-$HERE/llama10m.json}
[ -x "$BIN" ] || { echo "missing $BIN (build first)"; exit 1; }
[ "$MEASURE" = hwm ] || [ -x /usr/bin/time ] || { echo "missing /usr/bin/time (GNU time)"; exit 1; }
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# step POLICY TILE S [STEPS]: one training step (STEPS 0: the prediction only); sets rss (MiB), pred (MiB, plan
# model), secs, ok (1 = within BUDGET)
step() {
    local pol=$1 tile=$2 s=$3 n=${4:-1} args=()
    [ -n "$tile" ] && args=(--mlp-tile "$tile")
    [ "$pol" = auto ] && args+=(--memory "$((BUDGET - auto_base))M" ${HOST_BUDGET:+--host-memory "${HOST_BUDGET}M"})
    ok=0 rss=0 pred=0 secs=0
    local timer=(/usr/bin/time -f "maxrss %M" -o "$out/time")
    [ "$MEASURE" = hwm ] && timer=()
    if "${timer[@]}" "$BIN" train-steps --config "$CFG" --seq "$s" --steps "$n" --policy "$pol" "${args[@]}" \
        --backend "$BACKEND" --dtype "$DTYPE" --activations "$DTYPE" >"$out/log" 2>&1; then
        if [ "$MEASURE" = hwm ]; then # the allocator's high-water mark (--steps 0: none, the prediction only)
            rss=$(awk '/^backend memory: high-water mark/ { print $5 }' "$out/log")
            rss=${rss:-0}
        else
            rss=$(awk '/^maxrss/ { printf "%.1f", $2 / 1024 }' "$out/time")
        fi
        # the plan's total; against the device's allocations, without the offload host pool (its last figure)
        pred=$(awk -v dev="$([ "$MEASURE" = hwm ] && echo 1)" '/^predicted/ { print dev ? $5 - $(NF - 1) : $5 }' \
            "$out/log")
        secs=$(awk '/^step 1\// { for (i = 1; i <= NF; i++) if ($i == "time") print $(i + 1) }' "$out/log")
        ok=$(awk -v r="$rss" -v b="$BUDGET" 'BEGIN { print (r <= b) ? 1 : 0 }')
    fi
}

# plan_fits POLICY TILE S: 0 (true) when the plan model + base fits BUDGET at S
plan_fits() {
    step "$1" "$2" "$3" 0
    awk -v p="$pred" -v base="$base" -v b="$BUDGET" 'BEGIN { exit !(p > 0 && p + base <= b) }'
}

# longest FITS POLICY TILE: doubling from START (up to MAX), then bisection to GRAIN, with FITS (a function that
# sets ok); prints "lo hi" (hi 0: MAX reached)
longest() {
    local fits=$1 lo=$START hi=0 s=$START
    while [ $((s * 2)) -le "$MAX" ]; do
        s=$((s * 2))
        if $fits "$2" "$3" "$s"; then lo=$s; else hi=$s; break; fi
    done
    while [ "$hi" -gt 0 ] && [ $((hi - lo)) -gt "$GRAIN" ]; do
        s=$(( (lo + hi) / 2 / GRAIN * GRAIN ))
        if $fits "$2" "$3" "$s"; then lo=$s; else hi=$s; fi
    done
    echo "$lo $hi"
}

# measured_fits POLICY TILE S: one real step within BUDGET; remembers the figures of the longest that fits
measured_fits() {
    step "$1" "$2" "$3"
    [ "$ok" = 1 ] || return 1
    echo "$rss $pred $secs" >"$out/best.$3"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
what="peak RSS"
[ "$MEASURE" = hwm ] && what="$BACKEND allocator high-water mark"
echo "model $(basename "$CFG"), $DTYPE, batch 1, loss chunk 256, backend $BACKEND; budget $BUDGET MiB $what; threads $THREADS; lengths $START.. (x2, then bisection to $GRAIN), at most $MAX"
col="peak RSS"
[ "$MEASURE" = hwm ] && col="alloc HWM"
# auto fits the plan model to the budget: where the whole process's RSS is measured, less its baseline (keep's at
# START); on a GPU less what the device holds outside the allocator (the CUDA context: train-steps' last line)
auto_base=0
if [[ " $POLICIES " == *" auto"* ]]; then
    if [ "$MEASURE" = rss ]; then
        step keep "" "$START"
        auto_base=$(awk -v r="$rss" -v p="$pred" 'BEGIN { printf "%d", r - p + 1 }')
    elif [ "$BACKEND" = cuda ]; then
        step keep "" "$START"
        auto_base=$(awk '/^device memory outside the allocator:/ { printf "%d", $6 + 1 }' "$out/log")
        auto_base=${auto_base:-1024}
        echo "auto: the budget less ${auto_base} MiB outside the allocator (the CUDA context)"
    fi
fi
printf "%-22s %9s %10s %10s %10s %9s %11s\n" policy longest "$col" predicted "step s" "plan says" "plan+base"
for entry in $POLICIES; do
    pol=${entry%%:*} tile=""
    [ "$entry" != "$pol" ] && tile=${entry#*:}
    step "$pol" "$tile" "$START"
    [ "$ok" = 1 ] || { printf "%-22s %9s\n" "$entry" "< $START"; continue; }
    rm -f "$out"/best.*
    base=$(awk -v r="$rss" -v p="$pred" 'BEGIN { print r - p }')
    echo "$rss $pred $secs" >"$out/best.$START"
    read -r lo hi < <(longest measured_fits "$pol" "$tile")
    read -r lo_rss lo_pred lo_secs <"$out/best.$lo"
    read -r plo phi < <(longest plan_fits "$pol" "$tile")
    says=$plo
    [ "$phi" = 0 ] && says=">= $plo"
    plan_rss=$(awk -v p="$lo_pred" -v base="$base" 'BEGIN { printf "%.1f", p + base }')
    longest=$lo
    [ "$hi" = 0 ] && longest=">= $lo"
    printf "%-22s %9s %10s %10s %10s %9s %11s\n" "$entry" "$longest" "$lo_rss" "$lo_pred" "$lo_secs" "$says" "$plan_rss"
done
echo "(longest: tokens; $col, predicted: MiB at that length, predicted = the plan model without the process"
echo " baseline; plan says: the longest length (same search) the plan model + the baseline measured at $START puts within the budget;"
echo " plan+base: the plan model + baseline at the measured longest)"
