# lcextend train under mpirun (docs/parallel.md "Data parallelism"): --dp 2 on 2 ranks gives the loss curve of one
# process with the same global batch (--batch 2: the step's two sequences in the same sample order; rank d trains on
# the d-th), one report, one metrics.jsonl; a mesh that does not match the world (--dp 3, --tp 4), an unknown
# --backend and --backend cuda without a GPU fail with one line before anything is created (--cp:
# tests/cli/train_cp.sh, --tp: tests/cli/train_tp.sh); the main command (lcextend CKPT --to N --dp 2) equals one
# process on a recipe whose batches split evenly; a rank killed mid-run ends the job, non-zero, within 60 s, naming
# the rank.
# Skips (77) without mpirun.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MPIEXEC:-}" ] && [ -x "$MPIEXEC" ] || { echo "skip: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
check_shows_err=1
model="$LCX_SRC/tests/fixtures/models/llama_gqa"
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }

# one process, 2 sequences per step, against 2 ranks of 1 sequence each
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --batch 2 --lr 1e-2 --out "$tmp/one" --quiet --export-hf "$tmp/one-hf"
check "one process ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --lr 1e-2 --out "$tmp/two" --dp 2 --export-hf "$tmp/two-hf"
check "mpirun -np 2 --dp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "one 'train:' header on stdout" [ "$(grep -c '^train:' "$tmp/out")" -eq 1 ]
check "one 'done:' line on stdout" [ "$(grep -c '^done:' "$tmp/out")" -eq 1 ]
check "one step line per step" [ "$(grep -c '^stage 1/1 step' "$tmp/out")" -eq 5 ]
check "the header says 2 ranks" grep -q "2 ranks x 1 x 1 sequences per step" "$tmp/out"
check "5 metrics lines (rank 0 only)" [ "$(grep -c '"step"' "$tmp/two/metrics.jsonl")" -eq 5 ]
check "metrics: comm_s, compute_s, ring_wait_s, tp_comm_s, offload_wait_s and alloc_hwm" \
    grep -q '"comm_s": [0-9.]*, "compute_s": [0-9.]*, "ring_wait_s": [0-9.]*, "tp_comm_s": 0.0000, "offload_wait_s": 0.0000, "tflops": [0-9.e-]*, "alloc_hwm": [1-9][0-9]*}' "$tmp/two/metrics.jsonl"
# model FLOP/s per device: the step's 2 sequences over 2 devices (tests/cli/train_throughput.sh checks the FLOPs)
check "--dp 2: tflops x time = FLOPs of one 32-token sequence a device" awk -v F="$(flops_per_token "$model" 32)" '
    /"step"/ { match($0, /"time": [0-9.]+/); t = substr($0, RSTART + 8, RLENGTH - 8) + 0
               match($0, /"tflops": [0-9.e+-]+/); f = substr($0, RSTART + 10, RLENGTH - 10) * 1e12
               want = F * 32; d = f * t - want; if (d < 0) d = -d; if (d > want * (0.002 + 0.00006 / t)) bad = 1; n++ }
    END { exit bad || n != 5 }' "$tmp/two/metrics.jsonl"
check "one process: comm_s 0" [ "$(field "$tmp/one/metrics.jsonl" comm_s | sort -u)" = "0.0000" ]
check "no CP: ring_wait_s 0" [ "$(field "$tmp/two/metrics.jsonl" ring_wait_s | sort -u)" = "0.0000" ]
check "the same tokens per step" same "$(field "$tmp/two/metrics.jsonl" tokens)" "$(field "$tmp/one/metrics.jsonl" tokens)"
# float32: the gradients are summed over the ranks instead of over one batch, so the last bits differ; 1e-5 relative
paste <(field "$tmp/one/metrics.jsonl" loss) <(field "$tmp/two/metrics.jsonl" loss) >"$tmp/losses"
check "5 losses each" [ "$(awk 'NF == 2' "$tmp/losses" | wc -l)" -eq 5 ]
while read -r a b; do check "loss $b (2 ranks) vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done <"$tmp/losses"
check "the loss moves (lr 1e-2)" [ "$(sed -n 1p "$tmp/losses" | cut -f1)" != "$(sed -n 5p "$tmp/losses" | cut -f1)" ]
[ -f "$tmp/two/checkpoints/latest" ] && [ -f "$tmp/two-hf/model.safetensors" ] || failed "checkpoint and export"
check "one checkpoint name" [ "$(ls "$tmp/two/checkpoints" | grep -c step)" -eq 1 ]

# --dp defaults to the world: the same run
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --lr 1e-2 --out "$tmp/two-default" --quiet
check "--dp defaults to the world ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--dp default: same losses as --dp 2" \
    same "$(field "$tmp/two-default/metrics.jsonl" loss)" "$(field "$tmp/two/metrics.jsonl" loss)"

# refused before any work: one lcextend line (mpirun adds its own notice), nothing created
lines() { grep -c '^lcextend' "$tmp/err"; }
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --out "$tmp/bad3" --dp 3
check "--dp 3 on 2 ranks: fails" [ "$(rc)" -ne 0 ]
check "--dp 3: one line" [ "$(lines)" -eq 1 ]
check "--dp 3: names the numbers" grep -q "dp=3 needs 3 ranks, but the world has 2" "$tmp/err"
check "--dp 3: nothing created" [ ! -e "$tmp/bad3" ]
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --out "$tmp/badp" --tp 4
check "--tp 4 on 2 ranks: fails" [ "$(rc)" -ne 0 ]
check "--tp 4 on 2 ranks: one line" [ "$(lines)" -eq 1 ]
check "--tp 4 on 2 ranks: names the world" grep -q "tp 4 x --cp 1 does not divide the world of 2 ranks" "$tmp/err"
check "--tp 4 on 2 ranks: nothing created" [ ! -e "$tmp/badp" ]
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --out "$tmp/badp" --cp 2
check "--cp 2 on one process: the mesh does not fit" grep -q "does not divide the world of 1 ranks" "$tmp/err"
check "--cp 2 on one process: one line" one_line_err
check "--cp 2 on one process: nothing created" [ ! -e "$tmp/badp" ]
mpi 2 train "$model" --ids "$tmp/nope.txt" --seq 32 --steps 5 --out "$tmp/noids"
check "a missing --ids under mpirun: fails" [ "$(rc)" -ne 0 ]
check "a missing --ids: one line" [ "$(lines)" -eq 1 ]
check "a missing --ids: nothing created" [ ! -e "$tmp/noids" ]
for b in tpu cuda; do # an unknown backend, and cuda without a GPU (or without CUDA in the build): rank 0 says it
    mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --out "$tmp/nobe" --dp 2 --backend $b
    if [ $b = cuda ] && [ "$(rc)" -eq 0 ]; then echo "note: a CUDA device is visible: --backend cuda ran"; continue; fi
    check "--backend $b under mpirun: fails" [ "$(rc)" -ne 0 ]
    check "--backend $b under mpirun: one line" [ "$(lines)" -eq 1 ]
    check "--backend $b under mpirun: names the flag" grep -q "^lcextend train: .*--backend" "$tmp/err"
    check "--backend $b under mpirun: nothing created" [ ! -e "$tmp/nobe" ]
    rm -rf "$tmp/nobe"
done

# the main command, data-parallel: a recipe whose every stage has an even number of sequences per step, so 2 ranks
# train on exactly the sequences of one process (the plan splits them: --dp changes micro_seqs, not the batch)
recipe "$tmp/even.yaml" even-test 512 "64, 128" 128 256
run "$model" --to 256 --recipe "$tmp/even.yaml" --ids "$tmp/ids.txt" --out "$tmp/e1" --quiet
check "extend, one process ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 2 "$model" --to 256 --recipe "$tmp/even.yaml" --ids "$tmp/ids.txt" --out "$tmp/e2" --quiet --dp 2
check "extend --dp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "extend --dp 2: the plan says DP 2" grep -q "TP 1 x CP 1 x DP 2" "$tmp/out"
check "extend --dp 2: one plan" [ "$(grep -c '^layout:' "$tmp/out")" -eq 1 ]
check "extend --dp 2: each stage reported once" [ "$(grep -c '^stage [12]/2 done' "$tmp/out")" -eq 2 ]
[ "$(grep -c '^exported' "$tmp/out")" -eq 1 ] && [ -f "$tmp/e2/hf/config.json" ] || failed "extend --dp 2: one export"
check "extend --dp 2: 4 step lines in metrics" [ "$(grep -c '"step"' "$tmp/e2/metrics.jsonl")" -eq 4 ]
paste <(field "$tmp/e1/metrics.jsonl" loss) <(field "$tmp/e2/metrics.jsonl" loss) >"$tmp/elosses"
check "extend: 4 losses each" [ "$(awk 'NF == 2' "$tmp/elosses" | wc -l)" -eq 4 ]
while read -r a b; do check "extend loss $b (2 ranks) vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done <"$tmp/elosses"
# a failure on rank 0 alone (its export) reaches rank 1, which would otherwise wait for it: one line, non-zero
rm -rf "$tmp/e2/hf" && echo x >"$tmp/e2/hf"
MPIEXEC_TIMEOUT=60 mpi 2 "$model" --to 256 --recipe "$tmp/even.yaml" --ids "$tmp/ids.txt" --out "$tmp/e2" --quiet --dp 2 --resume
check "rank 0's export fails: the job fails ($(rc))" [ "$(rc)" -ne 0 ]
check "rank 0's export fails: one line naming it" [ "$(grep -c '^lcextend extend: .*e2/hf: already exists' "$tmp/err")" -eq 1 ]
run "$model" --to 256 --recipe "$tmp/even.yaml" --dry-run --cp 2 --dp 4
check "extend --dry-run plans --cp 2 --dp 4 ($(head -c 300 "$tmp/err"))" grep -q "TP 1 x CP 2 x DP 4" "$tmp/out"

# kill -9 of rank 1 mid-run: mpirun ends the job, non-zero, and names the rank
( "$MPIEXEC" --allow-run-as-root --oversubscribe -np 2 "$LCEXTEND" train "$model" --ids "$tmp/ids.txt" --seq 32 \
    --steps 1000000 --out "$tmp/kill" --quiet >"$tmp/kout" 2>"$tmp/kerr"; echo $? >"$tmp/krc" ) &
job=$!
for _ in $(seq 300); do [ -s "$tmp/kill/metrics.jsonl" ] && break; sleep 0.1; done
victim=
for p in $(pgrep -P "$(pgrep -n -P $job)" 2>/dev/null; pgrep -P $job); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$p; fi
done
check "found rank 1's process" [ -n "$victim" ]
if [ -n "$victim" ]; then
    t0=$(date +%s)
    kill -9 "$victim"
    for _ in $(seq 600); do [ -s "$tmp/krc" ] && break; sleep 0.1; done
    check "the job ended within 60 s of the kill ($(($(date +%s) - t0)) s)" [ -s "$tmp/krc" ]
    check "non-zero exit ($(cat "$tmp/krc" 2>/dev/null))" [ "$(cat "$tmp/krc" 2>/dev/null || echo 0)" -ne 0 ]
    check "mpirun names rank 1 ($(grep -i rank "$tmp/kerr" | head -2))" grep -qi "rank 1" "$tmp/kerr"
fi
[ -s "$tmp/krc" ] || kill -9 $job 2>/dev/null
wait

[ $fail -eq 0 ] && echo "train_dp: all checks passed"
exit $fail
