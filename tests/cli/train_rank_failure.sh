# A failure that only one rank sees mid-training (docs/parallel.md "Data parallelism"): rank 0 alone writes the
# checkpoints and metrics.jsonl, so a run directory whose `checkpoints` is a file (the save at step 2 fails) or
# whose metrics.jsonl is a directory fails on rank 0 only, while the other ranks would go on into the next step's
# collectives. The ranks learn it at the stage loop's agreement point: the job exits non-zero within 60 s, and the
# first line on stderr is our one line naming rank 0 and the cause (Open MPI adds its own notice about the
# non-zero exit after it; docs/parallel.md "Communicator"). --dp 2 and --cp 2. Skips (77) without mpirun.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MPIEXEC:-}" ] && [ -x "$MPIEXEC" ] || { echo "skip: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
check_shows_err=1
model="$LCX_SRC/tests/fixtures/models/llama_gqa"
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"

# fails_alone WHAT CAUSE ARGS...: lcextend train ARGS under mpirun -np 2 ends non-zero within 60 s, and stderr's
# first line is the one lcextend line, naming rank 0 and CAUSE (fixed text)
fails_alone() {
    local what=$1 cause=$2; shift 2
    local t0=$(date +%s)
    MPIEXEC_TIMEOUT=90 "$MPIEXEC" --allow-run-as-root --oversubscribe -np 2 "$LCEXTEND" train "$model" \
        --ids "$tmp/ids.txt" --seq 32 --steps 6 --quiet "$@" >"$tmp/out" 2>"$tmp/err"
    echo $? >"$tmp/rc"
    local dt=$(($(date +%s) - t0))
    check "$what: non-zero exit" [ "$(rc)" -ne 0 ]
    check "$what: ended within 60 s ($dt s)" [ "$dt" -le 60 ]
    check "$what: one lcextend line" [ "$(grep -c '^lcextend' "$tmp/err")" -eq 1 ]
    check "$what: it is the first line ($(head -1 "$tmp/err"))" grep -q '^lcextend train: ' <(head -1 "$tmp/err")
    check "$what: it names rank 0" grep -q '^lcextend train: .*rank 0: ' "$tmp/err"
    check "$what: it names the cause" grep -qF -- "$cause" <(head -1 "$tmp/err")
    check "$what: no rank says it is stopping on a signal" fails grep -q "stopping after this step" "$tmp/err"
}

# the save at step 2 fails on rank 0: after two steps were trained
mkdir -p "$tmp/save" && echo x >"$tmp/save/checkpoints"
fails_alone "--dp 2, rank 0's save" "checkpoint parent directory does not exist" --save-every 2 --out "$tmp/save" --dp 2
check "--dp 2: two steps trained before it" [ "$(grep -c '"step"' "$tmp/save/metrics.jsonl")" -eq 2 ]
mkdir -p "$tmp/savecp" && echo x >"$tmp/savecp/checkpoints"
fails_alone "--cp 2, rank 0's save" "checkpoint parent directory does not exist" --save-every 2 --out "$tmp/savecp" --cp 2
check "--cp 2: two steps trained before it" [ "$(grep -c '"step"' "$tmp/savecp/metrics.jsonl")" -eq 2 ]
# rank 0 cannot open metrics.jsonl at the stage's start
mkdir -p "$tmp/metrics/metrics.jsonl"
fails_alone "--dp 2, rank 0's metrics.jsonl" "metrics.jsonl: cannot open for appending" --out "$tmp/metrics" --dp 2

[ $fail -eq 0 ] && echo "train_rank_failure: all checks passed"
exit $fail
