# bench/bench_lib.sh: helpers the bench scripts share; sourced (`. "$HERE/bench_lib.sh"`), not run.

# random_ids N VOCAB FILE: N token ids in [0, VOCAB), space separated, from a fixed linear congruential generator:
# the same ids for every script and every run, so two runs (or two builds) train on the same tokens.
random_ids() {
    awk -v n="$1" -v v="$2" 'BEGIN { s = 7; for (i = 0; i < n; i++) {
        s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % v } }' >"$3"
}

# json_field FILE KEY: KEY's value on each line of a JSON-lines FILE (metrics.jsonl) that has it, in order.
json_field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }

# median: the median of the numbers on stdin, one a line (the mean of the middle two for an even count).
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# bench_cfg: CFG (default bench/llama10m.json, beside this file) and its VOCAB.
bench_cfg() {
    CFG=${CFG:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/llama10m.json}
    VOCAB=$(grep -o '"vocab_size": *[0-9]*' "$CFG" | grep -o '[0-9]*$')
}

# mpi_setup NAME: MPIEXEC (mpirun unless set; without one, NAME's one-line error and exit 1), one passive OpenMP
# thread per rank, root allowed, and wrap: a `bash -c` body that runs "$@" writing its peak RSS (KiB) to
# "$0.rss.RANK" (/usr/bin/time; without it, no file).
mpi_setup() {
    MPIEXEC=${MPIEXEC:-$(command -v mpirun || true)}
    [ -n "$MPIEXEC" ] || { echo "$1: needs mpirun" >&2; exit 1; }
    export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # shellcheck disable=SC2016 # expanded by the bash -c of each rank
    [ -x /usr/bin/time ] && wrap='exec /usr/bin/time -f %M -o "$0.rss.${OMPI_COMM_WORLD_RANK:-0}" "$@"' ||
        wrap='exec "$@"'
}
