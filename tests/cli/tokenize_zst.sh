#!/usr/bin/env bash
# lcextend tokenize on compressed inputs (.jsonl.zst, .txt.zst, .json.gz: src/core/zstream.h): the .bin/.idx equal,
# byte for byte, those of the same files uncompressed (tests/cli/tokenize.sh checks those against Hugging Face
# `tokenizers` + Megatron) for JSON lines, blank-line blocks and whole files, over 20 MB inputs (so the 8 MiB
# buffer is refilled between batches, and documents straddle refills), concatenated frames, and one 9 MB line
# (the buffer grows); gzip the same (several members in one file); a truncated or corrupt file is a one-line error
# naming it, with no output.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
FX="$LCX_SRC/tests/fixtures/tokenizer"
command -v zstd >/dev/null || { echo "zstd (the tool) is not installed: skipped"; exit 77; }
tok() { "$LCEXTEND" tokenize --tokenizer "$FX/bytelevel.json" --threads 1 --quiet "$@"; }
same() { cmp -s "$1.bin" "$2.bin" && cmp -s "$1.idx" "$2.idx"; }

# ~20 MB of JSON lines and of blank-line separated text, documents of 1 to 4000 bytes (a pseudo-random walk)
awk 'BEGIN { s = 3; w = "the a of to in and is it we on tok zst line buf"
    while (bytes < 20000000) { s = (s * 1103515245 + 12345) % 2147483648; n = 1 + int(s / 65536) % 700; t = ""
        for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; t = t " " substr(w, 1 + 3 * (int(s / 65536) % 10), 3) }
        printf "{\"text\": \"%s\", \"n\": %d}\n", t, n > "'"$tmp/big.jsonl"'"
        printf "%s\nmore %d\n\n", t, n > "'"$tmp/big.txt"'"; bytes += length(t) } }'
zstd -q -3 "$tmp/big.jsonl" -o "$tmp/big.jsonl.zst" && zstd -q -3 "$tmp/big.txt" -o "$tmp/big.txt.zst"
check "inputs made ($(wc -c <"$tmp/big.jsonl") bytes of JSON lines)" [ -s "$tmp/big.jsonl.zst" ]

tok --input "$tmp/big.jsonl" --output "$tmp/plain_jl" && tok --input "$tmp/big.jsonl.zst" --output "$tmp/zst_jl"
check "jsonl.zst: both ran" [ -s "$tmp/zst_jl.bin" ]
check "jsonl.zst: the output of the uncompressed file, byte for byte" same "$tmp/plain_jl" "$tmp/zst_jl"
tok --input "$tmp/big.txt" --split blank-line --output "$tmp/plain_tx" &&
    tok --input "$tmp/big.txt.zst" --split blank-line --output "$tmp/zst_tx"
check "txt.zst, blank-line blocks: the output of the uncompressed file" same "$tmp/plain_tx" "$tmp/zst_tx"
"$LCEXTEND" tokenize --tokenizer "$FX/bytelevel.json" --threads 2 --quiet --input "$tmp/big.jsonl.zst" \
    --output "$tmp/zst_jl2"
check "jsonl.zst with 2 threads: the same" same "$tmp/plain_jl" "$tmp/zst_jl2"

# whole files, a compressed one between plain ones; two frames concatenated read as one stream
head -c 3000000 "$tmp/big.txt" >"$tmp/part1.txt" && tail -c 2000000 "$tmp/big.txt" >"$tmp/part2.txt"
cat "$tmp/part1.txt" "$tmp/part2.txt" >"$tmp/both.txt"
zstd -q "$tmp/part1.txt" -o "$tmp/p1.zst" && zstd -q "$tmp/part2.txt" -o "$tmp/p2.zst" &&
    cat "$tmp/p1.zst" "$tmp/p2.zst" >"$tmp/both.txt.zst"
tok --input "$tmp/part1.txt" "$tmp/both.txt" "$tmp/part2.txt" --output "$tmp/plain_files" &&
    tok --input "$tmp/part1.txt" "$tmp/both.txt.zst" "$tmp/part2.txt" --output "$tmp/zst_files"
check "whole files, two frames in one .zst: the same 3 documents" same "$tmp/plain_files" "$tmp/zst_files"
check "whole files: 3 documents" [ "$(od -An -tu8 -j18 -N8 "$tmp/zst_files.idx" | tr -d ' ')" = 3 ]

# one line of 9 MB: longer than the first buffer
awk 'BEGIN { printf "{\"text\": \"short\"}\n{\"text\": \""; for (i = 0; i < 900000; i++) printf "tok zst a "
    printf "\"}\n{\"text\": \"after\"}\n" }' >"$tmp/long.jsonl"
zstd -q "$tmp/long.jsonl" -o "$tmp/long.jsonl.zst"
tok --input "$tmp/long.jsonl" --output "$tmp/plain_long" && tok --input "$tmp/long.jsonl.zst" --output "$tmp/zst_long"
check "a 9 MB line: the same 3 documents" same "$tmp/plain_long" "$tmp/zst_long"

# damaged files: one line naming the file, exit 1, no output
head -c $(( $(wc -c <"$tmp/long.jsonl.zst") / 2 )) "$tmp/long.jsonl.zst" >"$tmp/cut.jsonl.zst"
run tokenize --tokenizer "$FX/bytelevel.json" --quiet --input "$tmp/cut.jsonl.zst" --output "$tmp/cut"
check "truncated: exit 1" [ "$(rc)" -eq 1 ]
check "truncated: one line naming the file ($(head -c 300 "$tmp/err"))" \
    bash -c "[ \$(wc -l <'$tmp/err') -eq 1 ] && grep -qF '$tmp/cut.jsonl.zst: zstd stream is truncated' '$tmp/err'"
[ ! -e "$tmp/cut.bin" ] && [ ! -e "$tmp/cut.idx" ] || failed "truncated: no output"
printf 'this is not zstd at all\n' >"$tmp/bad.jsonl.zst"
run tokenize --tokenizer "$FX/bytelevel.json" --quiet --input "$tmp/bad.jsonl.zst" --output "$tmp/bad"
check "not zstd: exit 1, one line naming the file ($(head -c 300 "$tmp/err"))" \
    bash -c "[ \$(cat '$tmp/rc') -eq 1 ] && [ \$(wc -l <'$tmp/err') -eq 1 ] && \
        grep -qF '$tmp/bad.jsonl.zst: not a valid zstd stream at compressed byte' '$tmp/err'"
check "not zstd: no output" [ ! -e "$tmp/bad.bin" ]
: >"$tmp/empty.jsonl.zst"
run tokenize --tokenizer "$FX/bytelevel.json" --quiet --input "$tmp/empty.jsonl.zst" --output "$tmp/empty"
check "an empty .zst (a failed download): one line naming it ($(head -c 300 "$tmp/err"))" \
    bash -c "[ \$(cat '$tmp/rc') -eq 1 ] && grep -qF '$tmp/empty.jsonl.zst: empty file' '$tmp/err'"

# gzip (where the build has zlib: CI's does): JSON lines, two members in one file, a cut-off file
gzip -c "$tmp/big.jsonl" >"$tmp/big.json.gz"
run tokenize --tokenizer "$FX/bytelevel.json" --threads 1 --quiet --input "$tmp/big.json.gz" --output "$tmp/gz_jl"
if grep -q "built without zlib" "$tmp/err"; then
    echo "this build has no zlib: gzip checks skipped"
else
    check "json.gz ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    check "json.gz: the output of the uncompressed file, byte for byte" same "$tmp/plain_jl" "$tmp/gz_jl"
    gzip -c "$tmp/part1.txt" >"$tmp/both.txt.gz" && gzip -c "$tmp/part2.txt" >>"$tmp/both.txt.gz"
    tok --input "$tmp/part1.txt" "$tmp/both.txt.gz" "$tmp/part2.txt" --output "$tmp/gz_files"
    check "whole files, two gzip members in one .gz: the same 3 documents" same "$tmp/plain_files" "$tmp/gz_files"
    head -c 4096 /dev/zero >>"$tmp/both.txt.gz" # zero padding after the last member, which gzip ignores
    tok --input "$tmp/part1.txt" "$tmp/both.txt.gz" "$tmp/part2.txt" --output "$tmp/gz_pad"
    check "a .gz padded with zeros: the same 3 documents" same "$tmp/plain_files" "$tmp/gz_pad"
    head -c 100000 "$tmp/big.json.gz" >"$tmp/cut.json.gz"
    run tokenize --tokenizer "$FX/bytelevel.json" --quiet --input "$tmp/cut.json.gz" --output "$tmp/cutgz"
    check "truncated .gz: exit 1, one line naming the file ($(head -c 300 "$tmp/err"))" \
        bash -c "[ \$(cat '$tmp/rc') -eq 1 ] && [ \$(wc -l <'$tmp/err') -eq 1 ] && \
            grep -qF '$tmp/cut.json.gz: gzip stream is truncated' '$tmp/err'"
    check "truncated .gz: no output" [ ! -e "$tmp/cutgz.bin" ]
    printf 'not gzip\n' >"$tmp/bad.json.gz"
    run tokenize --tokenizer "$FX/bytelevel.json" --quiet --input "$tmp/bad.json.gz" --output "$tmp/badgz"
    check "not gzip: one line naming the file ($(head -c 300 "$tmp/err"))" \
        grep -qF "$tmp/bad.json.gz: not a valid gzip stream at compressed byte" "$tmp/err"
fi

exit $fail
