#!/usr/bin/env bash
# Every broken model directory of tests/attack/config (made by tests/attack/make_config_attacks.py) must make
# `lcextend inspect` exit 1 with exactly one line on stderr that contains the expected text (naming the file,
# key or tensor) and nothing on stdout; ok_* cases must succeed. A crash (signal) or sanitizer report fails.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="$LCX_SRC/tests/attack/config"
n=0
while IFS=$'\t' read -r name expect; do
    case "$name" in '#'*|'') continue ;; esac
    n=$((n + 1))
    "$LCEXTEND" inspect "$dir/$name" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ -z "$expect" ]; then
        if [ "$rc" -ne 0 ] || [ "$lines" -ne 0 ]; then
            echo "FAIL $name: expected success, got exit $rc: $(cat "$tmp/err")"; fail=1
        fi
        continue
    fi
    if [ "$rc" -ne 1 ]; then echo "FAIL $name: exit $rc (want 1): $(head -c 2000 "$tmp/err")"; fail=1; continue; fi
    if [ "$lines" -ne 1 ]; then echo "FAIL $name: $lines lines on stderr (want 1):"; cat "$tmp/err"; fail=1; continue; fi
    if [ -s "$tmp/out" ]; then echo "FAIL $name: wrote to stdout"; fail=1; fi
    if ! grep -qF -- "$expect" "$tmp/err"; then
        echo "FAIL $name: error does not contain '$expect':"; cat "$tmp/err"; fail=1
    fi
    if ! grep -q "^lcextend inspect: " "$tmp/err"; then echo "FAIL $name: not a one-line lcextend error"; fail=1; fi
done <"$dir/EXPECTED.tsv"
[ "$n" -ge 40 ] || { echo "FAIL: only $n cases in EXPECTED.tsv"; fail=1; }
echo "config attacks: $n cases, $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail
