#!/usr/bin/env bash
# Throughput in model FLOPs (Megatron's TFLOP/s per GPU): every metrics line of `lcextend train` has "tflops", the
# model FLOPs of the step's tokens (docs/plan.md "FLOPs", recomputed here from config.json) over its time, per
# device; with --peak-tflops also "mfu" = tflops / peak, and the done line gives the mean. Recompute does not
# count (the same "tflops" x time with --policy recompute). The --dp 2 case is in tests/cli/train_dp.sh.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
model="$LCX_SRC/recipes/tiny/model"
awk 'BEGIN { for (i = 0; i < 900; i++) printf "%d ", (i * 37 + 11) % 2000; print "" }' >"$tmp/ids.txt"
F=$(flops_per_token "$model" 128)
check "the tiny model's FLOPs per token at 128 (${F})" [ "${F:-0}" -gt 0 ]

# tflops_match FILE STEPS SEQS: each of STEPS lines has tflops x time = F x SEQS x 128 (to the printed digits)
tflops_match() {
    awk -v F="$F" -v n_want="$2" -v seqs="$3" '/"step"/ {
        match($0, /"time": [0-9.]+/); t = substr($0, RSTART + 8, RLENGTH - 8) + 0
        match($0, /"tflops": [0-9.e+-]+/); f = substr($0, RSTART + 10, RLENGTH - 10) * 1e12
        want = F * seqs * 128; d = f * t - want; if (d < 0) d = -d
        if (t <= 0 || d > want * (0.002 + 0.00006 / t)) bad = 1; n++ }
        END { exit bad || n != n_want }' "$1"
}
for policy in keep recompute; do
    run train "$model" --ids "$tmp/ids.txt" --seq 128 --steps 3 --batch 2 --policy "$policy" --peak-tflops 0.5 \
        --out "$tmp/$policy" --quiet
    check "$policy ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    check "$policy: tflops x time = the model FLOPs of 2 x 128 tokens, every step" \
        tflops_match "$tmp/$policy/metrics.jsonl" 3 2
    check "$policy: mfu = tflops / 0.5" awk '/"step"/ {
        match($0, /"tflops": [0-9.e+-]+/); f = substr($0, RSTART + 10, RLENGTH - 10)
        match($0, /"mfu": [0-9.e+-]+/); u = substr($0, RSTART + 7, RLENGTH - 7)
        d = u - f / 0.5; if (d < 0) d = -d; if (RSTART == 0 || d > 1e-3 * u) bad = 1; n++ } END { exit bad || n != 3 }' \
        "$tmp/$policy/metrics.jsonl"
    check "$policy: the done line gives the mean and the MFU" \
        grep -qE '^done: .*mean tokens/s [0-9.]+ \([0-9.e+-]+ model TFLOP/s per device, MFU [0-9.]+% of 0.5 TFLOP/s\)' \
        "$tmp/out"
done

run train "$model" --ids "$tmp/ids.txt" --seq 128 --steps 2 --out "$tmp/nopeak" --quiet
check "without --peak-tflops: tflops, no mfu" \
    bash -c "grep -q '\"tflops\": ' '$tmp/nopeak/metrics.jsonl' && ! grep -q '\"mfu\"' '$tmp/nopeak/metrics.jsonl'"
check "without --peak-tflops: no MFU in the done line" lacks MFU "$tmp/out"
bad_flag "--peak-tflops '0' is not a number in [1e-06, 1e+09]" train "$model" --ids "$tmp/ids.txt" --seq 128 --steps 2 \
    --peak-tflops 0 --out "$tmp/bad"

exit $fail
