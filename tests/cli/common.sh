# Shared preamble of the CLI tests, sourced by every tests/cli/<name>.sh (not a test itself: tests/CMakeLists.txt
# leaves it out of the glob). Source it first:
#   . "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# It requires LCEXTEND and LCX_SRC, makes $tmp (removed on exit) and sets fail=0; the helpers below set fail=1 on a
# failed check, and each test ends with its own summary and `exit $fail`.
set -u
: "${LCEXTEND:?}" "${LCX_SRC:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# check DESCRIPTION CONDITION...: prints "FAIL: DESCRIPTION" and sets fail=1 when CONDITION fails; with
# check_shows_err=1 also the first lines of the last run's stderr.
check() {
    local what=$1; shift
    "$@" || failed "$what"
}
# COND1 && COND2 ... || failed WHAT: a check of several conditions. check runs one command: in
# `check WHAT COND1 && COND2` the && is the shell's, so COND2 would run unchecked.
failed() {
    echo "FAIL: $1"
    if [ "${check_shows_err:-0}" = 1 ]; then cat "$tmp/err" 2>/dev/null | head -3; fi
    fail=1
}
# run ARGS...: lcextend ARGS with stdout in $tmp/out, stderr in $tmp/err, exit status for rc.
run() { "$LCEXTEND" "$@" >"$tmp/out" 2>"$tmp/err"; echo $? >"$tmp/rc"; }
rc() { cat "$tmp/rc"; }
# mpi NP ARGS...: lcextend ARGS under mpirun ($MPIEXEC, from CMake) with NP ranks (as root, oversubscribing the
# cores), outputs as run's. A script that uses it names MPIEXEC itself (its skip line): that gives it the mpi label.
mpi() {
    local np=$1; shift
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
        "$MPIEXEC" --allow-run-as-root --oversubscribe -np "$np" "$LCEXTEND" "$@" >"$tmp/out" 2>"$tmp/err"
    echo $? >"$tmp/rc"
}
# the last run wrote exactly one line on stderr
one_line_err() { [ "$(wc -l <"$tmp/err")" -eq 1 ]; }
# same A B: A is not empty and equals B. Two runs compared by what a pattern picks out of their outputs ("the same
# losses") must not agree on nothing: a pattern that stopped matching, or two runs that both wrote nothing.
same() { [ -n "$1" ] && [ "$1" = "$2" ]; }
# lacks [GREP OPTION...] PATTERN FILE: FILE is there and has no line matching PATTERN (a missing file, or a grep
# error such as a bad pattern, is a failure: `! grep` would pass on both)
lacks() {
    [ -r "${!#}" ] || return 1
    grep -q "$@"
    [ $? -eq 1 ]
}
# fails COMMAND...: true when COMMAND fails (its stdout dropped)
fails() { ! "$@" >/dev/null; }
# close A B T: |A - B| <= T * |B|
# (both numbers: an empty or non-numeric A or B, which awk would read as 0, fails)
close() {
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN {
        num = "^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"
        if (a !~ num || b !~ num) exit 1
        d = a - b; if (d < 0) d = -d; exit !(d <= t * (b < 0 ? -b : b)) }'
}
# bad_flag NEEDLE ARGS...: lcextend ARGS is a usage error: exit 2, one line on stderr, containing NEEDLE (fixed text)
bad_flag() {
    local needle=$1; shift
    run "$@"
    check "'$*': exit 2 (got $(rc))" [ "$(rc)" -eq 2 ]
    check "'$*': one line on stderr" one_line_err
    check "'$*': names '$needle' ($(head -c 300 "$tmp/err"))" grep -qF -- "$needle" "$tmp/err"
}
# host_id: this host as lcextend names it in a temporary (OUT.tmp-HOST-PID-RANDOM): FNV-1a of the host name
host_id() {
    python3 -c 'import socket
x = 2166136261
for c in socket.gethostname().encode(): x = ((x ^ c) * 16777619) % 2**32
print("%08x" % x)'
}
# dead_pid: the pid of a process that has ended (free now)
dead_pid() { true & local p=$!; wait $p; echo $p; }
# recipe FILE NAME TOKENS_PER_BATCH EVAL_LENGTHS SEQ_LEN...: the main command's small test recipe (yarn, 2 steps a
# stage at lr 1e-3 cosine, a save every step, keep, seed 7) with these tokens per step, evaluation lengths ("64,
# 128") and stages
recipe() {
    local file=$1 name=$2 tokens=$3 evals=$4
    shift 4
    {
        cat <<YAML
name: $name
defaults:
  method: yarn
  factor: auto
  steps: 2
  lr: {peak: 1e-3, warmup_steps: 1, schedule: cosine, min_lr: 1e-4}
  tokens_per_batch: $tokens
  grad_accum: 1
  eval_lengths: [$evals]
  save_interval: 1
  activation: keep
  clip_norm: 1.0
  weight_decay: 0.0
  seed: 7
stages:
YAML
        for len in "$@"; do echo "  - seq_len: $len"; done
    } >"$file"
}
# flops_per_token MODEL_DIR S: model FLOPs per trained token at length S from MODEL_DIR/config.json (docs/plan.md
# "FLOPs": 6 x the weights used in matmuls, the output projection included, + 6 L nh d (S + 1) for attention)
flops_per_token() {
    python3 - "$1/config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
S, H, F, L = int(sys.argv[2]), c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
nh, nkv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
d = c.get("head_dim") or H // nh
per_layer = H * nh * d + 2 * H * nkv * d + nh * d * H + 3 * H * F
print(6 * (L * per_layer + c["vocab_size"] * H) + 6 * L * nh * d * (S + 1))
PY
}
