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
