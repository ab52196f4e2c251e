# The main command (lcextend CKPT --to N) context- and tensor-parallel under mpirun (docs/extend.md "Parallel
# training (mpirun)", docs/parallel.md): the bundled tiny model (context 256) --to 512 in two stages (384, 512) with
# --eval-data and the passkey test, run in one process, with --cp 2 on 2 ranks, with --cp 2 --dp 2 on 4 ranks and
# with --tp 2 --cp 2 on 4 ranks (stage 1's evaluation then runs on every TP rank of the CP ranks, and with
# --stage-passkey its passkey test on the TP group; the checkpoints' layout says tp 2; the export, read whole from the final checkpoint, scores as one process's within 1e-5).
# The CP runs print one plan (the CP 2 layout, with the ring) and one report; every training loss and every stage
# evaluation in metrics.jsonl (stage 1's evaluation runs over the CP ranks: padded windows over the ring) equals
# the one-process run within 1e-5 relative; the before/after evaluation (on every rank, in the training's layout:
# each TP x CP group a copy of the model, with its slices of the weights and its parts of every window, the DP
# copies sharing out the windows and trials; before within 1e-12, 1e-6 with TP or CP) gives the same perplexities
# and passkey cells; the export is there; --resume continues a CP run exactly. Refused before any
# work, one line, nothing created or printed on stdout: a stage length that 2 x CP does not divide, a mesh that
# does not match the world, a --tp that does not divide the heads. Skips (77) without mpirun.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MPIEXEC:-}" ] && [ -x "$MPIEXEC" ] || { echo "skip: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
check_shows_err=1
tinym="$LCX_SRC/recipes/tiny/model"
lines() { grep -c '^lcextend' "$tmp/err"; }
# every "loss" of a metrics.jsonl (steps and stage evaluations, in order)
losses() { sed -n 's/.*"loss": \([^,}]*\).*/\1/p' "$1"; }
# the perplexity results of an eval JSON: mean_nll and ppl, in order (numbers: the protocol's "ppl" is its text)
ppls() { sed -n 's/.*"\(mean_nll\|ppl\)": \([-+0-9.e]*\)[,}].*/\2/p' "$1"; }

# held-out text (~700 tokens: the last window of each length is shorter and not a multiple of 2 x CP, so the CP
# evaluation pads it) and training ids below the vocabulary
awk 'BEGIN { n = split("and the of unto he said them his that for which shall were land people when house", w, " ");
             s = 11; for (i = 0; i < 700; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%s ", w[1 + int(s / 65536) % n] } }' >"$tmp/words.txt"
"$LCEXTEND" tokenize --tokenizer "$tinym/tokenizer.json" --input "$tmp/words.txt" --output "$tmp/words" --eos '<|end_of_text|>' --quiet --threads 1
awk 'BEGIN { s = 5; for (i = 0; i < 3000; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", 2 + int(s / 65536) % 2000 } }' >"$tmp/ids.txt"
# two sequences per step in both stages: DP 2 trains on exactly the sequences of one process
printf 'name: cp\ndefaults: {steps: 2, tokens_per_batch: 768, grad_accum: 1, eval_lengths: [256, 384], eval_stride: window, seed: 7, save_interval: 1, lr: {peak: 1e-3, warmup_steps: 1}}\nstages:\n  - seq_len: 384\n  - {seq_len: 512, tokens_per_batch: 1024, eval_lengths: [256, 512]}\n' >"$tmp/cp.yaml"
args=(--to 512 --recipe "$tmp/cp.yaml" --ids "$tmp/ids.txt" --eval-data "$tmp/words" --passkey 1 --depths 0,1 --quiet)

run "$tinym" "${args[@]}" --out "$tmp/one"
check "one process ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "one process: 4 steps and 2 stage-1 evaluations" [ "$(losses "$tmp/one/metrics.jsonl" | wc -l)" -eq 8 ]

# same_run DIR WHAT: DIR's numbers against the one-process run. float32: the CP ranks' partial gradients (and the
# window losses) are summed over the group instead of within one rank, so the last bits differ (observed: step
# losses equal in the 9 digits written, stage evaluations within ~9e-9, after.json within ~6e-8 relative); 1e-5
# as tests/cli/train_cp.sh
same_run() {
    paste <(losses "$tmp/one/metrics.jsonl") <(losses "$1/metrics.jsonl") >"$tmp/losses"
    [ "$(awk 'NF == 2' "$tmp/losses" | wc -l)" -eq 8 ] && [ "$(wc -l <"$tmp/losses")" -eq 8 ] ||
        failed "$2: 8 losses each (4 steps, 2 stage-1 evaluations, 2 after the run)"
    while read -r a b; do check "$2: metrics loss $b vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done <"$tmp/losses"
    check "$2: the same tokens per step" \
        same "$(sed -n 's/.*"tokens": \([0-9]*\).*/\1/p' "$1/metrics.jsonl")" "$(sed -n 's/.*"tokens": \([0-9]*\).*/\1/p' "$tmp/one/metrics.jsonl")"
    paste <(ppls "$tmp/one/eval/after.json") <(ppls "$1/eval/after.json") >"$tmp/ppls"
    check "$2: after.json: 4 values each" [ "$(awk 'NF == 2' "$tmp/ppls" | wc -l)" -eq 4 ]
    while read -r a b; do check "$2: after.json $b vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done <"$tmp/ppls"
    # before.json: the same weights; the copies' sums added in another order (1e-12), and with TP or CP the float32
    # sums of the TP ranks' slices and the ring's merges (1e-6). Its layout: TP $3, CP $4 (empty: none), $5 copies
    # sharing out the work (empty: one)
    local tol=1e-12
    [ -n "${3:-}${4:-}" ] && tol=1e-6
    if [ -n "${3:-}" ]; then
        grep -q "\"tp\": $3" "$1/eval/before.json" && \
            grep -q "\"tp\": $3" "$1/eval/after.json" || failed "$2: before.json and after.json say tp $3"
    fi
    if [ -n "${4:-}" ]; then
        grep -q "\"cp\": $4" "$1/eval/before.json" && grep -q "\"cp\": $4" "$1/eval/after.json" ||
            failed "$2: before.json and after.json say cp $4 (the windows split as in training)"
    fi
    if [ -n "${5:-}" ]; then
        grep -q "\"replicas\": $5" "$1/eval/before.json" && grep -q "\"replicas\": $5" "$1/eval/after.json" ||
            failed "$2: before.json and after.json say replicas $5 (every copy evaluates)"
    else
        check "$2: before.json says no replicas (one copy)" lacks replicas "$1/eval/before.json"
    fi
    paste <(ppls "$tmp/one/eval/before.json") <(ppls "$1/eval/before.json") >"$tmp/ppls"
    check "$2: before.json: 4 values each" [ "$(awk 'NF == 2' "$tmp/ppls" | wc -l)" -eq 4 ]
    while read -r a b; do check "$2: before.json $b vs $a (one process), $tol" close "$b" "$a" "$tol"; done <"$tmp/ppls"
    check "$2: the passkey cells before as one process's" \
        same "$(grep '_correct' "$1/eval/before.json")" "$(grep '_correct' "$tmp/one/eval/before.json")"
    check "$2: the passkey cells as one process's" \
        same "$(grep '_correct' "$1/eval/after.json")" "$(grep '_correct' "$tmp/one/eval/after.json")"
    # stage 1's evaluation: the same windows and tokens (DP ranks score shards of them, added up once per shard)
    check "$2: stage1.json: the same windows and tokens as one process's" \
        same "$(grep -E '"(windows|tokens)"' "$1/eval/stage1.json")" "$(grep -E '"(windows|tokens)"' "$tmp/one/eval/stage1.json")"
    [ -f "$1/eval/stage1.json" ] && [ -f "$1/eval/ppl.svg" ] && \
        [ -f "$1/eval/passkey-before.svg" ] && [ -f "$1/eval/passkey-after.svg" ] ||
        failed "$2: stage1.json, ppl.svg, passkey heat maps"
    [ -f "$1/hf/model.safetensors" ] && grep -q '"factor": 2.0' "$1/hf/config.json" || failed "$2: the export"
    check "$2: one plan" [ "$(grep -c '^layout:' "$tmp/out")" -eq 1 ]
    check "$2: one before/after table" [ "$(grep -c '^before / after' "$tmp/out")" -eq 1 ]
    check "$2: each stage reported once" [ "$(grep -c '^stage [12]/2 done' "$tmp/out")" -eq 2 ]
    check "$2: one export line" [ "$(grep -c '^exported' "$tmp/out")" -eq 1 ]
    check "$2: stage 1 evaluated once" [ "$(grep -c '^  eval length 384' "$tmp/out")" -eq 1 ]
}

mpi 2 "$tinym" "${args[@]}" --out "$tmp/cp2" --cp 2
check "mpirun -np 2 --cp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--cp 2: the plan is the CP 2 layout" grep -q "^layout:  TP 1 x CP 2 x DP 1" "$tmp/out"
check "--cp 2: the plan shows the ring" grep -q "^stage 2: ring per rank, per layer and sequence (256 tokens" "$tmp/out"
check "--cp 2: the stages name CP 2" [ "$(grep -c '^stage [12]/2: seq [0-9]* over CP 2' "$tmp/out")" -eq 2 ]
same_run "$tmp/cp2" "--cp 2" "" 2 ""

# --resume under --cp 2 from stage 2's step-1 checkpoint: the unbroken run's last step and after-evaluation
cp -r "$tmp/cp2" "$tmp/res" && rm -rf "$tmp/res/hf" "$tmp/res/eval/after.json" "$tmp/res/checkpoints/s02-step000002" && \
    echo s02-step000001 >"$tmp/res/checkpoints/latest" && : >"$tmp/res/metrics.jsonl"
mpi 2 "$tinym" "${args[@]}" --out "$tmp/res" --cp 2 --resume
check "--cp 2 --resume ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--cp 2 --resume: says so" grep -q "resuming from .*s02-step000001 (stage 2)" "$tmp/out"
check "--cp 2 --resume: the last step and the after-evaluation as the unbroken run" \
    same "$(losses "$tmp/res/metrics.jsonl")" "$(losses "$tmp/cp2/metrics.jsonl" | tail -n 3)"
check "--cp 2 --resume: after.json as the unbroken run" same "$(ppls "$tmp/res/eval/after.json")" "$(ppls "$tmp/cp2/eval/after.json")"

mpi 4 "$tinym" "${args[@]}" --out "$tmp/cd" --cp 2 --dp 2
check "mpirun -np 4 --cp 2 --dp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--cp 2 --dp 2: the plan is that layout" grep -q "^layout:  TP 1 x CP 2 x DP 2" "$tmp/out"
same_run "$tmp/cd" "--cp 2 --dp 2" "" 2 2

mpi 4 "$tinym" "${args[@]}" --out "$tmp/tc" --tp 2 --cp 2 --stage-passkey
check "mpirun -np 4 --tp 2 --cp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
grep -q '"tp": 2' \
    "$tmp/tc/eval/passkey-stage1.json" && grep -q '"cp": 2' "$tmp/tc/eval/passkey-stage1.json" && \
    [ "$(grep -c '^passkey retrieval of .*s01-' "$tmp/out")" -eq 1 ] ||
    failed "--tp 2 --cp 2 --stage-passkey: stage 1's passkey on the TP x CP group, once"
check "--tp 2 --cp 2: the plan is that layout" grep -q "^layout:  TP 2 x CP 2 x DP 1" "$tmp/out"
check "--tp 2 --cp 2: the stages name CP 2 and TP 2" \
    [ "$(grep -c '^stage [12]/2: seq [0-9]* over CP 2 ([0-9]* tokens per rank), TP 2' "$tmp/out")" -eq 2 ]
same_run "$tmp/tc" "--tp 2 --cp 2" 2 2 ""
check "--tp 2 --cp 2: the checkpoints' layout says tp 2" grep -q '"tp": 2' "$tmp/tc/checkpoints/s02-step000002/manifest.json"
score() { "$LCEXTEND" score "$1" --ids "$tmp/ids.txt" 2>&1 | sed -n 's/^loss: *//p'; }
s1=$(score "$tmp/one/hf") s2=$(score "$tmp/tc/hf")
check "--tp 2 --cp 2: the export scores ${s2:-?} as one process's ${s1:-?}, 1e-5" close "${s2:-0}" "${s1:-1}" 1e-5
# distributed saved activations (every layer recomputes: the recipe's activation is auto, with no budget): the
# same bits as the run without, so every loss of metrics.jsonl and after.json is the same text
mpi 4 "$tinym" "${args[@]}" --out "$tmp/tcd" --tp 2 --cp 2 --distribute-saved-activations
check "--tp 2 --cp 2 --distribute-saved-activations ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--distribute-saved-activations: the plan says so" \
    grep -q "^layout:  TP 2 x CP 2 .*saved activations distributed" "$tmp/out"
check "--distribute-saved-activations: both stages' models do" \
    [ "$(grep -c '^stage [12]/2: seq [0-9]* over CP 2 ([0-9]* tokens per rank), TP 2 (saved activations distr' \
        "$tmp/out")" -eq 2 ]
[ "$(losses "$tmp/tcd/metrics.jsonl" | wc -l)" -eq 8 ] && \
    same "$(losses "$tmp/tcd/metrics.jsonl")" "$(losses "$tmp/tc/metrics.jsonl")" ||
    failed "--distribute-saved-activations: 8 losses, each as without it"
check "--distribute-saved-activations: after.json as without it" \
    same "$(ppls "$tmp/tcd/eval/after.json")" "$(ppls "$tmp/tc/eval/after.json")"
# sequence parallelism: the residual stream and the norms split over TP by rows, the same forward; the norm
# weights' gradients are summed in another order, so the run is the one-process run's within 1e-5 as TP alone is
mpi 4 "$tinym" "${args[@]}" --out "$tmp/tcs" --tp 2 --cp 2 --sequence-parallel
check "--tp 2 --cp 2 --sequence-parallel ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--sequence-parallel: the plan says so" grep -q "^layout:  TP 2 x CP 2 .*, sequence parallel;" "$tmp/out"
check "--sequence-parallel: both stages' models do" \
    [ "$(grep -c '^stage [12]/2: seq [0-9]* over CP 2 ([0-9]* tokens per rank), TP 2 (sequence parallel)' \
        "$tmp/out")" -eq 2 ]
check "--sequence-parallel: the first loss as without it" \
    same "$(losses "$tmp/tcs/metrics.jsonl" | head -1)" "$(losses "$tmp/tc/metrics.jsonl" | head -1)"
same_run "$tmp/tcs" "--tp 2 --cp 2 --sequence-parallel" 2 2 ""

# refused before any work: one lcextend line, nothing created, nothing on stdout
refused() { # WHAT PATTERN
    check "$1: fails" [ "$(rc)" -ne 0 ]
    check "$1: one line" [ "$(lines)" -eq 1 ]
    check "$1: names it ($(head -c 300 "$tmp/err"))" grep -q -e "$2" "$tmp/err"
    check "$1: nothing created" [ ! -e "$tmp/bad" ]
    check "$1: nothing on stdout" [ ! -s "$tmp/out" ]
}
printf 'name: odd\ndefaults: {steps: 1}\nstages:\n  - seq_len: 382\n  - seq_len: 512\n' >"$tmp/odd.yaml"
mpi 2 "$tinym" --to 512 --recipe "$tmp/odd.yaml" --ids "$tmp/ids.txt" --out "$tmp/bad" --cp 2
refused "stage 382 under --cp 2" "odd.yaml:4: key 'seq_len': 382 is not a multiple of 4 (stages\[0\]: .*2 x CP)"
mpi 2 "$tinym" --to 510 --recipe "$tmp/cp.yaml" --ids "$tmp/ids.txt" --out "$tmp/bad" --cp 2
refused "--to 510 under --cp 2" "--to 510 is not a multiple of 4 (2 x CP"
mpi 2 "$tinym" "${args[@]}" --out "$tmp/bad" --cp 2 --dp 2
refused "--cp 2 --dp 2 on 2 ranks" "mesh tp=1 cp=2 dp=2 needs 4 ranks, but the world has 2"
mpi 2 "$tinym" "${args[@]}" --out "$tmp/bad" --cp 4
refused "--cp 4 on 2 ranks" "does not divide the world of 2 ranks"
mpi 4 "$tinym" "${args[@]}" --out "$tmp/bad" --tp 4
refused "--tp 4 (6 heads)" "--tp 4 does not divide num_attention_heads 6"

[ $fail -eq 0 ] && echo "extend_cp: all checks passed"
exit $fail
