#!/usr/bin/env bash
# A data mix (docs/extend.md "Data mixes"): --data given twice with --data-weights. On the bundled tiny model, a
# "long" dataset of long documents and a "short" one, weights 3 : 1:
#   - 4 steps of 2 sequences draw 6 samples from long and 2 from short (the shares, exactly: each sample is
#     drawn whole from the source furthest behind its share), as the checkpoints' training state records;
#   - a mix differs from either dataset alone, and swapping the weights changes the losses;
#   - --resume from step 2 gives the unbroken run's steps 3 and 4; a resume with other weights, or with one
#     --data, is refused with one line;
#   - flag errors are one line, exit 2, before any work;
#   - the main command takes the mix for every stage and records it in the run;
#   - under mpirun, --dp 2 gives the one-process losses and cursors.
# The sampling itself (every sample from one source, each source's samples those of its sampler alone, a saved
# cursor continuing exactly) is tests/unit/test_mix.c.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
model="$LCX_SRC/recipes/tiny/model"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# two corpora from one generator: 30 documents of 80-140 words, 120 of 3-10 words
corpus() { # N MIN SPAN SEED
    awk -v nd="$1" -v lo="$2" -v span="$3" -v s="$4" 'BEGIN { for (d = 0; d < nd; d++) { n = lo + d % span;
        for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648;
            printf "%s ", substr("the a of to in and is it we on", 1 + 3 * (int(s / 65536) % 10), 3) }
        printf "\n\n" } }'
}
corpus 30 80 61 5 >"$tmp/long.txt"
corpus 120 3 8 9 >"$tmp/short.txt"
for c in long short; do
    run tokenize --tokenizer "$model/tokenizer.json" --input "$tmp/$c.txt" --split blank-line --output "$tmp/$c" --quiet
    check "tokenize $c ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
done
train() { run train "$model" --seq 64 --batch 2 --steps 4 --lr 1e-3 --quiet "$@"; }
refused() { [ "$(rc)" -eq 1 ] && one_line_err && grep -qF -- "$1" "$tmp/err"; } # exit 1, one line holding $1
absent() { for p in "$@"; do [ ! -e "$p" ] || return 1; done; }

train --data "$tmp/long" --data "$tmp/short" --data-weights 3,1 --out "$tmp/mix" --save-every 2 --keep 0
check "mix 3:1 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
# the training state's "mix" on one line: {"weights":[...],"cursors":[[epoch,pos,offset,samples],...]}
mix_of() { tr -d ' \n' <"$1" | grep -o '"mix":{[^}]*}'; }
state="$tmp/mix/checkpoints/s01-step000004/manifest.json"
mix=$(mix_of "$state")
check "the training state records the weights 0.75, 0.25 ($mix)" grep -qF '"weights":[0.75,0.25]' <<<"$mix"
samples=$(grep -oE '[0-9]+\]' <<<"${mix#*cursors}" | tr -d ']' | tr '\n' ' ')
check "8 samples: 6 from long, 2 from short (got: $samples)" [ "$samples" = "6 2 " ]
check "the run records the mix" grep -qE '"data_mix": ?\[' "$state"
run inspect "$tmp/mix/checkpoints/s01-step000004"
check "inspect shows the mix ($(grep data_mix "$tmp/out"))" \
    grep -qE '^data_mix: +\[\{"data":"[^"]*long","weight":3(\.0)?\},\{"data":"[^"]*short","weight":1(\.0)?\}\]' "$tmp/out"

train --data "$tmp/long" --out "$tmp/long_only"
check "long alone ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
train --data "$tmp/short" --out "$tmp/short_only"
check "short alone ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
train --data "$tmp/long" --data "$tmp/short" --data-weights 1,3 --out "$tmp/mix13"
check "mix 1:3 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
for other in long_only short_only mix13; do
    check "the 3:1 mix's losses differ from $other's" \
        [ "$(field "$tmp/mix/metrics.jsonl" loss)" != "$(field "$tmp/$other/metrics.jsonl" loss)" ]
done
check "a one-source run records no mix" fails grep -q '"mix"' "$tmp/long_only/checkpoints/s01-step000004/manifest.json"

# --resume from step 2
resume_from_2() {
    rm -rf "$tmp/res" && mkdir -p "$tmp/res/checkpoints" && cp -r "$tmp/mix/checkpoints/s01-step000002" \
        "$tmp/res/checkpoints/" && echo s01-step000002 >"$tmp/res/checkpoints/latest"
    train --out "$tmp/res" --resume "$@"
}
resume_from_2 --data "$tmp/long" --data "$tmp/short" --data-weights 3,1
check "--resume ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--resume: steps 3 and 4 as the unbroken run" \
    same "$(field "$tmp/res/metrics.jsonl" loss)" "$(field "$tmp/mix/metrics.jsonl" loss | sed -n 3,4p)"
resume_from_2 --data "$tmp/long" --data "$tmp/short" --data-weights 1,1
check "--resume with other weights: exit 1" [ "$(rc)" -eq 1 ]
check "--resume with other weights: one line naming the mix ($(head -c 300 "$tmp/err"))" \
    grep -q "data mix of 2 sources; this run has 2 (use the same --data and --data-weights)" "$tmp/err"
check "--resume with other weights: one line" one_line_err
resume_from_2 --data "$tmp/long"
check "--resume with one --data: exit 1, one line ($(head -c 300 "$tmp/err"))" \
    refused "data mix of 2 sources; this run has 1"

# flag errors: one line, exit 2, nothing created
bad_flag "a data mix needs --data-weights with 2 weights (got 0)" \
    train "$model" --data "$tmp/long" --data "$tmp/short" --seq 64 --steps 1 --out "$tmp/bad1"
bad_flag "a data mix needs --data-weights with 2 weights (got 3)" \
    train "$model" --data "$tmp/long" --data "$tmp/short" --data-weights 1,2,3 --seq 64 --steps 1 --out "$tmp/bad2"
bad_flag "--data-weights: weights a data mix of two or more --data (got 1)" \
    train "$model" --data "$tmp/long" --data-weights 1 --seq 64 --steps 1 --out "$tmp/bad3"
bad_flag "'0' is not a positive number" \
    train "$model" --data "$tmp/long" --data "$tmp/short" --data-weights 1,0 --seq 64 --steps 1 --out "$tmp/bad4"
bad_flag "more than 8 values" train "$model" --data a --data b --data c --data d --data e --data f --data g \
    --data h --data i --seq 64 --steps 1 --out "$tmp/bad5"
bad_flag "a data mix needs --data-weights" "$model" --to 512 --data "$tmp/long" --data "$tmp/short" --out "$tmp/bad6"
check "no run directory was created" absent "$tmp/bad1" "$tmp/bad2" "$tmp/bad6"
run train "$model" --data "$tmp/long" --data "$tmp/nothing" --data-weights 1,1 --seq 64 --steps 1 --out "$tmp/bad7"
check "a missing second source: exit 1, one line naming it ($(head -c 300 "$tmp/err"))" refused "nothing"
check "a missing second source: no run directory" [ ! -e "$tmp/bad7" ]

# long-document sampling (docs/extend.md "Long-document sampling"): the settings go together, a filter that leaves
# no document is one line naming the data, and a mix with upsampling records it
bad_flag "--long-doc-tokens N and --long-doc-repeat R go together" \
    train "$model" --data "$tmp/long" --seq 64 --steps 1 --out "$tmp/bad8" --long-doc-tokens 100
run train "$model" --data "$tmp/long" --data "$tmp/short" --data-weights 3,1 --seq 64 --steps 1 --out "$tmp/bad9" \
    --min-doc-tokens 100k
check "--min-doc-tokens 100k: exit 1 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 1 ]
check "--min-doc-tokens 100k: one line naming the data" refused "long: no document has at least 102400 tokens"
train --data "$tmp/long" --data "$tmp/short" --data-weights 3,1 --out "$tmp/up" --min-doc-tokens 8 \
    --long-doc-tokens 100 --long-doc-repeat 3
check "a mix with length upsampling ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "the training state records the sampling" \
    grep -qE '"long_doc_repeat": ?3' "$tmp/up/checkpoints/s01-step000004/manifest.json"
check "upsampling changes the losses" \
    [ "$(field "$tmp/up/metrics.jsonl" loss)" != "$(field "$tmp/mix/metrics.jsonl" loss)" ]

# the main command: the mix in every stage, recorded in the run
recipe "$tmp/two.yaml" mix-test 512 "64" 256 512
run "$model" --to 512 --recipe "$tmp/two.yaml" --data "$tmp/long" --data "$tmp/short" --data-weights 3,1 \
    --out "$tmp/ext" --keep 0 --quiet --passkey 0
check "lcextend --to 512 with a mix ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
last=$(cat "$tmp/ext/checkpoints/latest" 2>/dev/null)
check "the extension's last checkpoint records the mix ($(mix_of "$tmp/ext/checkpoints/$last/manifest.json"))" \
    grep -qF '"weights":[0.75,0.25]' <<<"$(mix_of "$tmp/ext/checkpoints/$last/manifest.json")"

# DP 2 under mpirun: each rank trains on its share of the same mixed samples, so the losses are the one-process
# run's with --batch 2
if [ -z "${MPIEXEC:-}" ] || ! [ -x "$MPIEXEC" ]; then
    echo "no mpirun: the DP part skipped"
    [ "$fail" -eq 0 ] && echo "train_mix: all checks passed"
    exit "$fail"
fi
mpi 2 train "$model" --seq 64 --batch 1 --steps 4 --lr 1e-3 --quiet --data "$tmp/long" --data "$tmp/short" \
    --data-weights 3,1 --out "$tmp/dp2" --dp 2
check "mpirun -np 2 --dp 2 with a mix ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
paste <(field "$tmp/mix/metrics.jsonl" loss) <(field "$tmp/dp2/metrics.jsonl" loss) >"$tmp/dp_losses"
check "--dp 2: 4 losses" [ "$(awk 'NF == 2' "$tmp/dp_losses" | wc -l)" -eq 4 ]
while read -r a b; do check "--dp 2: loss $b vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done <"$tmp/dp_losses"
check "--dp 2: the same counts in the training state" \
    same "$(mix_of "$tmp/dp2/checkpoints/s01-step000004/manifest.json")" "$(mix_of "$state")"
[ "$fail" -eq 0 ] && echo "train_mix: all checks passed"
exit "$fail"
