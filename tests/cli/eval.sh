#!/usr/bin/env bash
# `lcextend eval` as a command, on the llama_gqa fixture with a byte-fallback tokenizer written here (vocab
# 132 < the model's 256): perplexity at two lengths on a tokenized file, checked against `lcextend score`
# (independent loss path) on the same window; JSON parses and holds what the table printed; SVGs written; the
# passkey table and heat map; --compare draws two series; usage and data errors are one line naming the thing.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

model="$tmp/model"
cp -r "$LCX_SRC/tests/fixtures/models/llama_gqa" "$model"
# SentencePiece-style BPE, no merges: <unk> <s> </s> "▁" then byte-fallback tokens <0x00>..<0x7F> (ids 4..131).
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

# Two documents: 150 and 80 text tokens (one per byte, plus the leading "▁").
head -c 149 "$LCX_SRC/tests/fixtures/tokenizer/cli_input.txt" | tr -c 'a-zA-Z .,\n' ' ' >"$tmp/a.txt"
head -c 79 "$LCX_SRC/tests/fixtures/tokenizer/cli_input.txt" | tr -c 'a-zA-Z .,\n' ' ' >"$tmp/b.txt"
run tokenize --tokenizer "$model" --input "$tmp/a.txt" "$tmp/b.txt" --output "$tmp/data" --no-eos --quiet
check "tokenize the data: exit 0" [ "$(rc)" -eq 0 ]

run eval --help
check "--help exits 0" [ "$(rc)" -eq 0 ]
check "--help has examples" grep -q "examples:" "$tmp/out"
run --help
check "top-level help lists eval" grep -q "eval" "$tmp/out"

# Length 151 non-overlapping = one window [BOS + document a] = exactly what score computes on those ids;
# document b (80 tokens) is shorter than the window at 151 and is skipped there.
run eval "$model" --data "$tmp/data" --lengths 64,151 --stride 0 --json "$tmp/e.json" --svg "$tmp/p.svg" \
    --series base --quiet
check "eval: exit 0" [ "$(rc)" -eq 0 ]
cp "$tmp/out" "$tmp/table"
ppl151=$(awk '$1 == 151 { print $5 }' "$tmp/table")
check "length 151: one window, 150 tokens, one document" awk '$1 == 151 { exit !($2 == 150 && $3 == 1 && $4 == 1) } ' "$tmp/table"
check "length 64: 150 + 80 tokens in 3 + 2 windows" awk '$1 == 64 { exit !($2 == 230 && $3 == 5 && $4 == 2) } ' "$tmp/table"
{ echo 1; echo 3; od -An -v -tu1 "$tmp/a.txt" | tr -s ' ' '\n' | grep -v '^$' |
    awk '{ print $1 == 32 ? 3 : $1 + 4 }'; } >"$tmp/ids.txt"
check "ids of document a by hand: 151" [ "$(wc -l <"$tmp/ids.txt")" -eq 151 ]
run score "$model" --ids "$tmp/ids.txt"
sc=$(awk '/^perplexity:/ { print $2 }' "$tmp/out")
check "perplexity at 151 ($ppl151) = score's ($sc)" close "$ppl151" "$sc" 1e-4
# --truncate: the first window of each document only (document b, 80 tokens, skipped at 151); the lengths 32,
# 64 and 151 from one pass per document
# equal three separate single-length runs (each one pass of its own length), and length 151 equals score's
run eval "$model" --data "$tmp/data" --lengths 32,64,151 --truncate --json "$tmp/t.json" --quiet
check "eval --truncate: exit 0" [ "$(rc)" -eq 0 ]
cp "$tmp/out" "$tmp/ttable"
check "--truncate: length 64 scores the first 63 tokens of both documents" awk '$1 == 64 { exit !($2 == 126 && $3 == 2 && $4 == 2) } ' "$tmp/ttable"
check "--truncate: one pass stated in the JSON" grep -q '"one_pass": true' "$tmp/t.json"
for L in 32 64 151; do
    run eval "$model" --data "$tmp/data" --lengths $L --truncate --quiet
    a=$(awk -v L=$L '$1 == L { print $5 }' "$tmp/ttable"); b=$(awk -v L=$L '$1 == L { print $5 }' "$tmp/out")
    check "--truncate length $L: one pass for three lengths ($a) = its own pass ($b)" close "$a" "$b" 1e-5
done
check "--truncate length 151 = score's" close "$(awk '$1 == 151 { print $5 }' "$tmp/ttable")" "$sc" 1e-4
# dynamic NTK computes its tables from the pass length: one pass per length there
cp -r "$model" "$tmp/dyn"
sed -i 's/"rope_type": "default"/"rope_type": "dynamic", "factor": 2.0/' "$tmp/dyn/config.json"
run eval "$tmp/dyn" --data "$tmp/data" --lengths 32,64 --truncate --json "$tmp/d.json" --quiet
check "--truncate with dynamic rope: exit 0" [ "$(rc)" -eq 0 ]
check "--truncate with dynamic rope: no one pass" grep -q '"one_pass": false' "$tmp/d.json"
check "SVG written" grep -q "<svg" "$tmp/p.svg"
check "SVG has the series name" grep -q "base" "$tmp/p.svg"
if command -v jq >/dev/null; then
    check "JSON parses, two results" [ "$(jq '.perplexity.results | length' "$tmp/e.json")" = 2 ]
    jp=$(jq '.perplexity.results[1].ppl' "$tmp/e.json")
    check "JSON ppl ($jp) = table ($ppl151)" close "$jp" "$ppl151" 1e-4
    check "JSON names the checkpoint" [ "$(jq -r .checkpoint "$tmp/e.json")" = "$model" ]
else
    check "JSON has results" grep -q '"results"' "$tmp/e.json"
fi

# Sliding window: more windows, same tokens; --compare draws the earlier run as a second line.
run eval "$model" --data "$tmp/data" --lengths 64,151 --stride 16 --series slide --svg "$tmp/p2.svg" \
    --compare "$tmp/e.json" --quiet
check "stride 16: exit 0" [ "$(rc)" -eq 0 ]
check "stride 16 at 64: 230 tokens in 7 + 3 windows" awk '$1 == 64 { exit !($2 == 230 && $3 == 10) } ' "$tmp/out"
check "compare SVG has both series" sh -c "grep -q base '$tmp/p2.svg' && grep -q slide '$tmp/p2.svg'"

# Default names: this run is CKPT's last component, a --compare file without "series" is its file name.
if command -v jq >/dev/null; then
    jq 'del(.perplexity.series)' "$tmp/e.json" >"$tmp/older.json"
    run eval "$model" --data "$tmp/data" --lengths 64 --svg "$tmp/p3.svg" --compare "$tmp/older.json" --quiet
    check "default series names in the legend" sh -c "grep -q '>model<' '$tmp/p3.svg' && grep -q 'older.json' '$tmp/p3.svg'"
fi

# --text: the file as one document, encoded by the checkpoint's tokenizer: same numbers as the dataset.
run eval "$model" --text "$tmp/a.txt" --lengths 151 --stride 0 --quiet
check "--text: exit 0" [ "$(rc)" -eq 0 ]
check "--text ppl = dataset ppl" awk -v p="$ppl151" '$1 == 151 { exit !($5 == p) }' "$tmp/out"

# Passkey: table, JSON cells, heat map.
run eval "$model" --passkey 1 --passkey-lengths 300 --depths 0,1 --mode both --json "$tmp/k.json" \
    --passkey-svg "$tmp/k.svg" --quiet
check "passkey: exit 0" [ "$(rc)" -eq 0 ]
check "passkey: both tables" sh -c "grep -q 'greedy decode' '$tmp/out' && grep -q 'loglik' '$tmp/out'"
check "passkey heat map" grep -q "<svg" "$tmp/k.svg"
if command -v jq >/dev/null; then
    check "passkey JSON: 2 cells of 300 tokens at most" \
        [ "$(jq '[.passkey.cells[] | select(.prompt_tokens <= 300)] | length' "$tmp/k.json")" = 2 ]
fi

# Multi-key passkey (--needles): 4 named keys per prompt, the other 3 ranked against by loglik.
run eval "$model" --passkey 1 --passkey-lengths 1000 --depths 0,1 --mode both --needles 4 --json "$tmp/k4.json" \
    --passkey-svg "$tmp/k4.svg" --quiet
check "needles: exit 0" [ "$(rc)" -eq 0 ]
check "needles: the table says 4 keys per prompt" grep -q '4 key(s) per prompt' "$tmp/out"
check "needles: the heat map's title says 4 keys" grep -q 'passkey retrieval (greedy, 4 keys)' "$tmp/k4.svg"
check "needles: the misses counted, and those that were another key" \
    grep -qE '^  misses: [0-2] of 2 trials, [0-2] of them another key of the prompt$' "$tmp/out"
check "needles: loglik against the other 3 keys and 4 distractors" \
    grep -q 'the 3 other keys in the prompt and 4 distractors; chance 12%' "$tmp/out"
if command -v jq >/dev/null; then
    check "needles JSON: needles 4, 2 cells of 1000 tokens at most" \
        [ "$(jq '[.passkey.needles, ([.passkey.cells[] | select(.prompt_tokens <= 1000)] | length)]' -c \
            "$tmp/k4.json")" = "[4,2]" ]
fi
# --haystack: the words of a text fill the prompt instead of the repeated sentences
run eval "$model" --passkey 1 --passkey-lengths 1000 --depths 0.5 --mode loglik --needles 2 \
    --haystack "$LCX_SRC/tests/fixtures/tokenizer/cli_input.txt" --json "$tmp/kh.json" --quiet
check "haystack: exit 0" [ "$(rc)" -eq 0 ]
check "haystack: the table names the file" grep -q 'key(s) per prompt in .*cli_input.txt' "$tmp/out"
if command -v jq >/dev/null; then
    check "haystack JSON: the file and a prompt of 950..1000 tokens (within a word)" \
        [ "$(jq -c '[(.passkey.haystack | endswith("cli_input.txt")),
                     (.passkey.cells[0].prompt_tokens | . > 950 and . <= 1000)]' "$tmp/kh.json")" = "[true,true]" ]
    run eval "$model" --passkey 1 --passkey-lengths 1000 --depths 0.5 --mode loglik --needles 2 --json "$tmp/kf.json" \
        --quiet
    check "no haystack: JSON null" [ "$(jq -c '.passkey.haystack' "$tmp/kf.json")" = "null" ]
fi
printf ' \n\t\n' >"$tmp/blank.txt"
run eval "$model" --passkey 1 --passkey-lengths 1000 --haystack "$tmp/blank.txt"
check "blank haystack: exit 1, one line: no words" \
    sh -c "[ $(rc) -eq 1 ] && [ $(wc -l <"$tmp/err") -eq 1 ] && grep -q 'haystack has no words' '$tmp/err'"
run eval "$model" --passkey 1 --passkey-lengths 1000 --haystack "$tmp/nohay.txt"
check "missing haystack: exit 1 naming the flag and the file" \
    sh -c "[ $(rc) -eq 1 ] && [ $(wc -l <"$tmp/err") -eq 1 ] && grep -q -- '--haystack: .*nohay.txt' '$tmp/err'"
run eval "$model" --data "$tmp/data" --haystack "$tmp/blank.txt"
check "--haystack without --passkey: usage" \
    sh -c "[ $(rc) -eq 2 ] && grep -q -- '--haystack needs --passkey' '$tmp/err'"
run eval "$model" --passkey 1 --passkey-lengths 300 --needles 32
check "32 needles in 300 tokens: exit 1, one line naming the length" \
    sh -c "[ $(rc) -eq 1 ] && [ $(wc -l <"$tmp/err") -eq 1 ] && grep -q 'passkey length 300' '$tmp/err'"
run eval "$model" --data "$tmp/data" --needles 2
check "--needles without --passkey: usage" sh -c "[ $(rc) -eq 2 ] && grep -q -- '--needles needs --passkey' '$tmp/err'"

# Errors: one line, naming the problem.
run eval
check "no CKPT: usage error" [ "$(rc)" -eq 2 ]
run eval "$model"
check "nothing to evaluate: usage" sh -c "[ $(rc) -eq 2 ] && grep -q 'nothing to evaluate' '$tmp/err'"
run eval "$model" --data "$tmp/data" --lengths 64,x
check "bad --lengths names the flag" sh -c "[ $(rc) -eq 2 ] && grep -q -- '--lengths' '$tmp/err'"
run eval "$model" --data "$tmp/data" --lengths 1
check "--lengths 1 refused" [ "$(rc)" -eq 2 ]
run eval "$model" --data "$tmp/data" --depths 0.5,2 --passkey 1
check "--depths out of range" [ "$(rc)" -eq 2 ]
run eval "$model" --data "$tmp/data" --text "$tmp/a.txt"
check "--data and --text exclusive" [ "$(rc)" -eq 2 ]
run eval "$model" --data "$tmp/nope" --lengths 64
check "missing data: exit 1, one line" sh -c "[ $(rc) -eq 1 ] && [ $(wc -l <"$tmp/err") -eq 1 ]"
check "missing data: names the file" grep -q "nope" "$tmp/err"
run eval "$tmp/none" --data "$tmp/data"
check "missing checkpoint: exit 1" [ "$(rc)" -eq 1 ]
check "missing checkpoint: one line" one_line_err
rm "$model/tokenizer.json"
run eval "$model" --passkey 1 --passkey-lengths 300
check "passkey without tokenizer: exit 1 naming --tokenizer" sh -c "[ $(rc) -eq 1 ] && grep -q -- '--tokenizer' '$tmp/err'"
run eval "$model" --data "$tmp/data" --lengths 151 --stride 0 --quiet
check "--data without tokenizer: BOS from config.json, same ppl" awk -v p="$ppl151" '$1 == 151 { exit !($5 == p) }' "$tmp/out"
printf '{"perplexity": {"results": [{"length": "x"}]}}' >"$tmp/bad.json"
run eval "$model" --data "$tmp/data" --lengths 64 --svg "$tmp/q.svg" --compare "$tmp/bad.json" --quiet
check "bad --compare file: exit 1 naming it" sh -c "[ $(rc) -eq 1 ] && grep -q 'bad.json' '$tmp/err'"

# flag syntax: strict numbers and lists, missing values, a switch with a value; all refused before any work
bad_flag "--lengths '64,,128': '' is not a length" eval "$model" --data "$tmp/data" --lengths 64,,128
bad_flag "--lengths '64,+128'" eval "$model" --data "$tmp/data" --lengths 64,+128
bad_flag "--stride '-1' is not a length in [0, 16m]" eval "$model" --data "$tmp/data" --stride=-1
bad_flag "--seed '1.5'" eval "$model" --data "$tmp/data" --seed 1.5
bad_flag "--depths '0,nan'" eval "$model" --data "$tmp/data" --passkey 1 --depths 0,nan
bad_flag "--mode 'best' (expected greedy, loglik or both)" eval "$model" --passkey 1 --mode best
bad_flag "--needles '33'" eval "$model" --passkey 1 --needles 33
bad_flag "flag --series needs a value" eval "$model" --data "$tmp/data" --series
bad_flag "flag --quiet takes no value" eval "$model" --data "$tmp/data" --quiet=1

exit $fail
