#!/usr/bin/env bash
# `lcextend CKPT --to N` and `lcextend train` on the fixture model llama_gqa (context 64) --to 256 with a 2-stage
# recipe written here: the plan is printed and --dry-run does nothing; a full run writes metrics, checkpoints and
# an HF export whose config has yarn factor 256/64 = 4; the before/after evaluation equals lcextend eval of the
# input and of the export (the fixture, and the bundled tiny model with passkey); resuming from an earlier checkpoint (rewound `latest`)
# and after a real SIGINT ends with exactly the losses of the uninterrupted run; errors before any work.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
model="$LCX_SRC/tests/fixtures/models/llama_gqa"
steps() { grep '"step"' "$1" | sed 's/"tokens_per_s".*//' | sort -u; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# token ids below the vocabulary (256): a fixed pseudo-random sequence
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"
recipe "$tmp/tiny.yaml" tiny-test 256 "64, 128" 128 256

# lcextend train: pretraining from random init with --export-hf, and train --resume continuing exactly
run train --config "$model/config.json" --ids "$tmp/ids.txt" --seq 32 --steps 4 --lr 1e-2 --out "$tmp/pre" --save-every 2 --keep 0 --quiet --export-hf "$tmp/pre-hf"
check "train from random init ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "train export" [ -f "$tmp/pre-hf/model.safetensors" ]
run train "$tmp/pre-hf" --ids "$tmp/ids.txt" --seq 32 --steps 4 --out "$tmp/t1" --save-every 2 --keep 0 --quiet
cp -r "$tmp/t1" "$tmp/t2"
rm -rf "$tmp/t2/checkpoints/s01-step000004"
printf 's01-step000002' >"$tmp/t2/checkpoints/latest"
run train "$tmp/pre-hf" --ids "$tmp/ids.txt" --seq 32 --steps 4 --out "$tmp/t2" --save-every 2 --keep 0 --quiet --resume
check "train --resume ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "train --resume: same losses" same "$(steps "$tmp/t2/metrics.jsonl")" "$(steps "$tmp/t1/metrics.jsonl")"
printf 's01-step000002' >"$tmp/t2/checkpoints/latest"
run train "$tmp/pre-hf" --ids "$tmp/ids.txt" --seq 16 --steps 4 --out "$tmp/t2" --save-every 2 --keep 0 --quiet --resume
check "train --resume with another --seq: refused" grep -q "saved by stage 1 with seq_len 32, 4 steps, seed 1234; this run has seq_len 16" "$tmp/err"
run train --config "$model/config.json" --ids "$tmp/ids.txt" --seq 32 --steps 2 --out "$tmp/t3" --resume
check "train --resume without a run: fails" [ "$(rc)" -eq 1 ]
run train "$model" --ids "$tmp/noids" --seq 32 --steps 2 --out "$tmp/t4"
check "train: missing ids refused before work" grep -q "noids: no such file" "$tmp/err"
check "train: missing ids creates nothing" [ ! -e "$tmp/t4" ]


# --dry-run: the plan, nothing written
run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/dry" --dry-run
check "dry-run exits 0" [ "$(rc)" -eq 0 ]
check "dry-run prints both stages with yarn s=2 and s=4" grep -q "yarn s=4" "$tmp/out"
check "dry-run prints stage 1 at 128" grep -qE "^1 +128 +yarn s=2" "$tmp/out"
check "dry-run writes nothing" [ ! -e "$tmp/dry" ]
run "$model" --to 1k --recipe "$tmp/tiny.yaml" --dry-run
check "--to 1k: beyond the recipe's explicit stages, refused" [ "$(rc)" -eq 1 ]

# the full run
run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/full" --keep 0 --quiet --eval-data "$tmp/pre/ids"
check "full run exits 0 ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
cp "$tmp/out" "$tmp/out.full"
check "metrics: 4 step lines" [ "$(grep -c '"step"' "$tmp/full/metrics.jsonl")" -eq 4 ]
check "metrics: eval lines" [ "$(grep -c '"eval_len"' "$tmp/full/metrics.jsonl")" -eq 4 ]
check "metrics: tflops x time = the model FLOPs of each stage's 256 tokens at its length" awk \
    -v F1="$(flops_per_token "$model" 128)" -v F2="$(flops_per_token "$model" 256)" '/"step"/ {
        match($0, /"time": [0-9.]+/); t = substr($0, RSTART + 8, RLENGTH - 8) + 0
        match($0, /"tflops": [0-9.e+-]+/); f = substr($0, RSTART + 10, RLENGTH - 10) * 1e12
        want = ($0 ~ /"stage": 1,/ ? F1 : F2) * 256; d = f * t - want; if (d < 0) d = -d
        if (t <= 0 || d > want * (0.002 + 0.00006 / t)) bad = 1; n++ } END { exit bad || n != 4 }' \
    "$tmp/full/metrics.jsonl"
check "eval JSON per stage" grep -q '"series": "stage 2 (256)"' "$tmp/full/eval/stage2.json"
check "eval plot" grep -q "<svg" "$tmp/full/eval/ppl.svg"
[ -d "$tmp/full/checkpoints/s02-step000002" ] && [ -d "$tmp/full/checkpoints/s01-step000001" ] ||
    failed "checkpoints of both stages"
check "latest is the last" grep -qx "s02-step000002" "$tmp/full/checkpoints/latest"
# one data stream over the stages: the ids are one document of 2500 tokens, so the sampler's offset is the tokens
# drawn in the run: 2 steps x 256 in each stage (a stage starting over would stand at 512)
offset=$(tr -d ' \n' <"$tmp/full/checkpoints/s02-step000002/manifest.json" | grep -o '"sampler":{[^}]*}' |
    grep -o '"offset":[0-9]*' | cut -d: -f2)
check "stage 2 goes on with stage 1's data stream (sampler offset $offset, expected 1024)" [ "$offset" = 1024 ]
check "HF export" [ -f "$tmp/full/hf/config.json" ]
run inspect "$tmp/full/hf"
check "export inspects" [ "$(rc)" -eq 0 ]
check "export: yarn factor 4 from 64" grep -q '"factor": 4.0' "$tmp/full/hf/config.json"
check "export: max_position_embeddings 256" grep -q '"max_position_embeddings": 256' "$tmp/full/hf/config.json"
check "export: original 64" grep -q '"original_max_position_embeddings": 64' "$tmp/full/hf/config.json"
run inspect "$tmp/full/checkpoints/s02-step000001"
check "inspect shows the training state" grep -qE '^stage: +2$' "$tmp/out"
check "inspect shows the recipe" grep -q 'recipe: *"tiny-test"' "$tmp/out"
run verify "$tmp/full/checkpoints/s01-step000002"
check "stage-1 checkpoint verifies" [ "$(rc)" -eq 0 ]

# before/after evaluation: the same JSON as lcextend eval of the input (loaded from the HF directory, not the
# import) and of the HF export (not the final checkpoint); no tokenizer in the fixture, so no passkey
strip_json() { grep -v '"series"\|"checkpoint"' "$1"; }
[ -f "$tmp/full/eval/before.json" ] && [ -f "$tmp/full/eval/after.json" ] || failed "before.json and after.json"
check "before/after table printed" grep -q "^before / after" "$tmp/out.full"
check "before/after table: row 128" grep -qE "^ +128 +[0-9.]+ +[0-9.]+ +- +-$" "$tmp/out.full"
check "ppl.svg has the before line" grep -q ">before<" "$tmp/full/eval/ppl.svg"
check "no passkey without a tokenizer" lacks passkey "$tmp/full/eval/before.json"
run eval "$model" --data "$tmp/pre/ids" --lengths 64,128 --stride 256 --quiet --json "$tmp/base_eval.json"
check "lcextend eval of the input ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "before = lcextend eval of the input" same "$(strip_json "$tmp/full/eval/before.json")" "$(strip_json "$tmp/base_eval.json")"
run eval "$tmp/full/hf" --data "$tmp/pre/ids" --lengths 64,128 --stride 256 --quiet --json "$tmp/hf_eval.json"
check "after = lcextend eval of the export" same "$(strip_json "$tmp/full/eval/after.json")" "$(strip_json "$tmp/hf_eval.json")"
ppls() { grep -o '"ppl": [0-9.e+-]*' "$1"; }
check "after = the last stage's evaluation" same "$(ppls "$tmp/full/eval/after.json")" "$(ppls "$tmp/full/eval/stage2.json")"
check "before != after (training changed the model)" [ "$(strip_json "$tmp/full/eval/before.json")" != "$(strip_json "$tmp/full/eval/after.json")" ]

# resume after stage 1 with --eval-data: the before evaluation is not redone, the after one is the same
cp -r "$tmp/full" "$tmp/rev"
rm -rf "$tmp/rev/checkpoints/s02-"* "$tmp/rev/hf" "$tmp/rev/eval/after.json" "$tmp/rev/eval/stage2.json"
printf 's01-step000002' >"$tmp/rev/checkpoints/latest"
run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/rev" --keep 0 --quiet --resume --eval-data "$tmp/pre/ids"
check "resume with --eval-data ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "resume: before not evaluated again" lacks 'evaluating the input' "$tmp/out"
check "resume: after evaluated" grep -q "evaluating the result" "$tmp/out"
check "resume: same before.json" cmp -s "$tmp/rev/eval/before.json" "$tmp/full/eval/before.json"
check "resume: same after numbers" same "$(strip_json "$tmp/rev/eval/after.json")" "$(strip_json "$tmp/full/eval/after.json")"
check "resume: table printed" grep -q "^before / after" "$tmp/out"

# resume from stage 1 step 1 (rewound latest, later checkpoints and the export removed)
cp -r "$tmp/full" "$tmp/rew"
rm -rf "$tmp/rew/checkpoints/s01-step000002" "$tmp/rew/checkpoints/s02-"* "$tmp/rew/hf"
printf 's01-step000001' >"$tmp/rew/checkpoints/latest"
run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/rew" --keep 0 --quiet --resume
check "resume exits 0 ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "resume says where" grep -q "resuming from .*s01-step000001" "$tmp/out"
check "resumed losses = uninterrupted losses" same "$(steps "$tmp/rew/metrics.jsonl")" "$(steps "$tmp/full/metrics.jsonl")"
check "same exported weights" cmp -s "$tmp/rew/hf/model.safetensors" "$tmp/full/hf/model.safetensors"

# resume at a stage boundary (latest = stage 1's final checkpoint): stage 2 runs from it; --gguf exports too
cp -r "$tmp/full" "$tmp/bnd"
rm -rf "$tmp/bnd/checkpoints/s02-"* "$tmp/bnd/hf"
printf 's01-step000002' >"$tmp/bnd/checkpoints/latest"
run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/bnd" --keep 0 --quiet --resume --gguf
check "boundary resume exits 0 ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "boundary resume: same losses" same "$(steps "$tmp/bnd/metrics.jsonl")" "$(steps "$tmp/full/metrics.jsonl")"
check "boundary resume: same exported weights" cmp -s "$tmp/bnd/hf/model.safetensors" "$tmp/full/hf/model.safetensors"
check "--gguf: model.gguf" [ -s "$tmp/bnd/model.gguf" ]
check "--gguf: GGUF magic" [ "$(head -c 4 "$tmp/bnd/model.gguf")" = "GGUF" ]
run "$model" --to 128 --recipe yarn-x2 --ids "$tmp/ids.txt" --out "$tmp/bnd" --resume
check "resume with another --to: refused" grep -q "saved by a run to 256 tokens, not --to 128" "$tmp/err"
run "$model" --to 128 --recipe yarn-x2 --ids "$tmp/ids.txt" --out "$tmp/bnd" --resume --dry-run
[ "$(rc)" -ne 0 ] && one_line_err && grep -q "saved by a run to 256 tokens, not --to 128" "$tmp/err" ||
    failed "--dry-run --resume with another --to: refused as the run would be ($(head -c 300 "$tmp/err"))"
run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/none" --resume --dry-run
[ "$(rc)" -ne 0 ] && one_line_err && grep -q "no such run directory to resume" "$tmp/err" ||
    failed "--dry-run --resume without a run: refused ($(head -c 300 "$tmp/err"))"

# a real SIGINT: either it stopped with a save (then --resume finishes it) or it had already finished
"$LCEXTEND" "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/int" --keep 0 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do grep -q "step 1/2" "$tmp/out" 2>/dev/null && break; sleep 0.05; done
kill -INT "$pid" 2>/dev/null
wait "$pid"
r=$?
if [ "$r" -ne 0 ]; then
    echo "note: SIGINT stopped the run (rc $r); resuming"
    check "SIGINT: clear message" grep -qE "interrupted (at stage .* step|after stage) .*--resume" "$tmp/err"
    run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/int" --keep 0 --quiet --resume
    check "resume after SIGINT exits 0 ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
fi
check "SIGINT + resume: same losses" same "$(steps "$tmp/int/metrics.jsonl")" "$(steps "$tmp/full/metrics.jsonl")"
check "SIGINT + resume: same final loss line" same "$(grep '"step"' "$tmp/int/metrics.jsonl" | tail -1 | sed 's/"tokens_per_s".*//')" "$(grep '"step"' "$tmp/full/metrics.jsonl" | tail -1 | sed 's/"tokens_per_s".*//')"

# SIGKILL (no chance to save) after the first periodic save: --resume replays from that save, same losses
"$LCEXTEND" "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/kill" --keep 0 >"$tmp/out" 2>"$tmp/err" &
pid=$!
# up to 30 s for the first save: a loaded machine starts slowly
for _ in $(seq 1500); do grep -q "^saved " "$tmp/out" 2>/dev/null && break; sleep 0.02; done
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/kill" --keep 0 --quiet --resume
check "resume after SIGKILL ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "SIGKILL + resume: same losses (replayed steps identical)" same "$(steps "$tmp/kill/metrics.jsonl")" "$(steps "$tmp/full/metrics.jsonl")"
check "SIGKILL + resume: same exported weights" cmp -s "$tmp/kill/hf/model.safetensors" "$tmp/full/hf/model.safetensors"

# a GGUF input (context 256, vocab 64): imported first, then planned; GGUF out again
awk 'BEGIN { s = 3; for (i = 0; i < 1500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 64 } }' >"$tmp/ids64.txt"
printf 'name: one\ndefaults: {steps: 1, tokens_per_batch: 512, lr: {peak: 1e-3, warmup_steps: 0}}\nstages:\n  - seq_len: target\n' >"$tmp/one.yaml"
run "$LCX_SRC/tests/fixtures/gguf/llama_q4.gguf" --to 512 --recipe "$tmp/one.yaml" --ids "$tmp/ids64.txt" --out "$tmp/gg" --quiet --gguf
check "GGUF input ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "GGUF input: plan after import" grep -qE "^1 +512 +yarn s=2" "$tmp/out"
check "GGUF input: GGUF out" [ "$(head -c 4 "$tmp/gg/model.gguf" 2>/dev/null)" = "GGUF" ]
check "GGUF input: HF out with yarn 2" grep -q '"factor": 2.0' "$tmp/gg/hf/config.json"
run "$LCX_SRC/tests/fixtures/gguf/llama_q4.gguf" --to 512 --recipe "$tmp/one.yaml" --ids "$tmp/ids.txt" --out "$tmp/gg2"
check "ids beyond the vocabulary: refused" grep -q "not below the vocabulary size 64" "$tmp/err"

# passkey before/after with the bundled tiny model (it has a tokenizer): one 1-step stage to 512, one held-out
# document of ~600 tokens; before/after equal lcextend eval of the input and of the export, passkey included
tinym="$LCX_SRC/recipes/tiny/model"
awk 'BEGIN { n = split("and the of unto he said them his that for which shall were land people when house", w, " ");
             s = 11; for (i = 0; i < 700; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%s ", w[1 + int(s / 65536) % n] } }' >"$tmp/words.txt"
"$LCEXTEND" tokenize --tokenizer "$tinym/tokenizer.json" --input "$tmp/words.txt" --output "$tmp/words" --eos '<|end_of_text|>' --quiet --threads 1
awk 'BEGIN { s = 5; for (i = 0; i < 1200; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", 2 + int(s / 65536) % 2000 } }' >"$tmp/ids2k.txt"
printf 'name: pk\ndefaults: {steps: 1, tokens_per_batch: 512, eval_lengths: [256, 512], eval_stride: window, lr: {peak: 1e-3, warmup_steps: 0}}\nstages:\n  - seq_len: 512\n' >"$tmp/pk.yaml"
run "$tinym" --to 512 --recipe "$tmp/pk.yaml" --ids "$tmp/ids2k.txt" --eval-data "$tmp/words" --passkey 1 --depths 0,1 \
    --needles 2 --haystack "$tmp/words.txt" --out "$tmp/pk" --quiet
check "tiny model with passkey ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "passkey in before.json" grep -q '"greedy_correct"' "$tmp/pk/eval/before.json"
check "passkey in after.json" grep -q '"greedy_correct"' "$tmp/pk/eval/after.json"
check "passkey of 2 needles in before.json" grep -q '"needles": 2' "$tmp/pk/eval/before.json"
check "passkey in the haystack's words in after.json" grep -q '"haystack": ".*words.txt"' "$tmp/pk/eval/after.json"
[ -f "$tmp/pk/eval/passkey-before.svg" ] && [ -f "$tmp/pk/eval/passkey-after.svg" ] || failed "passkey heat maps"
check "table: rows 256 and 512 with passkey" [ "$(grep -cE '^ +(256|512) +[0-9.]+ +[0-9.]+ +[0-9]+% +[0-9]+%$' "$tmp/out")" -eq 2 ]
run eval "$tinym" --data "$tmp/words" --lengths 256,512 --stride 0 --passkey 1 --depths 0,1 --needles 2 --quiet \
    --haystack "$tmp/words.txt" --json "$tmp/pk_base.json"
check "tiny: before = lcextend eval of the input" same "$(strip_json "$tmp/pk/eval/before.json")" "$(strip_json "$tmp/pk_base.json")"
run eval "$tmp/pk/hf" --data "$tmp/words" --lengths 256,512 --stride 0 --passkey 1 --depths 0,1 --needles 2 --quiet \
    --haystack "$tmp/words.txt" --json "$tmp/pk_hf.json"
check "tiny: after = lcextend eval of the export" same "$(strip_json "$tmp/pk/eval/after.json")" "$(strip_json "$tmp/pk_hf.json")"

# --stage-passkey: two stages (384, 512); stage 1's saved result gets the passkey test at stage 1's eval lengths,
# equal to lcextend eval of that checkpoint; stage 2 none of its own (the after-evaluation tests it); a resume
# that reruns stage 1's last step keeps the file and does not test again
printf 'name: pk2\ndefaults: {steps: 2, tokens_per_batch: 512, eval_stride: window, save_interval: 1, lr: {peak: 1e-3, warmup_steps: 0}}\nstages:\n  - {seq_len: 384, tokens_per_batch: 384, eval_lengths: [256, 384]}\n  - {seq_len: 512, eval_lengths: [256, 512]}\n' >"$tmp/pk2.yaml"
sp_args=("$tinym" --to 512 --recipe "$tmp/pk2.yaml" --ids "$tmp/ids2k.txt" --eval-data "$tmp/words" --passkey 1
         --depths 0,1 --stage-passkey --keep 10 --out "$tmp/sp" --quiet)
run "${sp_args[@]}"
check "--stage-passkey ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
[ -f "$tmp/sp/eval/passkey-stage1.json" ] && \
    [ -f "$tmp/sp/eval/passkey-stage1.svg" ] && [ ! -e "$tmp/sp/eval/passkey-stage2.json" ] ||
    failed "--stage-passkey: passkey-stage1.json and .svg, nothing for stage 2"
check "--stage-passkey: stage 1's table printed" grep -q "^passkey retrieval of .*s01-step000002: 1 trial" "$tmp/out"
run eval "$tmp/sp/checkpoints/s01-step000002" --passkey 1 --passkey-lengths 256,384 --depths 0,1 --quiet \
    --json "$tmp/sp_eval.json"
check "--stage-passkey: passkey-stage1.json = lcextend eval of the stage-1 checkpoint" \
    same "$(strip_json "$tmp/sp/eval/passkey-stage1.json")" "$(strip_json "$tmp/sp_eval.json")"
# the plan's disk estimate (docs/plan.md "Disk"): with --keep 10 every one of the 4 saves stays, and each checkpoint
# is within the estimate's bytes before zstd (fp32 weights and AdamW moments: 12 bytes a parameter)
run plan "$tinym" --to 512 --recipe "$tmp/pk2.yaml" --fp32 --keep 10 --json
check "disk: the plan's checkpoints are the run's ($(ls "$tmp/sp/checkpoints" | tr '\n' ' '))" python3 -c "
import json, os, sys
d = json.load(open('$tmp/out'))['totals']['disk']
cks = [c for c in os.listdir('$tmp/sp/checkpoints') if c != 'latest']
size = lambda c: sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(os.path.join('$tmp/sp/checkpoints', c)) for f in fs)
sys.exit(not (d['saves'] == 4 and d['held'] == 4 and len(cks) == 4 and all(size(c) <= d['checkpoint'] for c in cks)))"
# more than any disk holds (10^7 saves of 19 MiB kept, 183 TiB): the dry run warns in one line and goes on
printf 'defaults: {steps: 10000000, tokens_per_batch: 512, save_interval: 1}\nstages:\n  - {seq_len: 512}\n' \
    >"$tmp/huge.yaml"
run "$tinym" --to 512 --recipe "$tmp/huge.yaml" --keep 0 --ids "$tmp/ids2k.txt" --out "$tmp/huge" --dry-run
[ "$(rc)" -eq 0 ] && \
    one_line_err && grep -q "^warning: $tmp/huge: its filesystem has [0-9.]* [KMGT]iB free, and the run may write up to \
182.[0-9]* TiB more there (10000000 checkpoints of 19.14 MiB at once, the import of 3.19 MiB and the export of \
6.38 MiB, before zstd): free \
some, or --keep fewer\$" "$tmp/err" ||
    failed "disk: a run larger than the filesystem: a warning ($(head -c 300 "$tmp/err"))"
run "$tinym" --to 512 --recipe "$tmp/pk2.yaml" --ids "$tmp/ids2k.txt" --out "$tmp/small" --dry-run
[ "$(rc)" -eq 0 ] && [ ! -s "$tmp/err" ] || failed "disk: a run that fits: no warning"
cp "$tmp/sp/eval/passkey-stage1.json" "$tmp/sp_kept.json"
echo s01-step000001 >"$tmp/sp/checkpoints/latest" && rm -rf "$tmp/sp/hf" "$tmp/sp/eval/after.json"
run "${sp_args[@]}" --resume
check "--stage-passkey --resume ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--stage-passkey --resume: stage 1 not tested again" lacks '^passkey retrieval of .*s01-' "$tmp/out"
check "--stage-passkey --resume: the file kept" cmp -s "$tmp/sp/eval/passkey-stage1.json" "$tmp/sp_kept.json"

# errors before any work: exit 1 with one line, nothing created
err_case() { # DESCRIPTION PATTERN ARGS...
    local what=$1 pat=$2; shift 2
    rm -rf "$tmp/e"
    run "$@" --out "$tmp/e"
    check "$what: fails" [ "$(rc)" -ne 0 ]
    check "$what: message '$pat' ($(cat "$tmp/err"))" grep -q "$pat" "$tmp/err"
    check "$what: nothing created" [ ! -e "$tmp/e" ]
}
printf 'name: bad\nstages:\n  - seq_len: 128\n    bogus_key: 1\n' >"$tmp/bad.yaml"
err_case "bad recipe" "bad.yaml:4" "$model" --to 256 --recipe "$tmp/bad.yaml" --ids "$tmp/ids.txt"
err_case "missing data" "nodata" "$model" --to 256 --recipe "$tmp/tiny.yaml" --data "$tmp/nodata"
err_case "missing ids" "noids" "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/noids"
err_case "--passkey without a tokenizer" "passkey needs the input's tokenizer" "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --passkey 1
printf 'name: short\ndefaults: {steps: 1, tokens_per_batch: 512, eval_lengths: [32, 512], lr: {peak: 1e-3, warmup_steps: 0}}\nstages:\n  - seq_len: 512\n' >"$tmp/short.yaml"
err_case "eval length too short for the passkey prompt" "passkey length 32: .*shorter than the prompt" "$tinym" --to 512 --recipe "$tmp/short.yaml" --ids "$tmp/ids2k.txt" --eval-data "$tmp/words" --passkey 1
err_case "32 passkey needles do not fit 256 tokens" "passkey length 256: .*shorter than the prompt" "$tinym" --to 512 \
    --recipe "$tmp/pk.yaml" --ids "$tmp/ids2k.txt" --eval-data "$tmp/words" --needles 32
err_case "--needles with the passkey test off" "flag --needles: the passkey test is off" "$tinym" --to 512 \
    --recipe "$tmp/pk.yaml" --ids "$tmp/ids2k.txt" --eval-data "$tmp/words" --passkey 0 --needles 3
err_case "missing --haystack file" "haystack: .*nohay.txt" "$tinym" --to 512 --recipe "$tmp/pk.yaml" \
    --ids "$tmp/ids2k.txt" --eval-data "$tmp/words" --haystack "$tmp/nohay.txt"
err_case "--haystack with the passkey test off" "flag --haystack: the passkey test is off" "$tinym" --to 512 \
    --recipe "$tmp/pk.yaml" --ids "$tmp/ids2k.txt" --haystack "$tmp/words.txt"
err_case "--stage-passkey with the passkey test off" "flag --stage-passkey: the passkey test is off" "$tinym" \
    --to 512 --recipe "$tmp/pk.yaml" --ids "$tmp/ids2k.txt" --eval-data "$tmp/words" --passkey 0 --stage-passkey
printf 'name: short2\ndefaults: {steps: 1, tokens_per_batch: 512, lr: {peak: 1e-3, warmup_steps: 0}}\nstages:\n  - {seq_len: 384, tokens_per_batch: 384, eval_lengths: [32, 384]}\n  - {seq_len: 512, eval_lengths: [256, 512]}\n' >"$tmp/short2.yaml"
err_case "--stage-passkey: a stage's eval length too short" "stage 1's eval lengths (--stage-passkey): passkey length 32" \
    "$tinym" --to 512 --recipe "$tmp/short2.yaml" --ids "$tmp/ids2k.txt" --eval-data "$tmp/words" --passkey 1 --stage-passkey
err_case "missing eval data" "noeval" "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --eval-data "$tmp/noeval"
awk 'BEGIN { for (i = 0; i < 10; i++) printf "%d ", i * 40 }' >"$tmp/big_ids.txt"
err_case "ids beyond the vocabulary" "token 7: id 280 is not below the vocabulary size 256" "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/big_ids.txt"
err_case "--to below the context" "64" "$model" --to 32 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt"
printf 'name: odd\ndefaults: {steps: 1}\nstages:\n  - seq_len: 127\n  - seq_len: 256\n' >"$tmp/odd.yaml"
rm -rf "$tmp/e"
run "$model" --to 256 --recipe "$tmp/odd.yaml" --ids "$tmp/ids.txt" --out "$tmp/e" --tokens-per-s 1
check "stage length not a multiple of 2*CP: refused" [ "$(rc)" -ne 0 ]
check "odd length: nothing created" [ ! -e "$tmp/e" ]
check "odd length: names the recipe line" grep -q "odd.yaml:4" "$tmp/err"
run "$model" --to 256 --recipe "$tmp/tiny.yaml" --ids "$tmp/ids.txt" --out "$tmp/full"
check "existing run without --resume: refused" grep -q "already holds a run" "$tmp/err"
run notacommand
check "typo stays an unknown command" grep -q "unknown command 'notacommand'" "$tmp/err"
run ./no/such/model --to 256 --ids "$tmp/ids.txt"
check "missing checkpoint path: not found" grep -q "no such checkpoint" "$tmp/err"

# flag syntax: strict numbers and lists, missing values, stray operands; refused before anything is created
rm -rf "$tmp/e"
bad_flag "--passkey 'x' is not an integer in [0, 100000]" "$model" --to 256 --ids "$tmp/ids.txt" --passkey=x \
    --out "$tmp/e"
bad_flag "--keep '-1'" "$model" --to 256 --ids "$tmp/ids.txt" --keep -1 --out "$tmp/e"
bad_flag "--tokens-per-s 'nan' is not a positive number" "$model" --to 256 --ids "$tmp/ids.txt" --tokens-per-s nan \
    --out "$tmp/e"
bad_flag "--to '12kk' is not a length" "$model" --to=12kk --ids "$tmp/ids.txt" --out "$tmp/e"
bad_flag "--depths '0,1.5': '1.5' is not a number in [0, 1]" "$model" --to 256 --ids "$tmp/ids.txt" --depths 0,1.5 \
    --out "$tmp/e"
bad_flag "--dtype 'fp32' (expected f32 or bf16)" "$model" --to 256 --ids "$tmp/ids.txt" --dtype fp32 --out "$tmp/e"
bad_flag "flag --recipe needs a value" "$model" --to 256 --ids "$tmp/ids.txt" --out "$tmp/e" --recipe
bad_flag "unexpected argument 'stray'" "$model" stray --to 256 --ids "$tmp/ids.txt" --out "$tmp/e"
check "flag errors: nothing created" [ ! -e "$tmp/e" ]

[ "$fail" -eq 0 ] && echo "extend: all checks passed"
exit "$fail"
