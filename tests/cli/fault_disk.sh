#!/usr/bin/env bash
# A full disk (docs/reliability.md "Kills and full disks"), on a small tmpfs: import, reshard, export --format hf
# and --format gguf onto a disk too small for their output fail with a one-line error naming the file and "No space
# left on device", and leave nothing there; with the space freed (the tmpfs grown) the same command succeeds. A
# training run whose second save finds the disk full warns before it starts that its checkpoints need more than the
# disk has, then fails the same way, keeps its first checkpoint (verified) and no temporary; a --resume on the
# still-full disk fails again without adding anything; once space is freed the --resume finishes the run with the
# loss of an unbroken one. The main command's warning counts the import and, on --resume, only the saves left
# (the checkpoints there already written). Skips (77) where tmpfs cannot be mounted (not root, or no permission in
# a container).
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
tiny="$LCX_SRC/recipes/tiny/model"
gqa="$LCX_SRC/tests/fixtures/models/llama_gqa"
mnt="$tmp/disk"
mkdir "$mnt"
if ! mount -t tmpfs -o size=1m tmpfs "$mnt" 2>"$tmp/mount.err"; then
    echo "skip: cannot mount a tmpfs here ($(head -n 1 "$tmp/mount.err")): the full-disk cases need one"
    exit 77
fi
trap 'umount "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
resize() { mount -o remount,size="$1" "$mnt"; }
empty() { [ -z "$(ls -A "$mnt")" ]; }
# full_disk WHAT OUT ARGS...: lcextend ARGS fails on the full disk with one line naming OUT and ENOSPC, leaves the
# disk empty, and succeeds once the disk is grown
full_disk() {
    local what=$1 out=$2; shift 2
    resize 1m
    run "$@"
    check "$what on a full disk: fails (rc $(rc))" [ "$(rc)" -ne 0 ]
    check "$what on a full disk: one line on stderr ($(head -c 300 "$tmp/err"))" one_line_err
    check "$what on a full disk: says so ($(head -c 300 "$tmp/err"))" grep -q "No space left on device" "$tmp/err"
    check "$what on a full disk: names the output ($(head -c 300 "$tmp/err"))" grep -qF "$out" "$tmp/err"
    check "$what on a full disk: nothing left behind ($(ls -A "$mnt" | head -3 | tr '\n' ' '))" empty
    resize 64m
    run "$@"
    check "$what with the space freed: succeeds (rc $(rc): $(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
    check "$what with the space freed: no temporaries" [ -z "$(find "$mnt" -name '*.tmp-*')" ]
    rm -rf "${mnt:?}"/*
}

run import "$tiny" --out "$tmp/a.lcx"
check "import the tiny model" [ "$(rc)" -eq 0 ]
full_disk import "$mnt/i.lcx" import "$tiny" --out "$mnt/i.lcx"
full_disk reshard "$mnt/r.lcx" reshard "$tmp/a.lcx" --out "$mnt/r.lcx" --tp 2
full_disk "export hf" "$mnt/h" export "$tmp/a.lcx" --format hf --out "$mnt/h"
full_disk "export gguf" "$mnt/g.gguf" export "$tmp/a.lcx" --format gguf --out "$mnt/g.gguf"

# Training: size the disk from an unbroken run so that the first save fits and the second does not.
awk 'BEGIN { s = 7; for (i = 0; i < 2500; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' >"$tmp/ids.txt"
train() { run train "$gqa" --ids "$tmp/ids.txt" --seq 32 --steps 4 --save-every 2 --keep 0 --quiet --out "$@"; }
train "$tmp/ref"
check "unbroken training run (rc $(rc))" [ "$(rc)" -eq 0 ]
loss() { tail -n 1 "$1/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }
ck_kb=$(du -sk "$tmp/ref/checkpoints/s01-step000002" | cut -f1)
base_kb=$(($(du -sk "$tmp/ref" | cut -f1) - $(du -sk "$tmp/ref/checkpoints" | cut -f1)))
resize $((base_kb + ck_kb * 3 / 2 + 64))k
run_dir="$mnt/run"
# before it starts, the run warns that its checkpoints need more than the disk has (docs/plan.md "Disk"): 2 at
# once for the whole run, 1 more for a --resume after the first (the one there already counted as written); the
# failure is then one line after that warning. warned_error N: that warning for N checkpoints, then one line.
warned_error() {
    local what="$1 checkpoint"
    [ "$1" -ne 1 ] && what="${what}s"
    [ "$(wc -l <"$tmp/err")" -eq 2 ] && head -n 1 "$tmp/err" | grep -qF "warning: $run_dir: its filesystem has " &&
        head -n 1 "$tmp/err" | grep -q "the run may write up to .* more there ($what of .* at once, before zstd)"
}
train "$run_dir"
check "training on a disk that fills at the second save: fails (rc $(rc))" [ "$(rc)" -ne 0 ]
echo "training, full disk: $(cat "$tmp/err")"
check "training, full disk: the disk warning, then one line ($(head -c 400 "$tmp/err"))" warned_error 2
check "training, full disk: says so ($(head -c 300 "$tmp/err"))" grep -q "No space left on device" "$tmp/err"
check "training, full disk: latest is the first checkpoint" [ "$(cat "$run_dir/checkpoints/latest")" = s01-step000002 ]
check "training, full disk: the first checkpoint verifies" "$LCEXTEND" verify "$run_dir/checkpoints/s01-step000002" \
    >/dev/null
check "training, full disk: no temporaries ($(ls "$run_dir/checkpoints" | tr '\n' ' '))" \
    [ -z "$(find "$mnt" -name '*.tmp-*')" ]
used1=$(du -sk "$mnt" | cut -f1)
for attempt in 1 2; do
    train "$run_dir" --resume
    check "--resume on the still-full disk ($attempt): fails (rc $(rc))" [ "$(rc)" -ne 0 ]
    check "--resume on the still-full disk ($attempt): the warning, then one line ($(head -c 400 "$tmp/err"))" \
        warned_error 1
    check "--resume on the still-full disk ($attempt): no temporaries" [ -z "$(find "$mnt" -name '*.tmp-*')" ]
    check "--resume on the still-full disk ($attempt): takes no more space ($(du -sk "$mnt" | cut -f1) KiB, was $used1)" \
        [ "$(du -sk "$mnt" | cut -f1)" -le $((used1 + 8)) ]
done
resize 64m
train "$run_dir" --resume
check "--resume once space is freed: succeeds (rc $(rc): $(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "--resume once space is freed: latest is the last step" \
    [ "$(cat "$run_dir/checkpoints/latest")" = s01-step000004 ]
check "--resume once space is freed: it verifies" "$LCEXTEND" verify "$run_dir/checkpoints/s01-step000004" >/dev/null
check "--resume once space is freed: the loss curve ends as an unbroken run's" \
    same "$(loss "$run_dir")" "$(loss "$tmp/ref")"
check "--resume once space is freed: no temporaries" [ -z "$(find "$mnt" -name '*.tmp-*')" ]

# The main command (import, evaluations, 2 stages of 2 saves, --keep 0, the export) on a disk that holds two of its
# four checkpoints: it warns of 4 at once, the import and the export; its --resume after stage 1 of 2 saves left
# (2 done), the import there already.
rm -rf "${mnt:?}"/*
resize 64m
recipe "$tmp/two.yaml" two-stage 256 64 128 256
main() { run "$gqa" --to 256 --recipe "$tmp/two.yaml" --ids "$tmp/ids.txt" --keep 0 --quiet --out "$@"; }
main "$tmp/eref"
check "main command, unbroken (rc $(rc): $(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
ck_kb=$(du -sk "$tmp/eref/checkpoints/s01-step000001" | cut -f1)
kb() { du -sk "$1" | cut -f1; }
base_kb=$(($(kb "$tmp/eref") - $(kb "$tmp/eref/checkpoints") - $(kb "$tmp/eref/hf")))
resize $((base_kb + ck_kb * 5 / 2 + 64))k
main "$mnt/ext"
check "main command, full disk at its third save: fails (rc $(rc))" [ "$(rc)" -ne 0 ]
check "main command, full disk: latest is stage 1's last ($(cat "$mnt/ext/checkpoints/latest" 2>&1))" \
    [ "$(cat "$mnt/ext/checkpoints/latest")" = s01-step000002 ]
head -n 1 "$tmp/err" |
    grep -q "more there (4 checkpoints of .* at once, the import of .* and the export of .*, before zstd)" ||
    failed "main command, full disk: warned of 4 checkpoints, the import and the export ($(head -c 400 "$tmp/err"))"
main "$mnt/ext" --resume
check "main command --resume on the full disk: fails (rc $(rc))" [ "$(rc)" -ne 0 ]
head -n 1 "$tmp/err" | grep -q "more there (2 checkpoints of .* at once and the export of .*, before zstd)" ||
    failed "main command --resume: warned of the 2 saves left, no import ($(head -c 400 "$tmp/err"))"
main "$mnt/ext" --resume --dry-run
[ "$(rc)" -eq 0 ] && one_line_err &&
    grep -q "more there (2 checkpoints of .* at once and the export of .*, before zstd)" "$tmp/err" ||
    failed "main command --resume --dry-run: the same warning, and nothing else ($(head -c 400 "$tmp/err"))"
resize 64m
main "$mnt/ext" --resume
check "main command --resume once space is freed: succeeds (rc $(rc): $(head -c 300 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "main command --resume once space is freed: the loss curve ends as an unbroken run's" \
    same "$(loss "$mnt/ext")" "$(loss "$tmp/eref")"
check "main command: no temporaries" [ -z "$(find "$mnt" -name '*.tmp-*')" ]

echo "fault_disk: $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail
