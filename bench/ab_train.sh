#!/usr/bin/env bash
# A/B of two builds on one training layout: `mpirun -np NP lcextend train --config CFG --ids ... --seq SEQ --steps
# STEPS ARGS...` with BUILD_A's lcextend, then BUILD_B's, on the same random token ids (float32, random init), one
# OpenMP thread per rank. Prints per build the medians over steps 2..N of rank 0's step time, comm_s and tp_comm_s,
# the largest peak RSS of the ranks (/usr/bin/time -f %M; empty without it), and whether the two builds' losses
# are the same text. For a change that must keep the numbers (a new way to move the same sums) and should move
# less or hold less. Exit 1 when a run fails.
# usage: [NP=4] [SEQ=2048] [STEPS=4] [CFG=bench/llama10m.json] bench/ab_train.sh BUILD_A BUILD_B [ARGS...]
#   e.g. NP=4 bench/ab_train.sh /tmp/old/b build --dp 4
set -euo pipefail
A=$(cd "${1:?usage: $0 BUILD_A BUILD_B [ARGS...]}" && pwd)
B=$(cd "${2:?usage: $0 BUILD_A BUILD_B [ARGS...]}" && pwd)
shift 2
NP=${NP:-4}
SEQ=${SEQ:-2048}
STEPS=${STEPS:-4}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
[ -x "$A/lcextend" ] && [ -x "$B/lcextend" ] || { echo "ab_train.sh: needs two lcextend"; exit 1; }
bench_cfg
mpi_setup ab_train.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
random_ids $(( (STEPS + 2) * (SEQ + 1) * NP )) "$VOCAB" "$out/ids.txt"
echo "| build | step time | comm_s | tp_comm_s | peak RSS per rank |"
echo "|---|---|---|---|---|"
for k in A B; do
    bin=$A/lcextend
    [ $k = B ] && bin=$B/lcextend
    "$MPIEXEC" --oversubscribe -np "$NP" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY bash -c "$wrap" "$out/$k" \
        "$bin" train --config "$CFG" --ids "$out/ids.txt" --seq "$SEQ" --steps "$STEPS" --out "$out/$k" --quiet \
        "$@" >/dev/null
    rss=$(cat "$out/$k".rss.* 2>/dev/null | sort -n | tail -1)
    printf '| %s | %.3f s | %.4f s | %.4f s | %s |\n' "$k" \
        "$(json_field "$out/$k/metrics.jsonl" time | tail -n +2 | median)" \
        "$(json_field "$out/$k/metrics.jsonl" comm_s | tail -n +2 | median)" \
        "$(json_field "$out/$k/metrics.jsonl" tp_comm_s | tail -n +2 | median)" \
        "$([ -n "$rss" ] && awk -v k="$rss" 'BEGIN { printf "%.1f MiB", k / 1024 }' || echo -)"
done
la=$(json_field "$out/A/metrics.jsonl" loss) lb=$(json_field "$out/B/metrics.jsonl" loss)
[ -n "$la" ] && [ "$la" = "$lb" ] && echo "losses: the same text" || echo "losses: DIFFERENT"
