#!/usr/bin/env bash
# The CPU demo: extend the bundled tiny model (recipes/tiny/model, context 256) to 2048 with the tiny-demo recipe
# (three YaRN stages, 512 -> 1024 -> 2048) on the demo's training data (make_data.sh: the KJV training books from
# the Debian package bible-kjv, built once), evaluating the input before and the result after on the held-out
# books (perplexity at 256/512/1024/2048 and passkey retrieval) and printing the before/after table.
# usage: recipes/tiny/demo.sh [BUILD_DIR]   (default: the source tree's build/; the work directory is BUILD_DIR/demo,
#        or $DEMO_WORK)
# Running it again after it finished prints the table again; after an interruption it resumes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
[ -d "$build" ] && build=$(cd "$build" && pwd)
lcx=$build/lcextend
[ -x "$lcx" ] || { echo "demo.sh: no $lcx (build first: cmake -S . -B build && cmake --build build -j2)" >&2; exit 1; }
work=${DEMO_WORK:-$build/demo}
mkdir -p "$work"
start=$SECONDS
if [ ! -f "$work/data/train.idx" ]; then
    "$here/make_data.sh" "$work/data" "$lcx"
fi
out="$work/tiny-2048"
resume=()
[ -f "$out/checkpoints/latest" ] && resume=(--resume)
"$lcx" "$here/model" --to 2048 --recipe tiny-demo --data "$work/data/train" --eval-data "$here/data/heldout" \
    --passkey 2 --out "$out" "${resume[@]}"
echo "demo.sh: $((SECONDS - start)) s; run directory $out (eval/: before.json, after.json, ppl.svg, passkey-*.svg; hf/: the extended model)"
