# lcextend train --mlp-tile N (docs/model.md "Tiled MLP in training"): on the qwen3 fixture, --policy recompute with
# --mlp-tile 5 (ragged tiles of 2 x 24 tokens) and --mlp-tile 1k (a length unit; more than the tokens: untiled)
# give the loss curve of the untiled run, each loss within 1e-5 relative (float32 sums in another order: measured
# ~1e-7 on step 1, test_model_mlp_tiles); a tile of 0 or a non-number is a one-line usage error.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
check_shows_err=1
model="$LCX_SRC/tests/fixtures/models/qwen3"
awk 'BEGIN { s = 5; for (i = 0; i < 600; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 128 } }' >"$tmp/ids.txt"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
train() { run train "$model" --ids "$tmp/ids.txt" --seq 24 --batch 2 --steps 4 --lr 1e-3 --quiet --out "$@"; }

train "$tmp/ref" --policy recompute
check "untiled run" [ "$(rc)" -eq 0 ]
for t in 5 1k; do
    train "$tmp/tile$t" --policy recompute --mlp-tile "$t"
    check "--mlp-tile $t runs" [ "$(rc)" -eq 0 ]
    paste <(field "$tmp/ref/metrics.jsonl" loss) <(field "$tmp/tile$t/metrics.jsonl" loss) >"$tmp/losses"
    check "--mlp-tile $t: 4 losses each" [ "$(awk 'NF == 2' "$tmp/losses" | wc -l)" -eq 4 ]
    while read -r a b; do check "--mlp-tile $t: loss $b vs $a untiled, 1e-5" close "$b" "$a" 1e-5; done <"$tmp/losses"
done

# the main command trains with the plan's MLP tile: --mlp-tile 5 is the plan's (its layout line says so) and the
# run follows the untiled run's losses (llama_gqa, one 128-token stage, 2 steps)
gqa="$LCX_SRC/tests/fixtures/models/llama_gqa"
awk 'BEGIN { s = 7; for (i = 0; i < 1200; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/gqa.txt"
cat >"$tmp/r.yaml" <<'YAML'
name: tile-test
defaults: {method: yarn, factor: auto, steps: 2, lr: {peak: 1e-3, warmup_steps: 1}, tokens_per_batch: 256,
           eval_lengths: [64], activation: recompute, seed: 7}
stages:
  - seq_len: 128
YAML
extend() { run "$gqa" --to 128 --recipe "$tmp/r.yaml" --ids "$tmp/gqa.txt" --keep 0 --quiet --passkey 0 --out "$@"; }
run "$gqa" --to 128 --recipe "$tmp/r.yaml" --dry-run --mlp-tile 5
check "main command --mlp-tile 5: the plan's tile" grep -q "^layout: .*; loss chunk [0-9]*, MLP tile 5;" "$tmp/out"
extend "$tmp/x0"
check "main command untiled ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
extend "$tmp/x5" --mlp-tile 5
check "main command --mlp-tile 5 ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
paste <(field "$tmp/x0/metrics.jsonl" loss) <(field "$tmp/x5/metrics.jsonl" loss) | awk 'NF == 2' >"$tmp/losses"
check "main command --mlp-tile 5: 2 losses" [ "$(wc -l <"$tmp/losses")" -eq 2 ]
while read -r a b; do check "main command --mlp-tile 5: loss $b vs $a untiled, 1e-5" close "$b" "$a" 1e-5; done <"$tmp/losses"

bad_flag "--mlp-tile" train "$model" --ids "$tmp/ids.txt" --seq 24 --steps 1 --out "$tmp/bad" --mlp-tile 0
bad_flag "--mlp-tile" train "$model" --ids "$tmp/ids.txt" --seq 24 --steps 1 --out "$tmp/bad" --mlp-tile x

[ $fail -eq 0 ] && echo "cli mlp_tile: ok"
exit $fail
