#!/usr/bin/env bash
# `lcextend import / export / reshard / verify / inspect` as commands: round trips through the CLI compared byte for
# byte with the fixture (via cmp and safetensors bytes), reshard chains bit-exact via export, exit codes and
# one-line errors naming the flag or the numbers, no output left behind by a failure.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
check_shows_err=1
no_tmp_left() { ! ls -a "$tmp" | grep -q '\.tmp-'; }

M="$LCX_SRC/tests/fixtures/models"
G="$LCX_SRC/tests/fixtures/gguf"

for c in import export reshard verify; do
    run $c --help
    check "$c --help exits 0" [ "$(rc)" -eq 0 ]
    check "$c --help has examples" grep -q "examples:" "$tmp/out"
done
run --help
check "top-level help lists the commands" grep -q "reshard" "$tmp/out"

# HF -> lcx (TP2) -> HF: single-file fixture comes back as the identical file (same tensors, same writer order)
run import "$M/llama_gqa" --out "$tmp/gqa.lcx" --tp 2
check "import tp2: exit 0" [ "$(rc)" -eq 0 ]
check "import: quiet progress when stderr is not a terminal" [ "$(grep -c $'\r' "$tmp/err")" -eq 0 ]
run verify "$tmp/gqa.lcx"
check "verify: exit 0" [ "$(rc)" -eq 0 ]
check "verify: says ok" grep -q "^ok: " "$tmp/out"
run inspect "$tmp/gqa.lcx"
check "inspect lcx: exit 0" [ "$(rc)" -eq 0 ]
check "inspect lcx: layout" grep -q "tp 2 x cp 1 x dp 1" "$tmp/out"
check "inspect lcx: compression ratio" grep -q "compression ratio" "$tmp/out"
run inspect "$tmp/gqa.lcx" --json
check "inspect lcx --json: tp 2, 21 params" python3 -c "import json,sys; j=json.load(open('$tmp/out')); sys.exit(j['layout']['tp']!=2 or j['roles']['param']['tensors']!=21)"
run export "$tmp/gqa.lcx" --format hf --out "$tmp/gqa_hf"
check "export hf: exit 0" [ "$(rc)" -eq 0 ]
check "export hf: model.safetensors identical to the fixture" cmp -s "$tmp/gqa_hf/model.safetensors" "$M/llama_gqa/model.safetensors"
check "export hf: directory has a normal mode, not mkdtemp's 0700" [ "$(stat -c %a "$tmp/gqa_hf")" != 700 ]
check "export hf: generation_config copied" cmp -s "$tmp/gqa_hf/generation_config.json" "$M/llama_gqa/generation_config.json"
run inspect "$tmp/gqa_hf"
check "exported HF directory passes inspect" [ "$(rc)" -eq 0 ]

# reshard chains, bit-exact via export: TP1 -> TP2 -> TP4 -> TP1 and TP2xCP2 -> TP4xCP1 -> TP2xCP2
run import "$M/llama_sharded" --out "$tmp/c0.lcx" --codec raw
check "import sharded source" [ "$(rc)" -eq 0 ]
prev=c0; i=0
for l in "2 1" "4 1" "1 1" "2 2" "4 1" "2 2"; do
    set -- $l; i=$((i+1))
    run reshard "$tmp/$prev.lcx" --tp $1 --cp $2 --out "$tmp/c$i.lcx" --threads $((1 + i % 3))
    check "reshard to tp$1 cp$2: exit 0" [ "$(rc)" -eq 0 ]
    run export "$tmp/c$i.lcx" --format hf --out "$tmp/c$i.hf"
    check "export of tp$1 cp$2: exit 0" [ "$(rc)" -eq 0 ]
    check "tp$1 cp$2: index identical to the source's sharding by size" [ -f "$tmp/c$i.hf/model.safetensors" ]
    prev=c$i
done
python3 - "$M/llama_sharded" "$tmp" <<'PY' >"$tmp/py" 2>&1
import sys, glob, json, os
from safetensors.numpy import load_file
src = {}
for f in glob.glob(sys.argv[1] + "/*.safetensors"): src.update(load_file(f))
bad = 0
for i in range(1, 7):
    out = load_file(os.path.join(sys.argv[2], "c%d.hf" % i, "model.safetensors"))
    bad += sorted(out) != sorted(src) or any(out[k].tobytes() != src[k].tobytes() or out[k].dtype != src[k].dtype for k in src)
sys.exit(1 if bad else 0)
PY
py=$?
if [ $py -ne 0 ] && grep -q "No module named" "$tmp/py"; then echo "note: python safetensors missing, chain compared by cmp only"
    for i in 2 3 4 5 6; do check "chain step $i equals step 1" cmp -s "$tmp/c1.hf/model.safetensors" "$tmp/c$i.hf/model.safetensors"; done
else check "reshard chains bit-exact against the source tensors" [ $py -eq 0 ]; fi
for i in 2 3 4 5 6; do check "chain step $i: same safetensors bytes as step 1" cmp -s "$tmp/c1.hf/model.safetensors" "$tmp/c$i.hf/model.safetensors"; done

# a single .safetensors file as the source (config.json beside it), a memory bound on reshard
run import "$M/llama_gqa/model.safetensors" --out "$tmp/file.lcx" --tp 4 --codec zstd --level 3
check "import from a .safetensors file: exit 0" [ "$(rc)" -eq 0 ]
run reshard "$tmp/file.lcx" --tp 1 --out "$tmp/file1.lcx" --max-memory 4KiB --codec raw
check "reshard --max-memory 4KiB: exit 0" [ "$(rc)" -eq 0 ]
run export "$tmp/file1.lcx" --format hf --out "$tmp/file1_hf"
check "bounded reshard: identical model.safetensors" cmp -s "$tmp/file1_hf/model.safetensors" "$M/llama_gqa/model.safetensors"
run inspect "$tmp/file1.lcx" --json
check "bounded reshard: more pieces than tensors (row chunks)" python3 -c "import json,sys; j=json.load(open('$tmp/out')); sys.exit(not j['num_pieces'] > j['num_tensors'])"
run reshard "$tmp/file.lcx" --tp 1 --out "$tmp/file2.lcx" --max-memory lots
check "bad --max-memory: exit 2" [ "$(rc)" -eq 2 ]

# sharded HF export with --shard-size, bf16
run export "$tmp/gqa.lcx" --format hf --out "$tmp/gqa_sh" --shard-size 40KB --dtype bf16
check "sharded bf16 export: exit 0" [ "$(rc)" -eq 0 ]
check "sharded export has an index" [ -f "$tmp/gqa_sh/model.safetensors.index.json" ]
check "config says bfloat16" grep -q '"bfloat16"' "$tmp/gqa_sh/config.json"
run inspect "$tmp/gqa_sh"
check "sharded export passes inspect" [ "$(rc)" -eq 0 ]

# GGUF: import the fixture, export to GGUF and back to HF; HF -> GGUF -> HF identical
run import "$G/llama_tiny.gguf" --out "$tmp/tiny.lcx" --tp 2
check "import gguf: exit 0" [ "$(rc)" -eq 0 ]
run inspect "$tmp/tiny.lcx"
check "gguf import keeps tokenizer metadata" grep -q "tokenizer.gguf" "$tmp/out"
run export "$tmp/gqa.lcx" --format gguf --out "$tmp/gqa.gguf"
check "export gguf: exit 0" [ "$(rc)" -eq 0 ]
run import "$tmp/gqa.gguf" --out "$tmp/gqa2.lcx"
run export "$tmp/gqa2.lcx" --format hf --out "$tmp/gqa2_hf"
check "HF -> GGUF -> HF: identical model.safetensors" cmp -s "$tmp/gqa2_hf/model.safetensors" "$M/llama_gqa/model.safetensors"
run export "$tmp/gqa.lcx" --format gguf --out "$tmp/gqa_q8.gguf" --dtype q8_0
check "export gguf q8_0: exit 0" [ "$(rc)" -eq 0 ]

# errors: one line, naming the flag / numbers / file; exit 2 for usage, 1 for failures; nothing left behind
run import "$M/llama_gqa" --out "$tmp/bad.lcx" --tp 3
check "bad --tp: exit 1" [ "$(rc)" -eq 1 ]
check "bad --tp: names the numbers" grep -q "3" "$tmp/err"
check "bad --tp: one line" one_line_err
check "bad --tp: no output" [ ! -e "$tmp/bad.lcx" ]
run reshard "$tmp/gqa.lcx" --tp 8 --out "$tmp/bad8.lcx"
check "reshard heads not divisible: exit 1" [ "$(rc)" -eq 1 ]
check "reshard heads not divisible: one line naming 8" sh -c "grep -q 8 '$tmp/err' && [ \$(wc -l <'$tmp/err') -eq 1 ]"
check "reshard failure: no output" [ ! -e "$tmp/bad8.lcx" ]
run import /nonexistent/model --out "$tmp/x.lcx"
check "missing source: exit 1" [ "$(rc)" -eq 1 ]
check "missing source: names it" grep -q "/nonexistent/model" "$tmp/err"
check "missing source: one line" one_line_err
run import "$M/llama_gqa" --out "$tmp/gqa.lcx"
check "existing output: exit 1" [ "$(rc)" -eq 1 ]
check "existing output: says so" grep -q "already exists" "$tmp/err"
run export "$tmp/gqa.lcx" --format hf --out "$tmp/gqa_hf"
check "existing export dir: exit 1" [ "$(rc)" -eq 1 ]
run import "$M/llama_gqa" --out "$tmp/y.lcx" --frobnicate
check "unknown flag: exit 2" [ "$(rc)" -eq 2 ]
check "unknown flag: named" grep -q "unknown flag '--frobnicate'" "$tmp/err"
check "unknown flag: one line" one_line_err
run reshard "$tmp/gqa.lcx" --tp zero --out "$tmp/z.lcx"
check "non-numeric --tp: exit 2" [ "$(rc)" -eq 2 ]
check "non-numeric --tp: names the flag" grep -q -- "--tp 'zero'" "$tmp/err"
run reshard "$tmp/gqa.lcx" --tp 2
check "reshard without --out: exit 2" [ "$(rc)" -eq 2 ]
run export "$tmp/gqa.lcx" --format onnx --out "$tmp/o"
check "bad --format: exit 2" [ "$(rc)" -eq 2 ]
check "bad --format: named" grep -q -- "--format 'onnx'" "$tmp/err"
run export "$tmp/gqa.lcx" --format hf --dtype q8_0 --out "$tmp/o"
check "q8_0 for hf: exit 2" [ "$(rc)" -eq 2 ]
run export "$tmp/gqa.lcx" --format hf --shard-size lots --out "$tmp/o"
check "bad --shard-size: exit 2" [ "$(rc)" -eq 2 ]
# qwen2 exports as llama.cpp's qwen2 architecture and comes back identical
run import "$M/qwen2" --out "$tmp/qwen2.lcx"
run export "$tmp/qwen2.lcx" --format gguf --out "$tmp/qwen2.gguf"
check "qwen2 gguf export: exit 0" [ "$(rc)" -eq 0 ]
run import "$tmp/qwen2.gguf" --out "$tmp/qwen2b.lcx"
run export "$tmp/qwen2b.lcx" --format hf --out "$tmp/qwen2_hf"
check "qwen2 HF -> GGUF -> HF: identical model.safetensors" cmp -s "$tmp/qwen2_hf/model.safetensors" "$M/qwen2/model.safetensors"
# dynamic rope has no llama.cpp form: refused in one line, no file
mkdir "$tmp/dyn"
cp "$M/llama_gqa/model.safetensors" "$tmp/dyn/"
sed 's/^{$/{ "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},/' "$M/llama_gqa/config.json" >"$tmp/dyn/config.json"
run import "$tmp/dyn" --out "$tmp/dyn.lcx"
check "dynamic-rope model imports" [ "$(rc)" -eq 0 ]
run export "$tmp/dyn.lcx" --format gguf --out "$tmp/dyn.gguf"
check "dynamic rope gguf export refused: exit 1" [ "$(rc)" -eq 1 ]
check "dynamic rope gguf export refused: says dynamic" grep -q "dynamic" "$tmp/err"
check "dynamic rope gguf export refused: one line" one_line_err
check "dynamic rope gguf export refused: no file" [ ! -e "$tmp/dyn.gguf" ]
run verify /nonexistent/ckpt
check "verify missing: exit 1" [ "$(rc)" -eq 1 ]
# a flipped byte in a data file: verify names the file and fails
cp -r "$tmp/gqa.lcx" "$tmp/corrupt.lcx"
printf '\xff' | dd of="$tmp/corrupt.lcx/data-0.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
run verify "$tmp/corrupt.lcx"
check "verify corrupt: exit 1" [ "$(rc)" -eq 1 ]
check "verify corrupt: names data-0.bin" grep -q "data-0.bin" "$tmp/err"
check "verify corrupt: one line" one_line_err
check "no temporary directories left" no_tmp_left

# flag syntax on import/reshard/export/verify: --name=value, missing values, strict numbers and sizes
run import "$M/llama_gqa" --out="$tmp/eq.lcx" --tp=2 --codec=raw --level=3 --threads=1 --max-memory=1MiB -q
check "import --name=value: exit 0" [ "$(rc)" -eq 0 ]
check "import --name=value: layout tp 2" sh -c "grep -q '\"tp\": 2' '$tmp/eq.lcx/manifest.json'"
bad_flag "flag --out needs a value" import "$M/llama_gqa" --out
bad_flag "--threads '0x10' is not an integer in [1, 256]" import "$M/llama_gqa" --out "$tmp/t.lcx" --threads 0x10
bad_flag "--level '-8'" import "$M/llama_gqa" --out "$tmp/t.lcx" --level -8
bad_flag "--codec 'lz4' (expected raw, zstd or zstd-noshuffle)" import "$M/llama_gqa" --out "$tmp/t.lcx" --codec lz4
bad_flag "--max-memory '1e6'" reshard "$tmp/gqa.lcx" --out "$tmp/t.lcx" --max-memory 1e6
bad_flag "--shard-size '-1'" export "$tmp/gqa.lcx" --format hf --out "$tmp/t" --shard-size=-1
bad_flag "--dtype 'f8' (expected bf16, f16, f32 or q8_0)" export "$tmp/gqa.lcx" --format gguf --out "$tmp/t" \
    --dtype f8
bad_flag "unknown flag '--tp'" verify "$tmp/gqa.lcx" --tp 2
bad_flag "unexpected argument 'x' (one checkpoint only)" verify "$tmp/gqa.lcx" x
[ ! -e "$tmp/t.lcx" ] && [ ! -e "$tmp/t" ] || failed "flag errors: nothing written"

exit $fail
