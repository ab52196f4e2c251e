#!/usr/bin/env python3
"""Seed corpora for the libFuzzer targets that had none, made from the repository's fixtures (small files, a few
KB each). Run from the source tree after a build; writes tests/fuzz/corpus/<target>/ (existing seeds are kept):

    python3 tests/fuzz/make_seeds.py [build/lcextend]

lcx_manifest   manifests of an import of tests/fixtures/models/llama_gqa (compacted), and a small one rewritten to
               point into the 4 KiB data file that fuzz_lcx_manifest writes (raw and zstd pieces, several dtypes)
recipe         the shipped recipes and a few of tests/attack/recipes
tokenizer      texts to encode (lines of tests/fixtures/tokenizer/cli_input.txt, odd UTF-8) and small tokenizer.json
tokenizer_json the fixture tokenizers cut down to their first ids (vocabulary, merges, added tokens below K)
tokdata        fuzz_tokdata's framing (u32 .idx length, .idx, .bin) of tests/fixtures/tokdata/u16 and of small
               hand-built indexes (every dtype, empty documents, a multimodal tail)
zstream        fuzz_zstream's framing (a byte: kind and read size, then the file) of small zstd files (one frame,
               two frames; made with the zstd tool) and gzip files (one member, two; Python's gzip)
"""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(SRC, "tests", "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def manifest_seeds(lcextend):
    tmp = tempfile.mkdtemp()
    try:
        out = os.path.join(tmp, "g.lcx")
        subprocess.run([lcextend, "import", os.path.join(SRC, "tests/fixtures/models/llama_gqa"), "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "manifest.json")) as f:
            m = json.load(f)
    finally:
        shutil.rmtree(tmp)
    m["saved_at_ns"] = 0
    put("lcx_manifest", "import_llama_gqa.json", compact(m))
    # A one-layer model whose pieces lie inside fuzz_lcx_manifest's 4 KiB data-0.bin.
    cfg = dict(m["model_config"], hidden_size=4, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
               num_key_value_heads=1, head_dim=2, vocab_size=8, bos_token_id=1, eos_token_id=2)
    shapes = [("model.embed_tokens.weight", [8, 4]), ("model.layers.0.input_layernorm.weight", [4]),
              ("model.layers.0.self_attn.q_proj.weight", [4, 4]), ("model.layers.0.self_attn.k_proj.weight", [2, 4]),
              ("model.layers.0.self_attn.v_proj.weight", [2, 4]), ("model.layers.0.self_attn.o_proj.weight", [4, 4]),
              ("model.layers.0.post_attention_layernorm.weight", [4]),
              ("model.layers.0.mlp.gate_proj.weight", [8, 4]), ("model.layers.0.mlp.up_proj.weight", [8, 4]),
              ("model.layers.0.mlp.down_proj.weight", [4, 8]), ("model.norm.weight", [4]),
              ("lm_head.weight", [8, 4])]
    for variant, dtype, es in [("f32", "F32", 4), ("bf16", "BF16", 2), ("f16", "F16", 2)]:
        tensors, off = [], 0
        for i, (name, shape) in enumerate(shapes):
            n = es
            for s in shape:
                n *= s
            codec = "zstd" if (variant == "f32" and i % 3 == 2) else "raw"
            piece = {"file": "data-0.bin", "offset": off, "length": n, "codec": codec,
                     "filter": "shuffle" if i % 2 else "none", "raw_length": n, "start": [0] * len(shape),
                     "box": shape, "xxh3": "%016x" % (0x9e3779b97f4a7c15 * (i + 1) % (1 << 64))}
            tensors.append({"name": name, "role": "param", "dtype": dtype, "shape": shape, "pieces": [piece]})
            off += n
        small = {"format": m["format"], "version": m["version"], "saved_at_ns": 0, "layout": m["layout"],
                 "model_config": dict(cfg, dtype={"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[dtype]),
                 "tokenizer_files": ["tokenizer.json"], "files": [{"name": "data-0.bin", "size": 4096}],
                 "tensors": tensors}
        put("lcx_manifest", "small_%s.json" % variant, compact(small))
    # A piece split in two boxes, an optimizer-state role, and the training_state of the import.
    two = json.loads(compact(small))
    t = two["tensors"][0]
    p = t["pieces"][0]
    half = dict(p, box=[4, 4], raw_length=p["raw_length"] // 2, length=p["length"] // 2)
    t["pieces"] = [half, dict(half, start=[4, 0], offset=p["offset"] + half["length"])]
    two["tensors"].append(dict(two["tensors"][1], role="adam_m"))
    if "training_state" in m:
        two["training_state"] = m["training_state"]
    put("lcx_manifest", "small_split_pieces.json", compact(two))


def recipe_seeds():
    for name in ["pi.yaml", "abf.yaml", "yarn-x2.yaml", "llama3-8k-128k.yaml", "tiny-demo.yaml"]:
        with open(os.path.join(SRC, "recipes", name), "rb") as f:
            put("recipe", name, f.read())
    for name in ["longrope_without_lists.yaml", "llama3_key_with_pi.yaml", "auto_not_last.yaml", "duplicate_key.yaml",
                 "seq_not_divisible.yaml", "too_deep.yaml", "tab_indent.yaml", "method_dynamic.yaml"]:
        p = os.path.join(SRC, "tests/attack/recipes", name)
        if os.path.exists(p) and os.path.getsize(p) <= 8192:
            with open(p, "rb") as f:
                put("recipe", "attack_" + name, f.read())


def cut_tokenizer(path, k):
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    model = j["model"]
    j["added_tokens"] = [t for t in j.get("added_tokens", []) if t["id"] < k]
    if isinstance(model.get("vocab"), dict):
        model["vocab"] = {t: i for t, i in model["vocab"].items() if i < k}
        keep = set(model["vocab"])
        merges = []
        for mg in model.get("merges", []):
            a, b = mg.split(" ", 1) if isinstance(mg, str) else mg
            if a in keep and b in keep and a + b in keep:
                merges.append(mg)
        model["merges"] = merges[:64]
    elif isinstance(model.get("vocab"), list):
        model["vocab"] = model["vocab"][:k]
    if isinstance(j.get("post_processor"), dict):  # keep templates naming only kept tokens
        st = j["post_processor"].get("special_tokens")
        if isinstance(st, dict):
            for v in st.values():
                if isinstance(v, dict) and "ids" in v and any(i >= k for i in v["ids"]):
                    j["post_processor"] = None
                    break
    return compact(j)


def tokenizer_seeds():
    tdir = os.path.join(SRC, "tests/fixtures/tokenizer")
    for name, k in [("bytelevel", 300), ("spm", 300), ("metaspace", 300), ("qwen2", 300), ("variants", 300)]:
        put("tokenizer_json", name + "_cut.json", cut_tokenizer(os.path.join(tdir, name + ".json"), k))
    put("tokenizer", "tok_bytelevel_cut.json", cut_tokenizer(os.path.join(tdir, "bytelevel.json"), 280))
    with open(os.path.join(tdir, "cli_input.txt"), "rb") as f:
        lines = [l for l in f.read().split(b"\n") if l.strip()]
    for i, l in enumerate(lines[:6]):
        put("tokenizer", "text_%d.txt" % i, l[:2048])
    put("tokenizer", "text_unicode.txt", "café 中文 Привет  \t\n\n emoji 🙂 <|begin_of_text|> <s></s> 1234567 ▁x")
    put("tokenizer", "text_bad_utf8.bin", b"ab\xff\xfe\xc3(\xe2\x82 \xf0\x9f\x99 z\x00y")
    put("tokenizer", "text_spaces.txt", "   leading and trailing   \r\n  \u00a0nbsp\u3000ideographic ")


def idx(dtype, sizes, docs, itemsize, modes=False):
    ptrs, p = [], 0
    for s in sizes:
        ptrs.append(p)
        p += s * itemsize
    b = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, dtype, len(sizes), len(docs))
    b += struct.pack("<%di" % len(sizes), *sizes) + struct.pack("<%dq" % len(sizes), *ptrs)
    b += struct.pack("<%dq" % len(docs), *docs)
    if modes:
        b += bytes(len(sizes))
    return b, p


def frame(i, b):
    return struct.pack("<I", len(i)) + i + b


def tokdata_seeds():
    d = os.path.join(SRC, "tests/fixtures/tokdata")
    with open(os.path.join(d, "u16.idx"), "rb") as f:
        i = f.read()
    with open(os.path.join(d, "u16.bin"), "rb") as f:
        b = f.read()
    put("tokdata", "fixture_u16", frame(i, b))
    for name, code, size in [("u8", 1, 1), ("i8", 2, 1), ("i16", 3, 2), ("i32", 4, 4), ("i64", 5, 8), ("f64", 6, 8),
                             ("f32", 7, 4), ("u16", 8, 2)]:
        sizes = [3, 0, 5, 1]
        ix, nbin = idx(code, sizes, [0, 1, 2, 4], size)
        body = bytes((7 * k + 3) % 251 for k in range(nbin))
        put("tokdata", "small_" + name, frame(ix, body))
    ix, nbin = idx(8, [2, 2], [0, 2], 2, modes=True)
    put("tokdata", "multimodal", frame(ix, bytes(nbin)))
    ix, _ = idx(8, [], [0], 2)
    put("tokdata", "empty", frame(ix, b""))


def zstream_seeds():
    text = open(os.path.join(SRC, "tests", "fixtures", "tokenizer", "cli_input.jsonl"), "rb").read()[:3000]
    zst = subprocess.run(["zstd", "-q", "-c", "-3"], input=text, stdout=subprocess.PIPE, check=True).stdout
    put("zstream", "zstd_one_frame", bytes([0]) + zst)          # kind 0: zstd, 1 byte a read
    put("zstream", "zstd_two_frames", bytes([40]) + zst + zst)  # 21 bytes a read
    gz = gzip.compress(text, mtime=0)
    put("zstream", "gzip_one_member", bytes([1]) + gz)
    put("zstream", "gzip_two_members", bytes([41]) + gz + gzip.compress(b"second member\n", mtime=0))


def main():
    lcextend = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build", "lcextend")
    manifest_seeds(lcextend)
    recipe_seeds()
    tokenizer_seeds()
    tokdata_seeds()
    zstream_seeds()


if __name__ == "__main__":
    main()
