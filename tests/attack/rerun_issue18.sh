#!/usr/bin/env bash
# Issue 18's ten reproductions, rerun: tests/attack/rerun_issue18.sh [LCEXTEND] (default build/lcextend).
# Each line prints the case, the exit code, the number of stderr lines, the wall time and the first stderr line;
# then the harm checks (nothing written where a command was refused, links and existing files untouched, one
# winner of a race, no temporaries after a rerun). Exits 1 when any harm is found. docs/reliability.md records a
# run. The same cases are checked in CI by tests/cli/io_safety.sh and parse_validate.sh.
set -u
S=$(cd "$(dirname "$0")/../.." && pwd)
L=$(realpath "${1:-$S/build/lcextend}")
W=$(mktemp -d /tmp/r2repro.XXXXXX)
cd "$W" || exit 1
M=$S/tests/fixtures/models/llama_gqa
G=$S/tests/fixtures/gguf/llama_tiny.gguf
T=$S/recipes/tiny/model
harm=0
row() { # NAME CMD...: run with a 10 s guard, print rc, stderr lines, seconds, peak RSS, first line
    local name=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    timeout 10 /usr/bin/time -f %M -o mem.txt "$@" >out.txt 2>err.txt
    local rc=$?
    t1=$(date +%s.%N)
    printf '%-44s rc %3d  lines %d  %5.2f s  %4d MB  %s\n' "$name" "$rc" "$(wc -l <err.txt)" \
        "$(echo "$t1 - $t0" | bc)" "$(($(tail -n 1 mem.txt) / 1024))" "$(head -c 150 err.txt)"
}
bad() { echo "HARM: $*"; harm=1; }

$L import "$T" --out ok.lcx >/dev/null 2>&1 || bad "import tiny"
$L import "$M" --out gqa.lcx >/dev/null 2>&1 || bad "import gqa"

# 1. FIFO manifest
mkdir f.lcx && mkfifo f.lcx/manifest.json
row "1 FIFO manifest: verify" $L verify f.lcx
row "1 FIFO manifest: export hf" $L export f.lcx --format hf --out f1
row "1 FIFO manifest: reshard" $L reshard f.lcx --out f2
[ -e f1 ] || [ -e f2 ] && bad "1: output written"

# 2. recipe of 100,000 [
python3 -c "print('[' * 100000)" >deep.yaml
row "2 recipe of 100,000 [: plan" $L plan "$M" --to 512 --recipe deep.yaml

# 3. tokenizer.json id 2^27
python3 - "$T/tokenizer.json" big.json <<'EOF'
import json, sys
t = json.load(open(sys.argv[1])); t["model"]["vocab"]["zzz-unused"] = 2 ** 27; json.dump(t, open(sys.argv[2], "w"))
EOF
echo "hello world" >in.txt
row "3 tokenizer id 2^27: tokenize" $L tokenize --tokenizer big.json --input in.txt --output big
[ -e big.bin ] || [ -e big.idx ] && bad "3: output written"

# 4. GGUF export: a file appearing at --out; two concurrent exports
$L export ok.lcx --format gguf --out race.gguf >/dev/null 2>e1 & p1=$!
$L export ok.lcx --format gguf --out race.gguf >/dev/null 2>e2 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "4 two concurrent GGUF exports to one path:   rc $r1 and $r2: $(cat e1 e2 | head -c 150)"
[ $((r1 == 0)) -eq $((r2 == 0)) ] && bad "4: not exactly one winner"
caught=0
for i in $(seq 1 20); do
    $L export ok.lcx --format gguf --out ap$i.gguf >/dev/null 2>ap.err & p=$!
    while kill -0 $p 2>/dev/null && ! compgen -G "ap$i.gguf.tmp-*" >/dev/null; do :; done
    if (set -C; echo mine >ap$i.gguf) 2>/dev/null; then
        wait $p; r=$?
        [ $r -ne 0 ] && caught=$((caught + 1)) && [ "$(cat ap$i.gguf)" != mine ] && bad "4: appearing file replaced"
        [ $r -eq 0 ] && [ "$(cat ap$i.gguf)" = mine ] && bad "4: export says ok but the file is not its"
    else wait $p; fi
    [ $caught -ge 1 ] && break
done
echo "4 a file appearing at --out during GGUF export: caught $caught in $i trials: $(head -c 150 ap.err)"

# 5. tokenize over an existing PREFIX.bin / a symlink at PREFIX.idx
echo keep >ds.bin
row "5 tokenize over PREFIX.bin" $L tokenize --tokenizer "$T/tokenizer.json" --input in.txt --output ds
[ "$(cat ds.bin)" = keep ] || bad "5: ds.bin replaced"
rm ds.bin; echo victim >victim; ln -s victim ds.idx
row "5 tokenize over a symlink at PREFIX.idx" $L tokenize --tokenizer "$T/tokenizer.json" --input in.txt --output ds
[ "$(cat victim)" = victim ] && [ -L ds.idx ] || bad "5: link replaced or followed"

# 6. symlink leak
cp -r ok.lcx leak.lcx && ln -sf /etc/passwd leak.lcx/tokenizer.json
row "6 tokenizer.json -> /etc/passwd: verify" $L verify leak.lcx
row "6 tokenizer.json -> /etc/passwd: export hf" $L export leak.lcx --format hf --out leak-hf
row "6 tokenizer.json -> /etc/passwd: export gguf" $L export leak.lcx --format gguf --out leak.gguf
row "6 tokenizer.json -> /etc/passwd: reshard" $L reshard leak.lcx --out leak2.lcx
[ -e leak-hf ] || [ -e leak.gguf ] || [ -e leak2.lcx ] && bad "6: output written"
cp -r ok.lcx dlink.lcx && d=$(ls dlink.lcx | grep '^data-' | tail -1) && mv dlink.lcx/$d outside.bin &&
    ln -s "$W/outside.bin" dlink.lcx/$d
row "6 data file symlinked out: verify" $L verify dlink.lcx
row "6 data file symlinked out: reshard" $L reshard dlink.lcx --out dl2.lcx

# 7. kill -9 during reshard and export, then a rerun: no OUT.tmp-*
for c in reshard export; do
    killed=0
    for i in $(seq 1 20); do
        o=k-$c$i
        if [ $c = reshard ]; then $L reshard ok.lcx --out $o --max-memory 1 --threads 1 >/dev/null 2>&1 & p=$!
        else $L export ok.lcx --format hf --out $o >/dev/null 2>&1 & p=$!; fi
        while kill -0 $p 2>/dev/null && ! compgen -G "$o.tmp-*" >/dev/null; do :; done
        kill -9 $p 2>/dev/null; wait $p 2>/dev/null
        compgen -G "$o.tmp-*" >/dev/null || continue
        killed=$((killed + 1)); rm -rf $o
        if [ $c = reshard ]; then $L reshard ok.lcx --out $o >/dev/null 2>&1; else $L export ok.lcx --format hf --out $o >/dev/null 2>&1; fi
        compgen -G "$o.tmp-*" >/dev/null && bad "7: $c rerun left $o.tmp-*"
        [ $killed -ge 5 ] && break
    done
    echo "7 kill -9 during $c then a rerun:            $killed kills mid-run, litter after the rerun: $(ls -d k-$c*.tmp-* 2>/dev/null | wc -l)"
done

# 8. verify/reshard on checkpoints that cannot load
mut() { cp -r gqa.lcx "$1.lcx"; python3 -c "
import json; m = json.load(open('$1.lcx/manifest.json')); $2
json.dump(m, open('$1.lcx/manifest.json', 'w'))"; }
mut heads0 "m['model_config']['num_attention_heads'] = 0"
mut hidden "m['model_config']['hidden_size'] = 2 ** 40"
mut missing "m['tensors'] = [t for t in m['tensors'] if t['name'] != 'model.norm.weight']"
mut reshaped "t = [t for t in m['tensors'] if t['name'] == 'lm_head.weight'][0]
t['shape'] = [t['shape'][0] * 2, t['shape'][1] // 2]
for p in t['pieces']: p['box'] = list(t['shape'])"
for n in heads0 hidden missing reshaped; do
    row "8 $n: verify" $L verify $n.lcx
    row "8 $n: reshard" $L reshard $n.lcx --out $n-r.lcx --tp 2
    [ -e $n-r.lcx ] && bad "8: reshard wrote $n-r.lcx"
done

# 9. GGUF metadata
for kv in llama.attention.layer_norm_rms_epsilon=f32:nan llama.rope.freq_base=f32:nan llama.rope.freq_base=f32:-10000 \
          llama.rope.dimension_count=u32:7 tokenizer.ggml.bos_token_id=u32:4000000000 tokenizer.ggml.eos_token_id=u32:64; do
    python3 "$S/tests/attack/gguf_set.py" "$G" bad.gguf "$kv"
    rm -rf bad.lcx
    row "9 GGUF $kv: import" $L import bad.gguf --out bad.lcx
    [ -e bad.lcx ] && bad "9: import wrote bad.lcx"
done

# 10. odd tokenizer_files entries
for e in manifest.json data dup; do
    cp -r ok.lcx tf-$e.lcx
    python3 -c "
import json; m = json.load(open('tf-$e.lcx/manifest.json'))
e = '$e'
m['tokenizer_files'].append(m['files'][0]['name'] if e == 'data' else m['tokenizer_files'][0] if e == 'dup' else e)
json.dump(m, open('tf-$e.lcx/manifest.json', 'w'))"
    row "10 tokenizer_files + $e: verify" $L verify tf-$e.lcx
    row "10 tokenizer_files + $e: export hf" $L export tf-$e.lcx --format hf --out tf-$e-hf
    row "10 tokenizer_files + $e: reshard" $L reshard tf-$e.lcx --out tf-$e-r.lcx
    [ -e tf-$e-hf ] || [ -e tf-$e-r.lcx ] && bad "10: output written"
done

ls -d *.tmp-* 2>/dev/null && bad "temporaries left in the work directory"
echo "harm: $([ $harm = 0 ] && echo none || echo FOUND)"
cd / && rm -rf "$W"
exit $harm
