#!/usr/bin/env bash
# `lcextend inspect` as a command: exit codes, usage errors naming the flag, one-line errors, --json output, and
# on each fixture model (tests/fixtures/models/<name>, when present) a few numbers compared with the
# expected_inspect.json transformers wrote (the full field-by-field comparison is tests/unit/test_catalog.c).
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ok="$LCX_SRC/tests/attack/config/ok_tiny_llama"

run inspect --help
check "--help exits 0" [ "$(rc)" -eq 0 ]
check "--help shows usage and examples" grep -q "examples:" "$tmp/out"
run --help
check "top-level help lists inspect" grep -q "inspect" "$tmp/out"

run inspect
check "no PATH: exit 2" [ "$(rc)" -eq 2 ]
check "no PATH: says so" grep -q "missing PATH" "$tmp/err"
run inspect "$ok" --frobnicate
check "unknown flag: exit 2" [ "$(rc)" -eq 2 ]
check "unknown flag: named" grep -q "unknown flag '--frobnicate'" "$tmp/err"
check "unknown flag: one line" one_line_err
run inspect "$ok" "$ok"
check "two paths: exit 2" [ "$(rc)" -eq 2 ]
run inspect /nonexistent/model
check "missing path: exit 1" [ "$(rc)" -eq 1 ]
check "missing path: one line naming it" grep -q "/nonexistent/model" "$tmp/err"
check "missing path: one line" one_line_err

# text output of a valid tiny llama (V=8 H=4 F=8 L=1 heads 2 kv 1): parameters by hand = 220
run inspect "$ok"
check "ok dir: exit 0" [ "$(rc)" -eq 0 ]
check "ok dir: arch" grep -q "^arch: *llama (LlamaForCausalLM)" "$tmp/out"
check "ok dir: parameters" grep -q "^parameters: *220 " "$tmp/out"
check "ok dir: heads" grep -q "^heads / kv heads: *2 / 1" "$tmp/out"
check "ok dir: nothing on stderr" [ ! -s "$tmp/err" ]
run inspect "$ok" --json
check "--json: exit 0" [ "$(rc)" -eq 0 ]
check "--json: one object" bash -c "head -c1 '$tmp/out' | grep -q '{' && tail -n1 '$tmp/out' | grep -q '^}$'"
check "--json: num_parameters" grep -q '^  "num_parameters": 220,$' "$tmp/out"
check "--json: F32 bytes (220 x 4)" grep -q '"bytes": 880' "$tmp/out"

# a lone .safetensors file without config.json: tensors only
cp "$ok/model.safetensors" "$tmp/lone.safetensors"
run inspect "$tmp/lone.safetensors"
check "lone file: exit 0" [ "$(rc)" -eq 0 ]
check "lone file: tensors only" grep -q "none (tensors only)" "$tmp/out"
check "lone file: lists a tensor" grep -q "model.layers.0.mlp.down_proj.weight *F32 *\[4, 8\]" "$tmp/out"
run inspect "$tmp/lone.safetensors" --json
check "lone file --json: tensor list" grep -q '"tensors": \[' "$tmp/out"

# fixture models: numbers against transformers' expected_inspect.json
field() { # field FILE KEY -> first top-level-ish "KEY": NUMBER value
    grep -m1 -E "^ {1,2}\"$2\": " "$1" | sed -E 's/.*: ([-0-9.e+]+),?$/\1/'
}
n=0
for d in "$LCX_SRC"/tests/fixtures/models/*/; do
    [ -f "$d/expected_inspect.json" ] || continue
    n=$((n + 1))
    run inspect "$d" --json
    name=$(basename "$d")
    check "$name: exit 0 ($(cat "$tmp/err"))" [ "$(rc)" -eq 0 ]
    for key in num_parameters num_hidden_layers hidden_size num_attention_heads num_key_value_heads head_dim \
               intermediate_size vocab_size max_position_embeddings; do
        want=$(field "$d/expected_inspect.json" "$key")
        got=$(field "$tmp/out" "$key")
        check "$name: $key $got != $want" [ -n "$want" -a "$got" = "$want" ]
    done
    run inspect "$d"
    check "$name: text exit 0" [ "$(rc)" -eq 0 ]
done
# flag syntax: "--" ends the flags, a switch takes no value
run inspect --json -- "$ok"
check "-- before PATH: exit 0" [ "$(rc)" -eq 0 ]
check "-- before PATH: JSON" grep -q '"num_parameters": 220' "$tmp/out"
bad_flag "flag --json takes no value, not 'yes'" inspect "$ok" --json=yes
bad_flag "unexpected argument '$ok' (one PATH only)" inspect -- "$ok" "$ok"

echo "inspect: $n fixture models, $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail
