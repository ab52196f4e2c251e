#!/usr/bin/env bash
# A CLI test's `check WHAT COND` checks one command: in `check WHAT A && B` the && belongs to the shell, so B runs
# unchecked and the test passes whatever B says. Several conditions are written `A && B || failed WHAT`
# (tests/cli/common.sh). This lint finds a check whose command goes on after a top-level &&, ||, | or ; in the
# test scripts under tests/ (a condition inside quotes, $(...) or a subshell is fine).
# Usage: check_chains.sh ROOT | --self-test.
set -euo pipefail

# scan FILE...: "FILE:LINE: check ..." for each chained check; exit 1 when there is one
scan() {
    python3 - "$@" <<'PY'
import re, sys

def unbalanced(text):
    """Whether text ends inside a quoted string (a newline inside one continues the command)."""
    q, i = None, 0
    while i < len(text):
        c = text[i]
        if q == "'":
            q = None if c == "'" else q
        elif c == '\\':
            i += 1
        elif q == '"':
            q = None if c == '"' else q
        elif c in '\'"':
            q = c
        elif c == '#' and (i == 0 or text[i - 1] in ' \t'):
            break
        i += 1
    return q is not None

def commands(lines):
    """(first line number, text) of each command: lines joined across \\-newlines, open quotes, && and ||."""
    i = 0
    while i < len(lines):
        start, text = i, lines[i]
        while i + 1 < len(lines) and (text.endswith('\\') or unbalanced(text) or
                                      text.rstrip().endswith(('&&', '||'))):
            i += 1
            text = (text[:-1] if text.endswith('\\') else text) + '\n' + lines[i]
        yield start + 1, text
        i += 1

def top_level(text, i):
    """(index, char) of each character of text from i outside quotes, $(...) and subshells, in order."""
    stack = []  # the open contexts: ' " (
    while i < len(text):
        c, top = text[i], stack[-1] if stack else None
        if top == "'":
            if c == "'":
                stack.pop()
        elif c == '\\':
            i += 1
        elif top == '"':
            if c == '"':
                stack.pop()
            elif text.startswith('$(', i):
                stack.append('(')
                i += 1
        elif c in '\'"':
            stack.append(c)
        elif text.startswith('$(', i) or c == '(':
            stack.append('(')
            i += c == '$'
        elif c == ')' and top == '(':
            stack.pop()
        elif top is None:
            yield i, c
        i += 1

def chained(text):
    """Whether the check's command (after `check WHAT`) goes on after a top-level &&, ||, | or ;."""
    m = re.match(r'\s*check\s+', text)
    if not m:
        return False
    word_done = False
    for i, c in top_level(text, m.end()):
        if not word_done:
            word_done = c in ' \t\n'  # the end of WHAT
        elif c == '#' and text[i - 1] in ' \t\n':
            return False
        elif c in '|;' or (c == '&' and text[i - 1] not in '<>' and text[i + 1:i + 2] != '>'):
            return True
    return False

bad = 0
for path in sys.argv[1:]:
    for n, text in commands(open(path).read().split('\n')):
        if chained(text):
            print(f'{path}:{n}: {text.splitlines()[0].strip()[:100]}')
            bad = 1
sys.exit(bad)
PY
}

case ${1:-} in
--self-test)
    t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
    cat >"$t/good.sh" <<'SH'
check "one ($(head -c 3 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "in a shell" sh -c "[ 1 -eq 1 ] && true"
check "in quotes" grep -q 'a && b' "$tmp/out"
check "a pipe inside" [ "$(grep -c x "$f" | wc -l)" -eq 1 ]
check "continued" \
    grep -q "x" "$f"
[ "$(rc)" -eq 0 ] && grep -q x "$f" || failed "two conditions"
check "python" python3 -c "
import sys
sys.exit(0 and 1)"
SH
    scan "$t/good.sh" >/dev/null || { echo "self-test: a clean script fails: $(scan "$t/good.sh")"; exit 1; }
    for bad in 'check "w" [ 1 -eq 1 ] && grep -q x f' 'check "w ($(cat "$e"))" [ 1 ] && \\\n    one_line_err' \
        'check "w" grep -q x f ||\n    true' 'check "w" true; false' 'check w true | cat' \
        'check "w" python3 -c "\nprint(1)" && false'; do
        printf "$bad\n" >"$t/bad.sh"
        if scan "$t/bad.sh" >/dev/null; then echo "self-test: '$bad' not caught"; exit 1; fi
    done
    echo "self-test ok" ;;
"") echo "usage: check_chains.sh ROOT | --self-test" >&2; exit 2 ;;
*)
    mapfile -t files < <(cd "$1" && grep -rl --include='*.sh' -E '^[[:space:]]*check[[:space:]]' tests | sort)
    (cd "$1" && scan "${files[@]}") && echo "no chained check in ${#files[@]} test scripts" ;;
esac
