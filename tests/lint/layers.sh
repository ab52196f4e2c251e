#!/usr/bin/env bash
# The include rule (docs/architecture.md "Layers"): every library file (src/, formats/, kernels/) includes only
# headers of its own layer or of a layer below it, named by their path from the repository root. The table
# below is the rule; it must itself be acyclic. Usage: layers.sh ROOT  (exit 0 clean, 1 with one line per
# violation). layers.sh --self-test checks that the checker catches a violation, a cycle and a bare include.
set -euo pipefail

# layer: the layers it may include (besides itself). A layer is src/<folder>, or formats, or kernels.
ALLOWED='
core:
formats:     core
kernels:     core
comm:        core kernels
tokenizer:   core formats
rope:        core formats
checkpoint:  core formats
model:       core formats kernels comm checkpoint rope
train:       core formats kernels comm checkpoint rope model
convert:     core formats checkpoint rope tokenizer
eval:        core formats kernels comm checkpoint rope model tokenizer
plan:        core formats kernels comm checkpoint rope model train
pipeline:    core formats kernels comm checkpoint rope model train convert eval tokenizer plan
'

layer_of() { # path from the root -> layer name, or "" outside the library
    case $1 in
    src/*/*) local r=${1#src/}; echo "${r%%/*}" ;;
    formats/*) echo formats ;;
    kernels/*) echo kernels ;;
    *) echo "" ;;
    esac
}

allowed_of() { printf '%s\n' "$ALLOWED" | awk -v l="$1:" '$1 == l { $1 = ""; print; exit }'; }

check_tree() {
    local root=$1 bad=0
    # The table is a partial order: tsort reports a loop.
    if ! printf '%s\n' "$ALLOWED" | awk 'NF { l = $1; sub(":", "", l); for (i = 2; i <= NF; i++) print $i, l }' |
        tsort >/dev/null 2>&1; then
        echo "layers: the table of allowed includes has a cycle"; bad=1
    fi
    local f inc from to
    while IFS= read -r f; do
        from=$(layer_of "$f")
        if [ -z "$(printf '%s\n' "$ALLOWED" | awk -v l="$from:" '$1 == l')" ]; then
            echo "$f: layer '$from' is not in the table (tests/lint/layers.sh)"; bad=1; continue
        fi
        while IFS= read -r inc; do
            if [ ! -f "$root/$inc" ]; then
                echo "$f: #include \"$inc\" does not name a file from the repository root"; bad=1; continue
            fi
            to=$(layer_of "$inc")
            if [ -z "$to" ]; then
                echo "$f: #include \"$inc\" reaches outside the library"; bad=1; continue
            fi
            [ "$to" = "$from" ] && continue
            case " $(allowed_of "$from") " in
            *" $to "*) ;;
            *) echo "$f: #include \"$inc\": layer '$from' may not include layer '$to'"; bad=1 ;;
            esac
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$root/$f")
    done < <(cd "$root" && find src formats kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
    # src/ holds folders only: a file directly in src/ has no layer.
    if [ -n "$(cd "$root" && find src -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \))" ]; then
        echo "src/: sources belong in a layer folder (src/<layer>/), not in src/ itself"; bad=1
    fi
    return $bad
}

# check_tree must fail on ROOT and say MESSAGE.
expect_caught() {
    local out
    if out=$(check_tree "$1"); then return 1; fi
    [[ $out == *"$2"* ]]
}

self_test() {
    local t; t=$(mktemp -d); trap 'rm -rf "$t"' RETURN
    mkdir -p "$t/src/core" "$t/src/model" "$t/formats" "$t/kernels"
    echo '#include "src/core/a.h"' >"$t/src/core/a.h"
    echo '#include "src/core/a.h"' >"$t/formats/f.c"
    echo '#include "src/core/a.h"' >"$t/src/model/m.h"
    check_tree "$t" >/dev/null || { echo "self-test: a clean tree fails"; return 1; }
    echo '#include "src/model/m.h"' >>"$t/formats/f.c"
    expect_caught "$t" "layer 'formats' may not include layer 'model'" ||
        { echo "self-test: formats -> model not caught"; return 1; }
    echo '#include "src/core/a.h"' >"$t/formats/f.c"
    echo '#include "a.h"' >"$t/src/core/b.c"
    expect_caught "$t" 'does not name a file from the repository root' ||
        { echo "self-test: a bare include not caught"; return 1; }
    rm "$t/src/core/b.c"
    ALLOWED="$ALLOWED
core: model" expect_caught "$t" 'has a cycle' || { echo "self-test: a cycle in the table not caught"; return 1; }
    echo "self-test ok"
}

case ${1:-} in
--self-test) self_test ;;
"") echo "usage: layers.sh ROOT | --self-test" >&2; exit 2 ;;
*) check_tree "$1" && echo "layers ok" ;;
esac
