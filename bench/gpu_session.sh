#!/usr/bin/env bash
# One GPU session in one command: build for this card, then the CUDA checks and benchmarks of docs/cuda.md
# "What the GPU session runs first", most valuable first, each step under a time limit so that the whole run ends
# before DEADLINE seconds and whatever finished is kept. Every step's output goes to RESULTS/<step>.log and one
# line per step (rc, seconds) to RESULTS/summary.txt. A failed build stops at once, so the rest of a short device
# lease is left for a rerun.
#   usage: bench/gpu_session.sh RESULTS [DEADLINE_S=560]
# Run from the repository root on the GPU machine, with the Debian packages of `bench/gpu_deps.sh fetch` carried in
# .gpu-debs. Not a test.
set -uo pipefail
RESULTS=${1:?usage: $0 RESULTS [DEADLINE_S]}
DEADLINE=${2:-560}
B=build-gpu
# shellcheck source=bench/gpu_lib.sh
source bench/gpu_lib.sh
targets="test_backend_ops_cuda test_exec_cuda test_cast_cuda test_comm_nccl_cuda test_model_cuda bench_attention bench_matmul_cuda lcextend"
gpu_build $B "$targets" || { summary "build failed: stop"; pack; exit 1; }

export OMP_NUM_THREADS=8
# correctness first: every op case (tensor-core attention, the staged and split matmuls), the model on the GPU
step ctest_cuda 150 "ctest --test-dir $B -L cuda -V"
# the tensor-core backward's other modes (P and dS as one bf16 term; dQ fused, added in key-block order), the
# forward's 64-row blocks and the backward's 64-key ones against the CPU, and the fused one's determinism
# (test_exec_cuda runs the attention twice and compares the bits)
step bwd_modes_ops 60 "for m in '1 0' '0 1' '1 1'; do set -- \$m; LCX_CUDA_ATTN_BWD_BF16=\$1 \
    LCX_CUDA_ATTN_BWD_FUSED=\$2 $B/tests/test_backend_ops_cuda cuda attention_bwd || exit 1; done; \
    LCX_CUDA_ATTN_FWD_ROWS64=1 $B/tests/test_backend_ops_cuda cuda attention_fwd || exit 1; \
    for m in '0 0' '1 1'; do set -- \$m; LCX_CUDA_ATTN_BWD_KEYS64=1 LCX_CUDA_ATTN_BWD_BF16=\$1 \
    LCX_CUDA_ATTN_BWD_FUSED=\$2 $B/tests/test_backend_ops_cuda cuda attention_bwd || exit 1; done; \
    LCX_CUDA_ATTN_BWD_FUSED=1 $B/tests/test_exec_cuda"
step train_steps_cuda 30 "for b in cuda cpu; do $B/lcextend train-steps tests/fixtures/models/llama_gqa --steps 5 \
    --seq 16 --lr 1e-2 --backend \$b; done"
# speed, each against its peer in the same run
step bench_attention 180 "python3 bench/bench_attention.py --lcx $B/bench/bench_attention --seqs 4096,8192,16384 --reps 5 \
    --bwd-modes --bwd-keys64 --fwd-rows64"
step racecheck_attention 90 "compute-sanitizer --tool racecheck --error-exitcode 99 $B/tests/test_backend_ops_cuda cuda attention_"
step racecheck_fused 40 "for m in '0 1' '1 1'; do set -- \$m; LCX_CUDA_ATTN_BWD_BF16=\$1 LCX_CUDA_ATTN_BWD_FUSED=\$2 \
    compute-sanitizer --tool racecheck --error-exitcode 99 $B/tests/test_backend_ops_cuda cuda 'attention_bwd causal' \
    || exit 1; done"
step memcheck_ops 90 "compute-sanitizer --tool memcheck --error-exitcode 99 $B/tests/test_backend_ops_cuda"
# where the attention falls short: the profile that says why (the tensor-core kernels, 8k causal, head_dim 128)
step ncu_attention 60 "ncu --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
    -k regex:att --launch-count 6 $B/bench/bench_attention 8192 32 8 128 2"
step bench_matmul 45 "bench/matmul_cuda.sh $B 8192 10"
# document masking: 16k tokens in documents of 2k against causal (TFLOP/s of the visible work; document masks run
# on the scalar kernels until the tensor-core ones take them: docs/cuda.md "Document masks")
step bench_attention_docs 20 "$B/bench/bench_attention 16384 32 8 128 5 && $B/bench/bench_attention 16384 32 8 128 5 2048"
step step_1b_ours 90 "$B/lcextend train-steps --config bench/llama1b.json --seq 8192 --steps 4 --dtype bf16 \
    --activations bf16 --policy recompute --backend cuda --peak-tflops 989"
step step_1b_hf 60 "python3 bench/train_step_torch.py bench/llama1b.json 8192 4 16 --device cuda --dtype bf16 \
    --checkpointing --peak-tflops 989"
# ours without recompute (8k tokens of the 1B shape fit; what the planner picks when they do), larger loss chunks
step step_1b_ours_keep 60 "$B/lcextend train-steps --config bench/llama1b.json --seq 8192 --steps 4 --dtype bf16 \
    --activations bf16 --policy keep --chunk 1024 --backend cuda --peak-tflops 989"
# issue 15: our longest one-step context for the 1B shape (the allocator's high-water mark against the plan)
step longest_1b 120 "BACKEND=cuda CFG=bench/llama1b.json START=65536 MAX=1048576 GRAIN=65536 \
    POLICIES='recompute recompute+offload' bench/longest_context.sh $B"
step cp_one_gpu 60 "BACKEND=cuda SEQ=2048 bench/cp_check.sh $B"
# TP 2 on one GPU with and without distributed saved activations: the same losses (docs/parallel.md)
step tp_distribute_gpu 40 "BACKEND=cuda SEQ=2048 STEPS=3 TPS=2 bench/tp_distribute.sh $B"
# and with sequence parallelism: the first loss the same, the rest within 1e-5 (docs/parallel.md)
step tp_sp_gpu 40 "BACKEND=cuda MODE=sp SEQ=2048 STEPS=3 TPS=2 bench/tp_distribute.sh $B"
# ZeRO-1 with bf16 weights (the master sharded, the bf16 weights all-gathered) on one GPU: the same losses
step zero_gpu 40 "BACKEND=cuda SEQ=2048 STEPS=3 DPS=2 bench/zero_memory.sh $B"
# lcextend eval --tp 2 --cp 2 on the GPU (4 ranks: device logits gathered, the forward-only ring) against one CPU
# process (docs/evaluation-protocol.md)
step tp_eval_gpu 40 "BACKEND=cuda TP=2 CP=2 bench/tp_eval.sh $B"
step memcheck_exec 40 "compute-sanitizer --tool memcheck --error-exitcode 99 $B/tests/test_exec_cuda"
step initcheck_ops 60 "compute-sanitizer --tool initcheck --error-exitcode 99 $B/tests/test_backend_ops_cuda"
step cublaslt_trace 30 "CUBLASLT_LOG_LEVEL=2 $B/tests/test_backend_ops_cuda cuda matmul 2>&1 | head -c 4000000"
step comm_np4 30 "mpirun --allow-run-as-root --oversubscribe -np 4 $B/tests/test_comm_nccl_cuda"
summary "total $(( $(date +%s) - T0 )) s"
pack
