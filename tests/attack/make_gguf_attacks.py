#!/usr/bin/env python3
"""Write hand-made broken GGUF files into tests/attack/gguf/ (stdlib only), plus expected.txt: one line per
file, "<file>\t<substring the reader's error message must contain>". tests/unit/test_gguf_attacks.c opens each
one and checks it is rejected as a format error with that message.

    python3 tests/attack/make_gguf_attacks.py [OUTDIR]     (default: tests/attack/gguf next to this script)
"""

import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
GGML_F32, GGML_Q8_0 = 0, 8


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack("<I", vtype) + payload


def kv_u32(key, v):
    return kv(key, U32, struct.pack("<I", v))


def ti(name, dims, ggml_type, offset):
    return s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<IQ", ggml_type, offset)


def gguf(kvs=(), tis=(), data=b"", version=3, n_tensors=None, n_kv=None, align=32, magic=b"GGUF"):
    """A file: header, KVs, tensor infos, padding to `align`, data."""
    body = b"".join(kvs) + b"".join(tis)
    head = magic + struct.pack("<IQQ", version, len(tis) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    out = head + body
    out += b"\0" * ((-len(out)) % align)
    return out + data


F32x4 = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
ARCH = kv("general.architecture", STRING, s("llama"))


def attacks():
    a = {}
    ok_ti = ti("w", [4], GGML_F32, 0)
    a["bad_magic.gguf"] = (gguf([ARCH], [ok_ti], F32x4, magic=b"GGUX"), "bad magic 47 47 55 58")
    a["version4.gguf"] = (gguf([ARCH], [ok_ti], F32x4, version=4), "unsupported GGUF version 4")
    a["version1.gguf"] = (gguf([ARCH], [ok_ti], F32x4, version=1), "unsupported GGUF version 1")
    a["big_endian.gguf"] = (gguf([ARCH], [ok_ti], F32x4, version=3 << 24), "a big-endian file?")
    a["empty.gguf"] = (b"", "not a GGUF file: only 0 bytes")
    a["truncated_header.gguf"] = (gguf([ARCH], [ok_ti], F32x4)[:14], "header: truncated")
    a["huge_tensor_count.gguf"] = (gguf([ARCH], [ok_ti], F32x4, n_tensors=2**64 - 1),
                                   "tensor_count 18446744073709551615 is impossible")
    a["huge_kv_count.gguf"] = (gguf([ARCH], [ok_ti], F32x4, n_kv=2**62), "kv_count 4611686018427387904 is impossible")
    a["huge_key_length.gguf"] = (gguf([struct.pack("<Q", 2**63) + b"abc" + struct.pack("<I", U8) + b"\1"], [ok_ti],
                                      F32x4), "key #0: string length 9223372036854775808")
    a["huge_string_value.gguf"] = (gguf([kv("a.s", STRING, struct.pack("<Q", 10**12) + b"hi")], [ok_ti], F32x4),
                                   "key 'a.s': string length 1000000000000")
    a["duplicate_key.gguf"] = (gguf([kv_u32("a.b", 1), ARCH, kv_u32("a.b", 2)], [ok_ti], F32x4),
                               "duplicate key 'a.b' (#0 and #2)")
    a["empty_key.gguf"] = (gguf([ARCH, kv("", U32, b"\1\0\0\0")], [ok_ti], F32x4), "key #1 is empty")
    a["nul_in_key.gguf"] = (gguf([kv("a\0b", U8, b"\1")], [ok_ti], F32x4), "key #0 'a\\x00b' contains a NUL byte")
    a["unknown_value_type.gguf"] = (gguf([kv("a.t", 13, b"\0" * 8)], [ok_ti], F32x4), "key 'a.t': unknown value type 13")
    a["unknown_array_type.gguf"] = (gguf([kv("a.t", ARRAY, struct.pack("<IQ", 99, 1) + b"\0" * 8)], [ok_ti], F32x4),
                                    "unknown array element type 99")
    a["nested_array.gguf"] = (gguf([kv("a.n", ARRAY, struct.pack("<IQ", ARRAY, 1) + struct.pack("<IQ", U8, 0))],
                                   [ok_ti], F32x4), "key 'a.n': nested arrays are not supported")
    a["huge_array_count.gguf"] = (gguf([kv("a.arr", ARRAY, struct.pack("<IQ", U32, 2**61) + b"\0" * 16)], [ok_ti],
                                       F32x4), "key 'a.arr': array count 2305843009213693952 of u32 needs more")
    a["huge_string_in_array.gguf"] = (gguf([kv("t.tokens", ARRAY, struct.pack("<IQ", STRING, 2) + s("ok") +
                                               struct.pack("<Q", 2**40) + b"xy")], [ok_ti], F32x4),
                                      "key 't.tokens': string 1 of 2: string length 1099511627776")
    a["truncated_value.gguf"] = (gguf([ARCH, kv("a.u64", U64, b"\1" * 8)])[:90],
                                 "key 'a.u64': truncated: needs 8 bytes at offset 86, only 4 left")
    a["bad_alignment.gguf"] = (gguf([ARCH, kv_u32("general.alignment", 48)], [ok_ti], F32x4),
                               "general.alignment 48 is not a power of two")
    a["zero_alignment.gguf"] = (gguf([kv_u32("general.alignment", 0)], [ok_ti], F32x4),
                                "general.alignment 0 is not a power of two")
    a["alignment_u64.gguf"] = (gguf([kv("general.alignment", U64, struct.pack("<Q", 32))], [ok_ti], F32x4),
                               "key 'general.alignment' has type u64, expected u32")
    a["duplicate_tensor.gguf"] = (gguf([ARCH], [ok_ti, ti("w", [4], GGML_F32, 32)], F32x4 + b"\0" * 16 + F32x4),
                                  "duplicate tensor name 'w' (#0 and #1)")
    a["empty_tensor_name.gguf"] = (gguf([ARCH], [ti("", [4], GGML_F32, 0)], F32x4), "tensor #0 has an empty name")
    a["nul_in_tensor_name.gguf"] = (gguf([ARCH], [ti("x\0y", [4], GGML_F32, 0)], F32x4), "contains a NUL byte")
    a["n_dims5.gguf"] = (gguf([ARCH], [ti("w", [1, 1, 1, 1, 4], GGML_F32, 0)], F32x4),
                         "tensor 'w': n_dims 5 exceeds the maximum of 4")
    a["negative_dim.gguf"] = (gguf([ARCH], [ti("w", [2**63 + 4], GGML_F32, 0)], F32x4),
                              "dimension 0 is 9223372036854775812 (negative as int64)")
    a["overflowing_dims.gguf"] = (gguf([ARCH], [ti("w", [2**32, 2**32, 2], GGML_F32, 0)], F32x4),
                                  "tensor 'w': element count of dims [4294967296, 4294967296, 2, 1] overflows")
    a["byte_size_overflow.gguf"] = (gguf([ARCH], [ti("w", [2**62], GGML_F32, 0)], F32x4),
                                    "tensor 'w': byte size overflows")
    a["unknown_ggml_type.gguf"] = (gguf([ARCH], [ti("w", [4], 200, 0)], F32x4), "tensor 'w': unknown ggml type 200")
    a["removed_ggml_type.gguf"] = (gguf([ARCH], [ti("w", [32], 4, 0)], b"\0" * 64), "unknown ggml type 4")
    a["dims0_not_block.gguf"] = (gguf([ARCH], [ti("w", [16, 2], GGML_Q8_0, 0)], b"\0" * 68),
                                 "dims[0] = 16 is not a multiple of the Q8_0 block size 32")
    a["misaligned_offset.gguf"] = (gguf([ARCH], [ti("w", [4], GGML_F32, 8)], b"\0" * 8 + F32x4),
                                   "tensor 'w': offset 8 is not a multiple of the alignment 32")
    a["offset_past_end.gguf"] = (gguf([ARCH], [ti("w", [4], GGML_F32, 4096)], F32x4),
                                 "tensor 'w': data [4096, +16 bytes) extends past the end of the data section")
    a["huge_offset.gguf"] = (gguf([ARCH], [ti("w", [4], GGML_F32, 2**64 - 32)], F32x4), "extends past the end")
    a["truncated_data.gguf"] = (gguf([ARCH], [ti("w", [8], GGML_F32, 0)], F32x4),
                                "data [0, +32 bytes) extends past the end of the data section (16 bytes)")
    a["overlapping_tensors.gguf"] = (gguf([ARCH], [ti("a", [16], GGML_F32, 0), ti("b", [8], GGML_F32, 32)],
                                          b"\0" * 64), "tensor 'b' [32, 64) overlaps tensor 'a' [0, 64)")
    a["truncated_tensor_info.gguf"] = (gguf([ARCH], [ok_ti])[:-40], "tensor 'w': truncated")
    return a


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    a = attacks()
    for fn in os.listdir(outdir):
        if fn.endswith(".gguf") and fn not in a:
            os.remove(os.path.join(outdir, fn))
    lines = []
    for fn, (data, needle) in sorted(a.items()):
        with open(os.path.join(outdir, fn), "wb") as f:
            f.write(data)
        assert "\t" not in needle and "\n" not in needle
        lines.append(f"{fn}\t{needle}\n")
    with open(os.path.join(outdir, "expected.txt"), "w") as f:
        f.writelines(lines)
    print(f"{len(a)} attack files in {outdir}")


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "gguf"))
