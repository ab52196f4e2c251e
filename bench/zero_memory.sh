#!/usr/bin/env bash
# ZeRO-1 (docs/parallel.md "Data parallelism"): `lcextend train --dp D` under mpirun with and without --zero1, same
# model (bench/llama10m.json, random init via --config, DTYPE weights), the same random token ids, one sequence of
# SEQ tokens per rank and step, STEPS steps. Per DP size: rank 0's median step time and comm_s over steps 2..N (step
# 1 is warm-up), rank 0's peak RSS over the training steps (metrics.jsonl "peak_rss" of the last step: before the
# final checkpoint, whose writer holds host copies of what it saves), whether the losses are the same text (they
# must be: ZeRO-1 gives the same bits), and the peak RSS saved against the memory model's saving (docs/plan.md
# "Memory": the moments, and with bf16 weights the fp32 master, (1 - 1/D) of 8 or 12 bytes a parameter, less the
# exchange scratch of 2 x 4 x min(2^22, P) bytes, plus the unsharded sum's scratch, 4 (D + 1) ceil(min(P, 2^20) / D)
# bytes, which ZeRO-1 does not need). One OpenMP thread per rank (OMP_WAIT_POLICY=passive). Prints a
# markdown table; exit 1 when the losses differ, a ZeRO-1 run does not shard or a run fails. BACKEND=cuda runs the
# ranks on the machine's GPU (the staged communicator, or NCCL with a GPU each): the exchanges move device buffers,
# and the RSS columns are host memory only.
# usage: [BACKEND=cpu|cuda] [DTYPE=bf16|f32] [SEQ=512] [STEPS=4] [DPS="2 4"] [CFG=bench/llama10m.json]
#        bench/zero_memory.sh BUILD
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
SEQ=${SEQ:-512}
STEPS=${STEPS:-4}
DPS=${DPS:-"2 4"}
DTYPE=${DTYPE:-bf16}
BACKEND=${BACKEND:-cpu}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
BIN=$(cd "$BUILD" && pwd)/lcextend
[ -x "$BIN" ] || { echo "zero_memory.sh: needs $BIN"; exit 1; }
bench_cfg
mpi_setup zero_memory.sh
out=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$out"' EXIT; [ -n "${KEEP:-}" ] && echo "kept: $out" >&2
max_dp=0
for d in $DPS; do [ "$d" -gt "$max_dp" ] && max_dp=$d; done
random_ids $(( (STEPS + 2) * max_dp * (SEQ + 1) )) "$VOCAB" "$out/ids.txt"
# run NAME D [FLAGS...]: the run directory $out/NAME; its output (the header names the parameter count) in
# $out/NAME.txt
run() {
    local name=$1 d=$2
    shift 2
    "$MPIEXEC" --oversubscribe -np "$d" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY \
        "$BIN" train --config "$CFG" --ids "$out/ids.txt" --seq "$SEQ" --steps "$STEPS" --out "$out/$name" \
        --dp "$d" --dtype "$DTYPE" --backend "$BACKEND" --quiet "$@" >"$out/$name.txt"
}
peak_mib() { json_field "$out/$1/metrics.jsonl" peak_rss | tail -1 | awk '{ printf "%.1f", $1 / 1048576 }'; }
steps_median() { json_field "$out/$1/metrics.jsonl" "$2" | tail -n +2 | median; }
echo "| DP | --zero1 | step time | comm_s | peak RSS, rank 0 | saved (measured) | saved (model) | losses |"
echo "|---|---|---|---|---|---|---|---|"
bad=0
for d in $DPS; do
    run "w$d" "$d"
    run "z$d" "$d" --zero1
    grep -q "ZeRO-1 over $d ranks" "$out/z$d.txt" || { echo "zero_memory.sh: DP $d: the run did not shard"; bad=1; }
    P=$(grep -o '[0-9]* parameters' "$out/w$d.txt" | head -1 | grep -o '[0-9]*')
    bytes=$([ "$DTYPE" = bf16 ] && echo 12 || echo 8)
    model=$(awk -v p="$P" -v d="$d" -v b="$bytes" 'BEGIN { c = 4194304; if (p < c) c = p
        k = 1048576; if (p < k) k = p; g = int((k + d - 1) / d)
        printf "%.1f", (b * p * (1 - 1 / d) - 2 * 4 * c + 4 * (d + 1) * g) / 1048576 }')
    same=same
    lw=$(json_field "$out/w$d/metrics.jsonl" loss) # not two runs without losses
    [ -n "$lw" ] && [ "$lw" = "$(json_field "$out/z$d/metrics.jsonl" loss)" ] || { same=DIFFER; bad=1; }
    rw=$(peak_mib "w$d") rz=$(peak_mib "z$d")
    saved=$(awk -v a="$rw" -v b="$rz" 'BEGIN { printf "%.1f MiB", a - b }')
    for k in w z; do
        echo "| $d | $([ $k = z ] && echo on || echo off) | $(steps_median "$k$d" time) s |" \
            "$(steps_median "$k$d" comm_s) s | $(peak_mib "$k$d") MiB | $([ $k = z ] && echo "$saved") |" \
            "$([ $k = z ] && echo "$model MiB") | $same |"
    done
done
exit $bad
