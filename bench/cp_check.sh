#!/usr/bin/env bash
# Context parallelism on one device equals one rank: `lcextend train --cp C` under mpirun (C ranks sharing the
# machine's device: on a GPU the staged communicator, docs/parallel.md "Device buffers") against the same run in
# one process, same model (bench/llama10m.json, random init), ids, float32. Each step's loss and gradient norm
# (metrics.jsonl) must be within TOL (relative) of C = 1's: the ring sums attention in another order, nothing else
# differs. Prints one line per C and step; exit 1 on a difference above TOL or a failed run.
# usage: [BACKEND=cpu|cuda] [SEQ=1024] [STEPS=3] [CPS="2 4"] [TOL=1e-4] [CFG=bench/llama10m.json] \
#            bench/cp_check.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
BACKEND=${BACKEND:-cpu} SEQ=${SEQ:-1024} STEPS=${STEPS:-3} CPS=${CPS:-"2 4"} TOL=${TOL:-1e-4}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
BIN=$(cd "$BUILD" && pwd)/lcextend
[ -x "$BIN" ] || { echo "cp_check.sh: no $BIN (build first)" >&2; exit 1; }
bench_cfg
mpi_setup cp_check.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
random_ids $(( (STEPS + 2) * (SEQ + 1) )) "$VOCAB" "$out/ids.txt"
args=(train --config "$CFG" --ids "$out/ids.txt" --seq "$SEQ" --steps "$STEPS" --keep 0 --quiet
      --backend "$BACKEND")
# steps FILE: "step loss grad_norm" per step
steps() { grep '"step"' "$1" | sed -n 's/.*"step": *\([0-9]*\).*"loss": *\([^,}]*\).*"grad_norm": *\([^,}]*\).*/\1 \2 \3/p'; }
"$BIN" "${args[@]}" --out "$out/cp1" >"$out/log.1" 2>&1 || { tail -3 "$out/log.1"; exit 1; }
steps "$out/cp1/metrics.jsonl" >"$out/ref"
[ "$(wc -l <"$out/ref")" -eq "$STEPS" ] || { echo "cp_check.sh: CP 1 wrote no step metrics"; exit 1; }
bad=0
for C in $CPS; do
    "$MPIEXEC" --allow-run-as-root --oversubscribe -np "$C" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY \
        "$BIN" "${args[@]}" --cp "$C" --out "$out/cp$C" >"$out/log.$C" 2>&1 || { tail -3 "$out/log.$C"; exit 1; }
    steps "$out/cp$C/metrics.jsonl" | paste - "$out/ref" | awk -v c="$C" -v tol="$TOL" -v be="$BACKEND" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; return m > 0 ? d / m : d }
        { el = rel($2, $5); en = rel($3, $6); n++
          printf "%s CP %d step %d: loss %.8g vs %.8g (rel %.2e), grad norm %.8g vs %.8g (rel %.2e)\n",
                 be, c, $1, $2, $5, el, $3, $6, en
          if (!(el <= tol) || !(en <= tol)) bad = 1 } # a NaN is a difference
        END { if (n == 0) { print "no steps"; exit 1 } exit bad }' || bad=1
done
[ "$bad" -eq 0 ] && echo "cp_check.sh: every CP run within $TOL of one rank" || echo "cp_check.sh: a difference above $TOL"
exit "$bad"
