#!/usr/bin/env bash
# `lcextend rope` as a command: --show states per pair on the rope fixtures (hand-derived from the wavelengths and
# L = 64, see gen_rope_models.py), --seq changing dynamic/longrope, --to for every method (fields in config.json,
# re-extension against the original length), files linked / symlinks followed / copied across filesystems, no
# partial output, refusing an existing DIR, usage errors and one-line errors.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
states() { grep -o '"state": "[a-z]*"' "$tmp/out" | sed 's/.*: "//; s/"//' | tr '\n' ' '; }
key() { grep -E "^ +\"$1\": " "$tmp/out" | head -1 | sed 's/.*: //; s/,$//'; }
fx="$LCX_SRC/tests/fixtures/rope_models"

run rope --help
check "--help exits 0" [ "$(rc)" -eq 0 ]
check "--help has examples" grep -q "examples:" "$tmp/out"
run --help
check "top-level help lists rope" grep -q "^  rope " "$tmp/out"

# --show: pair states. Wavelengths 2*pi*1e4^(k/4) = 6.3, 63, 628, 6283 against L 64 (llama3: high-frequency
# limit L/4 = 16, low L/1 = 64; yarn betas 32/1 -> ramp over pairs 0..1).
run rope "$fx/default" --show --json
check "default: exit 0" [ "$(rc)" -eq 0 ]
check "default: all kept" [ "$(states)" = "kept kept kept kept " ]
check "default: attention factor 1" [ "$(key attention_factor)" = "1.0" ]
run rope "$fx/llama3" --show --json
check "llama3: kept blended interpolated interpolated ($(states))" \
    [ "$(states)" = "kept blended interpolated interpolated " ]
run rope "$fx/linear" --show --json
check "linear: all interpolated" [ "$(states)" = "interpolated interpolated interpolated interpolated " ]
run rope "$fx/yarn" --show --json
check "yarn: kept blended interpolated interpolated ($(states))" \
    [ "$(states)" = "kept blended interpolated interpolated " ]
check "yarn: seq defaults to max_position_embeddings 256" [ "$(key seq_len)" = "256" ]
# dynamic at n <= M is the plain rope; past M the base grows
run rope "$fx/dynamic" --show --json --seq 64
check "dynamic at 64: all kept" [ "$(states)" = "kept kept kept kept " ]
run rope "$fx/dynamic" --show --json --seq 256
check "dynamic at 256: pair 0 kept, others scaled" [ "$(states)" = "kept scaled scaled scaled " ]
# longrope: short factors (1, 1.1, 1.5, 2) up to L = 64, long (1, 1.8, 3.5, 6) past it
run rope "$fx/longrope" --show --json --seq 64
check "longrope at 64: short factor 1.1 on pair 1" grep -qE '"scale": 1\.(0999|1000)' "$tmp/out"
run rope "$fx/longrope" --show --json --seq 65
check "longrope at 65: long factor 1.8 on pair 1" grep -qE '"scale": 1\.(7999|8000)' "$tmp/out"
run rope "$fx/yarn/config.json" --show
check "text show of a config.json path" grep -q "^rope_type: *yarn" "$tmp/out"
check "text show has a per-pair table" grep -qE "^ +3 .* interpolated$" "$tmp/out"
run rope "$fx/nope" --show
check "missing CKPT: exit 1" [ "$(rc)" -eq 1 ]
check "missing CKPT: one line naming it" one_line_err
check "missing CKPT: names the path" grep -q "rope_models/nope" "$tmp/err"

# --to: config fields per method, from the plain fixture (M = L = 64)
to() { # to METHOD OUTNAME [extra flags]
    local m=$1 o=$2; shift 2
    run rope "$fx/default" --to 256 --method "$m" --out "$tmp/$o" "$@"
}
cfg() { sed -n "s/^  \"$2\": \(.*\),\?$/\1/p" "$tmp/$1/config.json" | sed 's/,$//' | head -1; }
to yarn y
check "yarn: exit 0" [ "$(rc)" -eq 0 ]
check "yarn: max_position_embeddings 256" [ "$(cfg y max_position_embeddings)" = "256" ]
check "yarn: rope_scaling yarn" grep -q '"rope_type": "yarn"' "$tmp/y/config.json"
check "yarn: factor 4.0" grep -q '"factor": 4.0' "$tmp/y/config.json"
check "yarn: original 64" grep -q '"original_max_position_embeddings": 64' "$tmp/y/config.json"
check "yarn: no rope_parameters left" fails grep -q rope_parameters "$tmp/y/config.json"
check "yarn: every other file present" [ "$(ls "$tmp/y" | wc -l)" -eq "$(ls "$fx/default" | wc -l)" ]
check "yarn: generation_config.json linked" [ "$(stat -c %i "$tmp/y/generation_config.json")" = \
    "$(stat -c %i "$fx/default/generation_config.json")" ]
check "yarn: source config untouched" grep -q '"rope_type": "default"' "$fx/default/config.json"
check "yarn: no temp dir left" [ -z "$(ls -d "$tmp"/y.tmp-* 2>/dev/null)" ]
# re-extension: factors against the original 64, not the current 256
run rope "$tmp/y" --to 512 --method yarn --out "$tmp/y2"
check "re-extension: exit 0" [ "$(rc)" -eq 0 ]
check "re-extension: factor 8 over original 64" grep -q '"factor": 8.0' "$tmp/y2/config.json"
check "re-extension: original still 64" grep -q '"original_max_position_embeddings": 64' "$tmp/y2/config.json"
to pi p
check "pi: linear factor 4" grep -q '"rope_type": "linear"' "$tmp/p/config.json"
check "pi: factor 4.0" grep -q '"factor": 4.0' "$tmp/p/config.json"
to abf a --theta 1e6
check "abf: exit 0" [ "$(rc)" -eq 0 ]
check "abf: theta 1e6" [ "$(cfg a rope_theta)" = "1000000.0" ]
check "abf: no scaling" fails grep -q '"rope_type": "[a-z]' "$tmp/a/config.json"
to ntk n
# theta' = 1e4 * 4^(8/6) = 63496.04...
check "ntk: theta 1e4 * 4^(4/3)" awk -v t="$(cfg n rope_theta)" 'BEGIN { exit !(t > 63496.04 && t < 63496.05) }'
to llama3 l
check "llama3: low/high 1/4" grep -q '"high_freq_factor": 4.0' "$tmp/l/config.json"
check "llama3: top-level original" [ "$(cfg l original_max_position_embeddings)" = "64" ]
to longrope lr --short-factor 1,1.1,1.5,2 --long-factor 1,1.8,3.5,6
check "longrope: exit 0" [ "$(rc)" -eq 0 ]
check "longrope: long_factor written" grep -q '"long_factor"' "$tmp/lr/config.json"
to longrope lr2 --short-factor 1,2 --long-factor 1,2
check "longrope wrong list length: exit 1" [ "$(rc)" -eq 1 ]
check "longrope wrong list length: one line" one_line_err
check "failed --to leaves nothing" [ -z "$(ls -d "$tmp"/lr2* 2>/dev/null)" ]

# an existing DIR is refused and left alone
mkdir "$tmp/exists"
run rope "$fx/default" --to 256 --out "$tmp/exists"
check "existing DIR: exit 1" [ "$(rc)" -eq 1 ]
check "existing DIR: one line" one_line_err
check "existing DIR: says so" grep -q "already exists" "$tmp/err"
check "existing DIR: untouched" [ -z "$(ls "$tmp/exists")" ]

# a symlinked source file (HF cache snapshots) is followed: the output holds a link to the real file
mkdir "$tmp/snap"
cp "$fx/default/config.json" "$tmp/snap/"
ln -s "$fx/default/model.safetensors" "$tmp/snap/model.safetensors"
run rope "$tmp/snap" --to 128 --out "$tmp/snap_out"
check "symlinked source: exit 0" [ "$(rc)" -eq 0 ]
[ -f "$tmp/snap_out/model.safetensors" ] && \
    [ ! -L "$tmp/snap_out/model.safetensors" ] || failed "symlinked source: output is a regular file"
check "symlinked source: same data" cmp -s "$tmp/snap_out/model.safetensors" "$fx/default/model.safetensors"

# across filesystems the files are copied (when /dev/shm is another filesystem than the fixtures)
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -c %d /dev/shm)" != "$(stat -c %d "$fx/default")" ]; then
    shm=$(mktemp -d /dev/shm/lcx-rope-XXXXXX)
    run rope "$fx/default" --to 256 --out "$shm/x"
    check "cross-fs: exit 0" [ "$(rc)" -eq 0 ]
    check "cross-fs: reports copies" grep -q "0 file(s) linked" "$tmp/out"
    check "cross-fs: weights equal" cmp -s "$shm/x/model.safetensors" "$fx/default/model.safetensors"
    rm -rf "$shm"
fi

# usage errors: exit 2, one line, naming the problem
usage() { # usage NEEDLE ARGS...
    local needle=$1; shift
    run rope "$@"
    check "usage '$*': exit 2" [ "$(rc)" -eq 2 ]
    check "usage '$*': names '$needle'" grep -q -- "$needle" "$tmp/err"
}
usage "missing CKPT" --show
usage "exactly one" "$fx/default"
usage "exactly one" "$fx/default" --show --to 256
usage "missing --out" "$fx/default" --to 256
usage "--to" "$fx/default" --to 12x --out "$tmp/q"
usage "--method" "$fx/default" --to 256 --method nope --out "$tmp/q"
usage "needs --theta" "$fx/default" --to 256 --method abf --out "$tmp/q"
usage "--theta" "$fx/default" --to 256 --theta 5e5 --out "$tmp/q"
usage "--theta" "$fx/default" --to 256 --method abf --theta -1 --out "$tmp/q"
usage "--short-factor" "$fx/default" --to 256 --method longrope --short-factor 1,x --long-factor 1 --out "$tmp/q"
usage "needs --short-factor" "$fx/default" --to 256 --method longrope --out "$tmp/q"
usage "--seq" "$fx/default" --show --seq 0
usage "go with --to" "$fx/default" --show --out "$tmp/q"
usage "unknown flag" "$fx/default" --show --bogus
check "no output dir from usage errors" [ ! -e "$tmp/q" ]
usage "--theta 'inf' is not a positive number" "$fx/default" --to 256 --method abf --theta inf --out "$tmp/q"
usage "--long-factor '1,0x2'" "$fx/default" --to 256 --method longrope --short-factor 1 --long-factor 1,0x2 \
    --out "$tmp/q"
usage "flag --to needs a value" "$fx/default" --to
usage "--seq '1e3' is not a length" "$fx/default" --show --seq=1e3
usage "unexpected argument" "$fx/default" "$fx/default" --show
check "no output dir from flag errors" [ ! -e "$tmp/q" ]
run rope "$fx/default/config.json" --to 256 --out "$tmp/q"
check "--to on a config.json: exit 1" [ "$(rc)" -eq 1 ]
check "--to on a config.json: one line" one_line_err
[ "$fail" -eq 0 ] && echo "rope: OK"
exit "$fail"
