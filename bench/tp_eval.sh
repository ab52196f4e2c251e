#!/usr/bin/env bash
# Tensor- and context-parallel evaluation (docs/evaluation-protocol.md "Tensor-parallel evaluation",
# "Context-parallel evaluation") on a backend: `lcextend eval --tp T --cp C` under mpirun (T x C ranks) on BACKEND
# (cuda: every rank on the machine's one GPU, the staged communicator, docs/parallel.md "Device buffers") against
# one process on the CPU backend, on the bundled tiny
# model (6 query heads on 2 KV heads, tied embeddings) and its held-out KJV documents: the perplexity at each
# length within 1e-5 relative and the same passkey table (greedy and loglik, every cell). Per run the wall time
# and the largest peak RSS of the ranks (host memory; /usr/bin/time -f %M, empty without it). Prints one line per
# check and a summary line; exit 1 when a run fails or a check does not hold.
# usage: [BACKEND=cpu|cuda] [TP=2] [CP=1] [LENGTHS=128,256] [PK_LENGTHS=256] bench/tp_eval.sh BUILD
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
BACKEND=${BACKEND:-cpu}
TP=${TP:-2}
CP=${CP:-1}
LENGTHS=${LENGTHS:-128,256}
PK_LENGTHS=${PK_LENGTHS:-256}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(cd "$BUILD" && pwd)/lcextend
[ -x "$BIN" ] || { echo "tp_eval.sh: needs $BIN"; exit 1; }
. "$ROOT/bench/bench_lib.sh"
mpi_setup tp_eval.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=(eval "$ROOT/recipes/tiny/model" --data "$ROOT/recipes/tiny/data/heldout" --lengths "$LENGTHS" --stride 0
      --passkey 1 --passkey-lengths "$PK_LENGTHS" --depths 0,0.5,1 --mode both --quiet)
# run NAME NP [FLAGS...]: stdout in $out/NAME.txt, each rank's peak RSS (KiB) in $out/NAME.rss.RANK
run() {
    local name=$1 np=$2 t0
    shift 2
    t0=$(date +%s.%N)
    "$MPIEXEC" --oversubscribe -np "$np" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY bash -c "$wrap" "$out/$name" \
        "$BIN" "${args[@]}" "$@" >"$out/$name.txt"
    echo "$name: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, peak RSS" \
        "$(cat "$out/$name".rss.* 2>/dev/null | sort -n | tail -1) KiB"
}
run one 1 --backend cpu
run tp "$((TP * CP))" --backend "$BACKEND" --tp "$TP" --cp "$CP"
fail=0
check() { if "${@:2}"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
same() { [ -n "$1" ] && [ "$1" = "$2" ]; } # not two runs that both printed nothing
rows() { awk '/^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+$/ { print $1, $2, $5 }' "$1"; }
check "the same lengths and tokens" same "$(rows "$out/one.txt" | cut -d' ' -f1,2)" "$(rows "$out/tp.txt" | cut -d' ' -f1,2)"
while read -r len _ a _ _ b; do
    check "length $len: perplexity $b vs one CPU process's $a (1e-5)" \
        awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }'
done < <(paste -d' ' <(rows "$out/one.txt") <(rows "$out/tp.txt"))
pk() { sed -n '/^passkey retrieval of/,$p' "$1" | sed 's/, in [0-9.]* s$//'; }
check "the same passkey table" same "$(pk "$out/one.txt")" "$(pk "$out/tp.txt")"
verdict=$([ $fail = 0 ] && echo all checks passed || echo FAILED)
echo "tp_eval.sh: --tp $TP --cp $CP on $BACKEND against one CPU process: $verdict"
exit $fail
