#!/usr/bin/env bash
# Data for the SmolLM2-135M extension (recipes/smollm2-8k-32k.yaml), from Debian packages only (no Python):
#   OUTDIR/train.bin/.idx    training: the 63 training books of the King James Bible (bible-kjv-text) as two long
#                            documents in canonical order (the Old Testament; the New Testament without Luke and
#                            Romans), plus 300 synthetic retrieval documents (below); tokenized with the model's
#                            own tokenizer (its GGUF), EOS after every document.
#   OUTDIR/heldout-kjv.txt   evaluation, in domain: the held-out books Proverbs, Luke, Romans in canonical order
#                            (never trained on; ~65k tokens: two windows at 32k).
#   OUTDIR/heldout-lic.txt   evaluation, out of domain: Debian's common-licenses texts (base-files), sorted by name.
# Synthetic retrieval documents (stated in docs/results.md): 1k to ~24k tokens of consecutive KJV training verses
# from a pseudo-random start, "The secret number is NNNNN. Keep it in mind." at a pseudo-random depth, and at the
# end "What was the secret number? The secret number is NNNNN." They teach retrieval over long distances with
# another wording and another filler than the passkey evaluation (src/eval/eval_passkey.c), so the evaluation
# still measures transfer. The generator is a fixed LCG in awk: the same package versions give the same bytes.
# usage: recipes/smollm2/make_data.sh GGUF OUTDIR [LCEXTEND]    (GGUF: from recipes/smollm2/get.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
gguf=${1:?usage: make_data.sh GGUF OUTDIR [LCEXTEND]}
out=${2:?usage: make_data.sh GGUF OUTDIR [LCEXTEND]}
lcx=${3:-${LCEXTEND:-build/lcextend}}
[ -x "$lcx" ] || { echo "make_data.sh: $lcx is not an executable lcextend (give it as the third argument)" >&2; exit 1; }
[ -f "$gguf" ] || { echo "make_data.sh: $gguf: no such file (run recipes/smollm2/get.sh)" >&2; exit 1; }
mkdir -p "$out"
"$here/../tiny/split_kjv.sh" "$out/kjv" 2>/dev/null
n=$(ls "$out/kjv/train" | wc -l)
[ "$n" -eq 63 ] || { echo "make_data.sh: expected 63 training books, got $n (bible-kjv-text changed?)" >&2; exit 1; }
rm -rf "$out/docs" && mkdir -p "$out/docs"
# Books 1-39 are the Old Testament, 40-66 the New (split_kjv.sh numbers them in canonical order).
for f in "$out/kjv/train/"*.txt; do
    b=$(basename "$f"); [ "${b%%_*}" -le 39 ] && cat "$f"
done >"$out/docs/00_old_testament.txt"
for f in "$out/kjv/train/"*.txt; do
    b=$(basename "$f"); [ "${b%%_*}" -ge 40 ] && cat "$f"
done >"$out/docs/01_new_testament.txt"
cat "$out/kjv/heldout/"*.txt >"$out/heldout-kjv.txt"
cat $(ls /usr/share/common-licenses/* | sort) >"$out/heldout-lic.txt" 2>/dev/null

# 300 retrieval documents; ~1.3 tokens a word, so 750..18750 words is ~1k..~24k tokens.
cat "$out/kjv/train/"*.txt | LC_ALL=C awk -v out="$out/docs" '
    function rnd(n) { s = (s * 1103515245 + 12345) % 2147483648; return int(s / 65536) % n }
    { verse[NR] = $0; words[NR] = NF }
    END {
        s = 20261125
        for (d = 0; d < 300; d++) {
            want = 750 + rnd(18001); depth = rnd(1001) / 1000; key = 10000 + rnd(90000)
            start = 1 + rnd(NR); got = 0; put = 0
            file = sprintf("%s/r%03d.txt", out, d)
            for (i = start; got < want; i = i % NR + 1) {
                if (!put && got >= depth * want) { print "The secret number is " key ". Keep it in mind." > file; put = 1 }
                print verse[i] > file; got += words[i]
            }
            if (!put) print "The secret number is " key ". Keep it in mind." > file
            printf "What was the secret number? The secret number is %d.", key > file
            close(file)
        }
    }'
"$lcx" tokenize --tokenizer "$gguf" --input "$out/docs/"*.txt --output "$out/train" --threads 2 --quiet
echo "make_data.sh: 2 KJV documents + 300 retrieval documents -> $out/train.bin/.idx ($(stat -c %s "$out/train.bin") bytes); held-out: $out/heldout-kjv.txt, $out/heldout-lic.txt" >&2
