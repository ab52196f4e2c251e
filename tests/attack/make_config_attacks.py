#!/usr/bin/env python3
"""Broken Hugging Face model directories for `lcextend inspect` (config.json and tensor-vs-config attacks).

Writes tests/attack/config/<case>/ (config.json and, where the case needs tensors, a hand-built
model.safetensors) and tests/attack/config/EXPECTED.tsv: `case <TAB> substring` — the one-line error must
contain the substring (it names the file/key/tensor). Cases named ok_* must be accepted (exit 0).
Stdlib only (CI never runs this; the outputs are committed). Run: python3 tests/attack/make_config_attacks.py
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "config")

# llama V=8 H=4 F=8 L=1 heads 2 kv 1 (head_dim 2)
BASE = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 8,
    "hidden_size": 4,
    "intermediate_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-05,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}

DT = {"F32": ("<f", 4), "BF16": (None, 2), "I32": ("<i", 4)}


def llama_tensors(cfg, dtype="F32"):
    """(name, dtype, shape) of every tensor docs/formats.md lists for this config."""
    V, H, F = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    nh = cfg["num_attention_heads"]
    ng = cfg.get("num_key_value_heads") or nh
    d = cfg.get("head_dim") or H // nh
    t = [("model.embed_tokens.weight", dtype, [V, H])]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t += [
            (p + "input_layernorm.weight", dtype, [H]),
            (p + "self_attn.q_proj.weight", dtype, [nh * d, H]),
            (p + "self_attn.k_proj.weight", dtype, [ng * d, H]),
            (p + "self_attn.v_proj.weight", dtype, [ng * d, H]),
            (p + "self_attn.o_proj.weight", dtype, [H, nh * d]),
            (p + "post_attention_layernorm.weight", dtype, [H]),
            (p + "mlp.gate_proj.weight", dtype, [F, H]),
            (p + "mlp.up_proj.weight", dtype, [F, H]),
            (p + "mlp.down_proj.weight", dtype, [H, F]),
        ]
    t.append(("model.norm.weight", dtype, [H]))
    if not cfg.get("tie_word_embeddings"):
        t.append(("lm_head.weight", dtype, [V, H]))
    return t


def values(name, n, seed=0):
    """Deterministic small values (exact in bf16) from the tensor name."""
    h = sum(ord(c) for c in name) + seed
    return [((h + 7 * k) % 17 - 8) * 0.25 for k in range(n)]


def encode(dtype, vals):
    if dtype == "F32":
        return struct.pack("<%df" % len(vals), *vals)
    if dtype == "I32":
        return struct.pack("<%di" % len(vals), *[int(v * 4) for v in vals])
    if dtype == "BF16":
        out = b""
        for v in vals:
            out += struct.pack("<f", v)[2:4]  # exact: values are multiples of 0.25 in [-2, 2]
        return out
    raise ValueError(dtype)


def safetensors_bytes(tensors, override=None):
    """tensors: list of (name, dtype, shape[, seed]); override: name -> raw data bytes."""
    header = {"__metadata__": {"format": "pt"}}
    data = b""
    for t in tensors:
        name, dtype, shape = t[:3]
        seed = t[3] if len(t) > 3 else 0
        n = 1
        for s in shape:
            n *= s
        raw = (override or {}).get(name) or encode(dtype, values(name, n, seed))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


CASES = []  # (name, expected substring)


def case(name, expect, config=None, config_text=None, tensors=None, files=None):
    d = os.path.join(OUT, name)
    os.makedirs(d)
    if config_text is not None:
        with open(os.path.join(d, "config.json"), "wb") as f:
            f.write(config_text if isinstance(config_text, bytes) else config_text.encode())
    elif config is not None:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
    if tensors is not None:
        with open(os.path.join(d, "model.safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensors))
    for fname, blob in (files or {}).items():
        with open(os.path.join(d, fname), "wb") as f:
            f.write(blob)
    CASES.append((name, expect))


def cfg(**changes):
    c = dict(BASE)
    for k, v in changes.items():
        if v is DELETE:
            c.pop(k, None)
        else:
            c[k] = v
    return c


DELETE = object()


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    good = llama_tensors(BASE)

    # accepted
    case("ok_tiny_llama", "", config=BASE, tensors=good)
    tied = cfg(tie_word_embeddings=True)
    case("ok_tied_lm_head_equal", "", config=tied,
         tensors=llama_tensors(tied) + [("lm_head.weight", "BF16", [8, 4])],
         )
    # lm_head above must equal the embedding: rebuild with the embedding's values under the lm_head name
    emb_vals = values("model.embed_tokens.weight", 32)
    with open(os.path.join(OUT, "ok_tied_lm_head_equal", "model.safetensors"), "wb") as f:
        f.write(safetensors_bytes(llama_tensors(tied) + [("lm_head.weight", "BF16", [8, 4])],
                                  override={"lm_head.weight": encode("BF16", emb_vals)}))

    # config.json: structure and types
    case("missing_vocab_size", "required key 'vocab_size' is missing", config=cfg(vocab_size=DELETE))
    case("missing_model_type", "required key 'model_type' is missing",
         config=cfg(model_type=DELETE, architectures=DELETE))
    case("string_hidden_size", "key 'hidden_size': expected an integer, got a string", config=cfg(hidden_size="4"))
    case("real_num_layers", "key 'num_hidden_layers': expected an integer, got a real number",
         config=cfg(num_hidden_layers=1.0))
    case("negative_hidden_size", "key 'hidden_size': must be positive", config=cfg(hidden_size=-4))
    case("zero_vocab", "key 'vocab_size': must be positive", config=cfg(vocab_size=0))
    case("huge_layers", "key 'num_hidden_layers': 1000000000000 is larger than the supported maximum",
         config=cfg(num_hidden_layers=10**12))
    case("huge_hidden", "key 'hidden_size': 9223372036854775807 is larger", config=cfg(hidden_size=2**63 - 1))
    case("integer_overflow", "invalid JSON at line", config_text='{"model_type": "llama", "vocab_size": 1' + "0" * 30 + "}")
    case("heads_not_dividing_hidden", "key 'hidden_size': 4 is not divisible by num_attention_heads 3",
         config=cfg(num_attention_heads=3, num_key_value_heads=1))
    case("kv_heads_not_dividing_heads", "key 'num_key_value_heads': 3 does not divide num_attention_heads 2",
         config=cfg(num_key_value_heads=3))
    case("zero_head_dim", "key 'head_dim': must be positive", config=cfg(head_dim=0))
    case("unknown_model_type", "key 'model_type': unsupported architecture 'gpt2' (supported: llama",
         config=cfg(model_type="gpt2", architectures=DELETE))
    case("model_type_newline", "key 'model_type': unsupported architecture 'llama?lcextend: fake second line'",
         config=cfg(model_type="llama\nlcextend: fake second line", architectures=DELETE))
    case("unknown_architectures", "key 'architectures': unsupported architecture 'GPT2LMHeadModel'",
         config=cfg(architectures=["GPT2LMHeadModel"]))
    case("architecture_mismatch", "key 'architectures': Qwen2ForCausalLM does not match model_type 'llama'",
         config=cfg(architectures=["Qwen2ForCausalLM"]))
    case("architectures_not_list", "key 'architectures': expected an array", config=cfg(architectures="LlamaForCausalLM"))
    case("hidden_act_gelu", "key 'hidden_act': activation 'gelu' is not supported", config=cfg(hidden_act="gelu"))
    case("mistral_active_sliding_window", "key 'sliding_window': sliding-window attention (window 16 < max_position_embeddings 64)",
         config=cfg(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=16))
    case("mistral_default_sliding_window", "key 'sliding_window': sliding-window attention (window 4096",
         config=cfg(model_type="mistral", architectures=["MistralForCausalLM"], max_position_embeddings=32768))
    case("qwen2_use_sliding_window", "key 'sliding_window'",
         config=cfg(model_type="qwen2", architectures=["Qwen2ForCausalLM"], use_sliding_window=True,
                    sliding_window=32, max_window_layers=0))
    case("tie_word_embeddings_int", "key 'tie_word_embeddings': expected true or false", config=cfg(tie_word_embeddings=1))
    case("rms_norm_eps_string", "key 'rms_norm_eps': expected a number, got a string", config=cfg(rms_norm_eps="1e-5"))
    case("rms_norm_eps_negative", "key 'rms_norm_eps': must be positive", config=cfg(rms_norm_eps=-1e-5))
    case("torch_dtype_int8", "key 'torch_dtype': unsupported dtype 'int8'", config=cfg(torch_dtype="int8"))
    case("eos_string", "key 'eos_token_id': expected an integer or a list", config=cfg(eos_token_id="</s>"))
    case("eos_too_many", "key 'eos_token_id': 40 ids", config=cfg(eos_token_id=list(range(40))))
    case("rope_scaling_string", "key 'rope_scaling': expected an object or null, got a string",
         config=cfg(rope_scaling="yarn"))
    case("rope_scaling_list", "key 'rope_scaling': expected an object or null, got an array", config=cfg(rope_scaling=[4]))
    case("rope_parameters_number", "key 'rope_parameters': expected an object or null", config=cfg(rope_parameters=4))
    case("rope_factor_string", "key 'rope_scaling.factor': expected a number, got a string",
         config=cfg(rope_scaling={"rope_type": "yarn", "factor": "4"}))
    case("rope_type_alias_conflict", "key 'rope_scaling.type': 'linear' disagrees with rope_type 'yarn'",
         config=cfg(rope_scaling={"rope_type": "yarn", "type": "linear", "factor": 4.0}))
    case("rope_theta_string", "key 'rope_theta': expected a number", config=cfg(rope_theta="10000"))
    case("rope_long_factor_too_long", "key 'rope_scaling.long_factor': 2000 entries",
         config=cfg(rope_scaling={"rope_type": "longrope", "long_factor": [1.0] * 2000, "short_factor": [1.0]}))
    case("rope_original_max_real", "key 'rope_parameters.original_max_position_embeddings': expected an integer",
         config=cfg(rope_parameters={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32.5}))

    # config.json: syntax
    case("invalid_json_trailing_comma", "invalid JSON at line 3, column",
         config_text='{\n  "model_type": "llama",\n  "vocab_size": 8,,\n}\n')
    case("invalid_json_truncated", "invalid JSON at line", config_text='{"model_type": "llama", "vocab_si')
    case("duplicate_key", "duplicate object key",
         config_text='{"model_type": "llama", "vocab_size": 8, "vocab_size": 16}')
    case("empty_config", "invalid JSON at line", config_text="")
    case("config_not_object", "expected a JSON object at the top level, got an array", config_text="[1, 2, 3]")
    case("config_not_utf8", "invalid JSON", config_text=b'{"model_type": "ll\xff\xfeama"}')
    case("config_nul_in_string", "invalid JSON", config_text=b'{"model_type": "llama\\u0000x"}')
    case("deep_nesting", "invalid JSON", config_text='{"x": ' + "[" * 5000 + "]" * 5000 + "}")
    case("nan_literal", "invalid JSON", config_text='{"model_type": "llama", "rms_norm_eps": NaN}')
    case("no_config_json", "config.json is missing", tensors=good)

    # tensors against the config
    case("tensor_missing", "1 missing: model.layers.0.self_attn.q_proj.weight", config=BASE,
         tensors=[t for t in good if t[0] != "model.layers.0.self_attn.q_proj.weight"])
    case("tensor_many_missing", "missing: model.embed_tokens.weight, model.layers.0.input_layernorm.weight, "
         "model.layers.0.self_attn.q_proj.weight, model.layers.0.self_attn.k_proj.weight (+8 more)",
         config=BASE, tensors=[("unrelated.weight", "F32", [2])])
    case("tensor_misshaped", "1 wrong shape: model.layers.0.mlp.down_proj.weight [8, 4] (expected [4, 8])", config=BASE,
         tensors=[(n, d, [8, 4] if n.endswith("down_proj.weight") else s) for n, d, s in good])
    case("tensor_extra", "1 unexpected: model.layers.1.input_layernorm.weight", config=BASE,
         tensors=good + [("model.layers.1.input_layernorm.weight", "F32", [4])])
    case("tensor_bias_unexpected", "1 unexpected: model.layers.0.self_attn.q_proj.bias", config=BASE,
         tensors=good + [("model.layers.0.self_attn.q_proj.bias", "F32", [4])])
    case("tensor_name_newline", "1 unexpected: model.norm.weight?fake line", config=BASE,
         tensors=good + [("model.norm.weight\nfake line", "F32", [4])])
    case("tensor_wrong_dtype_i32", "not a float dtype: model.norm.weight I32", config=BASE,
         tensors=[(n, "I32" if n == "model.norm.weight" else d, s) for n, d, s in good])
    case("tied_lm_head_different", "tensor 'lm_head.weight': present while tie_word_embeddings is true, but differs",
         config=tied, tensors=llama_tensors(tied) + [("lm_head.weight", "F32", [8, 4], 1)])
    case("tied_lm_head_misshaped", "lm_head.weight [4, 8] (tied: expected [8, 4])", config=tied,
         tensors=llama_tensors(tied) + [("lm_head.weight", "F32", [4, 8])])
    qwen2 = cfg(model_type="qwen2", architectures=["Qwen2ForCausalLM"])
    case("qwen2_missing_biases", "3 missing: model.layers.0.self_attn.q_proj.bias", config=qwen2, tensors=good)
    qwen3 = cfg(model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=8)
    case("qwen3_head_dim_ignored", "wrong shape: model.layers.0.self_attn.q_proj.weight [4, 4] (expected [16, 4])",
         config=qwen3, tensors=good + [("model.layers.0.self_attn.q_norm.weight", "F32", [8]),
                                       ("model.layers.0.self_attn.k_norm.weight", "F32", [8])])
    blob = safetensors_bytes(good)
    case("safetensors_truncated", "model.safetensors", config=BASE, files={"model.safetensors": blob[:-3]})
    index = {"metadata": {"total_size": 0},
             "weight_map": {n: "model-00001-of-00002.safetensors" for n, _, _ in good}}
    index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors"
    case("index_names_missing_shard", "model-00002-of-00002.safetensors", config=BASE,
         files={"model.safetensors.index.json": json.dumps(index).encode(),
                "model-00001-of-00002.safetensors": safetensors_bytes([t for t in good if t[0] != "model.norm.weight"])})

    with open(os.path.join(OUT, "EXPECTED.tsv"), "w") as f:
        f.write("# case\texpected substring of the one-line error (empty: must succeed)\n")
        for name, expect in CASES:
            f.write(f"{name}\t{expect}\n")
    print(f"wrote {len(CASES)} cases into {OUT}")


if __name__ == "__main__":
    main()
