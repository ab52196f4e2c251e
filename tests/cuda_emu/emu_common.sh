# shellcheck shell=bash
# Shared by tests/cuda_emu/run.sh and backend_run.sh; sourced, not run.
#   emu_rewrite SRC DST [SRC DST...]  a kernels/cuda source for emu_cuda.h: kernel<<<grid, block, smem,
#                                     stream>>>(args) -> emu_launch(kernel, grid, block, smem, stream, args), and
#                                     extern __shared__ float sm[] -> the launch's buffer
#   emu_libs BUILD                    the libraries of BUILD's link line after liblcx.a (a CUDA build links with
#                                     nvcc through a response file, a CPU-only one with the C compiler)
emu_rewrite() {
    python3 - "$@" <<'PY'
import re, sys
args = sys.argv[1:]
for src, dst in zip(args[::2], args[1::2]):
    s = open(src).read().replace("extern __shared__ float sm[];", "float *sm = emu_smem;")
    s = re.sub(r"(\w+(?:<\w+>)?)<<<(.*?)>>>\((.*?)\);", lambda m: f"emu_launch({m[1]}, {m[2]}, {m[3]});", s, flags=re.S)
    open(dst, "w").write(s)
PY
}

emu_libs() {
    local d=$1/tests/CMakeFiles/test_exec_cuda.dir
    if [ -f "$d/linkLibs.rsp" ]; then
        sed -e 's#\.\./liblcx\.a##' -e 's/"//g' "$d/linkLibs.rsp"
    else
        sed -e 's#.*\.\./liblcx\.a##' "$d/link.txt"
    fi
}
