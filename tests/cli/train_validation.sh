#!/usr/bin/env bash
# Validation during training (docs/extend.md "Validation"): --eval-data PREFIX with --eval-every K writes the
# held-out loss at the training length after every K-th step and the last. On the bundled tiny model:
#   - the validation lines come after steps 2 and 4 of 4, and the training losses are those of a run without
#     validation, bit for bit (evaluating leaves the training as it was);
#   - the last one equals `lcextend eval` of the step-4 checkpoint (non-overlapping windows of --seq, short
#     documents scored, the same BOS): the same tokens and perplexity; --eval-docs 5 equals eval of a dataset of
#     the first 5 documents alone;
#   - flag errors are one line before any work;
#   - under mpirun, --cp 2 (the ring scores each window), --dp 2 and --tp 2 give the one-process validation
#     losses;
#   - the main command validates in each stage with --eval-every.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
model="$LCX_SRC/recipes/tiny/model"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# training text and held-out text: 40 and 12 paragraphs of pseudo-random words (the held-out ones of 20-97 words:
# some shorter than a window)
words() { # N_DOCS SEED
    awk -v nd="$1" -v s="$2" 'BEGIN { for (d = 0; d < nd; d++) { n = 20 + (d * 7) % 78;
        for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648;
            printf "%s ", substr("the a of to in and is it we on", 1 + 3 * (int(s / 65536) % 10), 3) }
        printf "\n\n" } }'
}
words 40 3 >"$tmp/train.txt"
words 12 11 >"$tmp/held.txt"
awk 'BEGIN { RS = ""; ORS = "\n\n" } NR <= 5' "$tmp/held.txt" >"$tmp/held5.txt"
for c in train held held5; do
    run tokenize --tokenizer "$model/tokenizer.json" --input "$tmp/$c.txt" --split blank-line --output "$tmp/$c" --quiet
    check "tokenize $c ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
done
train() { run train "$model" --data "$tmp/train" --seq 64 --steps 4 --lr 1e-3 --quiet "$@"; }
# the step lines' losses, and the validation lines' fields
losses() { grep -v val_loss "$1" | field /dev/stdin loss; }
same() { [ -n "$1" ] && [ "$1" = "$2" ]; } # equal and not empty
# FIELD of the first result of an `lcextend eval --json` file
result() { tr -d ' \n' <"$1" | grep -o "\"results\":\[{.*" | grep -o "\"$2\":[0-9][0-9.e+-]*" | head -1 | cut -d: -f2; }
vals() { grep val_loss "$1" | field /dev/stdin "$2"; }

train --out "$tmp/plain"
check "without validation ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
train --out "$tmp/val" --eval-data "$tmp/held" --eval-every 2
check "--eval-every 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "validation after steps 2 and 4 ($(vals "$tmp/val/metrics.jsonl" step | tr '\n' ' '))" \
    [ "$(vals "$tmp/val/metrics.jsonl" step | tr '\n' ' ')" = "2 4 " ]
check "the training losses are the run's without validation, bit for bit" \
    same "$(losses "$tmp/val/metrics.jsonl")" "$(losses "$tmp/plain/metrics.jsonl")"
check "the validation loss changes as the model trains" \
    [ "$(vals "$tmp/val/metrics.jsonl" val_loss | sort -u | wc -l)" -eq 2 ]

# the last validation against lcextend eval of the checkpoint it was taken on
ckpt="$tmp/val/checkpoints/s01-step000004"
run eval "$ckpt" --data "$tmp/held" --lengths 64 --stride 0 --short score --json "$tmp/eval.json"
check "eval of the step-4 checkpoint ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
ref_ppl=$(result "$tmp/eval.json" ppl)
ref_tok=$(result "$tmp/eval.json" tokens)
got_ppl=$(vals "$tmp/val/metrics.jsonl" val_ppl | tail -1)
got_tok=$(vals "$tmp/val/metrics.jsonl" val_tokens | tail -1)
check "the last validation scores eval's tokens ($got_tok vs $ref_tok)" same "$got_tok" "$ref_tok"
check "the last validation perplexity is eval's ($got_ppl vs $ref_ppl, 1e-6)" close "$got_ppl" "${ref_ppl:-0}" 1e-6

train --out "$tmp/val5" --eval-data "$tmp/held" --eval-docs 5
check "--eval-docs 5, after the last step only ($(head -c 300 "$tmp/err"))" same "$(vals "$tmp/val5/metrics.jsonl" step)" 4
run eval "$ckpt" --data "$tmp/held5" --lengths 64 --stride 0 --short score --json "$tmp/eval5.json"
ref5=$(result "$tmp/eval5.json" ppl)
check "--eval-docs 5: eval of the first 5 documents alone ($(vals "$tmp/val5/metrics.jsonl" val_ppl) vs $ref5)" \
    close "$(vals "$tmp/val5/metrics.jsonl" val_ppl)" "${ref5:-0}" 1e-6

# flag errors
bad_flag "--eval-every: validation needs --eval-data PREFIX" \
    train "$model" --data "$tmp/train" --seq 64 --steps 4 --out "$tmp/bad1" --eval-every 2
bad_flag "--eval-every '0'" \
    train "$model" --data "$tmp/train" --seq 64 --steps 4 --out "$tmp/bad2" --eval-data "$tmp/held" --eval-every 0
bad_flag "--eval-every: validation needs --eval-data PREFIX" "$model" --to 512 --data "$tmp/train" --eval-every 2
run train "$model" --data "$tmp/train" --seq 64 --steps 4 --out "$tmp/bad3" --eval-data "$tmp/nothing"
check "a missing --eval-data: exit 1 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 1 ]
check "a missing --eval-data: one line naming it" one_line_err
check "a missing --eval-data: names it" grep -q "nothing" "$tmp/err"
check "a missing --eval-data: no run directory" [ ! -e "$tmp/bad3" ]

# the main command: validation in its stage at the stage's length
recipe "$tmp/one.yaml" val-test 512 "128" 512
run "$model" --to 512 --recipe "$tmp/one.yaml" --data "$tmp/train" --eval-data "$tmp/held" --eval-every 1 \
    --passkey 0 --out "$tmp/ext" --keep 0 --quiet
check "lcextend --to 512 --eval-every 1 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "a validation line after each of the stage's 2 steps" \
    [ "$(vals "$tmp/ext/metrics.jsonl" step | tr '\n' ' ')" = "1 2 " ]

# CP 2, DP 2 and TP 2 against one process
if [ -z "${MPIEXEC:-}" ] || ! [ -x "$MPIEXEC" ]; then
    echo "no mpirun: the CP and DP parts skipped"
    [ "$fail" -eq 0 ] && echo "train_validation: all checks passed"
    exit "$fail"
fi
for mode in "cp 2" "dp 2" "tp 2"; do
    set -- $mode
    # DP 2 trains on 2 sequences a step: its one-process reference is --batch 2
    ref="$tmp/val"
    if [ "$1" = dp ]; then
        train --out "$tmp/val_b2" --eval-data "$tmp/held" --eval-every 2 --batch 2
        ref="$tmp/val_b2"
    fi
    mpi 2 train "$model" --data "$tmp/train" --seq 64 --steps 4 --lr 1e-3 --quiet --out "$tmp/mpi_$1" \
        --eval-data "$tmp/held" --eval-every 2 "--$1" 2
    check "mpirun -np 2 --$1 2 with validation ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    paste <(vals "$ref/metrics.jsonl" val_loss) <(vals "$tmp/mpi_$1/metrics.jsonl" val_loss) >"$tmp/pairs"
    check "--$1 2: 2 validation losses" [ "$(awk 'NF == 2' "$tmp/pairs" | wc -l)" -eq 2 ]
    while read -r a b; do check "--$1 2: validation loss $b vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done \
        <"$tmp/pairs"
    # every window scored once: with --dp the ranks score shards of them, added up (docs/extend.md "Validation")
    check "--$1 2: the same validation tokens" \
        same "$(vals "$ref/metrics.jsonl" val_tokens)" "$(vals "$tmp/mpi_$1/metrics.jsonl" val_tokens)"
done
[ "$fail" -eq 0 ] && echo "train_validation: all checks passed"
exit "$fail"
