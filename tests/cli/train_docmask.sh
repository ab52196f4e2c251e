#!/usr/bin/env bash
# lcextend train --doc-mask (docs/extend.md "Document masking"): attention stays inside each document of a packed
# sequence. On the bundled tiny model and short documents: the mask changes the losses; on one document longer
# than every sequence it changes nothing, bit for bit; the checkpoints record it and --resume continues exactly
# with it and refuses a run without it; under mpirun, --cp 2 --doc-mask
# gives the one-process --doc-mask losses (the document starts permuted with the tokens). The model-level
# reference (packed documents == each document alone) is tests/unit/test_model_docmask.c.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
model="$LCX_SRC/recipes/tiny/model"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }

# 60 documents of 10-40 words, one per blank-line-separated paragraph
awk 'BEGIN { s = 11; for (d = 0; d < 60; d++) { n = 10 + d % 31; for (i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) % 2147483648; printf "%s ", substr("the a of to in and is it we on", 1 + 3 * (int(s / 65536) % 10), 3) }
    printf "\n\n" } }' >"$tmp/docs.txt"
run tokenize --tokenizer "$model/tokenizer.json" --input "$tmp/docs.txt" --split blank-line --output "$tmp/data" --quiet
check "tokenize 60 documents ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]

run train "$model" --data "$tmp/data" --seq 64 --steps 4 --lr 1e-3 --out "$tmp/causal" --quiet
check "causal ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
run train "$model" --data "$tmp/data" --seq 64 --steps 4 --lr 1e-3 --out "$tmp/doc" --doc-mask --save-every 2 \
    --keep 0 --quiet
check "--doc-mask ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--doc-mask: 4 steps" [ "$(field "$tmp/doc/metrics.jsonl" loss | wc -l)" -eq 4 ]
paste <(field "$tmp/causal/metrics.jsonl" loss) <(field "$tmp/doc/metrics.jsonl" loss) >"$tmp/losses"
check "the mask changes every step's loss ($(tr '\n\t' '; ' <"$tmp/losses"))" awk '$1 == $2 { exit 1 }' "$tmp/losses"
check "the checkpoint records attention_mask document" \
    grep -qE '"attention_mask": ?"document"' "$tmp/doc/checkpoints/s01-step000004/manifest.json"
check "and causal without the flag" \
    grep -qE '"attention_mask": ?"causal"' "$tmp/causal/checkpoints/s01-step000004/manifest.json"

# --resume from step 2: with --doc-mask the unbroken run's last two losses; without it refused, one line
resume_from_2() {
    rm -rf "$tmp/res" && mkdir -p "$tmp/res/checkpoints" && cp -r "$tmp/doc/checkpoints/s01-step000002" \
        "$tmp/res/checkpoints/" && echo s01-step000002 >"$tmp/res/checkpoints/latest"
    run train "$model" --data "$tmp/data" --seq 64 --steps 4 --lr 1e-3 --out "$tmp/res" --resume --quiet "$@"
}
resume_from_2
check "--resume without --doc-mask: exit 1" [ "$(rc)" -eq 1 ]
check "--resume without --doc-mask: one line naming the mask ($(head -c 300 "$tmp/err"))" \
    grep -q "attention_mask document; this run has causal" "$tmp/err"
check "--resume without --doc-mask: one line" one_line_err
resume_from_2 --doc-mask
check "--resume --doc-mask ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--resume --doc-mask: steps 3 and 4 as the unbroken run" \
    same "$(field "$tmp/res/metrics.jsonl" loss)" "$(field "$tmp/doc/metrics.jsonl" loss | sed -n 3,4p)"

# one document longer than the 4 x 32 tokens drawn: nothing to mask
awk 'BEGIN { for (i = 0; i < 400; i++) printf "%d ", (i * 37 + 5) % 2000 }' >"$tmp/ids.txt"
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 4 --lr 1e-3 --out "$tmp/one_c" --quiet
check "one document, causal ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 4 --lr 1e-3 --out "$tmp/one_d" --doc-mask --quiet
check "one document, --doc-mask ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "one document: the same losses, bit for bit" \
    same "$(field "$tmp/one_c/metrics.jsonl" loss)" "$(field "$tmp/one_d/metrics.jsonl" loss)"

# CP 2 against one process
if [ -z "${MPIEXEC:-}" ] || ! [ -x "$MPIEXEC" ]; then
    echo "no mpirun: the CP part skipped"
    [ "$fail" -eq 0 ] && echo "train_docmask: all checks passed"
    exit "$fail"
fi
mpi 2 train "$model" --data "$tmp/data" --seq 64 --steps 4 --lr 1e-3 --out "$tmp/cp2" --doc-mask --cp 2 --quiet
check "mpirun -np 2 --cp 2 --doc-mask ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
paste <(field "$tmp/doc/metrics.jsonl" loss) <(field "$tmp/cp2/metrics.jsonl" loss) >"$tmp/cp_losses"
check "--cp 2: 4 losses" [ "$(awk 'NF == 2' "$tmp/cp_losses" | wc -l)" -eq 4 ]
while read -r a b; do check "--cp 2 --doc-mask: loss $b vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done \
    <"$tmp/cp_losses"
[ "$fail" -eq 0 ] && echo "train_docmask: all checks passed"
exit "$fail"
