#!/usr/bin/env bash
# --backend on every command that runs the model (score, train-steps, eval, train, the main command): --backend cpu
# gives the output of no flag bit for bit (score's lines, train-steps' losses and norms, eval's table, train's and
# the main command's metrics and evaluations) and is recorded in the checkpoints' training state; an unknown
# backend and (without a GPU) cuda fail before any work: exit 1, one line on stderr naming the flag, nothing on
# stdout, no output file or run directory. Where a GPU is visible, --backend cuda must instead run, score within
# 1e-5 of the CPU (the model against the CPU: tests/unit/test_model_cuda.c).
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
check_shows_err=1
model="$LCX_SRC/tests/fixtures/models/llama_gqa"
ids_of() { sed -n '/input_ids/,/^ \]/p' "$1/inputs.json" | grep -E '^ +[0-9]+,?$' | tr -d ' ,'; }
ids_of "$model" >"$tmp/ids16.txt"
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"
# the step results of metrics.jsonl without the timings
steps() { grep '"step"' "$1" | sed 's/"tokens_per_s".*//'; }
# train-steps' step lines without the timings
losses() { sed -n 's/^\(step [0-9/]*  loss [0-9.]*  grad_norm [0-9.]*  clip [0-9.]*\).*/\1/p' "$1"; }

# every command lists the flag
for c in score train-steps eval train; do
    run "$c" --help
    check "$c --help lists --backend" grep -q -- "--backend" "$tmp/out"
done
run "$model" --help
check "the main command's --help lists --backend" grep -q -- "--backend" "$tmp/out"

# --backend cpu = no flag
run score "$model" --ids "$tmp/ids16.txt"
cp "$tmp/out" "$tmp/score.default"
run score "$model" --ids "$tmp/ids16.txt" --backend cpu
check "score --backend cpu: exit 0" [ "$(rc)" -eq 0 ]
check "score --backend cpu: the same output as no flag" cmp -s "$tmp/out" "$tmp/score.default"
check "score: a loss line" grep -q "^loss: " "$tmp/out"
run score "$model" --ids "$tmp/ids16.txt" --backend=cpu
check "score --backend=cpu: the same output" cmp -s "$tmp/out" "$tmp/score.default"

run train-steps "$model" --steps 3 --seq 16 --lr 1e-2
losses "$tmp/out" >"$tmp/ts.default"
grep '^model:' "$tmp/out" >"$tmp/ts.header"
run train-steps "$model" --steps 3 --seq 16 --lr 1e-2 --backend cpu
check "train-steps --backend cpu: exit 0" [ "$(rc)" -eq 0 ]
losses "$tmp/out" >"$tmp/ts.cpu"
check "train-steps: 3 step lines" [ "$(wc -l <"$tmp/ts.cpu")" -eq 3 ]
check "train-steps --backend cpu: the same losses and norms" cmp -s "$tmp/ts.cpu" "$tmp/ts.default"
check "train-steps --backend cpu: the same header" same "$(grep '^model:' "$tmp/out")" "$(cat "$tmp/ts.header")"
check "train-steps on the CPU: the header names no backend" lacks 'backend' "$tmp/ts.header"

run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 3 --lr 1e-2 --out "$tmp/t0" --quiet
check "train, no flag ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 3 --lr 1e-2 --out "$tmp/t1" --quiet --backend cpu
check "train --backend cpu: exit 0" [ "$(rc)" -eq 0 ]
check "train --backend cpu: 3 metrics lines" [ "$(grep -c '"step"' "$tmp/t1/metrics.jsonl")" -eq 3 ]
check "train --backend cpu: the same losses as no flag" same "$(steps "$tmp/t1/metrics.jsonl")" "$(steps "$tmp/t0/metrics.jsonl")"
check "train: the checkpoint records the backend" grep -qE '"backend": ?"cpu"' "$tmp/t1/checkpoints/s01-step000003/manifest.json"
check "train, no flag: the checkpoint records cpu too" grep -qE '"backend": ?"cpu"' "$tmp/t0/checkpoints/s01-step000003/manifest.json"

untimed_eval() { sed 's/ in [0-9.]* s$//' "$1"; } # the table's title ends with the time it took
run eval "$model" --data "$tmp/t0/ids" --lengths 32,64 --stride 32 --quiet
untimed_eval "$tmp/out" >"$tmp/eval.default"
run eval "$model" --data "$tmp/t0/ids" --lengths 32,64 --stride 32 --quiet --backend cpu
check "eval --backend cpu: exit 0" [ "$(rc)" -eq 0 ]
check "eval: a table" grep -qE "^ +64 +2500 " "$tmp/out"
check "eval --backend cpu: the same tables as no flag" same "$(untimed_eval "$tmp/out")" "$(cat "$tmp/eval.default")"

recipe "$tmp/tiny.yaml" tiny-test 256 "64, 128" 128
ext=("$model" --to 128 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --eval-data "$tmp/t0/ids" --keep 0 --quiet
     --tokens-per-s 1000)
run "${ext[@]}" --out "$tmp/e0"
check "main command, no flag ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
untimed() { sed 's/[0-9.]* tokens\/s//g; s/[0-9.e+-]* model TFLOP//g; s/peak RSS [0-9.]* MiB//g; s/ in [0-9.]* s$//
    s|/e[01]/|/e/|g' "$1"; }
untimed "$tmp/out" >"$tmp/e0.out"
run "${ext[@]}" --out "$tmp/e1" --backend cpu
check "main command --backend cpu: exit 0" [ "$(rc)" -eq 0 ]
check "main command --backend cpu: the same losses" same "$(steps "$tmp/e1/metrics.jsonl")" "$(steps "$tmp/e0/metrics.jsonl")"
check "main command --backend cpu: the same evaluations" \
    same "$(grep -v '"checkpoint"' "$tmp/e1/eval/after.json")" "$(grep -v '"checkpoint"' "$tmp/e0/eval/after.json")"
check "main command --backend cpu: the same output but timings" \
    same "$(untimed "$tmp/out")" "$(cat "$tmp/e0.out")"
check "main command on the CPU: the plan names no backend" lacks '^backend' "$tmp/out"
check "main command: the checkpoint records the backend" \
    grep -qE '"backend": ?"cpu"' "$tmp/e1/checkpoints/s01-step000002/manifest.json"
run "$model" --to 128 --recipe "$tmp/tiny.yaml" --dry-run --tokens-per-s 1000 --backend cpu
check "main command --dry-run --backend cpu: exit 0" [ "$(rc)" -eq 0 ]

# a backend that is not there, or cannot run here: one line naming the flag, nothing written
refused() { # WHAT NEEDLE OUTPUT-PATH ARGS...: lcextend ARGS fails with exit 1 before any work
    local what=$1 needle=$2 path=$3; shift 3
    run "$@"
    check "$what: exit 1 (got $(rc))" [ "$(rc)" -eq 1 ]
    check "$what: one line on stderr" one_line_err
    check "$what: names the flag ($(head -c 300 "$tmp/err"))" grep -qF -- "$needle" "$tmp/err"
    check "$what: nothing on stdout" [ ! -s "$tmp/out" ]
    check "$what: $path not created" [ ! -e "$path" ]
}
cuda_refused() { # the cuda backend, where it cannot run: a build without it, or no device
    grep -qE -- "--backend cuda: no CUDA device is visible|--backend: unknown backend 'cuda' \(available: cpu\)" "$tmp/err"
}
# is a GPU there? then --backend cuda runs, and scores as the CPU does (its refusals cannot be tested here)
run score "$model" --ids "$tmp/ids16.txt" --backend cuda
if [ "$(rc)" -eq 0 ]; then
    ours=$(awk '/^loss:/ { print $2 }' "$tmp/out")
    cpu=$(awk '/^loss:/ { print $2 }' "$tmp/score.default")
    check "score --backend cuda: loss $ours vs the CPU's $cpu" close "$ours" "$cpu" 1e-5
    echo "note: a CUDA device is visible: --backend cuda ran; its refusals are not tested"
    backends=tpu
else
    backends="tpu cuda"
fi
for b in $backends; do
    if [ "$b" = tpu ]; then needle="--backend: unknown backend 'tpu' (available: cpu"; else needle="--backend"; fi
    refused "score --backend $b" "$needle" "$tmp/x.npy" score "$model" --ids "$tmp/ids16.txt" --logits "$tmp/x.npy" --backend "$b"
    [ "$b" = cuda ] && check "score --backend cuda: says why" cuda_refused
    refused "train-steps --backend $b" "$needle" "$tmp/none" train-steps "$model" --steps 1 --seq 8 --backend "$b"
    refused "eval --backend $b" "$needle" "$tmp/ev.json" eval "$model" --data "$tmp/t0/ids" --lengths 32 --json "$tmp/ev.json" --backend "$b"
    refused "train --backend $b" "$needle" "$tmp/tb" train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 1 --out "$tmp/tb" --backend "$b"
    [ "$b" = cuda ] && check "train --backend cuda: says why" cuda_refused
    refused "main command --backend $b" "$needle" "$tmp/eb" "${ext[@]}" --out "$tmp/eb" --backend "$b"
    refused "main command --dry-run --backend $b" "$needle" "$tmp/ed" "$model" --to 128 --recipe "$tmp/tiny.yaml" --out "$tmp/ed" --dry-run --backend "$b"
    [ "$b" = cuda ] && check "main command --backend cuda: says why" cuda_refused
done
refused "score --backend=tpu" "--backend: unknown backend 'tpu'" "$tmp/x.npy" score "$model" --ids "$tmp/ids16.txt" --logits "$tmp/x.npy" --backend=tpu
bad_flag "flag --backend needs a value" score "$model" --ids "$tmp/ids16.txt" --backend

[ $fail = 0 ] && echo "backend: all checks passed"
exit $fail
