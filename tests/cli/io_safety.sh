#!/usr/bin/env bash
# The inputs and outputs rules (docs/reliability.md "Inputs and outputs"), as the commands keep them: a FIFO or a
# symlink inside an .lcx is refused at once (no hang, no leak), a Hugging Face cache directory of symlinks still
# loads, odd tokenizer_files entries are refused, nothing at --out is ever replaced (not even what appears during a
# run, not by a concurrent run), tokenize refuses existing outputs, and a killed run's temporaries go with the next.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
check_shows_err=1
tiny="$LCX_SRC/recipes/tiny/model"
litter() { compgen -G "$1.tmp-*" >/dev/null; } # litter OUT: some OUT.tmp-* exists
no_litter() { ! litter "$1"; }
# fast_one_line_error WHAT CMD...: lcextend CMD fails within 10 s with one line on stderr
fast_one_line_error() {
    local what=$1; shift
    timeout 10 "$LCEXTEND" "$@" >"$tmp/out" 2>"$tmp/err"; echo $? >"$tmp/rc"
    check "$what: no hang (rc $(rc))" [ "$(rc)" -ne 124 ]
    check "$what: fails" [ "$(rc)" -ne 0 ]
    check "$what: one-line error" one_line_err
}

run import "$tiny" --out "$tmp/a.lcx"
check "import the tiny model" [ "$(rc)" -eq 0 ]

# ---- inputs -------------------------------------------------------------------------------------------------
mkdir "$tmp/fifo.lcx" && mkfifo "$tmp/fifo.lcx/manifest.json"
for c in "verify $tmp/fifo.lcx" "export $tmp/fifo.lcx --format hf --out $tmp/fx" "reshard $tmp/fifo.lcx --out $tmp/fr"; do
    # shellcheck disable=SC2086
    fast_one_line_error "FIFO manifest: $c" $c
    check "FIFO manifest: $c: names the manifest" grep -q "manifest.json: not a regular file" "$tmp/err"
done
[ ! -e "$tmp/fx" ] && [ ! -e "$tmp/fr" ] || failed "FIFO manifest: no output"
# eval --compare FILE that is a FIFO: refused before any work (the read blocked after the whole evaluation)
mkfifo "$tmp/cmp.json"
fast_one_line_error "FIFO --compare: eval" eval "$tmp/a.lcx" --data "$LCX_SRC/recipes/tiny/data/heldout" \
    --lengths 64 --svg "$tmp/cmp.svg" --compare "$tmp/cmp.json"
check "FIFO --compare: names it" grep -q "cmp.json: not a regular file" "$tmp/err"
check "FIFO --compare: no picture" [ ! -e "$tmp/cmp.svg" ]

# A symlinked tokenizer.json or data file: refused by every reader, the target never copied out.
echo '{"secret": 1}' >"$tmp/secret.json"
cp -r "$tmp/a.lcx" "$tmp/tok.lcx" && ln -sf "$tmp/secret.json" "$tmp/tok.lcx/tokenizer.json"
cp -r "$tmp/a.lcx" "$tmp/data.lcx" && mv "$tmp/data.lcx/data-0.bin" "$tmp/outside.bin" &&
    ln -s "$tmp/outside.bin" "$tmp/data.lcx/data-0.bin"
for ck in tok data; do
    fast_one_line_error "symlinked $ck file: verify" verify "$tmp/$ck.lcx"
    check "symlinked $ck file: verify says symlink" grep -q "is a symlink" "$tmp/err"
    fast_one_line_error "symlinked $ck file: export hf" export "$tmp/$ck.lcx" --format hf --out "$tmp/$ck.hf"
    fast_one_line_error "symlinked $ck file: export gguf" export "$tmp/$ck.lcx" --format gguf --out "$tmp/$ck.gguf"
    fast_one_line_error "symlinked $ck file: reshard" reshard "$tmp/$ck.lcx" --out "$tmp/$ck.r.lcx"
    [ ! -e "$tmp/$ck.hf" ] && [ ! -e "$tmp/$ck.gguf" ] &&
        [ ! -e "$tmp/$ck.r.lcx" ] || failed "symlinked $ck file: nothing written"
done

# tokenizer_files naming the manifest, a data file or a file twice
for odd in manifest.json data-0.bin tokenizer.json; do
    cp -r "$tmp/a.lcx" "$tmp/odd.lcx"
    python3 -c "import json,sys; p=sys.argv[1]; j=json.load(open(p)); j['tokenizer_files'].append(sys.argv[2]); json.dump(j, open(p, 'w'))" \
        "$tmp/odd.lcx/manifest.json" "$odd"
    fast_one_line_error "tokenizer_files + $odd: verify" verify "$tmp/odd.lcx"
    check "tokenizer_files + $odd: names it" grep -q "$odd" "$tmp/err"
    fast_one_line_error "tokenizer_files + $odd: export" export "$tmp/odd.lcx" --format hf --out "$tmp/odd.hf"
    fast_one_line_error "tokenizer_files + $odd: reshard" reshard "$tmp/odd.lcx" --out "$tmp/odd.r.lcx"
    [ ! -e "$tmp/odd.hf" ] && [ ! -e "$tmp/odd.r.lcx" ] || failed "tokenizer_files + $odd: nothing written"
    rm -rf "$tmp/odd.lcx"
done

# The Hugging Face cache layout: snapshots/<rev>/FILE -> ../../blobs/<hash>. Still loads; a link to a FIFO does not hang.
hub="$tmp/hub/models--tiny"
mkdir -p "$hub/blobs" "$hub/snapshots/rev1"
for f in "$tiny"/*; do
    h=$(sha256sum "$f" | cut -c1-40)
    cp "$f" "$hub/blobs/$h"
    ln -s "../../blobs/$h" "$hub/snapshots/rev1/$(basename "$f")"
done
run import "$hub/snapshots/rev1" --out "$tmp/hub.lcx"
check "HF cache layout (symlinks to blobs): import (rc $(rc))" [ "$(rc)" -eq 0 ]
run verify "$tmp/hub.lcx"
check "HF cache layout: the import verifies" [ "$(rc)" -eq 0 ]
check "HF cache layout: the import holds files, not links" [ -z "$(find "$tmp/hub.lcx" -type l)" ]
run export "$hub/snapshots/rev1" --format gguf --out "$tmp/hub.gguf"
check "HF cache layout: export gguf (rc $(rc))" [ "$(rc)" -eq 0 ]
mkfifo "$hub/blobs/fifo" && ln -sf ../../blobs/fifo "$hub/snapshots/rev1/tokenizer.json"
fast_one_line_error "HF link to a FIFO: import" import "$hub/snapshots/rev1" --out "$tmp/hubfifo.lcx"
check "HF link to a FIFO: not a regular file" grep -q "not a regular file" "$tmp/err"

# ---- outputs ------------------------------------------------------------------------------------------------
# Two concurrent exports to one path: exactly one wins, the other says so, the file is whole.
for round in 1 2 3 4 5; do
    o="$tmp/race$round.gguf"
    "$LCEXTEND" export "$tmp/a.lcx" --format gguf --out "$o" >/dev/null 2>"$tmp/e1" & p1=$!
    "$LCEXTEND" export "$tmp/a.lcx" --format gguf --out "$o" >/dev/null 2>"$tmp/e2" & p2=$!
    wait $p1; r1=$?; wait $p2; r2=$?
    check "race $round: exactly one export wins (rc $r1 $r2)" [ $((r1 == 0)) -ne $((r2 == 0)) ]
    check "race $round: the loser says the path exists" grep -q "already exists" "$tmp/e1" "$tmp/e2"
    # the winner's temporary, seen by the loser, is a concurrent run's work: no warning about it
    loser=$tmp/e1; [ $r2 -ne 0 ] && loser=$tmp/e2
    check "race $round: the loser writes one line" [ "$(wc -l <"$loser")" -eq 1 ]
    check "race $round: no temporaries" no_litter "$o"
done
run export "$tmp/a.lcx" --format gguf --out "$tmp/ref.gguf"
check "race: the winner's file equals a lone export" cmp -s "$tmp/race1.gguf" "$tmp/ref.gguf"

# Something at --out (file, dangling symlink, directory) is never replaced or followed.
echo keep >"$tmp/keep"
ln -s "$tmp/nowhere" "$tmp/dangling.gguf"
ln -s "$tmp/keep" "$tmp/link.gguf"
mkdir "$tmp/dir.out"
for o in keep dangling.gguf link.gguf dir.out; do
    fast_one_line_error "existing --out $o: export gguf" export "$tmp/a.lcx" --format gguf --out "$tmp/$o"
    fast_one_line_error "existing --out $o: export hf" export "$tmp/a.lcx" --format hf --out "$tmp/$o"
    fast_one_line_error "existing --out $o: reshard" reshard "$tmp/a.lcx" --out "$tmp/$o"
done
check "existing --out: the file is untouched" [ "$(cat "$tmp/keep")" = keep ]
check "existing --out: nothing created through the dangling link" [ ! -e "$tmp/nowhere" ]

# A file appearing at --out while the command runs (created the moment its temporary shows): refused, kept.
caught=0
for trial in $(seq 1 20); do
    o="$tmp/appear$trial.lcx"
    "$LCEXTEND" reshard "$tmp/a.lcx" --out "$o" --max-memory 1 --threads 1 >/dev/null 2>"$tmp/err" & pid=$!
    while kill -0 $pid 2>/dev/null && ! litter "$o"; do :; done
    if (set -C; echo mine >"$o") 2>/dev/null; then
        wait $pid; r=$?
        if litter "$o" || [ $r -ne 0 ]; then # the run had not finished when the file appeared
            caught=$((caught + 1))
            check "appearing --out: reshard fails (rc $r)" [ $r -ne 0 ]
            check "appearing --out: says it exists" grep -q "already exists" "$tmp/err"
            check "appearing --out: the file is kept" [ "$(cat "$o")" = mine ]
        fi
    else
        wait $pid
    fi
    check "appearing --out: no temporaries" no_litter "$o"
    [ $caught -ge 2 ] && break
done
check "appearing --out: a file appeared mid-run at least once in 20 trials" [ $caught -ge 1 ]

# tokenize refuses an existing PREFIX.bin or PREFIX.idx (or a symlink there) and writes nothing.
printf 'hello world\n\nsecond document\n' >"$tmp/in.txt"
for ext in bin idx; do
    for kind in file link; do
        rm -f "$tmp/ds".*
        if [ $kind = file ]; then echo keep >"$tmp/ds.$ext"; else ln -s "$tmp/keep" "$tmp/ds.$ext"; fi
        fast_one_line_error "tokenize over a $kind at PREFIX.$ext" tokenize --tokenizer "$tiny/tokenizer.json" \
            --input "$tmp/in.txt" --split blank-line --output "$tmp/ds"
        check "tokenize over a $kind at PREFIX.$ext: says it exists" grep -q "already exists" "$tmp/err"
        check "tokenize over a $kind at PREFIX.$ext: kept" [ "$(cat "$tmp/ds.$ext")" = keep ]
        check "tokenize over a $kind at PREFIX.$ext: no other output" [ "$(ls "$tmp"/ds.* | wc -l)" -eq 1 ]
    done
done
check "tokenize: the linked file is untouched" [ "$(cat "$tmp/keep")" = keep ]

# score --logits: a file or a symlink there is refused before any work and kept (it was replaced).
echo "1 2 3 4 5" >"$tmp/ids.txt"
echo keep >"$tmp/logits.npy"
ln -s "$tmp/keep" "$tmp/logits-link.npy"
for o in logits.npy logits-link.npy; do
    fast_one_line_error "score --logits over $o" score "$tiny" --ids "$tmp/ids.txt" --logits "$tmp/$o"
    check "score --logits over $o: says it exists" grep -q "already exists" "$tmp/err"
    [ "$(cat "$tmp/$o")" = keep ] && [ ! -s "$tmp/out" ] || failed "score --logits over $o: kept"
done
check "score --logits: the linked file is untouched" [ "$(cat "$tmp/keep")" = keep ]
# train --export-hf over something: refused before any training (it trained, then refused), no run directory made.
seq 1 200 | tr '\n' ' ' >"$tmp/train_ids.txt"
mkdir "$tmp/hf-there"
fast_one_line_error "train --export-hf over a directory" train "$LCX_SRC/tests/fixtures/models/llama_gqa" \
    --ids "$tmp/train_ids.txt" --seq 16 --steps 1 --out "$tmp/run-x" --export-hf "$tmp/hf-there"
check "train --export-hf over a directory: says it exists" grep -q "hf-there: already exists" "$tmp/err"
check "train --export-hf over a directory: no training (no run directory)" [ ! -e "$tmp/run-x" ]
run score "$tiny" --ids "$tmp/ids.txt" --logits "$tmp/logits-new.npy"
[ "$(rc)" -eq 0 ] && [ -s "$tmp/logits-new.npy" ] &&
    no_litter "$tmp/logits-new.npy" || failed "score --logits to a new path: written"

# kill -9 mid-run leaves OUT.tmp-*; the next run to the same --out removes it (its owner is gone).
for c in reshard export; do
    killed=0
    for trial in $(seq 1 20); do
        o="$tmp/killed-$c$trial"
        if [ $c = reshard ]; then
            "$LCEXTEND" reshard "$tmp/a.lcx" --out "$o" --max-memory 1 --threads 1 >/dev/null 2>&1 & pid=$!
        else
            "$LCEXTEND" export "$tmp/a.lcx" --format hf --out "$o" >/dev/null 2>&1 & pid=$!
        fi
        while kill -0 $pid 2>/dev/null && ! litter "$o"; do :; done
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        litter "$o" || continue
        killed=$((killed + 1))
        rm -rf "$o" # a kill after the claim leaves a whole output: start again either way
        if [ $c = reshard ]; then run reshard "$tmp/a.lcx" --out "$o"; else run export "$tmp/a.lcx" --format hf --out "$o"; fi
        check "kill -9 during $c, then a rerun: rerun ok (rc $(rc))" [ "$(rc)" -eq 0 ]
        check "kill -9 during $c, then a rerun: no OUT.tmp-* left" no_litter "$o"
        [ $killed -ge 2 ] && break
    done
    check "kill -9 during $c: a kill landed mid-run at least once in 20 trials" [ $killed -ge 1 ]
done

# Temporaries beside --out that are not litter of a dead run (a live owner's, one without an owner in its name) are
# kept and named, with why, in one warning line; a dead owner's goes. Every command that claims an output.
host=$(host_id)
sleep 300 & owner=$! # a live owner
gone=$(dead_pid)
temps() { # temps OUT: the three kinds beside OUT
    touch "$1.tmp-$host-$owner-0000beef" "$1.tmp-old1" "$1.tmp-$host-$gone-0000dead"
}
for c in import reshard export-hf export-gguf tokenize; do
    o="$tmp/warned-$c"
    case $c in
        import) temps "$o"; run import "$tiny" --out "$o" ;;
        reshard) temps "$o"; run reshard "$tmp/a.lcx" --tp 2 --out "$o" ;;
        export-hf) temps "$o"; run export "$tmp/a.lcx" --format hf --out "$o" ;;
        export-gguf) temps "$o"; run export "$tmp/a.lcx" --format gguf --out "$o" ;;
        tokenize) o="$tmp/warned.bin"; temps "$o"
            run tokenize --tokenizer "$tiny/tokenizer.json" --input "$tmp/in.txt" --split blank-line --output "$tmp/warned" ;;
    esac
    [ "$(rc)" -eq 0 ] && [ -e "$o" ] || failed "kept temporaries, $c: runs (rc $(rc))"
    check "kept temporaries, $c: one warning line" [ "$(grep -c '^warning: ' "$tmp/err")" -eq 1 ]
    check "kept temporaries, $c: names both and why" grep -q "^warning: $o: kept 2 temporaries of other runs beside it: .*$(basename "$o").tmp-$host-$owner-0000beef (process $owner is running)" "$tmp/err"
    check "kept temporaries, $c: names the unattributable one" grep -q "$(basename "$o").tmp-old1 (no owner in its name)" "$tmp/err"
    [ -e "$o.tmp-$host-$owner-0000beef" ] && [ -e "$o.tmp-old1" ] || failed "kept temporaries, $c: both kept"
    [ ! -e "$o.tmp-$host-$gone-0000dead" ] &&
        lacks 0000dead "$tmp/err" || failed "kept temporaries, $c: the dead owner's removed, not named"
done
run verify "$tmp/warned-import"
check "kept temporaries: the import beside them verifies" [ "$(rc)" -eq 0 ]
kill $owner

echo "io_safety: $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail
