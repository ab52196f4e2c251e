#!/usr/bin/env bash
# The extension export path through the CLI against transformers (tests/fixtures/extended, gen_extended.py: the
# bundled tiny model zero-shot yarn-extended to 2048, run by transformers over 2048 held-out tokens):
#   lcextend rope recipes/tiny/model --to 2048 --method yarn --out ZS     (what a stage's config is)
#   -> lcextend import ZS --out Z.lcx -> lcextend export Z.lcx --format hf   (what `lcextend CKPT --to` exports)
#   -> lcextend export Z.lcx --format gguf -> lcextend import G.gguf -> export hf   (the GGUF read back)
# Each directory's config.json carries the fixture's rope (type, factor, original length, theta, max positions),
# `lcextend score DIR --logits` matches transformers at 1e-4 (max row-relative error over the fixture's rows and
# max |next-token log-prob difference| over all 2047 positions), and `rope --show` gives HF's inv_freq and
# attention factor. Comparisons are done by test_extended_export / test_rope_parity helper modes (C, no Python).
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
: "${LCX_BUILD:?}"
cmp_bin="$LCX_BUILD/tests/test_extended_export"
rope_bin="$LCX_BUILD/tests/test_rope_parity"
for b in "$cmp_bin" "$rope_bin"; do [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }; done
fx="$LCX_SRC/tests/fixtures/extended"
model="$LCX_SRC/recipes/tiny/model"
ids="$fx/ids.txt"

# The fixture was made from these exact weights; a retrained bundled model needs `make_fixtures.py --only extended`.
for f in "$model"/*.safetensors; do
    sum=$(sha256sum "$f" | cut -d' ' -f1)
    if ! grep -q "\"$(basename "$f")\": \"$sum\"" "$fx/reference.json"; then
        echo "FAIL: $f changed since tests/fixtures/extended was generated (regenerate: make_fixtures.py --only extended)"
        exit 1
    fi
done

# check_dir NAME DIR: config rope, logits, rope tables of an HF directory we wrote.
check_dir() {
    local name=$1 dir=$2
    check "$name: config.json rope as the fixture's" "$cmp_bin" --compare-config "$dir/config.json" "$fx"
    check "$name: score exits 0" "$LCEXTEND" score "$dir" --ids "$ids" --logits "$tmp/$name.npy" >"$tmp/$name.out" 2>&1
    check "$name: 2048 tokens scored" grep -q "2048 (2047 predicted)" "$tmp/$name.out"
    check "$name: logits within 1e-4 of transformers" "$cmp_bin" --compare "$tmp/$name.npy" "$fx" 1e-4
    check "$name: rope --show exits 0" "$LCEXTEND" rope "$dir" --show --json --seq 2048 >"$tmp/$name.json" 2>/dev/null
    check "$name: inv_freq / attention factor as HF's rotary module" "$rope_bin" --compare-rope "$tmp/$name.json" \
        "$fx/rope.json"
    grep -h "error" "$tmp/$name.cmp" 2>/dev/null; rm -f "$tmp/$name.npy"
}

check "rope --to 2048 exits 0" "$LCEXTEND" rope "$model" --to 2048 --method yarn --out "$tmp/zs" >/dev/null
check_dir zero-shot "$tmp/zs"

check "import exits 0" "$LCEXTEND" import "$tmp/zs" --out "$tmp/z.lcx" --quiet >/dev/null
check "export hf exits 0" "$LCEXTEND" export "$tmp/z.lcx" --format hf --out "$tmp/hf" --quiet >/dev/null
check_dir hf-export "$tmp/hf"

# GGUF: bf16 as stored (lossless for these weights); read back by our importer.
check "export gguf exits 0" "$LCEXTEND" export "$tmp/z.lcx" --format gguf --out "$tmp/z.gguf" --quiet >/dev/null
check "import gguf exits 0" "$LCEXTEND" import "$tmp/z.gguf" --out "$tmp/g.lcx" --quiet >/dev/null
check "export hf from the gguf exits 0" "$LCEXTEND" export "$tmp/g.lcx" --format hf --out "$tmp/ghf" --quiet >/dev/null
check_dir gguf-roundtrip "$tmp/ghf"

# config.json's dtype names the stored tensors (transformers 5 loads in it when from_pretrained gets no dtype):
# the bf16 import exports bfloat16; an fp32 training checkpoint of the same bf16 model (one step) exports float32.
dtype_of() { "$LCEXTEND" inspect "$1" --json 2>/dev/null | grep -o '"torch_dtype": "[a-z0-9]*"'; }
check "bf16 export says bfloat16" [ "$(dtype_of "$tmp/hf")" = '"torch_dtype": "bfloat16"' ]
check "train 1 step exits 0" "$LCEXTEND" train "$model" --ids "$ids" --seq 256 --steps 1 --out "$tmp/tr" \
    --export-hf "$tmp/trhf" >/dev/null 2>&1
check "fp32 training export says float32" [ "$(dtype_of "$tmp/trhf")" = '"torch_dtype": "float32"' ]

# Not blind: the unextended model over the same 2048 tokens is rejected (rope, config and logits).
check "plain model scores" "$LCEXTEND" score "$model" --ids "$ids" --logits "$tmp/plain.npy" >/dev/null 2>&1
check "compare rejects the unextended model's logits" fails "$cmp_bin" --compare "$tmp/plain.npy" "$fx" 1e-4
check "compare-config rejects the unextended config" fails "$cmp_bin" --compare-config "$model/config.json" "$fx"

[ "$fail" -eq 0 ] && echo "extended_export: OK"
exit "$fail"
