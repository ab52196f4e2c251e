#!/usr/bin/env bash
# Context-parallel training benchmark: `lcextend train --cp C` under mpirun for C = 2 and 4 against the same step in
# one process (C = 1, no mpirun), same model (bench/llama10m.json, random init via --config, float32), the same
# random token ids (--ids), one sequence of SEQ tokens per step (batch 1), STEPS steps, no checkpoints kept.
# Threads: ranks x OMP_NUM_THREADS = CORES where it can be (C = 1: CORES threads; C = 2 on 2 cores: 1 thread per
# rank; C = 4 on 2 cores: 1 thread per rank, i.e. 2 ranks per core, oversubscribed). OMP_WAIT_POLICY=passive.
# From rank 0's metrics.jsonl, steps 2..N (step 1 is warm-up): median step `time`, `tokens_per_s`, `comm_s` (the
# step's collectives: target count, loss gather, gradient sum) and `compute_s` (`time` - `comm_s`; it includes the
# ring attention's K/V transfers, posted before the compute they overlap; their waits are `ring_wait_s`), the
# ratios against C = 1, and each rank's peak RSS (/usr/bin/time -f %M, max over ranks). Prints a markdown table.
# Ring overlap: `ring_wait_s` (the part of compute_s blocked in the ring's waits, src/model/model_ring.c) against
# the same ring messages with nothing to overlap: bench_ring_transfer (bench/bench_ring_transfer.c) posts each of
# the step's ring exchanges (same schedule, sizes, ranks and threads) and waits for it at once, rank 0's median
# step. hidden share = 1 - ring_wait_s / blocking time, clamped to [0, 1] (0 when the waits take at least as long
# as the bare transfer, e.g. a rank waiting for a slower or descheduled peer).
# usage: [SEQ=2048] [STEPS=5] [CPS="1 2 4"] [CORES=$(nproc)] bench/cp_train.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
SEQ=${SEQ:-2048}
STEPS=${STEPS:-5}
CPS=${CPS:-"1 2 4"}
CORES=${CORES:-$(nproc)}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
BIN=$(cd "$BUILD" && pwd)/lcextend
RING=$(cd "$BUILD" && pwd)/bench/bench_ring_transfer
CFG="$HERE/llama10m.json"
MPIEXEC=${MPIEXEC:-$(command -v mpirun || true)}
[ -x "$BIN" ] && [ -x "$RING" ] || { echo "missing $BIN or $RING (build first)"; exit 1; }
[ -x /usr/bin/time ] && TIMECMD=/usr/bin/time || TIMECMD=env  # env: no RSS column
export OMP_WAIT_POLICY=passive OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# each rank runs under /usr/bin/time, its peak RSS (KiB) to PREFIX.RANK
if [ "$TIMECMD" = env ]; then wrap='exec "$@"'; else wrap='exec /usr/bin/time -f %M -o "$0.${OMPI_COMM_WORLD_RANK:-0}" "$@"'; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# random ids below the vocabulary (8192), enough for every step's sequence + 1
random_ids $(( (STEPS + 2) * (SEQ + 1) )) 8192 "$out/ids.txt"

# ring bytes each rank sends per step (docs/plan.md "Ring traffic", float32 activations a = 4, one sequence, TP 1):
# layers x [(C - 1) x 2 nkv d b a + (C - 1) x 2 nkv d b (a + 4) + 2 nkv d b 4], b = SEQ / C; 0 at C = 1
jnum() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$CFG"; }
ring_mib() { awk -v c="$1" -v s="$SEQ" -v l="$(jnum num_hidden_layers)" -v k="$(jnum num_key_value_heads)" \
    -v d="$(jnum head_dim)" 'BEGIN { b = s / c; a = 4; x = 0
    if (c > 1) x = l * ((c - 1) * 2 * k * d * b * a + (c - 1) * 2 * k * d * b * (a + 4) + 2 * k * d * b * 4)
    printf "%.1f", x / 1048576 }'; }
# field FILE KEY: the KEY of steps 2..N
field() { grep '"step"' "$1" | sed -n "2,\$s/.*\"$2\": \([^,}]*\).*/\1/p"; }

echo "machine: $CORES cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model $(basename "$CFG"), seq $SEQ, batch 1, $STEPS steps (medians of steps 2..$STEPS), OMP_WAIT_POLICY=passive"
for C in $CPS; do
    thr=$(( CORES / C )); [ "$thr" -ge 1 ] || thr=1
    run="$out/cp$C"
    args=(train --config "$CFG" --ids "$out/ids.txt" --seq "$SEQ" --steps "$STEPS" --keep 0 --out "$run" --quiet)
    if [ "$C" -eq 1 ]; then
        OMP_NUM_THREADS=$thr sh -c "$wrap" "$out/rss.cp1" "$BIN" "${args[@]}" >"$out/log.$C" 2>&1
    else
        [ -n "$MPIEXEC" ] || { echo "no mpirun: CP $C skipped"; continue; }
        OMP_NUM_THREADS=$thr "$MPIEXEC" --allow-run-as-root --oversubscribe -np "$C" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY \
            sh -c "$wrap" "$out/rss.cp$C" "$BIN" "${args[@]}" --cp "$C" \
            >"$out/log.$C" 2>&1 || true
    fi
    [ -s "$run/metrics.jsonl" ] || { echo "CP $C failed:"; tail -5 "$out/log.$C"; exit 1; }
    rss=$(cat "$out"/rss.cp$C.* 2>/dev/null | sort -g | tail -1)
    eval "t$C=$(field "$run/metrics.jsonl" time | median)"
    eval "tps$C=$(field "$run/metrics.jsonl" tokens_per_s | median)"
    eval "comm$C=$(field "$run/metrics.jsonl" comm_s | median)"
    eval "comp$C=$(field "$run/metrics.jsonl" compute_s | median)"
    eval "wait$C=$(field "$run/metrics.jsonl" ring_wait_s | median)"
    blk=0
    if [ "$C" -gt 1 ]; then # the same messages, nothing to overlap; rank 0's median (field 2)
        blk=$(OMP_NUM_THREADS=$thr "$MPIEXEC" --allow-run-as-root --oversubscribe -np "$C" -x OMP_NUM_THREADS \
            -x OMP_WAIT_POLICY "$RING" "$SEQ" "$(jnum num_hidden_layers)" "$(jnum num_key_value_heads)" \
            "$(jnum head_dim)" 4 | awk '$1 == "blocking_s" { print $2 }')
        [ -n "$blk" ] || { echo "bench_ring_transfer failed at CP $C"; exit 1; }
    fi
    eval "blk$C=$blk"
    eval "thr$C=$thr rss$C=${rss:-0}"
done
echo
echo "| CP | ranks x threads | step time (s) | tokens/s | comm_s (s) | compute_s (s) | comm share | tokens/s vs CP 1 | step time vs CP 1 | peak RSS per rank (MiB) | ring MiB sent per rank per step | ring_wait_s (s) | ring blocking (s) | ring hidden |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for C in $CPS; do
    v=t$C; [ -n "${!v:-}" ] || continue
    tpsv=tps$C; commv=comm$C; compv=comp$C; thrv=thr$C; rssv=rss$C; waitv=wait$C; blkv=blk$C
    awk -v c="$C" -v th="${!thrv}" -v t="${!v}" -v tps="${!tpsv}" -v cm="${!commv}" -v cp="${!compv}" -v r="${!rssv}" \
        -v rb="$(ring_mib "$C")" -v t1="${t1:-0}" -v tps1="${tps1:-0}" -v w="${!waitv}" -v bl="${!blkv}" 'BEGIN {
        h = "-"
        if (bl > 0) { x = 1 - w / bl; if (x < 0) x = 0; if (x > 1) x = 1; h = sprintf("%.0f%%", 100 * x) }
        printf "| %d | %d x %d | %.3f | %.0f | %.3f | %.3f | %.1f%% | %s | %s | %.1f | %s | %.4f | %.4f | %s |\n", c, c, th,
            t, tps, cm, cp, 100 * cm / t, (tps1 > 0 ? sprintf("%.2fx", tps / tps1) : "-"),
            (t1 > 0 ? sprintf("%.2fx", t / t1) : "-"), r / 1024, rb, w, bl, h }'
done
