#!/usr/bin/env bash
# Load benchmark: ours (bench_safetensors_load) vs Python safetensors, same file, same run, warm page cache.
# Every contender opens the file, validates it and reads every tensor byte into the same checksum (sum mod 2^64
# of little-endian u64 words), so the checksums must agree.
#   file A: ~1 GB of BF16 layer weights + an F32 embedding -> ours vs safetensors.torch.load_file
#   file B: the same shapes with F16 instead of BF16        -> ours vs safetensors.numpy.load_file (numpy has no bf16)
# usage: [ROUNDS=8] bench/safetensors_load.sh BUILD_DIR [REPEATS] [WORK_DIR]
# Python runs with one thread (torch.set_num_threads(1)); ours is single-threaded too. Reported: wall time and
# process CPU time (steadier when other jobs share the cores), medians over all repeats.
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR [REPEATS] [WORK_DIR]}
REPS=${2:-3}
ROUNDS=${ROUNDS:-8}
WORK=${3:-/tmp/lcx_bench_st}
BIN="$BUILD/bench/bench_safetensors_load"
[ -x "$BIN" ] || { echo "missing $BIN (build first)"; exit 1; }
mkdir -p "$WORK"

python3 - "$WORK" <<'EOF'
import os, sys, torch
from safetensors.torch import save_file
work = sys.argv[1]
# A TinyLlama-like slice: hidden 2048, 8 KV heads of 64 (k/v 512 rows), intermediate 5632, 9 layers, vocab 32000.
H, KV, F, L, V = 2048, 512, 5632, 9, 32000
g = torch.Generator().manual_seed(0)
def rnd(*shape, dtype):
    return (torch.randn(*shape, generator=g) * 0.02).to(dtype)
for tag, half in (("bf16", torch.bfloat16), ("f16", torch.float16)):
    path = os.path.join(work, f"bench_{tag}.safetensors")
    if os.path.exists(path):
        continue
    sd = {"model.embed_tokens.weight": rnd(V, H, dtype=torch.float32), "model.norm.weight": torch.ones(H)}
    for i in range(L):
        p = f"model.layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = rnd(H, H, dtype=half)
        sd[p + "self_attn.k_proj.weight"] = rnd(KV, H, dtype=half)
        sd[p + "self_attn.v_proj.weight"] = rnd(KV, H, dtype=half)
        sd[p + "self_attn.o_proj.weight"] = rnd(H, H, dtype=half)
        sd[p + "mlp.gate_proj.weight"] = rnd(F, H, dtype=half)
        sd[p + "mlp.up_proj.weight"] = rnd(F, H, dtype=half)
        sd[p + "mlp.down_proj.weight"] = rnd(H, F, dtype=half)
        sd[p + "input_layernorm.weight"] = torch.ones(H)
        sd[p + "post_attention_layernorm.weight"] = torch.ones(H)
    save_file(sd, path, metadata={"format": "pt"})
    print(f"wrote {path}: {os.path.getsize(path) / 1e9:.3f} GB, {len(sd)} tensors")
EOF

peer() { # peer FILE torch|numpy
python3 - "$1" "$2" "$REPS" <<'EOF'
import sys, time, statistics
import numpy as np, torch
torch.set_num_threads(1)
path, kind, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
M = 2**64
def run():
    t0, c0 = time.perf_counter(), time.process_time()
    s = 0
    if kind == "numpy":
        from safetensors.numpy import load_file
        d = load_file(path)
        for a in d.values():
            b = a.reshape(-1).view(np.uint8)
            n8 = b.size // 8 * 8
            s += int(b[:n8].view("<u8").sum(dtype=np.uint64)) + int(b[n8:].sum())
    else:
        from safetensors.torch import load_file
        d = load_file(path)
        for a in d.values():
            b = a.reshape(-1).view(torch.uint8)
            n8 = b.numel() // 8 * 8
            s += int(b[:n8].view(torch.int64).sum()) + int(b[n8:].sum())
    del d, a, b  # release the mapping / buffers inside the timed region, as ours unmaps in lcx_st_close
    return time.perf_counter() - t0, time.process_time() - c0, s % M
times = []
for r in range(reps):
    t, c, s = run()
    times.append(t)
    print(f"repeat {r}: {t:.4f} s cpu {c:.4f} s")
print(f"best_s={min(times):.4f} median_s={statistics.median(times):.4f} checksum={s}")
EOF
}

times() { sed -n 's/^repeat [0-9]*: \([0-9.]*\) s.* cpu \([0-9.]*\) s$/\1 \2/p'; }
checksum() { sed -n 's/.*checksum=\([0-9]*\).*/\1/p' | tail -1; }
for tag in bf16 f16; do
  f="$WORK/bench_$tag.safetensors"
  kind=$([ $tag = bf16 ] && echo torch || echo numpy)
  cat "$f" > /dev/null # warm the page cache
  "$BIN" "$f" 1 > /dev/null
  echo "== $f ($(stat -c %s "$f") bytes), $ROUNDS rounds x $REPS repeats, alternating ours / safetensors.$kind.load_file"
  : > "$WORK/ours.txt"; : > "$WORK/theirs.txt"
  for r in $(seq "$ROUNDS"); do # alternate so a noisy neighbour hits both sides alike
    ours=$("$BIN" "$f" "$REPS"); theirs=$(peer "$f" "$kind")
    [ "$(echo "$ours" | checksum)" = "$(echo "$theirs" | checksum)" ] ||
      { echo "CHECKSUM MISMATCH: $(echo "$ours" | checksum) vs $(echo "$theirs" | checksum)"; exit 1; }
    echo "$ours" | times >> "$WORK/ours.txt"; echo "$theirs" | times >> "$WORK/theirs.txt"
  done
  python3 - "$WORK/ours.txt" "$WORK/theirs.txt" "$kind" "$(stat -c %s "$f")" <<'EOF'
import statistics, sys
o = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
t = [tuple(map(float, l.split())) for l in open(sys.argv[2])]
kind, size = sys.argv[3], int(sys.argv[4])
med = lambda v, k: statistics.median(x[k] for x in v)
for name, v in (("ours", o), (f"safetensors.{kind}.load_file", t)):
    print(f"{name:30s} n={len(v)} wall best={min(x[0] for x in v):.4f}s median={med(v, 0):.4f}s "
          f"({size / med(v, 0) / 1e9:.1f} GB/s); cpu median={med(v, 1):.4f}s")
print(f"ratio {kind}/ours: wall (median) {med(t, 0) / med(o, 0):.2f}x, cpu (median) {med(t, 1) / med(o, 1):.2f}x; "
      "checksums agree")
EOF
done
