#!/usr/bin/env bash
# tests/cuda_emu/backend_run.sh BUILD [TEST [ARGS...]]: the whole CUDA backend (kernels/cuda: the backend table,
# the cuBLASLt matmul with its staged and split paths, every kernel) on the CPU, under emulations of the CUDA
# runtime (emu_runtime.h: device memory is host memory, queues are synchronous, copies check which side each
# pointer is on), of cuBLASLt (emu_cublaslt.h: host GEMMs that refuse what the library refuses) and of the
# kernels' CUDA subset (emu_cuda.h), all under AddressSanitizer. It then runs the CUDA tests against it, all
# below but tp_eval by default, or TEST with ARGS:
#   test_backend_ops_cuda  every op case against the CPU backend (ARGS: its backend and a case filter); without
#                          ARGS, the attention backward's cases once more with both of the tensor-core backward's
#                          other modes on (LCX_CUDA_ATTN_BWD_BF16, LCX_CUDA_ATTN_BWD_FUSED; run.sh's
#                          attention_emu runs each mode alone on every tensor-core case)
#   test_exec_cuda         the exec contract: copies, events, the allocation ledger, determinism
#   test_comm_nccl_cuda    the device communicators against MPI: staged, and NCCL (src/comm/comm_nccl.c) over the
#                          NCCL emulation (emu_nccl.cpp: MPI underneath), with its watchdog's abort; 1 rank, and 2
#                          ranks on 2 emulated devices (LCX_EMU_DEVICES=2)
#   test_model_cuda        the HF-parity fixtures' forward, backward and training steps against the CPU; without
#                          ARGS, once more with both of the tensor-core backward's modes on (its head_dim-64 model
#                          reaches them)
#   cp_check               lcextend on it: bench/cp_check.sh, CP 2 and 4 MPI ranks sharing the one emulated
#                          device (the staged communicator through "pinned" memory) against one rank (SEQ, STEPS,
#                          CFG: default the llama_gqa fixture, 64 tokens: the host GEMMs are slow; needs mpirun),
#                          and bench/tp_distribute.sh, TP 2 with and without distributed saved activations and
#                          with and without sequence parallelism (MODE=sp: its point-to-point reduce-scatter of
#                          device buffers), and bench/zero_memory.sh, DP 2 with and without ZeRO-1 (bf16 weights:
#                          the sharded master, the bf16 all-gather of device buffers); then the three again over
#                          NCCL (emu_nccl.cpp, one emulated device per rank, LCX_COMM_DEVICE=nccl)
#   train_steps            lcextend train-steps --backend cuda on it (the llama_gqa fixture, 16 tokens): its last
#                          line, the device memory outside the allocator, is there and 0 (the emulation has no
#                          context: every byte in use is an allocation of the backend's)
#   tp_eval                lcextend eval --tp 2 on it (bench/tp_eval.sh: 2 ranks on the emulated device against one
#                          CPU process; LENGTHS 64 and PK_LENGTHS 128 by default: slow, so not among the default runs;
#                          TP and CP from the environment, default 2 and 1)
# For machines without a GPU: it checks the host code, the kernels' indexing and the cuBLASLt calls' shapes,
# strides and staging, not the GPU's memory model, speed, or cuBLASLt's own numerics. BUILD is a configured and
# built CPU-only tree with AddressSanitizer (the CI's build-asan: its liblcx.a and link line are used). Not a
# registered test (each CUDA thread is a fiber of one host thread, so the runs go as parallel processes, JOBS at
# a time: about 15 CPU-minutes in all). Exit status: 0 when every run passed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: backend_run.sh BUILD [TEST [ARGS...]]}" && pwd)
shift
tests=${1:-test_backend_ops_cuda test_exec_cuda test_model_cuda test_comm_nccl_cuda cp_check train_steps}
[ $# -gt 0 ] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/cxx/kernels/cuda" "$work/c" "$work/obj"
# the kernels' translation units see emu_cuda.h as the CUDA runtime; the host C files see emu_runtime.h and the
# cuBLASLt mock
echo "#include \"$root/tests/cuda_emu/emu_cuda.h\"" >"$work/cxx/cuda_runtime.h"
cp "$work/cxx/cuda_runtime.h" "$work/cxx/cuda_runtime_api.h"
echo "#include \"$root/tests/cuda_emu/emu_runtime.h\"" >"$work/c/cuda_runtime_api.h"
echo "#include \"$root/tests/cuda_emu/emu_cublaslt.h\"" >"$work/c/cublasLt.h"
# the kernels rewritten for emu_cuda.h; cuda_cast.cu (the GPU casts for test_cast_cuda, half precision) is left
# out: emu_runtime.cpp gives its entry points
# shellcheck source=tests/cuda_emu/emu_common.sh
source "$root/tests/cuda_emu/emu_common.sh"
pairs=()
for f in "$root"/kernels/cuda/*.cu; do
    [ "$(basename "$f")" = cuda_cast.cu ] || pairs+=("$f" "$work/xf_$(basename "$f")")
done
emu_rewrite "${pairs[@]}" "$root/kernels/cuda/cuda_attention_tile.h" "$work/cxx/kernels/cuda/cuda_attention_tile.h"
san=("-fsanitize=address,undefined" -fno-omit-frame-pointer)
defs=(-D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -DLCX_HAVE_CUDA=1)
cxx() { g++ -std=c++20 -O1 -g "${san[@]}" -w -I"$work/cxx" -I"$root" -c "$@"; }
cc() { gcc -std=c11 -O1 -g "${san[@]}" -Wall -Wextra -Werror "${defs[@]}" -I"$work/c" -I"$root" -c "$@"; }
pids=()
for f in "$work"/xf_*.cu; do cxx -x c++ "$f" -o "$work/obj/$(basename "$f" .cu).o" & pids+=($!); done
cxx "$root/tests/cuda_emu/emu_runtime.cpp" -o "$work/obj/emu_runtime.o" & pids+=($!)
cxx "$root/tests/cuda_emu/emu_cublaslt.cpp" -o "$work/obj/emu_cublaslt.o" & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
# the backend's host code as the CUDA build compiles it, and the backend list with the CUDA table registered
cc "$root/kernels/cuda/cuda_backend.c" -o "$work/obj/cuda_backend.o"
cc "$root/kernels/cuda/cuda_matmul.c" -o "$work/obj/cuda_matmul.o"
cc "$root/kernels/backend.c" -o "$work/obj/backend.o"
cc "$root/src/comm/comm_stage_cuda.c" -o "$work/obj/comm_stage_cuda.o"
# the NCCL communicator over emu_nccl.cpp (MPI), linked only into test_comm_nccl_cuda and the NCCL runs' lcextend
# (lcextend_nccl): the other runs keep the build's communicators (without NCCL, a rank's device calls are staged)
nccl_objs() {
    [ -f "$work/nccl/comm_nccl.o" ] && return 0
    mkdir -p "$work/nccl"
    echo "#include \"$root/tests/cuda_emu/emu_nccl.h\"" >"$work/c/nccl.h"
    cc -DLCX_HAVE_NCCL=1 "$root/src/comm/comm_nccl.c" -o "$work/nccl/comm_nccl.o"
    # shellcheck disable=SC2046 # mpicc's flags are a list of words
    g++ -std=c++20 -O1 -g "${san[@]}" -w $(mpicc --showme:compile) -I"$root" \
        -c "$root/tests/cuda_emu/emu_nccl.cpp" -o "$work/nccl/emu_nccl.o"
}
libs=$(emu_libs "$build")
# The runs are written as job scripts first, then run JOBS at a time (default: the CPU count; each is one host
# thread), costliest first, their output printed in the order they were written.
mkdir -p "$work/jobs"
njobs=0
# job COST LABEL [VAR=VALUE...] PROGRAM [ARGS...]: PROGRAM on the emulated backend, from the build's test directory
job() {
    local cost=$1 label=$2 f
    shift 2
    f=$(printf '%s/jobs/%03d' "$work" "$njobs")
    njobs=$((njobs + 1))
    echo "$label" >"$f.label"
    {
        echo "echo $(printf '%q' "backend_run.sh: $label") >&2"
        printf 'cd %q && exec env LCX_CUDA_EMU=1 ASAN_OPTIONS=%q OMP_NUM_THREADS=%q' "$build/tests" \
            "${ASAN_OPTIONS:-detect_leaks=1}" "${OMP_NUM_THREADS:-2}"
        printf ' %q' "$@"
        echo
    } >"$f.sh"
    echo "$cost $f" >>"$work/jobs/list"
}
# lcextend itself on the emulated backend, once
lcextend_emu() {
    [ -x "$work/lcextend" ] && return 0
    for f in "$root"/tools/*.c; do cc "$f" -o "$work/tool_$(basename "$f" .c).o"; done
    # shellcheck disable=SC2086 # the link line is a list of words
    g++ "${san[@]}" "$work"/obj/*.o "$work"/tool_*.o -o "$work/lcextend" "$build/liblcx.a" $libs -lpthread
}
# and once more with the NCCL communicator over emu_nccl.cpp, as NCCL_BIN/lcextend
lcextend_nccl() {
    [ -x "$work/nccl_bin/lcextend" ] && return 0
    lcextend_emu
    nccl_objs
    mkdir -p "$work/nccl_bin"
    # shellcheck disable=SC2086 # the link line is a list of words
    g++ "${san[@]}" "$work"/obj/*.o "$work"/nccl/*.o "$work"/tool_*.o -o "$work/nccl_bin/lcextend" \
        "$build/liblcx.a" $libs -lpthread
}
for test in $tests; do
    if [ "$test" = tp_eval ]; then # lcextend eval --tp 2: both ranks on the one emulated "GPU"
        lcextend_emu
        job 1 "bench/tp_eval.sh on the emulated CUDA backend" ASAN_OPTIONS=detect_leaks=0 \
            BACKEND=cuda TP="${TP:-2}" CP="${CP:-1}" LENGTHS="${LENGTHS:-64}" PK_LENGTHS="${PK_LENGTHS:-128}" \
            bash "$root/bench/tp_eval.sh" "$work"
        continue
    fi
    if [ "$test" = train_steps ]; then
        lcextend_emu
        # shellcheck disable=SC2016 # expanded by the job's bash -c
        job 1 "lcextend train-steps on the emulated CUDA backend" ASAN_OPTIONS=detect_leaks=0 bash -c \
            '"$0" train-steps "$1" --backend cuda --steps 1 --seq 16 >"$2" && cat "$2" &&
             grep -q "^device memory outside the allocator: 0.0 MiB (in use on the device [0-9.]* MiB" "$2"' \
            "$work/lcextend" "$root/tests/fixtures/models/llama_gqa" "$work/train_steps.txt"
        continue
    fi
    if [ "$test" = cp_check ]; then # lcextend on the emulated backend: CP 2 and 4 ranks sharing its one "GPU"
        lcextend_emu
        job 2 "bench/cp_check.sh on the emulated CUDA backend" ASAN_OPTIONS=detect_leaks=0 \
            BACKEND=cuda SEQ="${SEQ:-64}" STEPS="${STEPS:-3}" \
            CFG="${CFG:-$root/tests/fixtures/models/llama_gqa/config.json}" bash "$root/bench/cp_check.sh" "$work"
        job 2 "bench/tp_distribute.sh on the emulated CUDA backend" ASAN_OPTIONS=detect_leaks=0 \
            BACKEND=cuda SEQ="${SEQ:-64}" STEPS="${STEPS:-3}" TPS=2 \
            CFG="${CFG:-$root/tests/fixtures/models/llama_gqa/config.json}" bash "$root/bench/tp_distribute.sh" "$work"
        job 2 "bench/tp_distribute.sh MODE=sp on the emulated CUDA backend" ASAN_OPTIONS=detect_leaks=0 \
            BACKEND=cuda MODE=sp SEQ="${SEQ:-64}" STEPS="${STEPS:-3}" TPS=2 \
            CFG="${CFG:-$root/tests/fixtures/models/llama_gqa/config.json}" bash "$root/bench/tp_distribute.sh" "$work"
        job 2 "bench/zero_memory.sh (ZeRO-1, bf16) on the emulated CUDA backend" ASAN_OPTIONS=detect_leaks=0 \
            BACKEND=cuda SEQ="${SEQ:-64}" STEPS="${STEPS:-3}" DPS=2 \
            CFG="${CFG:-$root/tests/fixtures/models/llama_gqa/config.json}" bash "$root/bench/zero_memory.sh" "$work"
        # the same over NCCL (emulated by MPI; LCX_COMM_DEVICE=nccl: refused rather than staged if it cannot be),
        # one emulated device per rank: the ring's grouped send/recv, TP's and ZeRO-1's collectives
        lcextend_nccl
        nccl_env=(ASAN_OPTIONS=detect_leaks=0 LCX_EMU_DEVICES=4 LCX_COMM_DEVICE=nccl BACKEND=cuda SEQ="${SEQ:-64}"
                  STEPS="${STEPS:-3}" CFG="${CFG:-$root/tests/fixtures/models/llama_gqa/config.json}")
        job 2 "bench/cp_check.sh over NCCL (emulated)" "${nccl_env[@]}" bash "$root/bench/cp_check.sh" \
            "$work/nccl_bin"
        job 2 "bench/tp_distribute.sh over NCCL (emulated)" "${nccl_env[@]}" TPS=2 \
            bash "$root/bench/tp_distribute.sh" "$work/nccl_bin"
        job 2 "bench/zero_memory.sh (ZeRO-1, bf16) over NCCL (emulated)" "${nccl_env[@]}" DPS=2 \
            bash "$root/bench/zero_memory.sh" "$work/nccl_bin"
        continue
    fi
    cc -I"$root/tests" -I"$root/tests/unit" -DLCX_SOURCE_DIR="\"$root\"" -DLCX_BINARY_DIR="\"$build\"" \
        "$root/tests/unit/$test.c" -o "$work/$test.o"
    extra=()
    if [ "$test" = test_comm_nccl_cuda ]; then
        nccl_objs
        extra=("$work"/nccl/*.o)
    fi
    # shellcheck disable=SC2086 # the link line is a list of words
    g++ "${san[@]}" "$work"/obj/*.o "${extra[@]}" "$work/$test.o" -o "$work/$test" "$build/liblcx.a" $libs \
        -lpthread
    if [ "$test" = test_comm_nccl_cuda ]; then # one rank, and two ranks on two emulated devices (one GPU each)
        job 1 "$test on the emulated CUDA backend and NCCL over MPI, 1 rank" ASAN_OPTIONS=detect_leaks=0 \
            "$work/$test" "$@"
        job 1 "$test on the emulated CUDA backend and NCCL over MPI, 2 ranks on 2 devices" \
            ASAN_OPTIONS=detect_leaks=0 LCX_EMU_DEVICES=2 OMPI_ALLOW_RUN_AS_ROOT=1 \
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 "$work/$test" "$@"
        continue
    fi
    cost=1
    [ "$test" = test_backend_ops_cuda ] && [ $# -eq 0 ] && cost=3
    job "$cost" "$test on the emulated CUDA backend" "$work/$test" "$@"
    # the tensor-core backward's other modes: P and dS as one bf16 term, dQ fused (cuda_attention_bwd_tc.cu)
    modes=() args=()
    if [ $# -eq 0 ]; then
        case $test in
        test_backend_ops_cuda) modes=("1 1") args=(cuda attention_bwd) ;;
        test_model_cuda) modes=("1 1") ;;
        esac
    fi
    for mode in "${modes[@]}"; do
        read -r ps fused <<<"$mode"
        job 2 "$test${args[*]:+ ${args[*]}}, LCX_CUDA_ATTN_BWD_BF16=$ps LCX_CUDA_ATTN_BWD_FUSED=$fused" \
            LCX_CUDA_ATTN_BWD_BF16="$ps" LCX_CUDA_ATTN_BWD_FUSED="$fused" "$work/$test" "${args[@]}"
    done
done
# each job writes its log and exit status
# shellcheck disable=SC2016
sort -k1,1nr -s "$work/jobs/list" | cut -d' ' -f2 |
    xargs -P "${JOBS:-$(nproc)}" -n 1 sh -c 's=$(date +%s); bash "$1.sh" >"$1.log" 2>&1; echo $? >"$1.rc"
        echo $(($(date +%s) - s)) >"$1.sec"' sh
rc=0
for ((i = 0; i < njobs; i++)); do
    f=$(printf '%s/jobs/%03d' "$work" "$i")
    cat "$f.log" >&2
    [ "$(cat "$f.rc" 2>/dev/null)" = 0 ] || { echo "backend_run.sh: failed: $(cat "$f.label")" >&2; rc=1; }
done
# the wall time of each run, so the CI's budget can be kept (costliest first)
for ((i = 0; i < njobs; i++)); do
    f=$(printf '%s/jobs/%03d' "$work" "$i")
    echo "$(cat "$f.sec" 2>/dev/null || echo '?') s: $(cat "$f.label")"
done | sort -rn | sed 's/^/backend_run.sh: /' >&2
exit $rc
