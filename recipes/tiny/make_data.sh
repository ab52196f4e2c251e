#!/usr/bin/env bash
# The demo's training data, from Debian packages only (no Python): the 63 training books of the King James Bible
# (all but Proverbs, Luke, Romans, which are the held-out split in recipes/tiny/data), one document per book,
# verse references stripped and verses one per line (split_kjv.sh), no trailing newline -- the text the tiny model
# was pretrained on (make_corpus.py, minus its synthetic passkey documents) -- tokenized with the bundled
# tokenizer as BOS + text + EOS per document. Deterministic: the same bible-kjv-text gives the same bytes.
# usage: recipes/tiny/make_data.sh OUTDIR [LCEXTEND]   -> OUTDIR/train.bin, OUTDIR/train.idx (OUTDIR/kjv: text)
#        LCEXTEND: the binary (default: $LCEXTEND, else build/lcextend)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: make_data.sh OUTDIR [LCEXTEND]}
lcx=${2:-${LCEXTEND:-build/lcextend}}
[ -x "$lcx" ] || { echo "make_data.sh: $lcx is not an executable lcextend (give it as the second argument)" >&2; exit 1; }
mkdir -p "$out"
"$here/split_kjv.sh" "$out/kjv" 2>/dev/null
n=$(ls "$out/kjv/train" | wc -l)
[ "$n" -eq 63 ] || { echo "make_data.sh: expected 63 training books, got $n (bible-kjv-text changed?)" >&2; exit 1; }
# One document per book without its final newline (make_corpus.py strips it too).
rm -rf "$out/kjv/docs"
mkdir -p "$out/kjv/docs"
for f in "$out/kjv/train/"*.txt; do
    printf '%s' "$(cat "$f")" >"$out/kjv/docs/$(basename "$f")"
done
"$lcx" tokenize --tokenizer "$here/model/tokenizer.json" --input "$out/kjv/docs/"*.txt --output "$out/train" \
    --eos '<|end_of_text|>' --threads 2 --quiet
echo "make_data.sh: $n books -> $out/train.bin/.idx ($(stat -c %s "$out/train.bin") bytes)" >&2
