# lcextend eval under mpirun with --tp (docs/evaluation-protocol.md "Tensor parallel evaluation"): on the bundled
# tiny model (6 query heads on 2 KV heads, tied embeddings), --tp 2 on 2 ranks gives one process's perplexities
# within 1e-6 relative (float32 sums in another order: each rank's GEMMs cover its heads, columns and vocabulary
# rows), the same tokens and windows, and the same passkey tables (greedy and loglik, 2 named keys in a text's
# words); one report and one JSON file, equal to one process's. A world that is not the TP group, a --tp that
# does not divide the world or the heads, and an output that exists fail with one line and write nothing.
# Skips (77) without mpirun.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MPIEXEC:-}" ] && [ -x "$MPIEXEC" ] || { echo "skip: no mpirun"; exit 77; }
check_shows_err=1
model="$LCX_SRC/recipes/tiny/model"
data="$LCX_SRC/recipes/tiny/data/heldout"
lines() { grep -c '^lcextend' "$tmp/err"; }
args=(eval "$model" --data "$data" --lengths 128,256 --stride 0 --passkey 1 --passkey-lengths 200,256
      --depths 0,0.5,1 --mode both --needles 2 --haystack "$LCX_SRC/docs/model.md" --quiet)

run "${args[@]}" --json "$tmp/one.json"
check "one process: exit 0" [ "$(rc)" -eq 0 ]
cp "$tmp/out" "$tmp/one.txt"
mpi 2 "${args[@]}" --tp 2 --json "$tmp/tp2.json"
check "--tp 2: exit 0" [ "$(rc)" -eq 0 ]
cp "$tmp/out" "$tmp/tp2.txt"
check "--tp 2: one perplexity table" [ "$(grep -c '^perplexity of' "$tmp/tp2.txt")" -eq 1 ]
check "--tp 2: one passkey table" [ "$(grep -c '^passkey retrieval of' "$tmp/tp2.txt")" -eq 1 ]
# the perplexity rows: length, tokens, windows, docs equal; perplexity and window mean within 1e-6
rows() { awk '/^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+$/' "$1"; }
check "two perplexity rows each" [ "$(rows "$tmp/one.txt" | wc -l)" -eq 2 ] && [ "$(rows "$tmp/tp2.txt" | wc -l)" -eq 2 ]
paste <(rows "$tmp/one.txt") <(rows "$tmp/tp2.txt") >"$tmp/pairs"
while read -r l1 t1 w1 d1 p1 m1 l2 t2 w2 d2 p2 m2; do
    check "length $l1: the same tokens, windows, documents" [ "$l1 $t1 $w1 $d1" = "$l2 $t2 $w2 $d2" ]
    check "length $l1: perplexity $p2 vs one process's $p1" close "$p2" "$p1" 1e-6
    check "length $l1: window mean $m2 vs $m1" close "$m2" "$m1" 1e-6
done <"$tmp/pairs"
# the passkey tables (every line from the passkey header on, the timing cut) are the same text
pk() { sed -n '/^passkey retrieval of/,$p' "$1" | sed 's/, in [0-9.]* s$//'; }
check "the passkey tables are one process's" diff <(pk "$tmp/one.txt") <(pk "$tmp/tp2.txt")
check "the passkey table has both modes" grep -q 'greedy decode' <(pk "$tmp/tp2.txt")
if command -v jq >/dev/null; then
    check "JSON: the same passkey cells" [ "$(jq -c .passkey.cells "$tmp/one.json")" = "$(jq -c .passkey.cells "$tmp/tp2.json")" ]
    for i in 0 1; do
        check "JSON: perplexity $i within 1e-6" close "$(jq ".perplexity.results[$i].ppl" "$tmp/tp2.json")" \
            "$(jq ".perplexity.results[$i].ppl" "$tmp/one.json")" 1e-6
    done
fi
check "one JSON file, nothing else written beside it" [ "$(ls "$tmp" | grep -c json)" -eq 2 ]

# refusals: one line each (rank 0's), non-zero, nothing written
mpi 2 eval "$model" --data "$data" --lengths 128 --json "$tmp/x.json"
check "2 ranks without --tp: refused" [ "$(rc)" -ne 0 ]
check "2 ranks without --tp: one line ($(head -1 "$tmp/err"))" [ "$(lines)" -eq 1 ]
check "2 ranks without --tp: it says what to launch" grep -q "evaluation splits over TP only (launch with mpirun -np 1, or give --tp 2)" "$tmp/err"
mpi 2 eval "$model" --data "$data" --lengths 128 --tp 3 --json "$tmp/x.json"
check "--tp 3 on 2 ranks: refused with one line" [ "$(rc)" -ne 0 ] && [ "$(lines)" -eq 1 ]
check "--tp 3 on 2 ranks: names the world" grep -q "does not divide the world of 2 ranks" "$tmp/err"
mpi 4 eval "$model" --data "$data" --lengths 128 --tp 4 --json "$tmp/x.json"
check "--tp 4 with 6 heads: refused with one line" [ "$(rc)" -ne 0 ] && [ "$(lines)" -eq 1 ]
check "--tp 4 with 6 heads: names the heads" grep -q "tp=4 does not divide the 6 attention heads" "$tmp/err"
check "no output from the refusals" [ ! -e "$tmp/x.json" ]
cp "$tmp/tp2.json" "$tmp/keep.json"
mpi 2 eval "$model" --data "$data" --lengths 128 --tp 2 --json "$tmp/tp2.json"
check "an existing --json: refused with one line" [ "$(rc)" -ne 0 ] && [ "$(lines)" -eq 1 ]
check "an existing --json: named" grep -qF "$tmp/tp2.json: already exists" "$tmp/err"
check "an existing --json: unchanged" cmp -s "$tmp/tp2.json" "$tmp/keep.json"

[ "$fail" = 0 ] && echo "eval_tp: all checks passed"
exit "$fail"
