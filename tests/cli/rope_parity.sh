#!/usr/bin/env bash
# Parity beyond the pretraining length through the CLI: `lcextend score DIR --ids DIR/ids.txt --logits OUT.npy`
# for every tests/fixtures/rope_models/<type> (max_position_embeddings 64 or L*s, 256 tokens) against
# transformers' logits.npy (max row-relative error 1e-4); `lcextend rope --show --json --seq 256` against the
# inv_freq/attention factor HF's rotary module used (rope.json); and zero-shot extensions of the plain fixture
# (`lcextend rope default --to 256 --method yarn|pi|llama3 --out X`) scored against the fixture HF ran with that
# rope (same weights, same L): the written directory really is the model transformers would run.
# The .npy/.json comparisons are done by test_rope_parity's --compare modes (C, no Python in CI).
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
: "${LCX_BUILD:?}"
cmp_bin="$LCX_BUILD/tests/test_rope_parity"
[ -x "$cmp_bin" ] || { echo "FAIL: $cmp_bin not built"; exit 1; }
fx="$LCX_SRC/tests/fixtures/rope_models"
n=0
for d in "$fx"/*/; do
    d=${d%/}
    t=$(basename "$d")
    [ -f "$d/logits.npy" ] || continue
    n=$((n + 1))
    check "$t: score exits 0" "$LCEXTEND" score "$d" --ids "$d/ids.txt" --logits "$tmp/$t.npy" >"$tmp/out" 2>&1
    check "$t: 256 tokens scored" grep -q "256 (255 predicted)" "$tmp/out"
    check "$t: logits within 1e-4 of transformers" "$cmp_bin" --compare "$tmp/$t.npy" "$d/logits.npy" 1e-4
    check "$t: rope --show exits 0" "$LCEXTEND" rope "$d" --show --json --seq 256 >"$tmp/$t.json" 2>/dev/null
    check "$t: rope --show inv_freq as HF's" "$cmp_bin" --compare-rope "$tmp/$t.json" "$d/rope.json"
done
check "7 rope fixtures found ($n)" [ "$n" -eq 7 ]

# The metric is not blind: the plain model's logits are far from yarn's.
check "compare rejects different logits" fails "$cmp_bin" --compare "$tmp/default.npy" "$fx/yarn/logits.npy" 1e-4

for pair in yarn:yarn pi:linear llama3:llama3; do
    m=${pair%%:*} ref=${pair#*:}
    out="$tmp/zs_$m"
    check "$m: rope --to 256 exits 0" "$LCEXTEND" rope "$fx/default" --to 256 --method "$m" --out "$out" >/dev/null
    check "$m: weights hard-linked (same inode)" [ "$(stat -c %i "$out/model.safetensors")" = \
        "$(stat -c %i "$fx/default/model.safetensors")" ]
    check "$m: zero-shot dir scores" "$LCEXTEND" score "$out" --ids "$fx/default/ids.txt" --logits "$tmp/zs_$m.npy" \
        >/dev/null
    check "$m: zero-shot logits = transformers on the $ref fixture" \
        "$cmp_bin" --compare "$tmp/zs_$m.npy" "$fx/$ref/logits.npy" 1e-4
done
[ "$fail" -eq 0 ] && echo "rope_parity: OK ($n fixtures)"
exit "$fail"
