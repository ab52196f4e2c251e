#!/usr/bin/env bash
# The OpenBLAS kernel set (kernels/cpu/cpu_blas.h): on a CPU with AVX2 and FMA (per /proc/cpuinfo) lcextend never
# runs its GEMMs on kernels older than AVX2, whatever OpenBLAS detected; a kernel set the user chose stands; and the
# choice changes no result beyond rounding (score's loss with Prescott kernels against the chosen ones).
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
unset OPENBLAS_CORETYPE LCX_OPENBLAS_DETECTED
model="$LCX_SRC/tests/fixtures/models/llama_gqa"
kernels() { sed -n 's/^cpu gemm: .*; kernels \([A-Za-z0-9_]*\) .*/\1/p' "$tmp/out"; }

run version
check "version: exit 0" [ "$(rc)" -eq 0 ]
check "version names the GEMM library and its kernels" grep -qE '^cpu gemm: OpenBLAS .*; kernels [A-Za-z]' "$tmp/out"
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
if [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]]; then
    k=$(kernels)
    check "AVX2 + FMA CPU: kernels '$k' are not older than AVX2" \
        bash -c "! grep -qiwE 'Unknown|Katmai|Coppermine|Northwood|Prescott|Banias|Core2|Penryn|Dunnington|Nehalem|\
Atom|Athlon|Opteron|Opteron_SSE3|Barcelona|Nano|Sandybridge|Bobcat|Bulldozer|Piledriver|Steamroller' <<<'$k'"
else
    echo "no AVX2 + FMA in /proc/cpuinfo: the kernel check is skipped (the rest runs)"
fi

# the user's choice stands, and its results equal the chosen kernels' to rounding
OPENBLAS_CORETYPE=Prescott run version
check "OPENBLAS_CORETYPE=Prescott is kept" [ "$(kernels)" = Prescott ]
awk 'BEGIN { s = 3; for (i = 0; i < 200; i++) {
    s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } }' \
    >"$tmp/ids.txt"
OPENBLAS_CORETYPE=Prescott run score "$model" --ids "$tmp/ids.txt"
check "score with Prescott kernels: exit 0" [ "$(rc)" -eq 0 ]
cp "$tmp/out" "$tmp/prescott"
run score "$model" --ids "$tmp/ids.txt"
check "score with the chosen kernels: exit 0" [ "$(rc)" -eq 0 ]
loss() { sed -n 's/^loss: *\([0-9.]*\).*/\1/p' "$1" | head -1; }
a=$(loss "$tmp/prescott") b=$(loss "$tmp/out")
check "the same loss to 1e-5 ($a vs $b)" \
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-5 * a) }'
exit $fail
