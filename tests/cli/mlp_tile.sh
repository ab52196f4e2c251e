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

bad_flag "--mlp-tile" train "$model" --ids "$tmp/ids.txt" --seq 24 --steps 1 --out "$tmp/bad" --mlp-tile 0
bad_flag "--mlp-tile" train "$model" --ids "$tmp/ids.txt" --seq 24 --steps 1 --out "$tmp/bad" --mlp-tile x

[ $fail -eq 0 ] && echo "cli mlp_tile: ok"
exit $fail
