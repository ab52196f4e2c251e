#!/usr/bin/env bash
# Library code never writes to the terminal (docs/architecture.md "Reporting"): in src/, only the terminal
# reporter (src/core/report.c) may name stdout/stderr or call printf/puts/putchar/perror. Everything else hands
# lines, progress, events and tables to an lcx_reporter. Usage: terminal_output.sh ROOT | --self-test.
set -euo pipefail

PATTERN='(^|[^a-zA-Z0-9_])(printf|puts|putchar|perror|vprintf)[[:space:]]*\(|(^|[^a-zA-Z0-9_])(stdout|stderr)([^a-zA-Z0-9_]|$)'
ALLOWED_FILE=src/core/report.c

# FILE with its comments blanked (line numbers kept), so a comment that mentions stderr is not a hit.
strip_comments() {
    awk '{
        out = ""; line = $0
        while (length(line) > 0) {
            if (in_c) { e = index(line, "*/"); if (!e) { line = ""; break } line = substr(line, e + 2); in_c = 0; continue }
            s = index(line, "/*"); d = index(line, "//")
            if (d && (!s || d < s)) { out = out substr(line, 1, d - 1); line = ""; break }
            if (!s) { out = out line; line = ""; break }
            out = out substr(line, 1, s - 1) " "; line = substr(line, s + 2); in_c = 1
        }
        print out
    }' "$1"
}

check_tree() {
    local hits="" f out
    while IFS= read -r f; do
        [ "$f" = "$ALLOWED_FILE" ] && continue
        out=$(strip_comments "$1/$f" | grep -nE "$PATTERN" | sed "s|^|$f:|" || true)
        if [ -n "$out" ]; then hits+="$out"$'\n'; fi

    done < <(cd "$1" && find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
    if [ -n "$hits" ]; then
        printf '%s' "$hits" | sed 's/$/   <- terminal output outside the reporter/'
        return 1
    fi
}

case ${1:-} in
--self-test)
    t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/src/core" "$t/src/train"
    printf 'void f(void) { fprintf(stderr, "x"); }\n' >"$t/$ALLOWED_FILE"
    printf 'void g(FILE *f) { fprintf(f, "x"); snprintf(b, 4, "x"); } /* to stderr */\n// printf(\n' >"$t/src/train/a.c"
    check_tree "$t" >/dev/null || { echo "self-test: a clean tree fails"; exit 1; }
    for bad in 'printf("x");' 'fputs("x", stdout);' 'fprintf(stderr, "x");' 'puts("x");' 'fflush(stdout);'; do
        printf 'void h(void) { %s }\n' "$bad" >"$t/src/train/b.c"
        if check_tree "$t" >/dev/null; then echo "self-test: '$bad' not caught"; exit 1; fi
    done
    echo "self-test ok" ;;
"") echo "usage: terminal_output.sh ROOT | --self-test" >&2; exit 2 ;;
*) check_tree "$1" && echo "no terminal output in src/ outside $ALLOWED_FILE" ;;
esac
