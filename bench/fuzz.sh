#!/usr/bin/env bash
# The long fuzzing run (docs/reliability.md "Fuzzing"): every libFuzzer target (or those named) for SECONDS each,
# starting from a copy of its seed corpus tests/fuzz/corpus/<target>/, one target after another. CI (.ci/run) runs
# the same targets for 30 s each; this is the minutes-per-target run whose figures docs/reliability.md records.
#
#   bench/fuzz.sh [-t SECONDS] [-b BUILD_DIR] [-o OUT_DIR] [-j JOBS] [TARGET...]
#     -t  seconds per target (default 300)
#     -b  the fuzz build (default build-fuzz; made with CC=clang cmake -S . -B build-fuzz -DLCX_FUZZ=ON -DLCX_TESTS=OFF)
#     -o  where the grown corpora, logs and crash files go (default a new directory under /tmp)
#     -j  libFuzzer -jobs/-workers per target (default 1)
#     TARGET: config, eval_json, gguf, lcx_manifest, recipe, safetensors, tokdata, tokenizer, tokenizer_json
#       (default: every fuzz_* in the build)
#
# Prints one line per target: executions, exec/s, coverage (edges) and features at start and end, corpus files and
# bytes at start and end, and the result ("ok", or the crash/leak/timeout file). Exits 1 when any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=300 build=build-fuzz out="" jobs=1
while getopts "t:b:o:j:" opt; do
    case $opt in
    t) secs=$OPTARG ;;
    b) build=$OPTARG ;;
    o) out=$OPTARG ;;
    j) jobs=$OPTARG ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ -n "$out" ] || out=$(mktemp -d /tmp/lcx-fuzz.XXXXXX)
mkdir -p "$out"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for fz in "$build"/tests/fuzz/fuzz_*; do [ -x "$fz" ] && targets+=("$(basename "$fz" | sed 's/^fuzz_//')"); done
fi
[ ${#targets[@]} -gt 0 ] || { echo "bench/fuzz.sh: no fuzz targets in $build/tests/fuzz (build with -DLCX_FUZZ=ON)"; exit 2; }
export LCX_SRC=$PWD
echo "bench/fuzz.sh: ${#targets[@]} targets x ${secs} s, $(nproc) cores, $(date -u +%Y-%m-%d), output in $out"
printf '%-15s %10s %7s %13s %13s %17s %s\n' target execs exec/s cov ft corpus result
failed=0
for t in "${targets[@]}"; do
    fz="$build/tests/fuzz/fuzz_$t"
    [ -x "$fz" ] || { echo "$t: no $fz"; failed=1; continue; }
    corpus="$out/corpus-$t" art="$out/artifacts-$t/"
    mkdir -p "$corpus" "$art"
    [ -d "tests/fuzz/corpus/$t" ] && cp -r "tests/fuzz/corpus/$t/." "$corpus/"
    files0=$(find "$corpus" -type f | wc -l) bytes0=$(du -sb "$corpus" | cut -f1)
    log="$out/$t.log"
    extra=()
    [ "$t" = config ] && [ -f tests/fuzz/config.dict ] && extra+=(-dict=tests/fuzz/config.dict)
    [ "$jobs" -gt 1 ] && extra+=(-jobs="$jobs" -workers="$jobs")
    "$fz" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=25 -print_final_stats=1 -artifact_prefix="$art" \
        "${extra[@]}" "$corpus" >"$log" 2>&1
    rc=$?
    # with -jobs, libFuzzer's parent copies each job's fuzz-N.log into its own output when the job ends: appending
    # them again counted every execution twice
    [ "$jobs" -gt 1 ] && rm -f fuzz-*.log
    execs=$(grep -h "stat::number_of_executed_units" "$log" | awk '{ s += $2 } END { print s + 0 }')
    eps=$((execs / (secs > 0 ? secs : 1)))
    init=$(grep -m1 "INITED" "$log")
    last=$(grep -E "DONE|#[0-9]+.*(pulse|NEW|REDUCE)" "$log" | tail -n 1)
    cov() { sed -n "s/.*cov: \([0-9]*\).*/\1/p" <<<"$1"; }
    ft() { sed -n "s/.*ft: \([0-9]*\).*/\1/p" <<<"$1"; }
    files1=$(find "$corpus" -type f | wc -l) bytes1=$(du -sb "$corpus" | cut -f1)
    crash=$(find "$art" -type f | head -n 1)
    if [ $rc -eq 0 ] && [ -z "$crash" ]; then result=ok; else result="FAILED (rc $rc${crash:+, $crash}; $log)"; failed=1; fi
    printf '%-15s %10s %7s %13s %13s %17s %s\n' "$t" "$execs" "$eps" "$(cov "$init")->$(cov "$last")" \
        "$(ft "$init")->$(ft "$last")" "$files0->$files1 files" "$result"
    echo "    corpus bytes $bytes0 -> $bytes1; log $log"
done
exit $failed
