#!/usr/bin/env bash
# `lcextend plan`: usage errors, the plan for the fixture model tests/fixtures/models/llama_gqa (context 64,
# rope default) --to 256 and --to 1k with stage lengths and yarn factors derived by hand (x2 stages from 64:
# factor = stage / 64), JSON output, the ring traffic per rank of CP 4 and CP 2 plans against sizes computed
# here from the config, recipe and method choices, and one-line errors before any work.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
model="$LCX_SRC/tests/fixtures/models/llama_gqa"

run plan --help
check "--help exits 0" [ "$(rc)" -eq 0 ]
check "--help has examples" grep -q "examples:" "$tmp/out"
check "--help lists the built-in recipes" grep -q "yarn-x2.*tiny-demo\|tiny-demo.*yarn-x2" "$tmp/out"
run --help
check "top-level help lists plan" grep -q "^  plan " "$tmp/out"

# usage errors: exit 2, one line
run plan
check "no CKPT: exit 2" [ "$(rc)" -eq 2 ]
check "no CKPT: says so" grep -q "missing CKPT" "$tmp/err"
run plan "$model"
check "no --to: exit 2" [ "$(rc)" -eq 2 ]
check "no --to: says so" grep -q "missing --to" "$tmp/err"
run plan "$model" --to 12kk
check "--to 12kk: exit 2" [ "$(rc)" -eq 2 ]
check "--to 12kk: named" grep -q "'12kk' is not a length" "$tmp/err"
check "--to 12kk: one line" one_line_err
run plan "$model" --to -5
check "--to -5: exit 2" [ "$(rc)" -eq 2 ]
run plan "$model" --to 0
check "--to 0: exit 2" [ "$(rc)" -eq 2 ]
run plan "$model" --to 1k --method rope-magic
check "bad --method: exit 2" [ "$(rc)" -eq 2 ]
check "bad --method: named" grep -q "rope-magic" "$tmp/err"
run plan "$model" --to 1k --frobnicate
check "unknown flag: exit 2" [ "$(rc)" -eq 2 ]
check "unknown flag: named" grep -q "unknown flag '--frobnicate'" "$tmp/err"
run plan "$model" --to 1k --cp 0
check "--cp 0: exit 2" [ "$(rc)" -eq 2 ]
run plan "$model" --to 1k --memory lots
check "--memory lots: exit 2" [ "$(rc)" -eq 2 ]

# --to 256 from 64 (yarn-x2): stages 128 (s=2), 256 (s=4), L = 64
run plan "$model" --to 256
check "--to 256: exit 0" [ "$(rc)" -eq 0 ]
check "--to 256: nothing on stderr" [ ! -s "$tmp/err" ]
check "--to 256: context line" grep -q "^context: 64 -> 256 " "$tmp/out"
check "--to 256: stage 1 = 128, yarn s=2 L=64" grep -Eq "^1 +128 +yarn s=2 L=64 +128 " "$tmp/out"
check "--to 256: stage 2 = 256, yarn s=4 L=64" grep -Eq "^2 +256 +yarn s=4 L=64 +256 " "$tmp/out"
check "--to 256: two stages" grep -q "^total: 2 stages" "$tmp/out"
check "--to 256: no stage 3" lacks -E '^3 ' "$tmp/out"

# --to 1k: 128, 256, 512, 1k with factors 2, 4, 8, 16
run plan "$model" --to 1k
check "--to 1k: exit 0" [ "$(rc)" -eq 0 ]
check "--to 1k: four stages" grep -q "^total: 4 stages" "$tmp/out"
check "--to 1k: stage 3 = 512, s=8" grep -Eq "^3 +512 +yarn s=8 L=64 +512 " "$tmp/out"
check "--to 1k: stage 4 = 1k, s=16" grep -Eq "^4 +1k +yarn s=16 L=64 +1k " "$tmp/out"
check "--to 1k: eval lengths of stage 4" grep -q "^stage 4: eval at 64 128 256 512 1k " "$tmp/out"
run plan "$model" --to 1024 --json
check "--json: exit 0" [ "$(rc)" -eq 0 ]
check "--json: one object" bash -c "head -c1 '$tmp/out' | grep -q '{' && tail -n1 '$tmp/out' | grep -q '^}$'"
check "--json: last stage length" grep -q '"seq_len": 1024,' "$tmp/out"
check "--json: yarn factor 16" grep -q '"factor": 16.0,' "$tmp/out"
check "--json: original length in rope_scaling" grep -q '"original_max_position_embeddings": 64,' "$tmp/out"
check "--json: attention factor 0.1 ln 16 + 1" grep -q '"attention_factor": 1.277258872' "$tmp/out"
want=$(grep -o '"num_parameters": [0-9]*' "$model/expected_inspect.json")
check "--json: parameter count as transformers counts it ($want)" grep -q "$want" "$tmp/out"
run plan "$model/config.json" --to 1k
check "CKPT as config.json: exit 0" [ "$(rc)" -eq 0 ]

# CP 4: the ring traffic per rank, message sizes computed here from the config (block = seq/CP rows of the KV
# heads; bf16 K|V = 2 bytes, fp32 dK|dV = 4), in the table and in the JSON; memory stated per rank
cfgint() { grep -o "\"$1\": [0-9]*" "$model/config.json" | grep -o '[0-9]*$'; }
kvh=$(cfgint num_key_value_heads) hd=$(cfgint head_dim) nl=$(cfgint num_hidden_layers)
run plan "$model" --to 256 --cp 4
check "--cp 4: exit 0" [ "$(rc)" -eq 0 ]
check "--cp 4: memory per rank" grep -q "^(memory/dev and peak memory are per rank" "$tmp/out"
cp "$tmp/out" "$tmp/cp4.txt"
run plan "$model" --to 256 --cp 4 --json
cp "$tmp/out" "$tmp/cp4.json"
for st in 1:128 2:256; do
    i=${st%%:*} S=${st#*:} blk=$((${st#*:} / 4))
    kv=$((2 * kvh * hd * blk * 2)) kvd=$((2 * kvh * hd * blk * (2 + 4))) dkv=$((2 * kvh * hd * blk * 4))
    check "--cp 4 stage $i ($S): forward 3 x $kv B, backward 3 x $kvd B + 1 x $dkv B" grep -q \
        "^stage $i: ring per rank, per layer and sequence ($blk tokens, $kvh kv heads): 4 steps each way; forward sends 3 x $kv B (K|V), backward 3 x $kvd B (K|V + fp32 dK|dV) + 1 x $dkv B (fp32 dK|dV); per optimizer step .* ($nl layers x [0-9]* sequences)$" \
        "$tmp/cp4.txt"
    seqs=$(grep "^stage $i: ring" "$tmp/cp4.txt" | grep -o 'x [0-9]* sequences' | grep -o '[0-9]*')
    step=$(( nl * seqs * (3 * kv + 3 * kvd + dkv) ))
    # the JSON's ring object of stage i (keys sorted: backward_msg_bytes ... steps)
    ring=$(awk -v n="$i" '/"index": /{k++} k==n && /"ring": \{/{r=1} r{print} r && /^ *\},?$/{exit}' "$tmp/cp4.json" | tr -d ' \n')
    check "--cp 4 stage $i: JSON ring fields ($ring)" [ "$ring" = "\"ring\":{\"backward_msg_bytes\":$kvd,\"backward_sends\":3,\"block_len\":$blk,\"bytes_per_layer_sequence\":$((3 * kv + 3 * kvd + dkv)),\"bytes_per_step\":$step,\"forward_msg_bytes\":$kv,\"forward_sends\":3,\"kv_heads\":$kvh,\"return_msg_bytes\":$dkv,\"return_sends\":1,\"sequences_per_rank\":$seqs,\"steps\":4}," ]
done
run plan "$model" --to 256 --cp 2 --fp32
check "--cp 2 --fp32: fp32 K|V (4 bytes), 1 forward send" grep -q \
    "^stage 2: ring per rank, per layer and sequence (128 tokens, $kvh kv heads): 2 steps each way; forward sends 1 x $((2 * kvh * hd * 128 * 4)) B (K|V), backward 1 x $((2 * kvh * hd * 128 * 8)) B" "$tmp/out"
run plan "$model" --to 256 --json
check "CP 1: no ring in the JSON" lacks '"ring"' "$tmp/out"
run plan "$model" --to 256
check "CP 1: no ring lines" lacks 'ring\|per rank' "$tmp/out"

# recipes and methods
run plan "$model" --to 512 --recipe tiny-demo --fp32 --tokens-per-s 1000
check "tiny-demo: exit 0" [ "$(rc)" -eq 0 ]
check "tiny-demo: three stages" grep -q "^total: 3 stages" "$tmp/out"
check "tiny-demo: keep activations" grep -Eq "^1 .* keep " "$tmp/out"
check "tiny-demo: a time estimate" bash -c "grep '^total:' '$tmp/out' | grep -q 'time [0-9]'"
run plan "$model" --to 1k --method pi
check "--method pi: linear" grep -Eq "^4 +1k +pi s=16 " "$tmp/out"
run plan "$model" --to 256 --recipe abf
check "abf: theta x4 per doubling" grep -Eq "^2 +256 +abf theta=160000 " "$tmp/out"
run plan "$model" --to 1k --recipe "$LCX_SRC/recipes/pi.yaml"
check "recipe by path: one stage" grep -q "^total: 1 stage," "$tmp/out"
check "recipe by path: label is the path" grep -q "recipes/pi.yaml" "$tmp/out"

# errors before any work: exit 1, one line
run plan "$model" --to 64
check "--to = current: exit 1" [ "$(rc)" -eq 1 ]
check "--to = current: says why" grep -q "not longer than the model's current context 64" "$tmp/err"
check "--to = current: one line" one_line_err
run plan "$model" --to 32
check "--to below current: exit 1" [ "$(rc)" -eq 1 ]
run plan "$model" --to 1k --recipe llama3-8k-128k
check "below the recipe's first stage: exit 1" [ "$(rc)" -eq 1 ]
check "below the recipe's first stage: says so" grep -q "below the first stage of recipe 'llama3-8k-128k' (16k)" "$tmp/err"
run plan "$model" --to 1k --recipe no-such-recipe
check "unknown recipe: exit 1" [ "$(rc)" -eq 1 ]
check "unknown recipe: lists the built-in ones" grep -q "yarn-x2" "$tmp/err"
run plan "$model" --to 1k --recipe "$LCX_SRC/tests/attack/recipes/typo_key.yaml"
check "bad recipe: exit 1" [ "$(rc)" -eq 1 ]
check "bad recipe: FILE:LINE" grep -q "typo_key.yaml:4: key 'setps'" "$tmp/err"
check "bad recipe: one line" one_line_err
run plan "$model" --to 1004 --cp 4
check "--to not a multiple of 2 CP: exit 1" [ "$(rc)" -eq 1 ]
check "--to not a multiple of 2 CP: says so" grep -q "not a multiple of 8" "$tmp/err"
run plan "$model" --to 1k --memory 1K
check "budget too small: exit 1" [ "$(rc)" -eq 1 ]
check "budget too small: names the stage" grep -q "stage 128 needs" "$tmp/err"
run plan /nonexistent/model --to 1k
check "missing CKPT: exit 1" [ "$(rc)" -eq 1 ]
check "missing CKPT: names it" grep -q "/nonexistent/model" "$tmp/err"

# flag syntax: --name=value, a missing value, strict numbers (no hex, exponents, inf, signs or overflow)
run plan "$model" --to=256 --memory=1GiB --tp=1 --tokens-per-s=1e4 --loss-chunk=1k
check "--name=value: exit 0" [ "$(rc)" -eq 0 ]
check "--name=value: same stages" grep -Eq "^2 +256 +yarn s=4 L=64 +256 " "$tmp/out"
bad_flag "flag --to needs a value" plan "$model" --to
bad_flag "--tp '1x' is not an integer in [1, 65536]" plan "$model" --to 1k --tp 1x
bad_flag "--cp '99999999999999999999'" plan "$model" --to 1k --cp 99999999999999999999
bad_flag "--dp '+2'" plan "$model" --to 1k --dp +2
bad_flag "--tokens-per-s 'inf' is not a positive number" plan "$model" --to 1k --tokens-per-s inf
bad_flag "--tokens-per-s 'nan'" plan "$model" --to 1k --tokens-per-s nan
bad_flag "--tokens-per-s '0x10'" plan "$model" --to 1k --tokens-per-s 0x10
bad_flag "--memory '1e9'" plan "$model" --to 1k --memory 1e9
bad_flag "--memory '0'" plan "$model" --to 1k --memory 0
bad_flag "--loss-chunk '4k ' is not a length" plan "$model" --to 1k --loss-chunk "4k "
bad_flag "flag --json takes no value" plan "$model" --to 1k --json=yes
bad_flag "unexpected argument 'again' (one CKPT only)" plan "$model" again --to 1k

# the layout search: Llama-3.1-8B's shape (hidden 4096, 32 layers, 32/8 heads, ffn 14336, vocab 128256, rope llama3
# factor 8 over 8k) --to 128k on 8 x 80 GB: a layout of 8 devices that fits, the explanation, the JSON, the same
# answer twice; --tp kept; the main command's --dry-run plans the same; an impossible target refused on one line
l8b="$tmp/llama-3.1-8b"
mkdir -p "$l8b"
cat >"$l8b/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
 "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": false,
 "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
JSON
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB
check "search 8B 128k 8x80GB: exit 0" [ "$(rc)" -eq 0 ]
cp "$tmp/out" "$tmp/search1.txt"
check "search: 10 layouts considered" grep -q "^search: 10 layouts of 8 devices (TP x CP x DP), 10 meet the layout rules, [1-9][0-9]* fit 80.00 GiB per device" "$tmp/out"
lay=$(grep -o '^layout:  TP [0-9]* x CP [0-9]* x DP [0-9]*' "$tmp/out" | grep -o '[0-9]*' | tr '\n' ' ')
set -- $lay
check "search: TP $1 x CP $2 x DP $3 = 8 devices" [ "$(( $1 * $2 * $3 ))" -eq 8 ]
check "search: TP $1 divides 32 heads, 8 kv heads and 14336" [ $((32 % $1 + 8 % $1 + 14336 % $1)) -eq 0 ]
check "search: 2 CP divides 128k" [ $((131072 % (2 * $2))) -eq 0 ]
check "search: the chosen line names the layout" grep -q "^chosen: TP $1 x CP $2 x DP $3, loss chunk [0-9]*, MLP tile [a-z0-9]*[a-zA-Z0-9 ,-]*: predicted .* tokens/s, peak .* GiB per device" "$tmp/out"
check "search: a runner-up" grep -q "^runner-up: TP [0-9]* x CP [0-9]* x DP [0-9]*, .* slower" "$tmp/out"
# the chosen plan offloads: the explanation says how much pinned host memory, per device and for all 8, and how to
# bound it
host_line='host: offload pins \([0-9.]*\) GiB of host memory per device ([0-9.]* [GT]iB for the 8 devices)'
hd=$(sed -n "s/^$host_line; --host-memory SIZE bounds it per device\$/\\1/p" "$tmp/out")
check "search: the host line (${hd:-missing})" [ -n "$hd" ]
check "search: the host line is the stages' largest host figure" grep -q "host (offload) ${hd:-none} GiB" "$tmp/out"
# the reserve for the CUDA context (1 GiB) and the NCCL communicators of more than one rank (512 MiB each): the
# world and the TP, CP, DP and CP x DP groups of the chosen layout that have more than one rank
comms=$(( ($1 * $2 * $3 > 1) + ($1 > 1) + ($2 > 1) + ($3 > 1) + ($2 * $3 > 1) ))
rsv=$(awk -v c="$comms" 'BEGIN { printf "%.2f", 1 + 0.5 * c }')
check "search: the reserve line ($rsv GiB, $comms communicators)" \
    grep -q "^reserve: $rsv GiB of each device's 80.00 GiB for the CUDA context (1.00 GiB) and $comms NCCL communicators of more than one rank (512.00 MiB each); --reserve SIZE sets it\$" "$tmp/out"
check "search: the layout line's budget and reserve" \
    grep -q "^layout:  .*; budget 80.00 GiB (reserve $rsv GiB);" "$tmp/out"
left=$(awk -v r="$rsv" 'BEGIN { print 80 - r }')
peak=$(grep -o 'peak memory [0-9.]* GiB per device' "$tmp/out" | grep -o '[0-9.]*')
check "search: peak $peak GiB <= $left GiB (80 less the reserve)" \
    awk -v p="$peak" -v l="$left" 'BEGIN { exit !(p > 0 && p <= l) }'
check "search: every stage within the budget less the reserve" \
    awk -v l="$left" '/^[0-9]+ / { v = $(NF-3); u = $(NF-2); if (u != "GiB" || !(v <= l)) bad = 1; n++ }
        END { exit bad || n == 0 }' "$tmp/out"
# the before/after evaluation on the chosen layout's TP x CP group at the last stage's 128k (+16): its line (a ring
# with CP, a passkey cache without), within 80 GiB
ev=$(sed -n 's/^evaluation (before\/after, float32, [^)]*): \([0-9.]*\) GiB per device at 131088 tokens: weights [^,]*, working set [^,]*, \(passkey cache\|TP gathers\|ring\) .*/\1/p' "$tmp/out")
check "search: the evaluation line (${ev:-missing})" [ -n "$ev" ]
awk -v p="${ev:-999}" 'BEGIN { exit !(p > 0 && p <= 80) }' && \
    lacks "^note: the before/after evaluation" "$tmp/out" ||
    failed "search: the evaluation ($ev GiB) within the budget, no note"
if [ "$2" -gt 1 ]; then
    grep -q "^evaluation (before/after, float32, on the .*CP group): .*, ring [0-9.]* [MG]iB$" "$tmp/out" && \
        lacks "^evaluation .*passkey cache" "$tmp/out" ||
        failed "search: CP $2: the evaluation splits its windows over CP (a ring, no passkey cache)"
fi
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --host-memory 64GB
h64=$(sed -n "s/^$host_line\$/\\1/p" "$tmp/out")
check "search --host-memory 64GB: the host line (${h64:-missing}) within it, no hint" \
    awk -v h="${h64:-999}" 'BEGIN { exit !(h > 0 && h <= 64) }'
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB
check "search: deterministic (same output twice)" cmp -s "$tmp/out" "$tmp/search1.txt"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --json
check "search --json: exit 0" [ "$(rc)" -eq 0 ]
check "search --json: the chosen layout" bash -c "tr -d ' \n' <'$tmp/out' | grep -q '\"chosen\":{\"cp\":$2,\"distribute_saved\":false,\"dp\":$3,\"fits\":true,'"
check "search --json: the explanation" bash -c "tr -d '\n' <'$tmp/out' | grep -q '\"explanation\": *\[ *\"search: 10 layouts'"
check "search --json: the layout object" bash -c "tr -d ' \n' <'$tmp/out' | grep -q '\"layout\":{\"activation_bytes\":2,\"cp\":$2,\"distribute_saved\":false,\"dp\":$3,'"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --json
check "search --json: the budget and the reserve" python3 -c "
import json, sys
l = json.load(open('$tmp/out'))['layout']
sys.exit(not (l['memory_budget'] == 80 * 2**30 and l['reserve'] == $rsv * 2**30))"
# --reserve SIZE instead of the default, --no-reserve none; with --memory (no search) only when given
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --reserve 8G
check "--reserve 8G: said" grep -q "^reserve: 8.00 GiB of each device's 80.00 GiB (--reserve)\$" "$tmp/out"
grep -q "^chosen: .*, peak [0-9.]* GiB per device ([0-9]*% of the 72.00 GiB the reserve leaves)" "$tmp/out" && \
    awk '/^[0-9]+ / { if (!($(NF-3) <= 72)) bad = 1; n++ } END { exit bad || n == 0 }' "$tmp/out" ||
    failed "--reserve 8G: the chosen peak within 72 GiB"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --no-reserve
grep -q "^layout:  .*; budget 80.00 GiB; throughput" "$tmp/out" && lacks "^reserve:" "$tmp/out" && \
    grep -q "^search: .* fit 80.00 GiB per device; " "$tmp/out" || failed "--no-reserve: none"
run plan "$l8b" --to 128k --tp 8 --cp 4 --memory 40G
check "--memory without --reserve: none" grep -q "^layout:  TP 8 x CP 4 .*; budget 40.00 GiB; throughput" "$tmp/out"
run plan "$l8b" --to 128k --tp 8 --cp 4 --memory 40G --reserve 2G --json
[ "$(rc)" -eq 0 ] && python3 -c "
import json, sys
p = json.load(open('$tmp/out'))
sys.exit(not (p['layout']['reserve'] == 2 * 2**30 and all(s['memory']['total'] <= 38 * 2**30 for s in p['stages'])))" ||
    failed "--memory 40G --reserve 2G: the stages fit 38 GiB"
run plan "$l8b" --to 128k --reserve 2G
[ "$(rc)" -eq 2 ] && \
    grep -q "flag --reserve: the reserve is kept out of a memory budget, and none was given" "$tmp/err" &&
    one_line_err ||
    failed "--reserve without a budget: exit 2, says so"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --reserve 80G
[ "$(rc)" -eq 2 ] && \
    grep -q "flag --reserve: 80.00 GiB leaves nothing of the 80.00 GiB budget per device" "$tmp/err" ||
    failed "--reserve of the whole budget: exit 2"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --reserve 1G --no-reserve
[ "$(rc)" -eq 2 ] && \
    grep -q "flags --reserve and --no-reserve: give one" "$tmp/err" || failed "--reserve and --no-reserve: exit 2"
bad_flag "--reserve '3X' is not a positive size" plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --reserve 3X
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --tp 4
check "search --tp 4: kept" grep -q "^layout:  TP 4 x CP [12] x DP [12]," "$tmp/out"
check "search --tp 4: two layouts" grep -q "^search: 2 layouts of 8 devices" "$tmp/out"
# distributed saved activations (docs/parallel.md): a recomputed layer stores H / TP of its input, plus one
# shared [T, H]: at TP 2 with all 32 layers recomputed, the activations drop by 16 x what the workspace gains
run plan "$l8b" --to 128k --tp 2 --cp 4 --json
cp "$tmp/out" "$tmp/whole.json"
run plan "$l8b" --to 128k --tp 2 --cp 4 --json --distribute-saved-activations
check "distributed: exit 0" [ "$(rc)" -eq 0 ]
check "distributed: in the layout" bash -c "tr -d ' \n' <'$tmp/out' | grep -q '\"distribute_saved\":true'"
check "distributed: activations -16 x (workspace +) of the whole plan" python3 -c "
import json, sys
w = json.load(open('$tmp/whole.json'))['stages'][-1]['memory']
d = json.load(open('$tmp/out'))['stages'][-1]['memory']
saved, extra = w['activations'] - d['activations'], d['workspace'] - w['workspace']
sys.exit(not (extra > 0 and abs(saved - 16 * extra) <= 1e-9 * saved and w['total'] - d['total'] == saved - extra))"
# (all of the 80 GB: with the default reserve's 3 GiB less, TP 4 x CP 2 with the inputs whole wins, distributed
# the runner-up)
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --host-memory 1GB --no-sequence-parallel --no-zero1 --no-reserve
check "search, 1 GB of host memory: distributed chosen" grep -q "^chosen: .*, saved activations distributed:" "$tmp/out"
check "search, 1 GB of host memory: said tried" grep -q "saved activations whole or distributed over TP" "$tmp/out"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --host-memory 1GB --no-distribute-saved-activations \
    --no-sequence-parallel
check "search --no-distribute-saved-activations: said" grep -q "saved activations whole;" "$tmp/out"
check "search --no-distribute-saved-activations: never chosen" lacks 'activations distributed' "$tmp/out"
# a budget with TP and no search: the faster of the plans that fit; 8B to 128k at TP 8 x CP 4 fits 25 GB
# only with the inputs distributed or sequence parallel (every layer recomputing needs more than 25 GB with them
# whole), with the moments whole (--no-zero1: ZeRO-1 over CP 4 frees 2.6 GiB, below)
run plan "$l8b" --to 128k --tp 8 --cp 4 --memory 25G --no-sequence-parallel --no-zero1
[ "$(rc)" -eq 0 ] && \
    grep -q "^layout:  TP 8 x CP 4 .*saved activations distributed" "$tmp/out" ||
    failed "--memory 25G: fits, distributed ($(head -c 300 "$tmp/err"))"
run plan "$l8b" --to 128k --tp 8 --cp 4 --memory 25G --no-distribute-saved-activations --no-sequence-parallel \
    --no-zero1
[ "$(rc)" -eq 1 ] && \
    grep -q "stage 128k needs .* (0 keep, 32 recompute, .* CP 4), above the budget 25.00 GiB" "$tmp/err" ||
    failed "--memory 25G, rows whole: does not fit"
run plan "$l8b" --to 128k --tp 8 --cp 4 --memory 25G --no-distribute-saved-activations --no-zero1
[ "$(rc)" -eq 0 ] && \
    grep -q "^layout:  TP 8 x CP 4 .*MLP tile none, sequence parallel;" "$tmp/out" ||
    failed "--memory 25G --no-distribute-saved-activations: fits, sequence parallel"
run plan "$l8b" --to 128k --tp 8 --cp 4 --memory 20G --no-sequence-parallel --no-zero1
check "--memory 20G: the smaller need, distributed" grep -q "CP 4, saved activations distributed over TP), above" "$tmp/err"
run plan "$l8b" --to 128k --tp 8 --cp 4 --memory 20G --no-zero1
check "--memory 20G, sequence parallelism tried: the smaller need, sequence parallel" \
    grep -q "CP 4, sequence parallel), above" "$tmp/err"
run plan "$l8b" --to 128k --tp 8 --sequence-parallel --no-sequence-parallel
[ "$(rc)" -eq 2 ] && grep -q "give one" "$tmp/err" || failed "both sequence-parallel flags: exit 2"
run plan "$l8b" --to 128k --tp 8 --sequence-parallel --distribute-saved-activations
[ "$(rc)" -eq 2 ] && \
    grep -q "already keeps only each TP rank's rows" "$tmp/err" && one_line_err ||
    failed "--sequence-parallel --distribute-saved-activations: exit 2, says why"
run plan "$l8b" --to 128k --sequence-parallel
[ "$(rc)" -eq 2 ] && \
    grep -q "split over TP ranks, .* without --tp 2" "$tmp/err" ||
    failed "--sequence-parallel without TP: exit 2, says why"
run plan "$l8b" --to 128k --tp 2 --cp 4 --json --sequence-parallel
check "--sequence-parallel: in the layout" bash -c "tr -d ' \n' <'$tmp/out' | grep -q '\"sequence_parallel\":true'"
check "--sequence-parallel: activations per layer as the memory model's" python3 -c "
import json, sys
w = json.load(open('$tmp/whole.json'))['stages'][-1]['memory']
q = json.load(open('$tmp/out'))['stages'][-1]['memory']
sys.exit(not (q['activations'] < w['activations'] and q['workspace'] > w['workspace'] and q['total'] < w['total']))"
# ZeRO-1 (docs/parallel.md "Data parallelism"): the AdamW moments and the bf16 model's fp32 master sharded over
# CP x DP; on with a budget, off without one unless --zero1; 1/(CP x DP) of them plus the exchange scratch, 2 x 2^22
# floats
run plan "$l8b" --to 128k --tp 2 --cp 4 --json
check "no budget: ZeRO-1 off" bash -c "tr -d ' \n' <'$tmp/out' | grep -q '\"zero1\":false'"
cp "$tmp/out" "$tmp/z0.json"
run plan "$l8b" --to 128k --tp 2 --cp 4 --json --zero1
check "--zero1: in the layout" bash -c "tr -d ' \n' <'$tmp/out' | grep -q '\"zero1\":true'"
# (ZeRO-1's exchange scratch replaces the unsharded sum's, (4 + 1) x 2^20 / 4 floats)
check "--zero1: a quarter of the moments and the master, 32 MiB of exchange scratch, nothing else" python3 -c "
import json, sys
w = json.load(open('$tmp/z0.json'))['stages'][-1]['memory']
z = json.load(open('$tmp/out'))['stages'][-1]['memory']
same = all(z[k] == w[k] for k in ('weights', 'grads', 'activations', 'logits', 'cp_buffers'))
quarter = z['optimizer'] == w['optimizer'] / 4 and z['master'] == w['master'] / 4
sys.exit(not (same and quarter and z['workspace'] - w['workspace'] == 2 * 4 * 2**22 - 4 * 5 * 2**18))"
run plan "$l8b" --to 128k --tp 8 --cp 4 --memory 25G --no-distribute-saved-activations --no-sequence-parallel
[ "$(rc)" -eq 0 ] && \
    grep -q "^layout:  TP 8 x CP 4 .*MLP tile none, ZeRO-1;" "$tmp/out" && \
    grep -q "adam [0-9.]* GiB (1/4, ZeRO-1)" "$tmp/out" ||
    failed "--memory 25G, rows whole, ZeRO-1 by default: fits (it did not with the moments whole)"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --json
cp "$tmp/out" "$tmp/sz.json"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --json --no-zero1
check "search: ZeRO-1 wherever CP x DP > 1, never with --no-zero1, and never slower" python3 -c "
import json, sys
z, n = json.load(open('$tmp/sz.json'))['search'], json.load(open('$tmp/out'))['search']
ok = all(c['zero1'] == (c['cp'] * c['dp'] > 1) for c in z['candidates'] if c['valid'])
ok &= all(c['zero1'] is False for c in n['candidates'] if c['valid'])
ok &= z['predicted_tokens_per_s'] >= n['predicted_tokens_per_s']
sys.exit(not ok)"
run plan "$l8b" --to 128k --tp 2 --zero1
[ "$(rc)" -eq 2 ] && \
    grep -q "sharded over the CP x DP ranks, and this layout has one" "$tmp/err" && one_line_err ||
    failed "--zero1 on one CP x DP rank: exit 2, says why, one line"
run plan "$l8b" --to 128k --cp 2 --zero1 --no-zero1
[ "$(rc)" -eq 2 ] && grep -q "give one" "$tmp/err" || failed "--zero1 --no-zero1: exit 2"
run "$l8b" --to 128k --tp 2 --cp 2 --zero1 --dry-run
[ "$(rc)" -eq 0 ] && \
    grep -q "^layout:  TP 2 x CP 2 .*, ZeRO-1;" "$tmp/out" ||
    failed "main command --zero1 --dry-run: the layout line says so"
run plan "$l8b" --to 128k --tp 8 --distribute-saved-activations --no-distribute-saved-activations
[ "$(rc)" -eq 2 ] && grep -q "give one" "$tmp/err" || failed "both flags: exit 2"
run plan "$l8b" --to 128k --distribute-saved-activations
check "--distribute-saved-activations without TP: exit 2" [ "$(rc)" -eq 2 ]
check "--distribute-saved-activations without TP: says so" grep -q "split over TP ranks, .* without --tp 2" "$tmp/err"
check "--distribute-saved-activations without TP: one line" one_line_err
run plan "$l8b" --to 128k --gpus 1 --gpu-memory 80G --distribute-saved-activations
[ "$(rc)" -eq 2 ] && \
    grep -q "\-\-gpus 1 has one" "$tmp/err" || failed "--gpus 1 --distribute-saved-activations: exit 2, says why"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80G --tp 1 --distribute-saved-activations
[ "$(rc)" -eq 2 ] && \
    grep -q "\-\-tp 1 has one" "$tmp/err" || failed "--gpus 8 --tp 1 --distribute-saved-activations: exit 2, says why"
# a keep recipe recomputes nothing: the layout does not claim distribution
printf 'name: k\ndefaults: {activation: keep, steps: 10}\nstages:\n  - seq_len: target\n' >"$tmp/keep.yaml"
run plan "$l8b" --to 128k --tp 2 --recipe "$tmp/keep.yaml" --distribute-saved-activations --json
check "keep recipe --distribute-saved-activations: nothing distributed" \
    bash -c "tr -d ' \n' <'$tmp/out' | grep -q '\"distribute_saved\":false'"
# one layer recomputing: distribution saves less than its shared buffer costs, so when neither plan fits the
# error is the whole plan's (the smaller need)
acts="recompute$(printf ', keep%.0s' $(seq 31))"
printf 'name: r1\ndefaults: {activation: [%s], steps: 10}\nstages:\n  - seq_len: target\n' "$acts" >"$tmp/r1.yaml"
run plan "$l8b" --to 128k --tp 2 --cp 4 --recipe "$tmp/r1.yaml" --memory 60G --no-sequence-parallel
check "one recompute layer, nothing fits: exit 1" [ "$(rc)" -eq 1 ]
check "one recompute layer, nothing fits: the whole plan's need" \
    bash -c "grep -q '(31 keep, 1 recompute, .*CP 4), above' '$tmp/err'"
run "$l8b" --to 128k --distribute-saved-activations --dry-run
check "main command --distribute-saved-activations without TP: exit 2" [ "$(rc)" -eq 2 ]
run "$l8b" --to 128k --tp 2 --distribute-saved-activations --dry-run
check "main command --tp 2 --distribute-saved-activations --dry-run: exit 0" [ "$(rc)" -eq 0 ]
check "main command: the layout line says so" grep -q "^layout:  TP 2 .*saved activations distributed" "$tmp/out"
run "$l8b" --to 128k --tp 2 --sequence-parallel --dry-run
[ "$(rc)" -eq 0 ] && \
    grep -q "^layout:  TP 2 .*, sequence parallel;" "$tmp/out" ||
    failed "main command --tp 2 --sequence-parallel --dry-run: the layout line says so"
run "$l8b" --to 128k --sequence-parallel --dry-run
check "main command --sequence-parallel without TP: exit 2" [ "$(rc)" -eq 2 ]
run "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --dry-run
check "main command --gpus --dry-run: exit 0" [ "$(rc)" -eq 0 ]
check "main command --gpus --dry-run: searched" grep -q "^search: 10 layouts of 8 devices" "$tmp/out"
check "main command --gpus on the CPU backend: no CUDA reserve" lacks '^reserve:\|(reserve ' "$tmp/out"
run "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --reserve 8G --dry-run
[ "$(rc)" -eq 0 ] && \
    grep -q "^layout:  .*; budget 80.00 GiB (reserve 8.00 GiB);" "$tmp/out" || failed "main command --reserve 8G: kept"
run "$l8b" --to 128k --reserve 8G --dry-run
[ "$(rc)" -eq 2 ] && \
    grep -q "flag --reserve: the reserve is kept out" "$tmp/err" ||
    failed "main command --reserve without --gpus: exit 2"
run plan "$l8b" --to 16m --gpus 1 --gpu-memory 24GB
check "16m on 1 x 24GB: exit 1" [ "$(rc)" -eq 1 ]
check "16m on 1 x 24GB: says why with the numbers" grep -q "nothing fits 1 device of 24.00 GiB: the smallest layout (TP 1 x CP 1 x DP 1, loss chunk [0-9]*, MLP tile [a-z0-9]*, least-memory policies) needs [0-9.]* TiB per device" "$tmp/err"
check "16m on 1 x 24GB: one line" one_line_err
run plan "$l8b" --to 128k --gpus 8
check "--gpus without --gpu-memory: exit 2" [ "$(rc)" -eq 2 ]
check "--gpus without --gpu-memory: says so" grep -q "flag --gpus: give --gpu-memory SIZE" "$tmp/err"
run plan "$l8b" --to 128k --gpus 8 --gpu-memory 80GB --tp 3
check "--tp 3 with --gpus 8: exit 1" [ "$(rc)" -eq 1 ]
check "--tp 3 with --gpus 8: says so" grep -q "\-\-tp 3 does not divide --gpus 8" "$tmp/err"
bad_flag "--gpus '0' is not an integer in [1, 65536]" plan "$model" --to 1k --gpus 0 --gpu-memory 1G

# attention_mask: document in a stage shows in the table's notes and the JSON; causal elsewhere
printf 'stages:\n  - {seq_len: 512, steps: 10, attention_mask: document}\n  - {seq_len: 1k, steps: 10}\n' \
    >"$tmp/dm.yaml"
run plan "$LCX_SRC/recipes/tiny/model" --to 1k --recipe "$tmp/dm.yaml"
check "document mask: exit 0 ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
[ "$(grep -c '^stage 1:.*; document mask' "$tmp/out")" -eq 1 ] && lacks '^stage 2:.*document mask' "$tmp/out" ||
    failed "document mask: stage 1 says so, stage 2 not"
run plan "$LCX_SRC/recipes/tiny/model" --to 1k --recipe "$tmp/dm.yaml" --json
check "document mask: JSON per stage" [ "$(grep -o '"attention_mask": "[a-z]*"' "$tmp/out" | tr '\n' ' ')" = \
    '"attention_mask": "document" "attention_mask": "causal" ' ]

# the sampler's filter and upsampling in a stage: its notes and JSON; an upsampling without its length refused
printf 'stages:\n  - {seq_len: 512, steps: 10, min_doc_tokens: 256, long_doc_tokens: 1k, long_doc_repeat: 3}\n%s\n' \
    '  - {seq_len: 1k, steps: 10}' >"$tmp/ld.yaml"
run plan "$LCX_SRC/recipes/tiny/model" --to 1k --recipe "$tmp/ld.yaml"
check "long documents: exit 0 ($(head -c 200 "$tmp/err"))" [ "$(rc)" -eq 0 ]
check "long documents: stage 1's notes ($(grep '^stage 1:' "$tmp/out"))" \
    grep -q '^stage 1:.*; documents from 256 tokens; documents of 1k+ tokens drawn 3x' "$tmp/out"
check "long documents: not in stage 2" fails grep -q '^stage 2:.*documents' "$tmp/out"
run plan "$LCX_SRC/recipes/tiny/model" --to 1k --recipe "$tmp/ld.yaml" --json
check "long documents: JSON per stage" [ "$(grep -o '"long_doc_repeat": [0-9]*' "$tmp/out" | tr '\n' ' ')" = \
    '"long_doc_repeat": 3 "long_doc_repeat": 1 ' ]
printf 'stages:\n  - {seq_len: 512, steps: 10, long_doc_repeat: 3}\n' >"$tmp/ld2.yaml"
run plan "$LCX_SRC/recipes/tiny/model" --to 512 --recipe "$tmp/ld2.yaml"
check "long_doc_repeat without long_doc_tokens: exit 1, one line ($(head -c 200 "$tmp/err"))" \
    [ "$(rc)" -eq 1 ]
check "long_doc_repeat without long_doc_tokens: names it" grep -q "long_doc_repeat 3 needs long_doc_tokens" "$tmp/err"

exit $fail
