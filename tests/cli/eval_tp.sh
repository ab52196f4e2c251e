# lcextend eval under mpirun (docs/evaluation-protocol.md "Tensor-parallel evaluation", "Context-parallel
# evaluation" and "Replicas"): on the bundled tiny model (6 query heads on 2 KV heads, tied embeddings), --tp 2 on
# 2 ranks, 2 ranks without --tp (two copies of the model sharing out the windows and trials), --tp 2 on 4 ranks
# (two TP groups), --cp 2 on 2 ranks (every window split over the ring), --cp 2 on 4 ranks (two copies of a CP
# pair) and --tp 2 --cp 2 on 4 ranks each give one process's perplexities within 1e-6 relative (float32 sums in
# another order: each rank's GEMMs cover its heads, columns and vocabulary rows, the ring merges partial attention
# by log-sum-exp; the replicas' sums are added in rank order), the same tokens and windows, and the same passkey
# tables (greedy and loglik, 2 named keys in a text's words); one report and one JSON file, equal to one process's,
# saying how it was computed. A --tp or --cp that does not divide the world or the heads, and an output that
# exists, fail with one line and write nothing; so does a failure of rank 0 alone before the work (a --compare file
# only the writer reads), within 60 s: the other rank does not wait for it in a collective. Skips (77) without
# mpirun.
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
rows() { awk '/^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+$/' "$1"; }
# the passkey tables (every line from the passkey header on, the timing cut)
pk() { sed -n '/^passkey retrieval of/,$p' "$1" | sed 's/, in [0-9.]* s$//'; }
# same_as_one NAME NP JSONKEY ARGS...: mpirun -np NP lcextend eval ARGS against the one process
same_as_one() {
    local name=$1 np=$2 key=$3; shift 3
    mpi "$np" "${args[@]}" "$@" --json "$tmp/$name.json"
    check "$name: exit 0" [ "$(rc)" -eq 0 ]
    cp "$tmp/out" "$tmp/$name.txt"
    check "$name: one perplexity table" [ "$(grep -c '^perplexity of' "$tmp/$name.txt")" -eq 1 ]
    check "$name: one passkey table" [ "$(grep -c '^passkey retrieval of' "$tmp/$name.txt")" -eq 1 ]
    # the perplexity rows: length, tokens, windows, docs equal; perplexity and window mean within 1e-6
    check "$name: two perplexity rows" [ "$(rows "$tmp/$name.txt" | wc -l)" -eq 2 ]
    paste <(rows "$tmp/one.txt") <(rows "$tmp/$name.txt") >"$tmp/pairs"
    while read -r l1 t1 w1 d1 p1 m1 l2 t2 w2 d2 p2 m2; do
        check "$name: length $l1: the same tokens, windows, documents" [ "$l1 $t1 $w1 $d1" = "$l2 $t2 $w2 $d2" ]
        check "$name: length $l1: perplexity $p2 vs one process's $p1" close "$p2" "$p1" 1e-6
        check "$name: length $l1: window mean $m2 vs $m1" close "$m2" "$m1" 1e-6
    done <"$tmp/pairs"
    check "$name: the passkey tables are one process's" diff <(pk "$tmp/one.txt") <(pk "$tmp/$name.txt")
    check "$name: the passkey table has both modes" grep -q 'greedy decode' <(pk "$tmp/$name.txt")
    check "$name: the JSON says $key" grep -q "$key" "$tmp/$name.json"
    if command -v jq >/dev/null; then
        check "$name: JSON: the same passkey cells" \
            same "$(jq -c .passkey.cells "$tmp/one.json")" "$(jq -c .passkey.cells "$tmp/$name.json")"
        for i in 0 1; do
            check "$name: JSON: perplexity $i within 1e-6" close "$(jq ".perplexity.results[$i].ppl" "$tmp/$name.json")" \
                "$(jq ".perplexity.results[$i].ppl" "$tmp/one.json")" 1e-6
        done
    fi
}
same_as_one tp2 2 '"tp": 2' --tp 2
same_as_one replicas2 2 '"replicas": 2'
same_as_one tp2x2 4 '"replicas": 2' --tp 2
check "--tp 2 on 4 ranks: the JSON says tp 2 too" grep -q '"tp": 2' "$tmp/tp2x2.json"
same_as_one cp2 2 '"cp": 2' --cp 2
check "--cp 2 on 2 ranks: one copy (no replicas in the JSON)" lacks replicas "$tmp/cp2.json"
same_as_one cp2x2 4 '"replicas": 2' --cp 2
check "--cp 2 on 4 ranks: the JSON says cp 2 too" grep -q '"cp": 2' "$tmp/cp2x2.json"
same_as_one tp2cp2 4 '"cp": 2' --tp 2 --cp 2
check "--tp 2 --cp 2: the JSON says tp 2 too" grep -q '"tp": 2' "$tmp/tp2cp2.json"
check "one JSON file per run, nothing else written beside them" [ "$(ls "$tmp" | grep -c json)" -eq 7 ]

# refusals: one line each (rank 0's), non-zero, nothing written
# a failure of rank 0 alone before the work (only the writer reads --compare): the others must not wait in the
# evaluation's collectives for it (the agreement point): the job ends within 60 s with rank 0's line
t0=$(date +%s)
MPIEXEC_TIMEOUT=90 mpi 2 eval "$model" --data "$data" --lengths 128 --tp 2 --svg "$tmp/x.svg" --compare "$tmp/none.json"
check "rank 0 alone fails: non-zero" [ "$(rc)" -ne 0 ]
check "rank 0 alone fails: ended within 60 s ($(( $(date +%s) - t0 )) s)" [ $(( $(date +%s) - t0 )) -le 60 ]
[ "$(lines)" -eq 1 ] && \
    grep -qF "$tmp/none.json" "$tmp/err" ||
    failed "rank 0 alone fails: one line naming the file ($(head -1 "$tmp/err"))"
mpi 2 eval "$model" --data "$data" --lengths 128 --tp 3 --json "$tmp/x.json"
[ "$(rc)" -ne 0 ] && [ "$(lines)" -eq 1 ] || failed "--tp 3 on 2 ranks: refused with one line"
check "--tp 3 on 2 ranks: names the world" grep -q "does not divide the world of 2 ranks" "$tmp/err"
mpi 2 eval "$model" --data "$data" --lengths 128 --tp 2 --cp 2 --json "$tmp/x.json"
[ "$(rc)" -ne 0 ] && [ "$(lines)" -eq 1 ] || failed "--tp 2 --cp 2 on 2 ranks: refused with one line"
check "--tp 2 --cp 2 on 2 ranks: names the world" grep -q "tp 2 x --cp 2 does not divide the world of 2" "$tmp/err"
mpi 4 eval "$model" --data "$data" --lengths 128 --tp 4 --json "$tmp/x.json"
[ "$(rc)" -ne 0 ] && [ "$(lines)" -eq 1 ] || failed "--tp 4 with 6 heads: refused with one line"
check "--tp 4 with 6 heads: names the heads" grep -q "tp=4 does not divide the 6 attention heads" "$tmp/err"
check "no output from the refusals" [ ! -e "$tmp/x.json" ]
cp "$tmp/tp2.json" "$tmp/keep.json"
mpi 2 eval "$model" --data "$data" --lengths 128 --tp 2 --json "$tmp/tp2.json"
[ "$(rc)" -ne 0 ] && [ "$(lines)" -eq 1 ] || failed "an existing --json: refused with one line"
check "an existing --json: named" grep -qF "$tmp/tp2.json: already exists" "$tmp/err"
check "an existing --json: unchanged" cmp -s "$tmp/tp2.json" "$tmp/keep.json"

[ "$fail" = 0 ] && echo "eval_tp: all checks passed"
exit "$fail"
