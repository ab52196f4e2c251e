#!/usr/bin/env bash
# Distributed saved activations (docs/parallel.md): `lcextend train --tp T --policy recompute` under mpirun with
# and without --distribute-saved-activations, same model (bench/llama10m.json, random init via --config, float32),
# the same random token ids, one sequence of SEQ tokens per step, STEPS steps. Per TP size: rank 0's median step
# time and tp_comm_s over steps 2..N (step 1 is warm-up), the largest peak RSS of the ranks (/usr/bin/time -f %M),
# whether the losses are the same text, and the peak RSS saved against the memory model's saving
# (docs/plan.md "Memory": L layers x T x a x H x (1 - 1/TP) of stored input less one shared T x a x H). One OpenMP
# thread per rank (OMP_WAIT_POLICY=passive). Prints a markdown table; exit 1 when the losses differ or a run fails.
# BACKEND=cuda runs the ranks on the machine's GPU (the staged communicator: docs/parallel.md "Device buffers"),
# where the RSS columns are host memory only. Without /usr/bin/time the RSS columns are empty. CFG: another
# config.json (its heads divisible by the TP sizes).
# MODE=sp compares --sequence-parallel instead (docs/parallel.md "Sequence parallelism"), with POLICY (keep or
# recompute, default keep): the first loss the same text, the others within 1e-5 relative (the norms' gradients
# are summed in another order); the model's saving is docs/plan.md's: (1 - 1/TP) of the layers' H-wide rows (keep:
# input, both norm outputs, residual and the rstd; recompute: the input, and the scratch's three of them), of the
# last output, the final norm's and the backward's dres and dxn, less three whole [T, H] buffers.
# usage: [BACKEND=cpu|cuda] [MODE=distribute|sp] [POLICY=keep|recompute] [SEQ=8192] [STEPS=3] [TPS="2 4"]
#        [CFG=bench/llama10m.json] bench/tp_distribute.sh BUILD
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
SEQ=${SEQ:-8192}
STEPS=${STEPS:-3}
TPS=${TPS:-"2 4"}
BACKEND=${BACKEND:-cpu}
MODE=${MODE:-distribute}
case $MODE in
distribute) POLICY=recompute flag=--distribute-saved-activations ;;
sp) POLICY=${POLICY:-keep} flag=--sequence-parallel ;;
*) echo "tp_distribute.sh: MODE is distribute or sp, not $MODE"; exit 1 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
BIN=$(cd "$BUILD" && pwd)/lcextend
[ -x "$BIN" ] || { echo "tp_distribute.sh: needs $BIN"; exit 1; }
bench_cfg
mpi_setup tp_distribute.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
random_ids $(( (STEPS + 2) * (SEQ + 1) )) "$VOCAB" "$out/ids.txt"
# run NAME TP [FLAGS...]: the run directory $out/NAME, each rank's peak RSS (KiB) in $out/NAME.rss.RANK
run() {
    local name=$1 tp=$2
    shift 2
    "$MPIEXEC" --oversubscribe -np "$tp" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY bash -c "$wrap" "$out/$name" \
        "$BIN" train --config "$CFG" --ids "$out/ids.txt" --seq "$SEQ" --steps "$STEPS" --out "$out/$name" \
        --tp "$tp" --policy "$POLICY" --backend "$BACKEND" --quiet "$@" >/dev/null
}
H=$(sed -n 's/.*"hidden_size": *\([0-9]*\).*/\1/p' "$CFG")
L=$(sed -n 's/.*"num_hidden_layers": *\([0-9]*\).*/\1/p' "$CFG")
echo "| TP | $flag | step time | tp_comm_s | peak RSS per rank | saved (measured) | saved (model) | losses |"
echo "|---|---|---|---|---|---|---|---|"
bad=0
for tp in $TPS; do
    run "w$tp" "$tp"
    run "d$tp" "$tp" "$flag"
    if [ "$MODE" = distribute ]; then
        lw=$(json_field "$out/w$tp/metrics.jsonl" loss) ld=$(json_field "$out/d$tp/metrics.jsonl" loss)
        same=$([ -n "$lw" ] && [ "$lw" = "$ld" ] && echo same || echo DIFFERENT)
    else
        same=$(paste <(json_field "$out/w$tp/metrics.jsonl" loss) <(json_field "$out/d$tp/metrics.jsonl" loss) |
            awk -v n="$STEPS" 'NR == 1 && $1 != $2 { bad = 1 }
                { d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > m) m = d; if (d > 1e-5) bad = 1 }
                END { if (NR != n || bad) print "DIFFERENT"; else if (m == 0) print "the same text"
                      else printf "first the same, the rest %.1g apart\n", m }')
    fi
    [ "$same" != DIFFERENT ] || bad=1
    rw=$(cat "$out/w$tp".rss.* 2>/dev/null | sort -n | tail -1) rd=$(cat "$out/d$tp".rss.* 2>/dev/null | sort -n | tail -1)
    rw=${rw:-0} rd=${rd:-0}
    model=$(awk -v L="$L" -v T="$SEQ" -v H="$H" -v tp="$tp" -v mode="$MODE" -v pol="$POLICY" 'BEGIN { s = 1 - 1 / tp
        if (mode == "distribute") b = L * T * 4 * H * s - T * 4 * H
        else {
            b = pol == "keep" ? L * T * (16 * H + 8) * s : L * T * 4 * H * s + T * (12 * H + 8) * s
            b += T * (8 * H + 4) * s + T * 8 * H * s - 3 * T * 4 * H
        }
        printf "%.1f", b / 1048576 }')
    mib() { [ "$rw" -gt 0 ] && awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }' || echo -; }
    for k in w d; do
        t=$(json_field "$out/$k$tp/metrics.jsonl" time | tail -n +2 | median)
        c=$(json_field "$out/$k$tp/metrics.jsonl" tp_comm_s | tail -n +2 | median)
        if [ $k = w ]; then
            printf '| %s | no | %.3f s | %.3f s | %s | | | |\n' "$tp" "$t" "$c" "$(mib "$rw")"
        else
            printf '| %s | yes | %.3f s | %.3f s | %s | %s | %s MiB | %s |\n' "$tp" "$t" "$c" "$(mib "$rd")" \
                "$(mib $((rw - rd)))" "$model" "$same"
        fi
    done
done
exit "$bad"
