#!/usr/bin/env bash
# GGUF export carries the tokenizer of an HF-sourced checkpoint: the bundled tiny model imported and exported to
# GGUF (and through `lcextend MODEL --to N --gguf`) tokenizes the fixture texts to the same .bin/.idx as its
# tokenizer.json (itself checked against Hugging Face elsewhere); a tokenizer that cannot be written (here: more ids
# than the model's vocab_size) gives a warning, and the export still succeeds with bos/eos only.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
check_shows_err=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

tiny="$LCX_SRC/recipes/tiny/model"
FX="$LCX_SRC/tests/fixtures/tokenizer"
# texts: the tokenizer fixtures' CLI input plus digits, spaces, special-token text and non-ASCII
cp "$FX/cli_input.txt" "$tmp/in.txt"
printf '\n\nIn 1611, 12345 men said: "I'"'"'LL go" - don'"'"'t they?\n\n  x  \t y <|end_of_text|> caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 99\n' >>"$tmp/in.txt"
same_ids() { # same_ids TOKENIZER_A TOKENIZER_B: tokenize in.txt with both, compare the datasets
    rm -f "$tmp"/[ab].bin "$tmp"/[ab].idx # tokenize never overwrites
    "$LCEXTEND" tokenize --tokenizer "$1" --input "$tmp/in.txt" --split blank-line --output "$tmp/a" --quiet &&
        "$LCEXTEND" tokenize --tokenizer "$2" --input "$tmp/in.txt" --split blank-line --output "$tmp/b" --quiet &&
        cmp -s "$tmp/a.bin" "$tmp/b.bin" && cmp -s "$tmp/a.idx" "$tmp/b.idx" && [ -s "$tmp/a.bin" ]
}

run import "$tiny" --out "$tmp/tiny.lcx" --quiet
check "import tiny: exit 0" [ "$(rc)" -eq 0 ]
for d in bf16 f32; do
    run export "$tmp/tiny.lcx" --format gguf --dtype $d --out "$tmp/tiny-$d.gguf"
    check "export gguf $d: exit 0" [ "$(rc)" -eq 0 ]
    check "export gguf $d: no warning" lacks 'GGUF export:' "$tmp/err"
    check "export gguf $d: GGUF ids = tokenizer.json ids" same_ids "$tiny/tokenizer.json" "$tmp/tiny-$d.gguf"
done
check "the GGUF names llama.cpp's pre-tokenizer" grep -qa "smollm" "$tmp/tiny-f32.gguf"

# HF export of a GGUF (the file itself, and an .lcx imported from it) writes tokenizer.json + tokenizer_config.json
# converted from tokenizer.ggml.*: the same ids as the GGUF and as the original tokenizer.json (BOS template
# included), and the bos/eos names of the original
run import "$tmp/tiny-f32.gguf" --out "$tmp/from-gguf.lcx" --quiet
check "import gguf: exit 0" [ "$(rc)" -eq 0 ]
for src in "$tmp/tiny-f32.gguf" "$tmp/from-gguf.lcx"; do
    n=$(basename "$src")
    o="$tmp/hf-${n%.*}-${n##*.}" # a directory named *.gguf would be taken for a GGUF file
    run export "$src" --format hf --out "$o"
    check "export hf from $(basename "$src"): exit 0" [ "$(rc)" -eq 0 ]
    check "export hf from $(basename "$src"): tokenizer files written" [ -s "$o/tokenizer.json" -a -s "$o/tokenizer_config.json" ]
    check "export hf from $(basename "$src"): ids = the GGUF's" same_ids "$tmp/tiny-f32.gguf" "$o/tokenizer.json"
    check "export hf from $(basename "$src"): ids = the original tokenizer.json's" same_ids "$tiny/tokenizer.json" "$o"
    check "export hf from $(basename "$src"): bos_token named" grep -q '"bos_token": "<|begin_of_text|>"' "$o/tokenizer_config.json"
    check "export hf from $(basename "$src"): add_bos_token" grep -q '"add_bos_token": true' "$o/tokenizer_config.json"
    check "export hf from $(basename "$src"): no GGUF tokenizer file" [ ! -e "$o/tokenizer.gguf" ]
done

# the main command's --gguf (one training step on fixed ids)
awk 'BEGIN { s = 7; for (i = 0; i < 600; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 2048 } }' >"$tmp/ids.txt"
cat >"$tmp/one.yaml" <<'YAML'
name: one
defaults:
  method: yarn
  factor: auto
  steps: 1
  lr: {peak: 1e-4, warmup_steps: 1, schedule: constant}
  tokens_per_batch: 512
  grad_accum: 1
  eval_lengths: [512]
  save_interval: 0
  seed: 7
stages:
  - seq_len: 512
YAML
run "$tiny" --to 512 --recipe "$tmp/one.yaml" --ids "$tmp/ids.txt" --out "$tmp/run" --gguf --quiet
check "extend --gguf: exit 0" [ "$(rc)" -eq 0 ]
check "extend --gguf: GGUF ids = tokenizer.json ids" same_ids "$tiny/tokenizer.json" "$tmp/run/model.gguf"

# a tokenizer.json with 4000 ids on a model with 256: warned about, not written; the export itself succeeds
mkdir "$tmp/spm"
cp "$LCX_SRC/tests/fixtures/models/llama_gqa/"* "$tmp/spm/"
cp "$FX/spm.json" "$tmp/spm/tokenizer.json"
run import "$tmp/spm" --out "$tmp/spm.lcx" --quiet
run export "$tmp/spm.lcx" --format gguf --out "$tmp/spm.gguf"
check "spm export: exit 0" [ "$(rc)" -eq 0 ]
check "spm export: warns that the tokenizer was not written" grep -q "tokenizer not written (token id .* past the model's vocab_size)" "$tmp/err"
check "spm export: no tokenizer.ggml.tokens" lacks -a tokenizer.ggml.tokens "$tmp/spm.gguf"

echo "gguf_tokenizer: $([ $fail = 0 ] && echo "all checks passed" || echo FAILED)"
exit $fail
