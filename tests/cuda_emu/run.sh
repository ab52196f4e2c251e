#!/usr/bin/env bash
# tests/cuda_emu/run.sh BUILD [CASE-INDEX]: run the CUDA attention kernels on the CPU, under an emulation of the
# CUDA subset they use (emu_cuda.h), against the CPU backend (attention_emu.cpp). For machines without a GPU:
# it checks the kernels' indexing, masks, GQA mapping, tile walks and barriers/shuffles, not the GPU's memory
# model, occupancy or speed. BUILD is a configured and built tree (its liblcx.a and link line are used). Takes
# minutes (one host thread per CUDA thread); not a registered test. Exit 0 when every case is within tolerance.
# tests/cuda_emu/backend_run.sh runs the whole backend (every op, the model) the same way.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/inc/kernels/cuda"
echo "#include \"$root/tests/cuda_emu/emu_cuda.h\"" >"$work/cuda_runtime.h"
cp "$work/cuda_runtime.h" "$work/cuda_runtime_api.h"
# kernel<<<grid, block, smem, stream>>>(args) -> emu_launch(kernel, grid, block, smem, stream, args);
# extern __shared__ float sm[] -> the launch's buffer
python3 - "$root" "$work" <<'PY'
import re, sys
root, work = sys.argv[1], sys.argv[2]
def rewrite(src, dst):
    s = open(f"{root}/{src}").read().replace("extern __shared__ float sm[];", "float *sm = emu_smem;")
    s = re.sub(r"(\w+(?:<\w+>)?)<<<(.*?)>>>\((.*?)\);", lambda m: f"emu_launch({m[1]}, {m[2]}, {m[3]});", s, flags=re.S)
    open(f"{work}/{dst}", "w").write(s)
rewrite("kernels/cuda/cuda_attention_fwd.cu", "xf_attention_fwd.cu")
rewrite("kernels/cuda/cuda_attention_fwd_tc.cu", "xf_attention_fwd_tc.cu")
rewrite("kernels/cuda/cuda_attention_bwd.cu", "xf_attention_bwd.cu")
rewrite("kernels/cuda/cuda_attention_bwd_tc.cu", "xf_attention_bwd_tc.cu")
rewrite("kernels/cuda/cuda_attention_tile.h", "inc/kernels/cuda/cuda_attention_tile.h")
PY
if [ -f "$build/tests/CMakeFiles/test_exec_cuda.dir/linkLibs.rsp" ]; then # a CUDA build (nvcc links)
    libs=$(sed -e 's#\.\./liblcx\.a##' -e 's/"//g' "$build/tests/CMakeFiles/test_exec_cuda.dir/linkLibs.rsp")
else
    libs=$(sed -e 's#.*\.\./liblcx\.a##' "$build/tests/CMakeFiles/test_exec_cuda.dir/link.txt")
fi
# shellcheck disable=SC2086 # the link line is a list of words
g++ -std=c++20 -O1 -g -fsanitize=address,undefined -w -I"$work/inc" -I"$work" -I"$root" \
    "$root/tests/cuda_emu/attention_emu.cpp" "$root/tests/cuda_emu/emu_runtime.cpp" -o "$work/attention_emu" \
    "$build/liblcx.a" $libs
"$work/attention_emu" ${2:+"$2"}
