# lcextend train, tensor parallel under mpirun (docs/parallel.md "Tensor parallelism", docs/extend.md "Parallel
# training (mpirun)"): on the qwen2 fixture (4 query heads on 1 KV head, which TP 2 replicates; q/k/v biases)
# --tp 2 on 2 ranks, --tp 2 --cp 2 on 4 ranks and --tp 2 --dp 2 --zero1 on 4 ranks give the loss curve of one
# process (the last with --batch 2) within 1e-5 relative, one report, one metrics.jsonl, a manifest whose layout
# says tp 2, and an export of the whole model equal to one process's within tolerance (the same score); the step-2
# checkpoint of a TP 2 run resumes with --tp 1 (one process) and with --tp 2 --cp 2, a TP 1 checkpoint with
# --tp 2, and each continues the uninterrupted loss curve within 1e-5; a --tp that does not divide the heads or
# the world fails with one line before anything is created; --distribute-saved-activations gives the recompute
# run's losses and norms bit for bit, --sequence-parallel its first loss bit for bit and the others within 1e-5.
# Skips (77) without mpirun.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MPIEXEC:-}" ] && [ -x "$MPIEXEC" ] || { echo "skip: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
check_shows_err=1
model="$LCX_SRC/tests/fixtures/models/qwen2"
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 128 } }' >"$tmp/ids.txt"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
lines() { grep -c '^lcextend' "$tmp/err"; }
# same_losses A B WHAT [FROM]: the losses of B equal those of A from line FROM (default 1) on, each within 1e-5
# relative (float32: the TP ranks' partial sums are added over the group instead of within one rank, so the last
# bits differ; observed at most 3e-7 relative over 5 steps at lr 1e-2)
same_losses() {
    paste <(field "$1/metrics.jsonl" loss | tail -n +"${4:-1}") <(field "$2/metrics.jsonl" loss) >"$tmp/losses"
    check "$3: $((6 - ${4:-1})) losses each" [ "$(awk 'NF == 2' "$tmp/losses" | wc -l)" -eq $((6 - ${4:-1})) ]
    while read -r a b; do check "$3: loss $b vs $a (one process), 1e-5" close "$b" "$a" 1e-5; done <"$tmp/losses"
}
# same_export A B WHAT: two exported model.safetensors hold the same tensors (F32, same shapes), each within 2e-3
# of its largest magnitude, and score the same within 1e-5. The weights after 5 AdamW steps at lr 1e-2 amplify
# float32 noise: AdamW normalises each element's gradient, so elements whose gradient is (nearly) zero -- k_proj's
# bias exactly, softmax being shift invariant -- take lr-sized steps that follow the order of the sums (observed:
# at most 9e-4 of the largest magnitude, k_proj.bias at --tp 2 --dp 2; plain --dp 2 gives 3e-4, --cp 2 2e-4; the
# other tensors at most 2e-4). The tensors need python3 (its standard library); without it the scores alone.
same_export() {
    if command -v python3 >/dev/null; then
        python3 - "$1" "$2" <<'PY' >"$tmp/py" 2>&1
import json, struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h, out = json.loads(b[8:8 + n]), {}
    for k, v in h.items():
        if k == '__metadata__': continue
        if v['dtype'] != 'F32': sys.exit('%s: dtype %s' % (k, v['dtype']))
        s, e = v['data_offsets']
        out[k] = (v['shape'], struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e]))
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
if sorted(a) != sorted(b): sys.exit('tensor names differ')
for k in a:
    if a[k][0] != b[k][0]: sys.exit('%s: shape %s vs %s' % (k, b[k][0], a[k][0]))
    scale = max(max(abs(x) for x in a[k][1]), 1e-30)
    d = max(abs(x - y) for x, y in zip(a[k][1], b[k][1])) / scale
    if d > 2e-3: sys.exit('%s: differs by %.3g of its largest magnitude' % (k, d))
PY
        local prc=$?
        check "$3: the same exported tensors ($(head -c 200 "$tmp/py"))" [ $prc -eq 0 ]
    fi
    "$LCEXTEND" score "$(dirname "$1")" --ids "$tmp/ids.txt" >"$tmp/s1" 2>&1
    "$LCEXTEND" score "$(dirname "$2")" --ids "$tmp/ids.txt" >"$tmp/s2" 2>&1
    local l1 l2
    l1=$(sed -n 's/^loss: *//p' "$tmp/s1") l2=$(sed -n 's/^loss: *//p' "$tmp/s2")
    check "$3: the export scores ${l2:-?} as one process's ${l1:-?}" close "${l2:-0}" "${l1:-1}" 1e-5
}
verifies() { "$LCEXTEND" verify "$1" >/dev/null; }
manifest_tp() { sed -n 's/.*"tp": *\([0-9]*\).*/\1/p' "$1/manifest.json" | head -1; }
# a run directory resuming at step 2 of FROM's checkpoint
resume_dir() {
    mkdir -p "$2/checkpoints" && cp -r "$1/checkpoints/s01-step000002" "$2/checkpoints/" && \
        cp "$1/ids.bin" "$1/ids.idx" "$2/" && echo s01-step000002 >"$2/checkpoints/latest"
}
args=(train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 5 --lr 1e-2)

# one process (the reference, with a step-2 checkpoint) and TP 2 on 2 ranks
run "${args[@]}" --out "$tmp/one" --quiet --save-every 2 --keep 0 --export-hf "$tmp/one-hf"
check "one process ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 2 "${args[@]}" --out "$tmp/tp2" --tp 2 --save-every 2 --keep 0 --export-hf "$tmp/tp2-hf"
check "mpirun -np 2 --tp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "one 'train:' header, naming TP 2" [ "$(grep -c '^train:.*seq 32, TP 2, 1 x 1 sequences' "$tmp/out")" -eq 1 ]
check "one 'done:' line" [ "$(grep -c '^done:' "$tmp/out")" -eq 1 ]
check "one step line per step" [ "$(grep -c '^stage 1/1 step' "$tmp/out")" -eq 5 ]
check "5 metrics lines (rank 0 only)" [ "$(grep -c '"step"' "$tmp/tp2/metrics.jsonl")" -eq 5 ]
# the TP group's collectives are communication: tp_comm_s within comm_s, above 0 over the run (a step's may round
# to 0.0000: the model is tiny and its TP sums take tens of microseconds); 0 in one process
paste <(field "$tmp/tp2/metrics.jsonl" tp_comm_s) <(field "$tmp/tp2/metrics.jsonl" comm_s) >"$tmp/tpc"
check "tp_comm_s on every step" [ "$(awk 'NF == 2' "$tmp/tpc" | wc -l)" -eq 5 ]
check "0 <= tp_comm_s <= comm_s, > 0 in all ($(tr '\n\t' '; ' <"$tmp/tpc"))" \
    awk '$1 < 0 || $1 > $2 + 1e-4 { bad = 1 } { s += $1 } END { exit bad || s <= 0 }' "$tmp/tpc"
check "one process: tp_comm_s 0" [ "$(field "$tmp/one/metrics.jsonl" tp_comm_s | sort -u)" = "0.0000" ]
same_losses "$tmp/one" "$tmp/tp2" "--tp 2"
check "the loss moves (lr 1e-2)" [ "$(sed -n 1p "$tmp/losses" | cut -f1)" != "$(sed -n 5p "$tmp/losses" | cut -f1)" ]
ck="$tmp/tp2/checkpoints/s01-step000002"
check "--tp 2: the manifest's layout says tp 2" [ "$(manifest_tp "$ck")" = 2 ]
check "--tp 2: 1 kv head on 2 ranks: kv_layout replicated" grep -q '"kv_layout": *"replicated"' "$ck/manifest.json"
[ -f "$ck/data-0.bin" ] && [ -f "$ck/data-1.bin" ] || failed "--tp 2: one data file per rank"
check "--tp 2: the checkpoint verifies" verifies "$ck"
same_export "$tmp/one-hf/model.safetensors" "$tmp/tp2-hf/model.safetensors" "--tp 2"

# TP 2 x CP 2 on 4 ranks against one process
mpi 4 "${args[@]}" --out "$tmp/tc" --tp 2 --cp 2 --quiet --export-hf "$tmp/tc-hf"
check "mpirun -np 4 --tp 2 --cp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "the header says CP 2 and TP 2" grep -q "seq 32 over CP 2 (16 tokens per rank), TP 2, 1 x 1 sequences" "$tmp/out"
same_losses "$tmp/one" "$tmp/tc" "--tp 2 --cp 2"
check "--tp 2 --cp 2: the manifest's layout says tp 2" [ "$(manifest_tp "$tmp/tc/checkpoints/s01-step000005")" = 2 ]
same_export "$tmp/one-hf/model.safetensors" "$tmp/tc-hf/model.safetensors" "--tp 2 --cp 2"

# distributed saved activations (docs/parallel.md): each TP rank keeps its rows of a recomputed layer's input;
# the same bits as the recompute run without it, so the metrics' losses and gradient norms are the same text
mpi 2 "${args[@]}" --out "$tmp/rec" --tp 2 --policy recompute --quiet
check "mpirun -np 2 --tp 2 --policy recompute ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 2 "${args[@]}" --out "$tmp/dist" --tp 2 --policy recompute --distribute-saved-activations --quiet
check "... --distribute-saved-activations ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--distribute-saved-activations: the header says so" \
    grep -q "^train:.*, TP 2 (saved activations distributed)," "$tmp/out"
for f in loss grad_norm; do
    check "--distribute-saved-activations: 5 ${f}s" [ "$(field "$tmp/dist/metrics.jsonl" $f | wc -l)" -eq 5 ]
    check "--distribute-saved-activations: every $f as without it" \
        same "$(field "$tmp/dist/metrics.jsonl" $f)" "$(field "$tmp/rec/metrics.jsonl" $f)"
done
run "${args[@]}" --out "$tmp/bad" --distribute-saved-activations --policy recompute
check "--distribute-saved-activations without --tp: exit 2" [ "$(rc)" -eq 2 ]
check "--distribute-saved-activations without --tp: one line naming the flag" \
    grep -q "^lcextend train: flag --distribute-saved-activations: .*give --tp 2 or more" "$tmp/err"
run "${args[@]}" --out "$tmp/bad" --distribute-saved-activations --tp 2
check "--distribute-saved-activations with keep: exit 2" [ "$(rc)" -eq 2 ]
check "--distribute-saved-activations with keep: names the policy" grep -q "give --policy recompute" "$tmp/err"
check "--distribute-saved-activations refused: nothing created" [ ! -e "$tmp/bad" ]

# sequence parallelism (docs/parallel.md): the residual stream and the norms split over TP by rows; the same
# forward, the norms' gradients summed in another order, so the first loss is the same text and the rest agree
# within 1e-5 (same_losses)
mpi 2 "${args[@]}" --out "$tmp/sp" --tp 2 --policy recompute --sequence-parallel --quiet
check "... --sequence-parallel ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--sequence-parallel: the header says so" grep -q "^train:.*, TP 2 (sequence parallel)," "$tmp/out"
check "--sequence-parallel: the first loss as without it" \
    same "$(field "$tmp/sp/metrics.jsonl" loss | head -1)" "$(field "$tmp/rec/metrics.jsonl" loss | head -1)"
same_losses "$tmp/rec" "$tmp/sp" "--sequence-parallel"
run "${args[@]}" --out "$tmp/bad" --sequence-parallel
[ "$(rc)" -eq 2 ] && \
    grep -q "^lcextend train: flag --sequence-parallel: .*give --tp 2 or more" "$tmp/err" ||
    failed "--sequence-parallel without --tp: exit 2, one line naming the flag"
run "${args[@]}" --out "$tmp/bad" --tp 2 --policy recompute --sequence-parallel --distribute-saved-activations
[ "$(rc)" -eq 2 ] && \
    grep -q "not with --distribute-saved-activations" "$tmp/err" ||
    failed "--sequence-parallel --distribute-saved-activations: exit 2, says why"
check "--sequence-parallel refused: nothing created" [ ! -e "$tmp/bad" ]

# TP 2 x DP 2 with ZeRO-1 on 4 ranks against one process with the same global batch
run "${args[@]}" --batch 2 --out "$tmp/one2" --quiet --export-hf "$tmp/one2-hf"
check "one process, --batch 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mpi 4 "${args[@]}" --out "$tmp/td" --tp 2 --dp 2 --zero1 --quiet --export-hf "$tmp/td-hf"
check "mpirun -np 4 --tp 2 --dp 2 --zero1 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "the header says TP 2, ZeRO-1 and 2 DP ranks" grep -q "seq 32, TP 2, ZeRO-1 over 2 ranks, 2 ranks x 1 x 1 sequences" "$tmp/out"
same_losses "$tmp/one2" "$tmp/td" "--tp 2 --dp 2 --zero1"
ck="$tmp/td/checkpoints/s01-step000005"
[ "$(manifest_tp "$ck")" = 2 ] && \
    [ -f "$ck/data-3.bin" ] || failed "--tp 2 --dp 2 --zero1: layout tp 2, one data file per rank"
same_export "$tmp/one2-hf/model.safetensors" "$tmp/td-hf/model.safetensors" "--tp 2 --dp 2 --zero1"

# resume across layouts: the TP 2 step-2 checkpoint with --tp 1 and with --tp 2 --cp 2, the TP 1 one with --tp 2
resume_dir "$tmp/tp2" "$tmp/r1"
run "${args[@]}" --out "$tmp/r1" --resume --quiet
check "--tp 2 checkpoint, --resume in one process ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--resume: says so" grep -q "resuming .*s01-step000002 at step 2/5" "$tmp/out"
same_losses "$tmp/one" "$tmp/r1" "tp 2 -> tp 1" 3
resume_dir "$tmp/tp2" "$tmp/r2"
mpi 4 "${args[@]}" --out "$tmp/r2" --resume --quiet --tp 2 --cp 2
check "--tp 2 checkpoint, --resume --tp 2 --cp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
same_losses "$tmp/one" "$tmp/r2" "tp 2 -> tp 2 x cp 2" 3
resume_dir "$tmp/one" "$tmp/r3"
mpi 2 "${args[@]}" --out "$tmp/r3" --resume --quiet --tp 2
check "one-process checkpoint, --resume --tp 2 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
same_losses "$tmp/one" "$tmp/r3" "tp 1 -> tp 2" 3
check "tp 1 -> tp 2: the new checkpoints say tp 2" [ "$(manifest_tp "$tmp/r3/checkpoints/s01-step000005")" = 2 ]

# refused before any work: one lcextend line, nothing created
mpi 3 "${args[@]}" --out "$tmp/bad" --tp 3
check "--tp 3 (4 heads): fails" [ "$(rc)" -ne 0 ]
check "--tp 3 (4 heads): one line" [ "$(lines)" -eq 1 ]
check "--tp 3 (4 heads): names the flag and the heads" grep -q "^lcextend train: .*--tp 3: .*heads" "$tmp/err"
check "--tp 3 (4 heads): nothing created" [ ! -e "$tmp/bad" ]
mpi 3 "${args[@]}" --out "$tmp/bad" --tp 2
check "--tp 2 on 3 ranks: fails" [ "$(rc)" -ne 0 ]
check "--tp 2 on 3 ranks: one line naming the world" grep -q "tp 2 x --cp 1 does not divide the world of 3 ranks" "$tmp/err"
check "--tp 2 on 3 ranks: one line" [ "$(lines)" -eq 1 ]
check "--tp 2 on 3 ranks: nothing created" [ ! -e "$tmp/bad" ]

[ $fail -eq 0 ] && echo "train_tp: all checks passed"
exit $fail
