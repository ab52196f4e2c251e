# --activations bf16|f32 on train-steps, train and the main command: bf16 runs train-steps on a fixture model with
# step losses within the bf16 tolerance of f32 (test_model_bf16: 2 x 2^-8 relative), the main command's plan
# follows the flag, and a typo is a one-line usage error (exit 2) naming the flag.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
m="$LCX_SRC/tests/fixtures/models/llama_gqa"

run train-steps "$m" --seq 16 --steps 3 --activations bf16
check "train-steps --activations bf16 runs" [ "$(rc)" -eq 0 ]
check "train-steps prints the act dtype" grep -q "BF16 activations" "$tmp/out"
grep '^step' "$tmp/out" | awk '{print $4}' >"$tmp/bf16"
run train-steps "$m" --seq 16 --steps 3
check "train-steps default f32" grep -q "F32 activations" "$tmp/out"
grep '^step' "$tmp/out" | awk '{print $4}' >"$tmp/f32"
[ "$(wc -l <"$tmp/bf16")" -eq 3 ] && [ "$(wc -l <"$tmp/f32")" -eq 3 ] || failed "3 step losses each"
paste "$tmp/bf16" "$tmp/f32" >"$tmp/pairs"
while read -r a b; do check "bf16 loss $a vs f32 $b" close "$a" "$b" 0.0078125; done <"$tmp/pairs"

# the plan's activation bytes follow the flag
run "$m" --to 128 --activations bf16 --dry-run
check "plan with bf16 activations" grep -q "activations bf16" "$tmp/out"
run "$m" --to 128 --dry-run
check "plan default f32 activations" grep -q "activations fp32" "$tmp/out"

# typos: one line, exit 2, naming the flag
for cmd in "train-steps $m" "train --config x.json --ids x --seq 8 --steps 1 --out $tmp/run" "$m --to 128"; do
    # shellcheck disable=SC2086
    run $cmd --activations bf61
    check "$cmd: typo exit 2" [ "$(rc)" -eq 2 ]
    check "$cmd: one line" one_line_err
    check "$cmd: names the flag" grep -q -- "--activations 'bf61' (expected bf16 or f32)" "$tmp/err"
done

[ $fail -eq 0 ] && echo "cli activations: ok"
exit $fail
