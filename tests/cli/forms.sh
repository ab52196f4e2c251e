#!/usr/bin/env bash
# One model, five checkpoint forms, one loader (src/checkpoint/source.h): the llama_gqa fixture as an HF
# directory, its model.safetensors file, a shard index (export --shard-size 40KB), a TP-2 .lcx (import), and a
# GGUF made by our own export with --dtype f32 (every tensor float32, so the numbers agree exactly; q/k rows
# permuted for llama.cpp and un-permuted on load). score, inspect, plan, eval, rope --show and export must give
# the same answers for all five; a path that is none of them, a directory without config.json, a truncated
# GGUF and an .lcx missing a data file fail with one line naming the path.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# ids of a fixture's inputs.json (one integer per line in its input_ids block)
ids_of() { sed -n '/input_ids/,/^ \]/p' "$1/inputs.json" | grep -E '^ +[0-9]+,?$' | tr -d ' ,'; }

fx="$LCX_SRC/tests/fixtures/models/llama_gqa"
model="$tmp/model"
cp -r "$fx" "$model"
# The SentencePiece-style byte-fallback tokenizer of tests/cli/eval.sh: <unk> <s> </s> "▁" <0x00>..<0x7F>.
{
    printf '{"version":"1.0","truncation":null,"padding":null,"added_tokens":['
    printf '{"id":0,"content":"<unk>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},'
    printf '{"id":1,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},'
    printf '{"id":2,"content":"</s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],'
    printf '"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"\\u2581"},'
    printf '{"type":"Replace","pattern":{"String":" "},"content":"\\u2581"}]},"pre_tokenizer":null,'
    printf '"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},'
    printf '{"Sequence":{"id":"A","type_id":0}}],"pair":[{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"B","type_id":1}}],'
    printf '"special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}},'
    printf '"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"\\u2581"},"content":" "},'
    printf '{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},'
    printf '"model":{"type":"BPE","dropout":null,"unk_token":"<unk>","continuing_subword_prefix":null,'
    printf '"end_of_word_suffix":null,"fuse_unk":true,"byte_fallback":true,"ignore_merges":false,'
    printf '"vocab":{"<unk>":0,"<s>":1,"</s>":2,"\\u2581":3'
    for b in $(seq 0 127); do printf ',"<0x%02X>":%d' "$b" $((b + 4)); done
    printf '},"merges":[]}}\n'
} >"$model/tokenizer.json"

# The other forms, made by our own commands.
check "import as a TP-2 .lcx" "$LCEXTEND" import "$model" --out "$tmp/m.lcx" --tp 2 --quiet
check "export a sharded HF directory" "$LCEXTEND" export "$tmp/m.lcx" --format hf --shard-size 40KB --out "$tmp/sharded" --quiet
check "export an F32 GGUF" "$LCEXTEND" export "$tmp/m.lcx" --format gguf --dtype f32 --out "$tmp/m.gguf" --quiet
[ -f "$tmp/sharded/model.safetensors.index.json" ] &&
    [ "$(ls "$tmp/sharded"/model-*-of-*.safetensors | wc -l)" -ge 2 ] ||
    failed "the sharded export has an index and shards"
names=(hf-dir safetensors index lcx gguf)
forms=("$model" "$model/model.safetensors" "$tmp/sharded/model.safetensors.index.json" "$tmp/m.lcx" "$tmp/m.gguf")

# Data: ids of the fixture's inputs (score), a tokenized text (eval).
ids_of "$fx" >"$tmp/ids.txt"
head -c 149 "$LCX_SRC/tests/fixtures/tokenizer/cli_input.txt" | tr -c 'a-zA-Z .,\n' ' ' >"$tmp/a.txt"
run tokenize --tokenizer "$model" --input "$tmp/a.txt" --output "$tmp/data" --no-eos --quiet
check "tokenize the eval data: exit 0" [ "$(rc)" -eq 0 ]

# score: the same loss, printed to 6 decimals, in every form; the HF one is transformers' loss.
ref=$(grep '"loss"' "$fx/reference.json" | head -1 | sed 's/.*: *//; s/,.*//')
for k in "${!forms[@]}"; do
    run score "${forms[$k]}" --ids "$tmp/ids.txt"
    check "score ${names[$k]}: exit 0 ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    cp "$tmp/out" "$tmp/score.${names[$k]}"
    # the logits too, bit for bit
    run score "${forms[$k]}" --ids "$tmp/ids.txt" --logits "$tmp/logits.${names[$k]}.npy"
done
hf_loss=$(awk '/^loss:/ { print $2 }' "$tmp/score.hf-dir")
check "score hf-dir: loss $hf_loss is transformers' $ref" close "$hf_loss" "$ref" 2e-6
for n in "${names[@]:1}"; do
    check "score $n = score hf-dir" cmp -s "$tmp/score.$n" "$tmp/score.hf-dir"
    check "logits $n = logits hf-dir (bitwise)" cmp -s "$tmp/logits.$n.npy" "$tmp/logits.hf-dir.npy"
done

# inspect: exit 0 everywhere; the config numbers agree (the .lcx summary carries these keys from its manifest).
num() { grep -E "^  \"$2\": " "$1" | head -1 | sed 's/.*: *//; s/,$//'; }
for k in "${!forms[@]}"; do
    run inspect "${forms[$k]}" --json
    check "inspect ${names[$k]}: exit 0 ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    cp "$tmp/out" "$tmp/inspect.${names[$k]}"
    run inspect "${forms[$k]}"
    check "inspect ${names[$k]} (text): exit 0" [ "$(rc)" -eq 0 ]
done
for key in num_hidden_layers hidden_size num_attention_heads num_key_value_heads vocab_size max_position_embeddings; do
    want=$(num "$tmp/inspect.hf-dir" "$key")
    for n in "${names[@]:1}"; do
        check "inspect $n: $key $(num "$tmp/inspect.$n" "$key") = $want" [ "$(num "$tmp/inspect.$n" "$key")" = "$want" ]
    done
done
for n in safetensors index gguf; do
    check "inspect $n: num_parameters" same "$(num "$tmp/inspect.$n" num_parameters)" "$(num "$tmp/inspect.hf-dir" num_parameters)"
done
check "inspect gguf: says gguf" grep -q '"format": "gguf"' "$tmp/inspect.gguf"

# plan and rope --show: the same text from every form's config (a GGUF's from its metadata).
for k in "${!forms[@]}"; do
    run plan "${forms[$k]}" --to 1k --tokens-per-s 1000
    check "plan ${names[$k]}: exit 0 ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    cp "$tmp/out" "$tmp/plan.${names[$k]}"
    run rope "${forms[$k]}" --show --seq 256
    check "rope --show ${names[$k]}: exit 0" [ "$(rc)" -eq 0 ]
    grep -v '^config:' "$tmp/out" >"$tmp/rope.${names[$k]}"
done
for n in "${names[@]:1}"; do
    check "plan $n = plan hf-dir" cmp -s "$tmp/plan.$n" "$tmp/plan.hf-dir"
    check "rope --show $n = rope --show hf-dir" cmp -s "$tmp/rope.$n" "$tmp/rope.hf-dir"
done

# eval: perplexity at two lengths (BOS from each form's own tokenizer: tokenizer.json beside the config or in the
# .lcx, the GGUF's converted tokenizer metadata) and passkey greedy decoding: the same tables.
for k in "${!forms[@]}"; do
    run eval "${forms[$k]}" --data "$tmp/data" --lengths 64,151 --stride 0 --passkey 1 --passkey-lengths 300 \
        --depths 0.5 --series forms --quiet
    check "eval ${names[$k]}: exit 0 ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    # the titles name the checkpoint and the time taken; the tables must be equal
    grep -v -e '^perplexity of ' -e '^passkey retrieval of ' "$tmp/out" >"$tmp/eval.${names[$k]}"
done
check "eval hf-dir: a perplexity row at 151" grep -qE '^ *151 ' "$tmp/eval.hf-dir"
check "eval hf-dir: a passkey table at 300" grep -qE '^ +depth +300$' "$tmp/eval.hf-dir"
for n in "${names[@]:1}"; do
    check "eval $n = eval hf-dir" cmp -s "$tmp/eval.$n" "$tmp/eval.hf-dir"
done

# export: HF directories written from every form hold the same tensors.
for k in "${!forms[@]}"; do
    check "export ${names[$k]} to hf: exit 0" "$LCEXTEND" export "${forms[$k]}" --format hf --out "$tmp/x.${names[$k]}" --quiet
done
for n in "${names[@]:1}"; do
    check "export $n: model.safetensors = hf-dir's" cmp -s "$tmp/x.$n/model.safetensors" "$tmp/x.hf-dir/model.safetensors"
done

# Errors: one line naming the path and what was expected, exit 1, nothing on stdout.
printf 'hello\n' >"$tmp/notes.txt"
mkdir "$tmp/empty"
head -c 200 "$tmp/m.gguf" >"$tmp/cut.gguf"
cp -r "$tmp/m.lcx" "$tmp/broken.lcx"
rm "$(ls "$tmp/broken.lcx"/data-*.bin | tail -1)"
err_case() { # err_case WHAT EXPECTED_TEXT COMMAND...
    local what=$1 want=$2; shift 2
    run "$@"
    check "$what: exit 1" [ "$(rc)" -eq 1 ]
    check "$what: one line" one_line_err
    check "$what: says '$want' ($(head -c 200 "$tmp/err"))" grep -qF -- "$want" "$tmp/err"
    check "$what: no output" [ ! -s "$tmp/out" ]
}
for cmd in inspect score eval plan; do
    extra=()
    case $cmd in score) extra=(--ids "$tmp/ids.txt") ;; eval) extra=(--data "$tmp/data") ;; plan) extra=(--to 1k) ;; esac
    err_case "$cmd on a text file" "notes.txt: not a checkpoint (expected" $cmd "$tmp/notes.txt" "${extra[@]}"
    err_case "$cmd on a directory without config.json" "empty: not a Hugging Face model directory: config.json is missing" \
        $cmd "$tmp/empty" "${extra[@]}"
    err_case "$cmd on a truncated GGUF" "cut.gguf" $cmd "$tmp/cut.gguf" "${extra[@]}"
done
for cmd in inspect score eval; do
    extra=()
    case $cmd in score) extra=(--ids "$tmp/ids.txt") ;; eval) extra=(--data "$tmp/data") ;; esac
    err_case "$cmd on an .lcx missing a data file" "data-" $cmd "$tmp/broken.lcx" "${extra[@]}"
done
err_case "export of a text file" "notes.txt: not a checkpoint (expected" export "$tmp/notes.txt" --format hf --out "$tmp/no"
check "export of a text file: nothing written" [ ! -e "$tmp/no" ]
err_case "train from a text file" "notes.txt: not a checkpoint (expected" train "$tmp/notes.txt" --ids "$tmp/ids.txt" \
    --seq 8 --steps 1 --out "$tmp/run"
check "train from a text file: no run directory" [ ! -e "$tmp/run" ]

[ "$fail" -eq 0 ] && echo "forms: score, inspect, plan, rope, eval and export agree over ${#forms[@]} forms"
exit "$fail"
