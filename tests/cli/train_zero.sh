# ZeRO-1 under mpirun (docs/parallel.md "Data parallelism"): lcextend train --zero1 on 2 ranks gives the same loss
# curve, gradient norms and exported weights, bit for bit, as without it (also with bf16 weights, whose fp32 master
# it shards); its checkpoints hold one data file per rank; the step-2 checkpoint of the --zero1 run resumes in one
# process (the same global batch) and continues the loss curve within 1e-5; the main command with --zero1 equals
# the main command without it, and with --gpus 2 it is the plan's choice. Skips (77) without mpirun.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MPIEXEC:-}" ] && [ -x "$MPIEXEC" ] || { echo "skip: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
check_shows_err=1
model="$LCX_SRC/tests/fixtures/models/llama_gqa"
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }

mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 4 --lr 1e-2 --clip 0.3 --out "$tmp/plain" --quiet --export-hf "$tmp/plain-hf"
check "--dp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 4 --lr 1e-2 --clip 0.3 --out "$tmp/z" --quiet --zero1 \
    --save-every 2 --keep 0 --export-hf "$tmp/z-hf"
check "--dp 2 --zero1 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "4 metrics lines" [ "$(grep -c '"step"' "$tmp/z/metrics.jsonl")" -eq 4 ]
check "--zero1: the same losses" same "$(field "$tmp/z/metrics.jsonl" loss)" "$(field "$tmp/plain/metrics.jsonl" loss)"
check "--zero1: the same gradient norms" \
    same "$(field "$tmp/z/metrics.jsonl" grad_norm)" "$(field "$tmp/plain/metrics.jsonl" grad_norm)"
check "--zero1: the same exported weights" cmp -s "$tmp/z-hf/model.safetensors" "$tmp/plain-hf/model.safetensors"
ck="$tmp/z/checkpoints/s01-step000002"
[ -f "$ck/data-0.bin" ] && [ -f "$ck/data-1.bin" ] || failed "--zero1: one data file per rank"
check "--zero1: the step-4 checkpoint is latest" [ "$(cat "$tmp/z/checkpoints/latest")" = "s01-step000004" ]

# bf16 weights: ZeRO-1 shards the fp32 master too (each rank writes its rows of it); the same bits, and the export
# (from the checkpoint's master pieces of both ranks) byte-equal
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 4 --lr 1e-2 --clip 0.3 --out "$tmp/p16" --quiet \
    --dtype bf16 --export-hf "$tmp/p16-hf"
check "--dtype bf16 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 4 --lr 1e-2 --clip 0.3 --out "$tmp/z16" --quiet \
    --dtype bf16 --zero1 --export-hf "$tmp/z16-hf"
check "--dtype bf16 --zero1 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
[ -s "$tmp/z16/metrics.jsonl" ] && \
    same "$(field "$tmp/z16/metrics.jsonl" loss)" "$(field "$tmp/p16/metrics.jsonl" loss)" ||
    failed "bf16 --zero1: the same losses"
check "bf16 --zero1: the same exported weights" cmp -s "$tmp/z16-hf/model.safetensors" "$tmp/p16-hf/model.safetensors"
run inspect "$tmp/z16/checkpoints/s01-step000004"
check "bf16 --zero1: the checkpoint holds the whole master" grep -q "master .* 34976 elements" "$tmp/out"

# resume the step-2 checkpoint in one process with the same global batch (2 sequences per step)
mkdir -p "$tmp/r/checkpoints" && cp -r "$ck" "$tmp/r/checkpoints/" && echo s01-step000002 >"$tmp/r/checkpoints/latest"
head -n 2 "$tmp/z/metrics.jsonl" >"$tmp/r/metrics.jsonl"
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 4 --lr 1e-2 --clip 0.3 --batch 2 --out "$tmp/r" --quiet --resume
check "resume in one process ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
paste <(field "$tmp/z/metrics.jsonl" loss | sed -n 3,4p) <(field "$tmp/r/metrics.jsonl" loss | sed -n 3,4p) >"$tmp/losses"
check "2 continued losses each" [ "$(awk 'NF == 2' "$tmp/losses" | wc -l)" -eq 2 ]
# float32: one process sums the two sequences' gradients inside its GEMMs, the ranks after them: 1e-5 relative
while read -r a b; do check "continued loss $b (one process) vs $a (2 ranks, ZeRO-1), 1e-5" close "$b" "$a" 1e-5; done <"$tmp/losses"

# the main command with --zero1
recipe "$tmp/even.yaml" even-test 512 64 128 256
mpi 2 "$model" --to 256 --recipe "$tmp/even.yaml" --ids "$tmp/ids.txt" --out "$tmp/e1" --quiet --dp 2
check "extend --dp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 2 "$model" --to 256 --recipe "$tmp/even.yaml" --ids "$tmp/ids.txt" --out "$tmp/e2" --quiet --dp 2 --zero1
check "extend --dp 2 --zero1 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "extend --zero1: 4 step lines" [ "$(grep -c '"step"' "$tmp/e2/metrics.jsonl")" -eq 4 ]
check "extend --zero1: the same losses" same "$(field "$tmp/e2/metrics.jsonl" loss)" "$(field "$tmp/e1/metrics.jsonl" loss)"
check "extend --zero1: the same exported weights" cmp -s "$tmp/e2/hf/model.safetensors" "$tmp/e1/hf/model.safetensors"

# the main command's layout search (--gpus 2): DP 2 and ZeRO-1 chosen, and the run follows the plan
mpi 2 "$model" --to 256 --recipe "$tmp/even.yaml" --ids "$tmp/ids.txt" --out "$tmp/e3" --quiet --gpus 2 \
    --gpu-memory 1G
check "extend --gpus 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "extend --gpus 2: the plan chose DP 2 with ZeRO-1" grep -q "^layout:  TP 1 x CP 1 x DP 2, .*, ZeRO-1;" "$tmp/out"
check "extend --gpus 2: both stages shard the moments" [ "$(grep -c "^stage [12]/2: .*ZeRO-1 over 2 ranks" "$tmp/out")" -eq 2 ]
mpi 2 "$model" --to 256 --recipe "$tmp/even.yaml" --ids "$tmp/ids.txt" --out "$tmp/e4" --quiet --gpus 2 \
    --gpu-memory 1G --no-zero1
# (the search line lists "ZeRO-1 off" among what it tried)
[ "$(rc)" -eq 0 ] && grep -q "^layout:  TP 1 x CP 1 x DP 2, " "$tmp/out" && lacks "^layout: .*ZeRO-1" "$tmp/out" &&
    lacks "^stage .*ZeRO-1 over" "$tmp/out" || failed "extend --gpus 2 --no-zero1: not sharded"
[ -s "$tmp/e3/metrics.jsonl" ] && \
    same "$(field "$tmp/e3/metrics.jsonl" loss)" "$(field "$tmp/e4/metrics.jsonl" loss)" ||
    failed "extend --gpus 2: the same losses as --no-zero1"
check "extend --gpus 2: the same exported weights as --no-zero1" \
    cmp -s "$tmp/e3/hf/model.safetensors" "$tmp/e4/hf/model.safetensors"
mpi 2 "$model" --to 256 --recipe "$tmp/even.yaml" --ids "$tmp/ids.txt" --out "$tmp/e5" --zero1 --no-zero1
[ "$(rc)" -eq 2 ] && grep -q "give one" "$tmp/err" || failed "extend --zero1 --no-zero1: exit 2, one line"

[ $fail -eq 0 ] && echo "train_zero: all checks passed"
exit $fail
