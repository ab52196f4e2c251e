#!/usr/bin/env bash
# GEMM efficiency on a GPU: our matmul (bench_matmul_cuda: the CUDA table, cuBLASLt) against torch.matmul on the
# same Llama-3.2-1B-shaped bf16 GEMMs over TOKENS tokens, in one run on one GPU. Prints per GEMM both TFLOP/s
# (2 M N K / time) and ours / torch. torch gets the same layouts as views (x @ W.t(), dy @ W, dy.t() @ x), so
# cuBLAS sees the same transposes; its output is bf16 everywhere (torch.matmul has no bf16 x bf16 -> f32 form),
# where ours writes the weight gradients dW in f32 with beta = 1 (C read and written in f32: more bytes), and
# its A is bf16 where ours is f32 in lm_head.dx_f32 (the loss chunk's dX: ours runs the tiled fallback there).
# usage: bench/matmul_cuda.sh BUILD_DIR [TOKENS=8192] [REPS=20]
# Exits 77 (skipped) without a GPU, like the CUDA tests.
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR [TOKENS] [REPS]}
TOKENS=${2:-8192}
REPS=${3:-20}
BIN="$BUILD/bench/bench_matmul_cuda"
[ -x "$BIN" ] || { echo "missing $BIN (build first)"; exit 1; }
OURS=$(mktemp)
trap 'rm -f "$OURS"' EXIT
rc=0
"$BIN" "$TOKENS" "$REPS" > "$OURS" || rc=$?
if [ "$rc" -ne 0 ]; then
    cat "$OURS"
    exit "$rc"
fi

python3 - "$OURS" "$REPS" <<'PY'
import sys, time
try:
    import torch
except ImportError:
    print("matmul_cuda.sh: no torch: ours only"); print(open(sys.argv[1]).read(), end=""); sys.exit(0)
if not torch.cuda.is_available():
    print("matmul_cuda.sh: torch sees no GPU, skipped"); sys.exit(77)
reps = int(sys.argv[2])
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("gemm ")]
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
def operand(rows_, cols):
    return (torch.rand(rows_, cols, device=dev) * 2 - 1).to(torch.bfloat16)
print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
print(f"{'gemm':<15} {'ta':>2} {'tb':>2} {'M':>7} {'N':>7} {'K':>7} {'A':>4} {'C':>4} {'ours ms':>8} {'ours TF/s':>9} "
      f"{'torch ms':>8} {'torch TF/s':>10} {'ratio':>6}")
for _, name, ta, tb, m, n, k, adt, cdt, beta, ms, tf in rows:
    ta, tb, m, n, k = int(ta), int(tb), int(m), int(n), int(k)
    a = operand(k, m) if ta else operand(m, k)       # A as stored
    b = operand(n, k) if tb else operand(k, n)       # B as stored
    opa = a.t() if ta else a
    opb = b.t() if tb else b
    for _ in range(3):
        torch.matmul(opa, opb)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.matmul(opa, opb)
    torch.cuda.synchronize()
    tms = (time.perf_counter() - t0) * 1e3 / reps
    ttf = 2.0 * m * n * k / (tms * 1e-3) / 1e12
    print(f"{name:<15} {ta:>2} {tb:>2} {m:>7} {n:>7} {k:>7} {adt:>4} {cdt:>4} {float(ms):>8.3f} {float(tf):>9.1f} "
          f"{tms:>8.3f} {ttf:>10.1f} {float(tf) / ttf:>6.2f}")
    del a, b, opa, opb
    torch.cuda.empty_cache()
PY
