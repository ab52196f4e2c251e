#!/usr/bin/env bash
# Reshard benchmark: a ~2 GB synthetic bf16 llama checkpoint (.lcx, raw codec) TP1 -> TP4 with `lcextend reshard`
# against `cp -r` of the same directory, same run, warm page cache, alternating rounds; peak RSS from
# /usr/bin/time -v. cp is timed alone and followed by `sync` (our writer fsyncs every file before the rename).
#   usage: [ROUNDS=3] [THREADS=] bench/reshard.sh BUILD_DIR [WORK_DIR]
# Prints a markdown table for docs/benchmarks.md. Needs python3 + torch + safetensors for the synthetic model.
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR [WORK_DIR]}
WORK=${2:-/tmp/lcx_bench_reshard}
ROUNDS=${ROUNDS:-3}
L="$BUILD/lcextend"
[ -x "$L" ] || { echo "missing $L (build first)"; exit 1; }
mkdir -p "$WORK"
THREADS_FLAG=${THREADS:+--threads $THREADS}

if [ ! -f "$WORK/src/model.safetensors" ]; then
python3 - "$WORK/src" <<'PY'
import json, os, sys, torch
from safetensors.torch import save_file
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
# llama, hidden 2048, 16 heads / 8 kv heads of 128, intermediate 5632, 18 layers, vocab 32000: 0.98 B params
H, NH, NG, HD, F, L, V = 2048, 16, 8, 128, 5632, 18, 32000
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "num_attention_heads": NH,
       "num_key_value_heads": NG, "head_dim": HD, "intermediate_size": F, "num_hidden_layers": L, "vocab_size": V,
       "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
       "tie_word_embeddings": False, "hidden_act": "silu"}
json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
g = torch.Generator().manual_seed(0)
def w(*s): return (torch.randn(*s, generator=g) * 0.02).to(torch.bfloat16)
t = {"model.embed_tokens.weight": w(V, H), "lm_head.weight": w(V, H), "model.norm.weight": torch.ones(H, dtype=torch.bfloat16)}
for i in range(L):
    p = f"model.layers.{i}."
    t[p + "input_layernorm.weight"] = torch.ones(H, dtype=torch.bfloat16)
    t[p + "post_attention_layernorm.weight"] = torch.ones(H, dtype=torch.bfloat16)
    t[p + "self_attn.q_proj.weight"] = w(NH * HD, H); t[p + "self_attn.k_proj.weight"] = w(NG * HD, H)
    t[p + "self_attn.v_proj.weight"] = w(NG * HD, H); t[p + "self_attn.o_proj.weight"] = w(H, NH * HD)
    t[p + "mlp.gate_proj.weight"] = w(F, H); t[p + "mlp.up_proj.weight"] = w(F, H); t[p + "mlp.down_proj.weight"] = w(H, F)
save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
PY
fi
rm -rf "$WORK/tp1.lcx" "$WORK/tp4.lcx" "$WORK/cp.lcx"
"$L" import "$WORK/src" --out "$WORK/tp1.lcx" --codec raw --quiet
BYTES=$(du -sb "$WORK/tp1.lcx" | cut -f1)
sync
cat "$WORK/tp1.lcx"/* >/dev/null # warm the page cache for both contenders

measure() { # measure LABEL CMD... -> "seconds rss_kb"
    local log="$WORK/time.log"; shift
    /usr/bin/time -v "$@" 2>"$log" >/dev/null
    local el rss
    el=$(grep "Elapsed (wall clock)" "$log" | awk '{print $NF}' | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
    rss=$(grep "Maximum resident set size" "$log" | awk '{print $NF}')
    echo "$el $rss"
}
rss_r=0; rss_c=0; all_c=""; all_cs=""; all_r=""
for r in $(seq 1 "$ROUNDS"); do
    rm -rf "$WORK/cp.lcx"; sync
    read -r t_c k_c < <(measure cp cp -r "$WORK/tp1.lcx" "$WORK/cp.lcx")
    rm -rf "$WORK/cp.lcx"; sync
    read -r t_cs _ < <(measure cp_sync sh -c "cp -r '$WORK/tp1.lcx' '$WORK/cp.lcx' && sync")
    rm -rf "$WORK/cp.lcx" "$WORK/tp4.lcx"; sync
    read -r t_r k_r < <(measure reshard "$L" reshard "$WORK/tp1.lcx" --tp 4 --codec raw --out "$WORK/tp4.lcx" --quiet $THREADS_FLAG)
    echo "round $r: cp -r ${t_c}s, cp -r + sync ${t_cs}s, reshard TP1->TP4 ${t_r}s (peak RSS ${k_r} KiB)" >&2
    all_c="$all_c $t_c"; all_cs="$all_cs $t_cs"; all_r="$all_r $t_r"
    rss_r=$(( k_r > rss_r ? k_r : rss_r )); rss_c=$(( k_c > rss_c ? k_c : rss_c ))
done
"$L" verify "$WORK/tp4.lcx" >/dev/null
LARGEST=$(python3 -c "print(32000*2048*2)")
python3 - "$BYTES" "$all_c" "$all_cs" "$all_r" "$rss_c" "$rss_r" "$LARGEST" <<'PY'
import statistics, sys
b = int(sys.argv[1]); c, cs, r = ([float(x) for x in a.split()] for a in sys.argv[2:5])
kc, kr, big = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
mb = b / 1e6
med = statistics.median
print("| contender | best s | median s | MB/s (median) | peak RSS |")
print("|---|---|---|---|---|")
print(f"| `cp -r` | {min(c):.2f} | {med(c):.2f} | {mb / med(c):.0f} | {kc / 1024:.0f} MiB |")
print(f"| `cp -r` + `sync` | {min(cs):.2f} | {med(cs):.2f} | {mb / med(cs):.0f} | |")
print(f"| `lcextend reshard --tp 4 --codec raw` (fsyncs) | {min(r):.2f} | {med(r):.2f} | {mb / med(r):.0f} | "
      f"{kr / 1024:.0f} MiB ({kr * 1024 / big:.2f}x the largest tensor) |")
print(f"\n{mb:.0f} MB, {len(r)} rounds. Speed of reshard relative to cp -r: best {min(c) / min(r):.2f}, median "
      f"{med(c) / med(r):.2f}; relative to cp -r + sync: best {min(cs) / min(r):.2f}, median {med(cs) / med(r):.2f}")
PY
