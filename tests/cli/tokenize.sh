#!/usr/bin/env bash
# lcextend tokenize end to end: its .bin/.idx must equal, byte for byte, what Hugging Face `tokenizers` + Megatron's
# IndexedDatasetBuilder produce for the same input (tests/fixtures/gen_tokenizer.py, cli_* files); bad flags and
# bad inputs give clear errors.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
FX="$LCX_SRC/tests/fixtures/tokenizer"
pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }

# text, blank-line separated documents, 1 and 2 threads
for th in 1 2; do
  "$LCEXTEND" tokenize --tokenizer "$FX/bytelevel.json" --input "$FX/cli_input.txt" --split blank-line \
    --output "$tmp/text$th" --threads $th --quiet || bad "text run ($th threads) failed"
  cmp -s "$tmp/text$th.bin" "$FX/cli_text.bin" && cmp -s "$tmp/text$th.idx" "$FX/cli_text.idx" && ok ||
    bad "text ($th threads): output differs from tokenizers + Megatron"
done
# JSON lines (format from the extension), EOS named explicitly
"$LCEXTEND" tokenize --tokenizer "$FX/bytelevel.json" --input "$FX/cli_input.jsonl" --eos '<|end_of_text|>' \
  --output "$tmp/jl" --quiet || bad "jsonl run failed"
cmp -s "$tmp/jl.bin" "$FX/cli_jsonl.bin" && cmp -s "$tmp/jl.idx" "$FX/cli_jsonl.idx" && ok ||
  bad "jsonl: output differs from tokenizers + Megatron"
# one document per file: two files -> two documents; the .idx says 2 sequences (u64 at byte 18)
printf 'hello world\n\nsecond paragraph\n' > "$tmp/a.txt"
printf 'other file' > "$tmp/b.txt"
"$LCEXTEND" tokenize --tokenizer "$FX/bytelevel.json" --input "$tmp/a.txt" "$tmp/b.txt" --output "$tmp/files" --quiet ||
  bad "per-file run failed"
n=$(od -An -tu8 -j18 -N8 "$tmp/files.idx" | tr -d ' ')
[ "$n" = 2 ] && ok || bad "per-file: expected 2 documents, got '$n'"
# errors
expect_fail() { # expected-exit-code expected-message-fragment args...
  local code=$1 msg=$2
  shift 2
  out=$("$LCEXTEND" tokenize "$@" 2>&1)
  local rc=$?
  if [ $rc -eq "$code" ] && grep -qF -- "$msg" <<<"$out"; then ok; else bad "tokenize $* -> rc $rc: $out (wanted $code, '$msg')"; fi
}
expect_fail 2 "--tokenizer is required" --input "$tmp/a.txt" --output "$tmp/x"
expect_fail 2 "--split must be" --tokenizer "$FX/bytelevel.json" --input "$tmp/a.txt" --output "$tmp/x" --split lines
expect_fail 2 "is not a token" --tokenizer "$FX/bytelevel.json" --input "$tmp/a.txt" --output "$tmp/x" --eos '<nope>'
expect_fail 1 "no_such.txt" --tokenizer "$FX/bytelevel.json" --input "$tmp/no_such.txt" --output "$tmp/x"
printf '{"text": "fine"}\n{"text": 5}\n' > "$tmp/bad.jsonl"
expect_fail 1 "bad.jsonl:2: no string field 'text'" --tokenizer "$FX/bytelevel.json" --input "$tmp/bad.jsonl" --output "$tmp/x"
printf '{"text": "fine"}\n{"text": "unterminated}\n' > "$tmp/bad2.jsonl"
expect_fail 1 "bad2.jsonl:2: invalid JSON" --tokenizer "$FX/bytelevel.json" --input "$tmp/bad2.jsonl" --output "$tmp/x"
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}' > "$tmp/tok.json"
expect_fail 1 "model.merges[0]: token 'b' is not in the vocabulary" --tokenizer "$tmp/tok.json" --input "$tmp/a.txt" --output "$tmp/x"
# flag syntax: --name=value (--input=FILE takes the files after it too), unknown flags, missing values, strict
# numbers
"$LCEXTEND" tokenize --tokenizer="$FX/bytelevel.json" --input="$tmp/a.txt" "$tmp/b.txt" --output="$tmp/files2" \
  --quiet || bad "--name=value run failed"
cmp -s "$tmp/files2.idx" "$tmp/files.idx" && cmp -s "$tmp/files2.bin" "$tmp/files.bin" && ok ||
  bad "--input=a b: output differs from --input a b"
expect_fail 2 "unknown flag '--frob'" --tokenizer "$FX/bytelevel.json" --input "$tmp/a.txt" --output "$tmp/x" --frob
expect_fail 2 "flag --output needs a value" --tokenizer "$FX/bytelevel.json" --input "$tmp/a.txt" --output
expect_fail 2 "flag --input needs a value" --tokenizer "$FX/bytelevel.json" --input --output "$tmp/x"
expect_fail 2 "--threads '0x2' is not an integer in [1, 1024]" --tokenizer "$FX/bytelevel.json" --input "$tmp/a.txt" \
  --output "$tmp/x" --threads 0x2
expect_fail 2 "--dtype must be uint16 or int32, not 'u8'" --tokenizer "$FX/bytelevel.json" --input "$tmp/a.txt" \
  --output "$tmp/x" --dtype u8
expect_fail 2 "unexpected argument 'stray'" --tokenizer "$FX/bytelevel.json" --output "$tmp/x" stray \
  --input "$tmp/a.txt"
[ ! -e "$tmp/x.bin" ] && [ ! -e "$tmp/x.idx" ] && ok || bad "a failed run left output files"
"$LCEXTEND" tokenize --help | grep -q "examples:" && ok || bad "--help has no examples"

echo "cli_tokenize: $pass passed, $fail failed"
[ $fail -eq 0 ]
