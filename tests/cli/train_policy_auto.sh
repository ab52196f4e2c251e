#!/usr/bin/env bash
# `lcextend train --policy auto --memory SIZE`: the planner picks each layer's activation policy for the budget
# (docs/plan.md, lcx_plan_step_policies) before anything is created, prints it, and trains with it. Checked on a
# 6-layer model of the llama_gqa fixture's shape at 1024 tokens against `train-steps --steps 0`, which prints the
# memory model's totals and the same planner's split: a budget above the all-keep prediction keeps every layer, one
# halfway between all-recompute and all-keep mixes keep and recompute (the same line as train-steps' at that
# budget), and the losses are the keep run's bit for bit (policies change where tensors live, not the numbers); a
# budget below the least split fails with one line and creates nothing; flag errors are one line.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=2 # the CPU arena's per-thread tiles are in the prediction: the same for both commands
sed 's/"num_hidden_layers": *[0-9]*/"num_hidden_layers": 6/' "$LCX_SRC/tests/fixtures/models/llama_gqa/config.json" \
    >"$tmp/config.json"
awk 'BEGIN { s = 7; for (i = 0; i < 3000; i++) {
    s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
args=(train --config "$tmp/config.json" --ids "$tmp/ids.txt" --seq 1024 --steps 2 --quiet)
# predicted KIB POLICY: train-steps' memory-model total for every layer at POLICY, in KiB
predicted() {
    "$LCEXTEND" train-steps --config "$tmp/config.json" --seq 1024 --steps 0 --policy "$1" --chunk 256 |
        sed -n 's/^predicted (plan memory model): \([0-9.]*\) MiB.*/\1/p' | awk '{ printf "%d", $1 * 1024 }'
}
keep=$(predicted keep) rec=$(predicted recompute)
check "train-steps predicts keep ($keep KiB) above recompute ($rec KiB)" [ "${keep:-0}" -gt "${rec:-0}" ]

run "${args[@]}" --out "$tmp/keep"
check "--policy keep ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
# the steps' metrics carry the backend allocator's high-water mark: the memory model's device total predicts it
hwm=$(field "$tmp/keep/metrics.jsonl" alloc_hwm | tail -1)
check "keep: alloc_hwm ${hwm:-missing} B within 10% of the prediction, $keep KiB" \
    awk -v h="${hwm:-0}" -v k="$keep" 'BEGIN { d = h / 1024 - k; if (d < 0) d = -d; exit !(h > 0 && d <= 0.1 * k) }'
check "keep: no device_used on the CPU" lacks device_used "$tmp/keep/metrics.jsonl"
run "${args[@]}" --out "$tmp/big" --policy auto --memory $((keep + 1024))K
check "auto, a budget above keep's: exit 0 ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "auto, a budget above keep's: every layer keeps" grep -q "^policy (auto): layers 0-5 keep; predicted" "$tmp/out"

mid=$(( (keep + rec) / 2 ))
run "${args[@]}" --out "$tmp/mid" --policy auto --memory ${mid}K
check "auto, halfway ($mid KiB): exit 0 ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
line=$(sed -n 's/^policy (auto): layers\(.*\); predicted.*/\1/p' "$tmp/out")
check "auto, halfway: keep and recompute layers ($line)" bash -c "[[ '$line' == *recompute* && '$line' == *keep* ]]"
"$LCEXTEND" train-steps --config "$tmp/config.json" --seq 1024 --steps 0 --policy auto --memory ${mid}K \
    --chunk 256 >"$tmp/ts" 2>&1
check "auto, halfway: train-steps' split" grep -qF "policy (auto): layers$line" "$tmp/ts"
for d in big mid; do
    [ -n "$(field "$tmp/keep/metrics.jsonl" loss)" ] && \
        same "$(field "$tmp/$d/metrics.jsonl" loss)" "$(field "$tmp/keep/metrics.jsonl" loss)" ||
        failed "auto ($d): the keep run's losses, bit for bit"
done

run "${args[@]}" --out "$tmp/small" --policy auto --memory 1M
check "auto, 1 MiB: fails" [ "$(rc)" -eq 1 ]
check "auto, 1 MiB: one line naming the flag and the need" \
    grep -q "^lcextend train: .*--policy auto: no split of the 6 layers .* the least needs" "$tmp/err"
check "auto, 1 MiB: one line" one_line_err
check "auto, 1 MiB: nothing created" [ ! -e "$tmp/small" ]

run "${args[@]}" --out "$tmp/bad" --policy auto
[ "$(rc)" -eq 2 ] && grep -q "needs --memory SIZE" "$tmp/err" || failed "auto without --memory: exit 2, says so"
run "${args[@]}" --out "$tmp/bad" --memory 1G
[ "$(rc)" -eq 2 ] && grep -q "only with --policy auto" "$tmp/err" || failed "--memory without auto: exit 2, says so"
run "${args[@]}" --out "$tmp/bad" --policy recompute --host-memory 1G
[ "$(rc)" -eq 2 ] && one_line_err || failed "--host-memory without auto: exit 2"
check "flag errors: nothing created" [ ! -e "$tmp/bad" ]

[ $fail -eq 0 ] && echo "train_policy_auto: all checks passed"
exit $fail
