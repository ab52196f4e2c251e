# Shared by the one-command GPU sessions (bench/gpu_session.sh, bench/smollm2_gpu.sh); sourced, not run. Before
# sourcing set RESULTS (where the logs go) and DEADLINE (seconds for the whole run). Gives:
#   step NAME LIMIT_S CMD...  CMD under at most LIMIT_S seconds, never past the deadline (a step that would get
#                             under 10 s is skipped and said so); output in RESULTS/logs/NAME.log, one line per step
#                             (rc, seconds) in RESULTS/summary.txt
#   summary LINE...           a line of RESULTS/summary.txt (and the terminal)
#   pack                      the logs as one archive beside summary.txt (the device tool brings back a few
#                             files only)
#   gpu_build DIR TARGETS     the environment (bench/gpu_deps.sh env .gpu-debs; logs/env.log, deps.log) and a
#                             RelWithDebInfo build of TARGETS for this card's own architecture, as step `build`
LOGS=$RESULTS/logs
mkdir -p "$LOGS"
T0=$(date +%s)
pack() { tar czf "$RESULTS/logs.tgz" -C "$RESULTS" logs && rm -rf "$LOGS"; }
summary() { echo "$*" | tee -a "$RESULTS/summary.txt"; }

step() {
    local name=$1 limit=$2; shift 2
    local left=$(( DEADLINE - ($(date +%s) - T0) - 5 ))
    (( limit > left )) && limit=$left
    if (( limit < 10 )); then summary "$name: skipped (deadline)"; return 0; fi
    local s=$(date +%s)
    timeout -k 5 "$limit" bash -c "$*" > "$LOGS/$name.log" 2>&1
    local rc=$?
    summary "$name: rc $rc, $(( $(date +%s) - s )) s (limit $limit s)"
    return $rc
}

gpu_build() {
    local dir=$1 targets=$2
    {
        date -u; nvidia-smi; nvcc --version | tail -2
        python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name())'
        python3 -c 'import transformers; print("transformers", transformers.__version__)'
        which compute-sanitizer; nproc
    } > "$LOGS/env.log" 2>&1
    export PATH=$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer
    # shellcheck disable=SC1091
    source bench/gpu_deps.sh env .gpu-debs > "$LOGS/deps.log" 2>&1
    local cc
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
    step build 240 "cmake -S . -B $dir -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLCX_WERROR=ON -DLCX_CUDA_ARCHS=${cc:-90} \
        \$LCX_DEVICE_CMAKE_ARGS && cmake --build $dir -j16 --target $targets"
}
