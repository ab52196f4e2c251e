#!/usr/bin/env bash
# The warm-up-stable-decay schedule (src/train/lr_schedule.h): `lcextend train --schedule wsd` writes, step by
# step, the learning rate of Hugging Face's get_wsd_schedule (written out below in awk from HF's formula, not from
# ours), for each decay shape and the default decay (a fifth of the steps); a --resume inside the decay phase
# continues the unbroken run's rates and losses; flag errors are one line; a recipe's lr.decay_fraction becomes the
# plan's decay steps.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
model="$LCX_SRC/recipes/tiny/model"
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
awk 'BEGIN { for (i = 0; i < 600; i++) printf "%d ", (i * 37 + 11) % 500; print "" }' >"$tmp/ids.txt"

# hf_wsd W T D TYPE MIN PEAK: HF's rate for the updates after steps 0 .. T-1, one per line
hf_wsd() {
    awk -v W="$1" -v T="$2" -v D="$3" -v type="$4" -v m0="$5" -v peak="$6" 'BEGIN {
        m = m0 / peak; S = T - W - D; pi = atan2(0, -1)
        for (s = 0; s < T; s++) {
            if (s < W) { f = s / (W > 1 ? W : 1); f = f * (1 - m) + m }
            else if (s < W + S) f = 1
            else if (s < W + S + D) {
                p = (s - W - S) / (D > 1 ? D : 1)
                if (type == "linear") f = 1 - p; else if (type == "1-sqrt") f = 1 - sqrt(p)
                else f = 0.5 * (1 + cos(pi * 0.5 * 2 * p))
                f = f * (1 - m) + m
            } else f = m
            printf "%.12g\n", peak * (f > 0 ? f : 0)
        } }'
}
# same_rates FILE_A FILE_B: equal line by line to 1e-7 relative (metrics print 9 digits)
same_rates() {
    paste "$1" "$2" | awk 'NF != 2 { exit 1 } { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-7 * $2 + 1e-15) exit 1 }
        END { if (NR == 0) exit 1 }'
}

for type in cosine linear 1-sqrt; do
    run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 20 --lr 1e-3 --min-lr 1e-4 --warmup 3 \
        --schedule wsd --decay-steps 6 --decay-type "$type" --out "$tmp/$type" --quiet
    check "wsd $type ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    field "$tmp/$type/metrics.jsonl" lr >"$tmp/$type.lr"
    hf_wsd 3 20 6 "$type" 1e-4 1e-3 >"$tmp/$type.hf"
    check "wsd $type: 20 rates equal HF's get_wsd_schedule ($(tr '\n' ' ' <"$tmp/$type.lr"))" \
        same_rates "$tmp/$type.lr" "$tmp/$type.hf"
done
check "the shapes differ in the decay" fails cmp -s "$tmp/linear.lr" "$tmp/1-sqrt.lr"

# the default: decay the last fifth (4 of 20 steps), cosine
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 20 --lr 1e-3 --schedule wsd --save-every 10 --keep 0 \
    --out "$tmp/default" --quiet
check "wsd default ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
field "$tmp/default/metrics.jsonl" lr >"$tmp/default.lr"
hf_wsd 0 20 4 cosine 0 1e-3 >"$tmp/default.hf"
check "wsd default: 4 decay steps, cosine ($(tr '\n' ' ' <"$tmp/default.lr"))" \
    same_rates "$tmp/default.lr" "$tmp/default.hf"

# --resume from step 10 (stable) with a later decay: the unbroken run's steps 11-20, rates and losses
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 20 --lr 1e-3 --schedule wsd --decay-steps 12 \
    --save-every 10 --keep 0 --out "$tmp/whole" --quiet
check "wsd 12 decay steps ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
mkdir -p "$tmp/res/checkpoints" && cp -r "$tmp/whole/checkpoints/s01-step000010" "$tmp/res/checkpoints/" &&
    echo s01-step000010 >"$tmp/res/checkpoints/latest"
run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 20 --lr 1e-3 --schedule wsd --decay-steps 12 \
    --save-every 10 --keep 0 --out "$tmp/res" --resume --quiet
check "--resume at step 10 ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
tail -n 10 "$tmp/whole/metrics.jsonl" | grep -o '"loss": [^,]*, "lr": [^,]*' >"$tmp/whole.tail"
tail -n 10 "$tmp/res/metrics.jsonl" | grep -o '"loss": [^,]*, "lr": [^,]*' >"$tmp/res.tail"
check "--resume: steps 11-20 have the unbroken run's losses and rates" cmp -s "$tmp/whole.tail" "$tmp/res.tail"
check "--resume: 10 steps compared" [ "$(wc -l <"$tmp/res.tail")" -eq 10 ]

# the training state records the schedule; a --resume with another one is refused with one line naming both, and
# with --override-lr goes on with the new one from the saved step (the rates of HF's schedule there)
check "the training state records the schedule" grep -qE '"decay_steps": ?12' \
    "$tmp/whole/checkpoints/s01-step000010/manifest.json"
run inspect "$tmp/whole/checkpoints/s01-step000010"
want='^lr: +\{"schedule":"wsd","peak":0.001,"min_lr":0(\.0)?,"warmup_steps":0,"decay_steps":12,'
check "inspect shows the schedule ($(grep '^lr:' "$tmp/out"))" grep -qE "$want\"decay_type\":\"cosine\"\\}" "$tmp/out"
resume_with() {
    rm -rf "$tmp/res" && mkdir -p "$tmp/res/checkpoints" && cp -r "$tmp/whole/checkpoints/s01-step000010" \
        "$tmp/res/checkpoints/" && echo s01-step000010 >"$tmp/res/checkpoints/latest"
    run train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 20 --save-every 10 --keep 0 --out "$tmp/res" --resume \
        --quiet "$@"
}
resume_with --lr 1e-3 --schedule wsd --decay-steps 8
check "--resume with 8 decay steps instead of 12: exit 1" [ "$(rc)" -eq 1 ]
check "--resume with another schedule: one line naming both ($(head -c 400 "$tmp/err"))" \
    bash -c "[ \$(wc -l <'$tmp/err') -eq 1 ] && grep -qF 'lr 0.001 wsd, warm-up 0, min_lr 0, decay 12 cosine; this run \
has lr 0.001 wsd, warm-up 0, min_lr 0, decay 8 cosine (use the same lr settings, or --override-lr' '$tmp/err'"
check "refused: nothing trained" [ "$(wc -l <"$tmp/res/metrics.jsonl" 2>/dev/null || echo 0)" -eq 0 ]
resume_with --lr 2e-3 --schedule cosine --min-lr 1e-4 --override-lr
check "--override-lr ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
field "$tmp/res/metrics.jsonl" lr >"$tmp/override.lr"
awk 'BEGIN { pi = atan2(0, -1)
    for (s = 10; s < 20; s++) printf "%.12g\n", 1e-4 + (2e-3 - 1e-4) * 0.5 * (1 + cos(pi * s / 20)) }' \
    >"$tmp/override.hf"
check "--override-lr: steps 11-20 at the new cosine's rates ($(tr '\n' ' ' <"$tmp/override.lr"))" \
    same_rates "$tmp/override.lr" "$tmp/override.hf"
bad_flag "--override-lr goes with --resume" train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 20 --override-lr \
    --out "$tmp/bad"

# flag errors: one line each, no run directory
bad_flag "--decay-steps: only --schedule wsd has a decay phase (the schedule is cosine)" train "$model" \
    --ids "$tmp/ids.txt" --seq 32 --steps 20 --decay-steps 4 --out "$tmp/bad"
bad_flag "--decay-type: only --schedule wsd" train "$model" --ids "$tmp/ids.txt" --seq 32 --steps 20 \
    --schedule constant --decay-type linear --out "$tmp/bad"
bad_flag "--warmup 10 + --decay-steps 15 are more than --steps 20" train "$model" --ids "$tmp/ids.txt" --seq 32 \
    --steps 20 --warmup 10 --schedule wsd --decay-steps 15 --out "$tmp/bad"
bad_flag "--decay-type 'sqrt' (expected cosine, linear or 1-sqrt)" train "$model" --ids "$tmp/ids.txt" --seq 32 \
    --steps 20 --schedule wsd --decay-type sqrt --out "$tmp/bad"
check "flag errors: no run directory" [ ! -e "$tmp/bad" ]

# a recipe: lr.decay_fraction 0.1 of 50 steps is 5 decay steps, in the plan's table and JSON
cat >"$tmp/wsd.yaml" <<'YAML'
name: wsd
description: warm-up, stable, decay
defaults:
  lr: {peak: 1e-4, warmup_steps: 5, schedule: wsd, decay_fraction: 0.1, decay_type: 1-sqrt, min_lr: 1e-5}
  steps: 50
stages:
  - seq_len: 512
  - seq_len: 1024
    lr: {schedule: constant}
YAML
run plan "$model" --to 1024 --recipe "$tmp/wsd.yaml"
check "plan with wsd ($(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "plan: stage 1 decays 5 steps, 1-sqrt, to 1e-05" grep -q "0.0001 w5 wsd d5 1-sqrt->1e-05" "$tmp/out"
check "plan: the legend explains wsd" grep -q "wsd: decay steps, decay shape" "$tmp/out"
run plan "$model" --to 1024 --recipe "$tmp/wsd.yaml" --json
check "plan --json: decay_steps 5, decay_type 1-sqrt" \
    bash -c "grep -q '\"decay_steps\": 5,' '$tmp/out' && grep -q '\"decay_type\": \"1-sqrt\",' '$tmp/out'"
check "plan --json: the constant stage has no decay" [ "$(grep -c decay_steps "$tmp/out")" -eq 1 ]

exit $fail
