#!/usr/bin/env bash
# A small reproduction of the YaRN paper's comparison on the CPU demo (docs/results.md): the bundled tiny model
# (context 256) at 256..2048 tokens with no rope scaling, with PI and with YaRN zero-shot (`lcextend rope`: only
# config.json changes), and PI and YaRN fine-tuned with the tiny-demo recipe (three stages 512 -> 1024 -> 2048,
# 25 steps each). Perplexity with the protocol's sliding window (stride 256) on the held-out books, passkey
# retrieval (greedy, 2 trials x 5 depths), one JSON per variant and one picture with all five lines.
# usage: recipes/tiny/compare_methods.sh BUILD_DIR OUTDIR   (about 4 minutes on 2 cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: compare_methods.sh BUILD_DIR OUTDIR}
out=${2:?usage: compare_methods.sh BUILD_DIR OUTDIR}
lcx=$(cd "$build" && pwd)/lcextend
[ -x "$lcx" ] || { echo "compare_methods.sh: no $lcx (build first)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -f "$out/data/train.idx" ] || "$here/make_data.sh" "$out/data" "$lcx"

evaluate() { # NAME MODEL_DIR [extra eval flags]
    local name=$1 model=$2
    shift 2
    "$lcx" eval "$model" --data "$here/data/heldout" --lengths 256,512,1024,2048 --stride 256 --passkey 2 \
        --series "$name" --json "$out/$name.json" --quiet "$@" >"$out/$name.txt"
    echo "compare_methods.sh: $name done" >&2
}

rm -rf "$out/pi-zero-shot" "$out/yarn-zero-shot"
"$lcx" rope "$here/model" --to 2048 --method pi --out "$out/pi-zero-shot" >/dev/null
"$lcx" rope "$here/model" --to 2048 --method yarn --out "$out/yarn-zero-shot" >/dev/null
for m in pi yarn; do
    rm -rf "$out/$m-fine-tuned"
    "$lcx" "$here/model" --to 2048 --recipe tiny-demo --method "$m" --data "$out/data/train" \
        --out "$out/$m-fine-tuned" --quiet >"$out/$m-fine-tuned.log"
done
evaluate none "$here/model"
evaluate pi-zero-shot "$out/pi-zero-shot"
evaluate yarn-zero-shot "$out/yarn-zero-shot"
evaluate pi-fine-tuned "$out/pi-fine-tuned/hf"
evaluate yarn-fine-tuned "$out/yarn-fine-tuned/hf" --svg "$out/methods-ppl.svg" \
    --compare "$out/none.json" --compare "$out/pi-zero-shot.json" --compare "$out/yarn-zero-shot.json" \
    --compare "$out/pi-fine-tuned.json"
for name in none pi-zero-shot yarn-zero-shot pi-fine-tuned yarn-fine-tuned; do
    echo "== $name"
    cat "$out/$name.txt"
done
echo "compare_methods.sh: JSON per variant and methods-ppl.svg in $out" >&2
