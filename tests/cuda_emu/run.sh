#!/usr/bin/env bash
# tests/cuda_emu/run.sh BUILD [CASE-INDEX]: run the CUDA attention kernels on the CPU, under an emulation of the
# CUDA subset they use (emu_cuda.h), against the CPU backend (attention_emu.cpp). For machines without a GPU:
# it checks the kernels' indexing, masks, GQA mapping, tile walks and barriers/shuffles, not the GPU's memory
# model, occupancy or speed. BUILD is a configured and built tree (its liblcx.a and link line are used). Each
# CUDA thread is a fiber of one host thread (emu_cuda.h), so the cases run as parallel processes, JOBS at a time
# (default: the CPU count), their output printed in case order: about 10 CPU-minutes in all. Not a registered
# test. Exit 0 when every case is within tolerance.
# tests/cuda_emu/backend_run.sh runs the whole backend (every op, the model) the same way.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/inc/kernels/cuda"
echo "#include \"$root/tests/cuda_emu/emu_cuda.h\"" >"$work/cuda_runtime.h"
cp "$work/cuda_runtime.h" "$work/cuda_runtime_api.h"
# shellcheck source=tests/cuda_emu/emu_common.sh
source "$root/tests/cuda_emu/emu_common.sh"
k=$root/kernels/cuda
emu_rewrite "$k/cuda_attention_fwd.cu" "$work/xf_attention_fwd.cu" "$k/cuda_attention_fwd_tc.cu" \
    "$work/xf_attention_fwd_tc.cu" "$k/cuda_attention_bwd.cu" "$work/xf_attention_bwd.cu" \
    "$k/cuda_attention_bwd_tc.cu" "$work/xf_attention_bwd_tc.cu" \
    "$k/cuda_attention_tile.h" "$work/inc/kernels/cuda/cuda_attention_tile.h"
libs=$(emu_libs "$build")
# shellcheck disable=SC2086 # the link line is a list of words
g++ -std=c++20 -O1 -g -fsanitize=address,undefined -w -I"$work/inc" -I"$work" -I"$root" \
    "$root/tests/cuda_emu/attention_emu.cpp" "$root/tests/cuda_emu/emu_runtime.cpp" -o "$work/attention_emu" \
    "$build/liblcx.a" $libs
if [ -n "${2:-}" ]; then
    "$work/attention_emu" "$2"
    exit
fi
"$work/attention_emu" --cases >"$work/cases" # the indices, costliest first
n=$(wc -l <"$work/cases")
# each case writes its log and exit status (the inner shell expands $1..$3: program, folder, case index)
# shellcheck disable=SC2016
xargs <"$work/cases" -P "${JOBS:-$(nproc)}" -n 1 sh -c 's=$(date +%s); "$1" "$3" >"$2/case$3.log" 2>&1
    echo $? >"$2/case$3.rc"; echo "case $3: $(($(date +%s) - s)) s" >>"$2/case$3.log"' sh "$work/attention_emu" "$work"
failed=0
for ((i = 0; i < n; i++)); do
    cat "$work/case$i.log"
    [ "$(cat "$work/case$i.rc" 2>/dev/null)" = 0 ] || { echo "run.sh: case $i failed"; failed=$((failed + 1)); }
done
echo "run.sh: $((n - failed)) of $n cases within tolerance"
[ "$failed" -eq 0 ]
