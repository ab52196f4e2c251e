#!/usr/bin/env bash
# Dump the King James Bible from Debian's bible-kjv-text (via the `bible` program of package bible-kjv) and
# split it into one plain-text document per book: held-out = Proverbs, Luke, Romans (three genres: wisdom,
# gospel narrative, epistle); every other book is training data. Verse references ("Luke1:1 ") are stripped;
# verses stay one per line. Deterministic: same package version, same files.
# usage: split_kjv.sh OUTDIR    -> OUTDIR/train/NN_Book.txt, OUTDIR/heldout/NN_Book.txt
set -euo pipefail
out=${1:?usage: split_kjv.sh OUTDIR}
command -v bible >/dev/null || { echo "split_kjv.sh: needs the 'bible' program (apt-get install bible-kjv)" >&2; exit 1; }
rm -rf "$out/train" "$out/heldout"
mkdir -p "$out/train" "$out/heldout"
bible -f "Gen1:1-Rev22:21" | LC_ALL=C awk -v out="$out" '
    {
        ref = $1
        book = ref; sub(/[0-9]+:[0-9]+$/, "", book)
        if (book != prev) { n++; prev = book
            dir = (book == "Prv" || book == "Luke" || book == "Rom") ? "heldout" : "train"
            if (file) close(file)
            file = sprintf("%s/%s/%02d_%s.txt", out, dir, n, book) }
        sub(/^[^ ]+ /, "")
        print > file
    }'
echo "split_kjv.sh: $(ls "$out/train" | wc -l) training books, $(ls "$out/heldout" | wc -l) held-out books in $out" >&2
