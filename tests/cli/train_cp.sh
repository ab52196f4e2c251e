# lcextend train, context parallel under mpirun (docs/parallel.md "Data parallelism", docs/extend.md "Parallel
# training (mpirun)"): --cp 2 on 2 ranks gives the loss curve of one process (each rank holds 16 of every
# sequence's 32 tokens), --cp 2 --dp 2 on 4 ranks that of one process with --batch 2; one report, one metrics.jsonl;
# --resume continues a CP run; a --seq that 2 x CP does not divide fails with one line before anything is created
# (the main command under --cp: tests/cli/extend_cp.sh). Skips (77) without mpirun.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MPIEXEC:-}" ] && [ -x "$MPIEXEC" ] || { echo "skip: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
check_shows_err=1
model="$LCX_SRC/tests/fixtures/models/llama_gqa"
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
lines() { grep -c '^lcextend' "$tmp/err"; }
# same_losses A B WHAT: 5 losses each, every one within 1e-5 relative (float32: the CP ranks' partial gradients
# are summed over the group instead of within one rank, so the last bits differ; observed ~2e-6 after 3 steps at
# lr 1e-2), and the same tokens per step
same_losses() {
    paste <(field "$1/metrics.jsonl" loss) <(field "$2/metrics.jsonl" loss) >"$tmp/losses"
    check "$3: 5 losses each" [ "$(awk 'NF == 2' "$tmp/losses" | wc -l)" -eq 5 ]
    while read -r a b; do check "$3: loss $b vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done <"$tmp/losses"
    check "$3: the same tokens per step" same "$(field "$2/metrics.jsonl" tokens)" "$(field "$1/metrics.jsonl" tokens)"
}

# CP 2 against one process
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --lr 1e-2 --out "$tmp/one" --quiet
check "one process ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --lr 1e-2 --out "$tmp/cp2" --cp 2 --save-every 3 \
    --keep 0 --export-hf "$tmp/cp2-hf"
check "mpirun -np 2 --cp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "one 'train:' header, naming CP 2" [ "$(grep -c '^train:.*seq 32 over CP 2 (16 tokens per rank), 1 x 1 sequences' "$tmp/out")" -eq 1 ]
check "one 'done:' line" [ "$(grep -c '^done:' "$tmp/out")" -eq 1 ]
check "one step line per step" [ "$(grep -c '^stage 1/1 step' "$tmp/out")" -eq 5 ]
check "5 metrics lines (rank 0 only)" [ "$(grep -c '"step"' "$tmp/cp2/metrics.jsonl")" -eq 5 ]
same_losses "$tmp/one" "$tmp/cp2" "--cp 2"
# the ring's waits are part of the step's compute_s (outside the collectives' comm_s)
paste <(field "$tmp/cp2/metrics.jsonl" ring_wait_s) <(field "$tmp/cp2/metrics.jsonl" compute_s) >"$tmp/waits"
check "ring_wait_s on every step" [ "$(awk 'NF == 2' "$tmp/waits" | wc -l)" -eq 5 ]
check "ring_wait_s <= compute_s ($(tr '\n\t' '; ' <"$tmp/waits"))" awk '$1 > $2 + 1e-4 { exit 1 }' "$tmp/waits"
check "the loss moves (lr 1e-2)" [ "$(sed -n 1p "$tmp/losses" | cut -f1)" != "$(sed -n 5p "$tmp/losses" | cut -f1)" ]
[ -d "$tmp/cp2/checkpoints/s01-step000003" ] && \
    [ -d "$tmp/cp2/checkpoints/s01-step000005" ] && [ -f "$tmp/cp2-hf/model.safetensors" ] ||
    failed "checkpoints 3 and 5, and the export"

# --resume from step 3 under CP 2: the same last two losses as the unbroken run
mkdir -p "$tmp/res/checkpoints" && cp -r "$tmp/cp2/checkpoints/s01-step000003" "$tmp/res/checkpoints/" && \
    cp "$tmp/cp2/ids.bin" "$tmp/cp2/ids.idx" "$tmp/res/" && echo s01-step000003 >"$tmp/res/checkpoints/latest"
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --lr 1e-2 --out "$tmp/res" --cp 2 --resume --quiet
check "--cp 2 --resume ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--resume: says so" grep -q "resuming .*s01-step000003 at step 3/5" "$tmp/out"
check "--resume: steps 4 and 5 as the unbroken run" \
    same "$(field "$tmp/res/metrics.jsonl" loss)" "$(field "$tmp/cp2/metrics.jsonl" loss | sed -n 4,5p)"

# CP 2 x DP 2 on 4 ranks against one process with the same global batch
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --batch 2 --lr 1e-2 --out "$tmp/one2" --quiet
check "one process, --batch 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 4 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --lr 1e-2 --out "$tmp/cd" --cp 2 --dp 2 --quiet
check "mpirun -np 4 --cp 2 --dp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "the header says 2 DP ranks over CP 2" grep -q "over CP 2 (16 tokens per rank), 2 ranks x 1 x 1 sequences" "$tmp/out"
same_losses "$tmp/one2" "$tmp/cd" "--cp 2 --dp 2"

# refused before any work: one lcextend line, nothing created
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 30 --steps 5 --out "$tmp/bad" --cp 2
check "--seq 30 --cp 2: fails" [ "$(rc)" -ne 0 ]
check "--seq 30 --cp 2: one line" [ "$(lines)" -eq 1 ]
check "--seq 30 --cp 2: names the numbers" grep -q "sequence length 30 is not a positive multiple of 2\*cp = 4" "$tmp/err"
check "--seq 30 --cp 2: nothing created" [ ! -e "$tmp/bad" ]
mpi 2 train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --out "$tmp/bad" --cp 2 --dp 2
check "--cp 2 --dp 2 on 2 ranks: one line naming the mesh" grep -q "needs 4 ranks, but the world has 2" "$tmp/err"
check "--cp 2 --dp 2 on 2 ranks: one line" [ "$(lines)" -eq 1 ]
check "--cp 2 --dp 2 on 2 ranks: nothing created" [ ! -e "$tmp/bad" ]

[ $fail -eq 0 ] && echo "train_cp: all checks passed"
exit $fail
