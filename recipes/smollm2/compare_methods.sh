#!/usr/bin/env bash
# Zero-shot context extension methods on the real checkpoint (docs/results.md): SmolLM2-135M (trained to 8k,
# rope_theta 1e5) with no scaling, PI, NTK-aware, dynamic NTK, YaRN, Llama-3-style and ABF, each set up for
# TARGET tokens by `lcextend rope` (only config.json changes), evaluated at 8k, 16k, ... TARGET:
#   perplexity: the first window of each held-out document (`eval --truncate`: every length from one pass per
#     document, except dynamic NTK, whose tables depend on the pass length), on the in-domain KJV held-out books
#     and the out-of-domain common-licenses texts (make_data.sh; ~65k tokens each, two documents);
#   passkey: log-likelihood rank of the key against 4 distractors, TRIALS trials per (length, depth);
#   multi-key passkey: NEEDLES named keys per prompt, one asked for (eval --needles), in the words of the
#     common-licenses texts (eval --haystack), ranked against the other keys and 4 distractors.
# usage: recipes/smollm2/compare_methods.sh GGUF OUTDIR [BUILD_DIR]
#   env: TARGET (default 32768), LENGTHS (default 8192,16384,...,TARGET), DEPTHS (default 0,0.5,1),
#        TRIALS (default 1), METHODS (default "none pi ntk dynamic yarn llama3 abf"), BACKEND (cpu, or cuda),
#        NEEDLES (default 4; 0: no multi-key sweep), HAYSTACK (default OUTDIR/data/heldout-lic.txt; "filler": the
#        repeated sentences)
# Three sweeps: every method's perplexity (METHOD-ppl.json/.txt; the last method's run draws methods-ppl.svg with
# the others' JSON), then every method's passkey cells (METHOD-passkey.json/.txt/.svg), then its multi-key cells
# (METHOD-needles.json/.txt/.svg). A rerun skips what exists.
# Cost on the CPU: about one forward pass of TARGET tokens per document and per passkey cell and method (a 32k
# pass of this model is ~10 minutes on 2 cores), so the defaults take hours there; a GPU runs them in minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
gguf=${1:?usage: compare_methods.sh GGUF OUTDIR [BUILD_DIR]}
out=${2:?usage: compare_methods.sh GGUF OUTDIR [BUILD_DIR]}
build=${3:-build}
lcx=$(cd "$build" && pwd)/lcextend
[ -x "$lcx" ] || { echo "compare_methods.sh: no $lcx (build first)" >&2; exit 1; }
target=${TARGET:-32768}
if [ -z "${LENGTHS:-}" ]; then
    LENGTHS=8192
    for ((l = 16384; l <= target; l *= 2)); do LENGTHS="$LENGTHS,$l"; done
fi
depths=${DEPTHS:-0,0.5,1}
trials=${TRIALS:-1}
methods=${METHODS:-none pi ntk dynamic yarn llama3 abf}
backend=${BACKEND:-cpu}
needles=${NEEDLES:-4}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -f "$out/data/heldout-kjv.txt" ] || "$here/make_data.sh" "$gguf" "$out/data" "$lcx"
# the held-out texts as two documents of one dataset
[ -f "$out/heldout.idx" ] || "$lcx" tokenize --tokenizer "$gguf" --input "$out/data/heldout-kjv.txt" \
    "$out/data/heldout-lic.txt" --output "$out/heldout" --no-eos --quiet
haystack=${HAYSTACK:-$out/data/heldout-lic.txt}
hay=()
[ "$haystack" = filler ] || hay=(--haystack "$haystack")
[ -d "$out/base" ] || "$lcx" export "$gguf" --format hf --dtype f32 --out "$out/base" >/dev/null

# model_dir METHOD: the zero-shot checkpoint of a method, written on first use
model_dir() {
    local m=$1 model="$out/$1-$target"
    case $m in
        none) model="$out/base" ;;
        abf) [ -d "$model" ] || "$lcx" rope "$out/base" --to "$target" --method abf \
                 --theta "$(awk -v t="$target" 'BEGIN { printf "%.0f", 1e5 * 4 ^ (log(t / 8192) / log(2)) }')" \
                 --out "$model" >/dev/null || return 1 ;; # the abf recipe's x4 per doubling
        *) [ -d "$model" ] || "$lcx" rope "$out/base" --to "$target" --method "$m" --out "$model" >/dev/null ||
               return 1 ;;
    esac
    echo "$model"
}

# Two sweeps, each skipping what an earlier run finished (a JSON per method and sweep; METHOD.json from a
# run of the one-sweep version of this script counts for both): every method's perplexity first (minutes each),
# then every method's passkey cells (the long part).
set -- $methods
last=${!#}
for m in "$@"; do
    [ -f "$out/$m.json" ] || [ -f "$out/$m-ppl.json" ] && continue
    model=$(model_dir "$m")
    picture=()
    if [ "$m" = "$last" ]; then # the last one draws every method's perplexity
        picture=(--svg "$out/methods-ppl.svg")
        for o in "$@"; do
            [ "$o" = "$m" ] && continue
            for f in "$out/$o-ppl.json" "$out/$o.json"; do
                [ -f "$f" ] && { picture+=(--compare "$f"); break; }
            done
        done
    fi
    t0=$(date +%s)
    "$lcx" eval "$model" --backend "$backend" --data "$out/heldout" --lengths "$LENGTHS" --truncate --series "$m" \
        --json "$out/$m-ppl.json" "${picture[@]}" --quiet >"$out/$m-ppl.txt"
    echo "compare_methods.sh: $m perplexity done in $(($(date +%s) - t0)) s" >&2
done
for m in "$@"; do
    [ -f "$out/$m.json" ] || [ -f "$out/$m-passkey.json" ] && continue
    model=$(model_dir "$m")
    t0=$(date +%s)
    "$lcx" eval "$model" --backend "$backend" --passkey "$trials" --passkey-lengths "$LENGTHS" --depths "$depths" \
        --mode loglik \
        --series "$m" --json "$out/$m-passkey.json" --passkey-svg "$out/$m-passkey.svg" --quiet >"$out/$m-passkey.txt"
    echo "compare_methods.sh: $m passkey done in $(($(date +%s) - t0)) s" >&2
done
for m in "$@"; do
    [ "$needles" -gt 1 ] || break
    [ -f "$out/$m-needles.json" ] && continue
    model=$(model_dir "$m")
    t0=$(date +%s)
    "$lcx" eval "$model" --backend "$backend" --passkey "$trials" --passkey-lengths "$LENGTHS" --depths "$depths" \
        --mode loglik --needles "$needles" "${hay[@]}" --series "$m" --json "$out/$m-needles.json" \
        --passkey-svg "$out/$m-needles.svg" --quiet >"$out/$m-needles.txt"
    echo "compare_methods.sh: $m multi-key passkey done in $(($(date +%s) - t0)) s" >&2
done
for m in $methods; do
    echo "== $m"
    if [ -f "$out/$m-ppl.txt" ]; then cat "$out/$m-ppl.txt" "$out/$m-passkey.txt"; else cat "$out/$m.txt"; fi
    [ ! -f "$out/$m-needles.txt" ] || cat "$out/$m-needles.txt"
done
echo "compare_methods.sh: JSON per method and sweep, methods-ppl.svg, METHOD-passkey.svg and METHOD-needles.svg in" \
    "$out" >&2
