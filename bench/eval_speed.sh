#!/usr/bin/env bash
# Evaluation speed on the CPU (issue 16): perplexity of SmolLM2-135M (float32) on the same text, same windows,
# same machine, in one run: `lcextend eval --stride 0` against transformers (bench/eval_speed_hf.py: SDPA, no_grad)
# and, when a llama.cpp build is given, `llama-perplexity` on the F32 GGUF of our export (it scores the second half
# of each window; its tokens/s counts every token it runs). Tokens/s = tokens scored / seconds of the passes
# (lcextend: its own timer line; transformers: around the passes), peak RSS from /usr/bin/time -v (whole process,
# the model load included). Contenders alternate; each figure is the median of ROUNDS.
# usage: [ROUNDS=3] [THREADS=2] [LENGTHS="2048 8192"] bench/eval_speed.sh BUILD_DIR GGUF TEXT [LLAMA_BUILD_DIR]
#   GGUF: recipes/smollm2/get.sh's file; TEXT: e.g. recipes/smollm2/make_data.sh's heldout-kjv.txt
#   LLAMA_BUILD_DIR: a llama.cpp CMake build with bin/llama-perplexity (e.g. of the vendor/llama.cpp in the
#   llama-cpp-python sdist: `pip download --no-deps --no-binary :all: llama-cpp-python`)
#   python3 with torch + transformers must be importable (PYTHON overrides the interpreter).
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR GGUF TEXT [LLAMA_BUILD_DIR]}
GGUF=${2:?usage: $0 BUILD_DIR GGUF TEXT [LLAMA_BUILD_DIR]}
TEXT=${3:?usage: $0 BUILD_DIR GGUF TEXT [LLAMA_BUILD_DIR]}
LLAMA=${4:-}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
LENGTHS=${LENGTHS:-"2048 8192"}
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
BIN="$BUILD/lcextend"
[ -x "$BIN" ] || { echo "missing $BIN (build first)"; exit 1; }
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$BIN" export "$GGUF" --format hf --dtype f32 --out "$out/hf" >/dev/null
[ -z "$LLAMA" ] || "$BIN" export "$GGUF" --format gguf --dtype f32 --out "$out/f32.gguf" >/dev/null

rss() { awk '/Maximum resident set size/ { printf "%.0f", $NF / 1024 }' "$1"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "threads $THREADS, rounds $ROUNDS, text $(basename "$TEXT") ($(wc -c <"$TEXT") bytes)"
for L in $LENGTHS; do
    for r in $(seq "$ROUNDS"); do
        /usr/bin/time -v "$BIN" eval "$out/hf" --text "$TEXT" --lengths "$L" --stride 0 >"$out/lcx.$L.$r" 2>"$out/lcx.$L.$r.time"
        t=$(awk '/^perplexity of/ { for (i = 1; i <= NF; i++) if ($i == "in") s = $(i + 1) } END { print s }' "$out/lcx.$L.$r")
        n=$(awk -v L="$L" '$1 == L { print $2 }' "$out/lcx.$L.$r")
        echo "$(awk -v n="$n" -v t="$t" 'BEGIN { print n / t }') $(rss "$out/lcx.$L.$r.time") $(awk -v L="$L" '$1 == L { print $5 }' "$out/lcx.$L.$r")" >>"$out/lcx.$L"
        /usr/bin/time -v "$PY" "$HERE/eval_speed_hf.py" "$out/hf" "$TEXT" "$L" "$THREADS" >"$out/hf.$L.$r" 2>"$out/hf.$L.$r.time"
        echo "$(awk '{ print $8 }' "$out/hf.$L.$r") $(rss "$out/hf.$L.$r.time") $(awk '{ print $2 }' "$out/hf.$L.$r")" >>"$out/hf.$L"
        if [ -n "$LLAMA" ]; then
            /usr/bin/time -v "$LLAMA/bin/llama-perplexity" -m "$out/f32.gguf" -f "$TEXT" -c "$L" -b "$L" -t "$THREADS" \
                >"$out/cpp.$L.$r" 2>"$out/cpp.$L.$r.time" || true
            # its log has no rate: tokens run (chunks x n_ctx) over the time between the log lines that start and
            # end the passes (timestamps minutes.seconds.ms.us)
            tps=$(awk -v L="$L" '
                function t(s, a) { split(s, a, "."); return a[1] * 60 + a[2] + a[3] / 1e3 + a[4] / 1e6 }
                /calculating perplexity over/ { for (i = 1; i <= NF; i++) if ($i == "over") n = $(i + 1); t0 = t($1) }
                match($0, /[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+ I Final estimate/) { split(substr($0, RSTART), b, " "); t1 = t(b[1]) }
                END { if (n && t1 > t0) printf "%.1f", n * L / (t1 - t0) }' "$out/cpp.$L.$r.time")
            ppl=$(grep -o 'Final estimate: PPL = [0-9.]*' "$out/cpp.$L.$r.time" | awk '{ print $NF }')
            echo "${tps:-nan} $(rss "$out/cpp.$L.$r.time") ${ppl:-nan}" >>"$out/cpp.$L"
        fi
    done
    for c in lcx hf cpp; do
        [ -f "$out/$c.$L" ] || continue
        tps=$(cut -d' ' -f1 "$out/$c.$L" | median); mem=$(cut -d' ' -f2 "$out/$c.$L" | median)
        ppl=$(cut -d' ' -f3 "$out/$c.$L" | head -1)
        eval "tps_$c=$tps"
        printf "L %6s  %-22s tokens/s %8.1f (rounds: %s)  peak RSS %6s MiB  ppl %s\n" "$L" \
            "$(case $c in lcx) echo lcextend;; hf) echo transformers;; cpp) echo llama-perplexity;; esac)" "$tps" \
            "$(cut -d' ' -f1 "$out/$c.$L" | tr '\n' ' ')" "$mem" "$ppl"
    done
    awk -v a="$tps_lcx" -v b="$tps_hf" -v L="$L" 'BEGIN { printf "L %6s  ratio lcextend / transformers: %.2fx\n", L, a / b }'
    [ -z "$LLAMA" ] || awk -v a="$tps_lcx" -v b="$tps_cpp" -v L="$L" 'BEGIN { printf "L %6s  ratio lcextend / llama-perplexity (tokens/s as each counts them): %.2fx\n", L, a / b }'
done
