#!/usr/bin/env bash
# kill -9 at random points (docs/reliability.md "Kills and full disks"): import, reshard, export --format hf,
# export --format gguf and a training save, TRIALS times each (default 20; LCX_FAULT_TRIALS overrides). After each
# kill the output is either absent or valid (an .lcx passes `lcextend verify`; an HF directory or GGUF file equals
# an unkilled run's byte for byte; a run's `latest` and every checkpoint in it verify), and after the next run to
# the same output (a rerun; for training `--resume`, or a fresh run where no checkpoint was committed yet) the
# output is valid and no OUT.tmp-* is left. Kill points, in turn: a random time in [0, T] after the start (T = an
# unkilled run's wall time, measured here, so the points follow the machine's speed); a random time in [0, W] after
# the temporary appears (W = the unkilled run's time from then to its end: inside the write); and the moment the
# temporary appears (the process stopped there, then killed: a kill inside the operation on any machine). Prints
# the outcome counts per command, as recorded in docs/reliability.md.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
TRIALS=${LCX_FAULT_TRIALS:-20}
tiny="$LCX_SRC/recipes/tiny/model"
gqa="$LCX_SRC/tests/fixtures/models/llama_gqa"
RANDOM=${LCX_FAULT_SEED:-18} # reproducible kill points (for a given machine speed)
litter() { compgen -G "$1.tmp-*" >/dev/null; }
now_ms() { date +%s%3N; }
# start_op OP OUT [FLAG]: start OP writing OUT in the background (pid in $pid: lcextend itself, exec'd)
start_op() {
    case $1 in
    import) exec "$LCEXTEND" import "$tiny" --out "$2" ;;
    reshard) exec "$LCEXTEND" reshard "$tmp/a.lcx" --out "$2" --tp 2 --threads 1 ;;
    hf) exec "$LCEXTEND" export "$tmp/a.lcx" --format hf --out "$2" ;;
    gguf) exec "$LCEXTEND" export "$tmp/a.lcx" --format gguf --out "$2" ;;
    train) exec "$LCEXTEND" train "$gqa" --ids "$tmp/ids.txt" --seq 32 --steps 6 --save-every 1 --keep 2 --out "$2" \
        --quiet ${3:-} ;;
    esac >/dev/null 2>"$tmp/op.err" &
    pid=$!
}
# valid OP OUT: OUT is a whole output of OP
valid() {
    case $1 in
    import | reshard) "$LCEXTEND" verify "$2" >/dev/null 2>&1 ;;
    hf) diff -r "$2" "$tmp/ref.hf" >/dev/null ;;
    gguf) cmp -s "$2" "$tmp/ref.gguf" ;;
    train)
        local c ok=0
        [ -f "$2/checkpoints/latest" ] || return 0 # no checkpoint committed yet: nothing to check
        "$LCEXTEND" verify "$2/checkpoints/$(cat "$2/checkpoints/latest")" >/dev/null 2>"$tmp/verify.err" || ok=1
        for c in "$2"/checkpoints/s01-*; do
            case $c in *.tmp-*) continue ;; esac
            "$LCEXTEND" verify "$c" >/dev/null 2>>"$tmp/verify.err" || ok=1
        done
        return $ok
        ;;
    esac
}
# train_litter RUN: a temporary in RUN/checkpoints
train_litter() { compgen -G "$1/checkpoints/*.tmp-*" >/dev/null; }
# wait_temp OP OUT: until OP's temporary for OUT shows (or the process ends)
wait_temp() {
    if [ $1 = train ]; then
        while kill -0 $pid 2>/dev/null && ! train_litter "$2"; do :; done
    else
        while kill -0 $pid 2>/dev/null && ! litter "$2"; do :; done
    fi
}
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
last_loss() { tail -n 1 "$1/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }

run import "$tiny" --out "$tmp/a.lcx"
check "import the tiny model" [ "$(rc)" -eq 0 ]
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"
# References, the wall time T of an unkilled run of each and W, the time from its temporary's appearance to its end.
declare -A T W
for op in import reshard hf gguf train; do
    t0=$(now_ms)
    start_op $op "$tmp/ref.$op"
    wait_temp $op "$tmp/ref.$op"
    t1=$(now_ms)
    wait $pid
    check "unkilled $op (rc $?)" valid $op "$tmp/ref.$op"
    t2=$(now_ms)
    T[$op]=$((t2 - t0 + 1)) W[$op]=$((t2 - t1 + 1))
done
ref_loss=$(last_loss "$tmp/ref.train")

# A resumed run whose --keep prunes the checkpoint it resumed from still saves (its tokenizer files came from
# there: found by these kills, fixed in src/train/train_ckpt.c).
start_op train "$tmp/keep" "--keep 0"
wait $pid
rm -rf "$tmp/keep/checkpoints/s01-step00000"[456]
printf 's01-step000003\n' >"$tmp/keep/checkpoints/latest"
start_op train "$tmp/keep" --resume
wait $pid
check "resume from step 3 with --keep 2 (the resumed checkpoint pruned at step 5) saves on (rc $?: $(head -c 300 "$tmp/op.err"))" \
    [ "$(cat "$tmp/keep/checkpoints/latest")" = s01-step000006 ]
check "resume with --keep 2: the loss curve ends as an unbroken run's" [ "$(last_loss "$tmp/keep")" = "$ref_loss" ]
# Killed after claiming the step-6 checkpoint, before moving latest: the resume from step 5 finds step 6 saved and
# points latest at it (it used to stay at step 5; fixed in src/train/train_ckpt.c), and removes the killed run's
# `latest` temporary (it saved nothing, so nothing swept it: the kill trials caught such litter, this or a killed
# prune's directory, in 5 of 260 trials; a resume now sweeps first).
printf 's01-step000005\n' >"$tmp/keep/checkpoints/latest"
killed_latest="$tmp/keep/checkpoints/latest.tmp-$(host_id)-$(dead_pid)-0000dead"
printf 's01-step000006\n' >"$killed_latest"
start_op train "$tmp/keep" --resume
wait $pid
check "a checkpoint claimed but not yet latest: the resume succeeds (rc $?)" [ -s "$tmp/keep/checkpoints/latest" ]
check "a checkpoint claimed but not yet latest: latest names it after the resume" \
    [ "$(cat "$tmp/keep/checkpoints/latest")" = s01-step000006 ]
check "a checkpoint claimed but not yet latest: the killed run's latest temporary is gone" [ ! -e "$killed_latest" ]

summary=""
for op in ${LCX_FAULT_OPS:-import reshard hf gguf train}; do
    mid=0 finished=0 present=0 absent=0
    for trial in $(seq 1 "$TRIALS"); do
        o="$tmp/k-$op-$trial"
        start_op $op "$o"
        case $((trial % 3)) in
        0) sleep_ms $((RANDOM % T[$op])) ;;                          # anywhere, reading included
        1) wait_temp $op "$o"; sleep_ms $((RANDOM % W[$op])) ;;      # inside the write
        2) wait_temp $op "$o"; kill -STOP $pid 2>/dev/null ;;        # the moment the temporary appears
        esac
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        r=$?
        if [ $r = 137 ]; then mid=$((mid + 1)); else finished=$((finished + 1)); fi
        check "$op trial $trial: finished runs succeed (rc $r: $(head -c 200 "$tmp/op.err"))" [ $r = 137 -o $r = 0 ]
        if [ $op = train ]; then
            if [ -f "$o/checkpoints/latest" ]; then present=$((present + 1)); else absent=$((absent + 1)); fi
            check "$op trial $trial (rc $r): the committed checkpoints verify ($(ls "$o/checkpoints" 2>&1 | tr '\n' ' '))" valid train "$o"
            [ $fail = 1 ] && head -c 300 "$tmp/verify.err"
            if [ -f "$o/checkpoints/latest" ]; then start_op train "$o" --resume; else start_op train "$o"; fi
            wait $pid
            r=$?
            check "$op trial $trial: the next run succeeds (rc $r: $(head -c 200 "$tmp/op.err"))" [ $r = 0 ]
            check "$op trial $trial: after it, every checkpoint verifies" valid train "$o"
            check "$op trial $trial: after it, latest names the last step ($(cat "$o/checkpoints/latest"))" \
                [ "$(cat "$o/checkpoints/latest")" = s01-step000006 ]
            check "$op trial $trial: after it, the loss curve ends as an unbroken run's" \
                [ "$(last_loss "$o")" = "$ref_loss" ]
            check "$op trial $trial: no temporaries after the next run" eval '! train_litter "$o"'
        else
            had=0
            if [ -e "$o" ]; then
                had=1
                present=$((present + 1))
                check "$op trial $trial (rc $r): the output is whole" valid $op "$o"
            else
                absent=$((absent + 1))
            fi
            start_op $op "$o"
            wait $pid
            r=$?
            if [ $had = 1 ]; then
                check "$op trial $trial: a rerun over the whole output refuses it (rc $r)" grep -q "already exists" "$tmp/op.err"
            else
                check "$op trial $trial: the rerun succeeds (rc $r: $(head -c 200 "$tmp/op.err"))" [ $r = 0 ]
            fi
            check "$op trial $trial: after the rerun the output is whole" valid $op "$o"
            check "$op trial $trial: no OUT.tmp-* after the rerun" eval '! litter "$o"'
        fi
        rm -rf "$o"
    done
    line="$op: $TRIALS trials, unkilled ${T[$op]} ms (writing ${W[$op]} ms); killed mid-run $mid, finished first $finished; output after the kill: none $absent, whole $present"
    echo "$line"
    summary="$summary$line"$'\n'
    check "$op: at least a quarter of the kills landed mid-run ($mid of $TRIALS)" [ $((mid * 4)) -ge "$TRIALS" ]
done

echo "fault_kill: $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail
