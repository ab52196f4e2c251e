#!/usr/bin/env python3
"""Write the safetensors attack catalogue: hand-made broken files (bad_*) and valid edge cases (ok_*).

Stdlib only and deterministic: rerunning it rewrites identical bytes. Besides the files it writes
safetensors/EXPECTED.tsv, read by tests/unit/test_safetensors.c:

    file <TAB> ours <TAB> reference <TAB> detail

ours       accept | reject: what lcx_st_parse must do
reference  accept | reject: what the Rust reader (Python `safetensors.safe_open`) does; checked by
           tests/attack/check_reference.py. Rows where they differ are deliberate (see formats/safetensors.h).
detail     reject: a substring of our error message; accept: the number of tensors.

Usage: python3 tests/attack/make_attack_files.py   (writes next to this script)
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "safetensors")


def raw(header: bytes, data: bytes = b"", n=None) -> bytes:
    """File with header bytes as given; n overrides the stored header length."""
    return struct.pack("<Q", len(header) if n is None else n) + header + data


def js(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def t(dtype="F32", shape=(1,), offs=(0, 4), **extra):
    d = {"dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape, "data_offsets": list(offs)}
    d.update(extra)
    return d


F4B = b"\x00\x00\x80\x3f"  # 1.0f
ENTRY = b'{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'

# (name, bytes, ours, reference, detail)
CASES = [
    # ---- framing -----------------------------------------------------------------------------------------
    ("bad_empty_file", b"", "reject", "reject", "too small for the 8-byte header length"),
    ("bad_7_bytes", b"\x08\x00\x00\x00\x00\x00\x00", "reject", "reject", "too small"),
    ("bad_header_len_past_end", raw(b"{}", n=1000), "reject", "reject", "runs past the end of the file"),
    ("bad_header_len_over_100MB", raw(b"{}", n=100_000_001), "reject", "reject", "exceeds the limit"),
    ("bad_header_len_u64_max", raw(b"{}", n=2**64 - 1), "reject", "reject", "exceeds the limit"),
    ("bad_header_len_zero", raw(b""), "reject", "reject", "not valid JSON"),
    # ---- encoding and JSON syntax ------------------------------------------------------------------------
    ("bad_utf8_invalid_byte", raw(b'{"a\xff":' + ENTRY + b"}", F4B), "reject", "reject", "not valid UTF-8"),
    ("bad_utf8_overlong", raw(b'{"a\xc0\xaf":' + ENTRY + b"}", F4B), "reject", "reject", "not valid UTF-8"),
    ("bad_utf8_surrogate", raw(b'{"a\xed\xa0\x80":' + ENTRY + b"}", F4B), "reject", "reject", "not valid UTF-8"),
    ("bad_utf8_truncated_seq", raw(b'{"a":' + ENTRY + b"}\xe2\x82", F4B), "reject", "reject", "not valid UTF-8"),
    ("bad_json_unterminated", raw(b'{"a":{"dtype":"F32"', F4B), "reject", "reject", "not valid JSON"),
    ("bad_json_trailing_garbage", raw(b'{"a":' + ENTRY + b"} x", F4B), "reject", "reject", "not valid JSON"),
    ("bad_json_trailing_nul", raw(b'{"a":' + ENTRY + b"}\x00", F4B), "reject", "reject", "not valid JSON"),
    ("bad_json_bom", raw(b'\xef\xbb\xbf{"a":' + ENTRY + b"}", F4B), "reject", "reject", "not valid JSON"),
    ("bad_json_int_too_big", raw(b'{"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}}', F4B),
     "reject", "reject", "not valid JSON"),
    ("bad_json_deep_nesting", raw(b'{"__metadata__":{"x":' + b"[" * 5000 + b"]" * 5000 + b"}}"), "reject", "reject",
     "not valid JSON"),
    ("bad_top_level_array", raw(b"[]"), "reject", "reject", "header is not a JSON object"),
    ("bad_top_level_string", raw(b'"abc"'), "reject", "reject", "header is not a JSON object"),
    # ---- duplicates (the reference keeps the last value: deliberate difference where it accepts) ------------
    ("bad_duplicate_tensor_same_entry", raw(b'{"a":' + ENTRY + b',"a":' + ENTRY + b"}", F4B), "reject", "accept",
     "duplicate object key"),
    ("bad_duplicate_tensor", raw(b'{"a":' + ENTRY + b',"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
                                 F4B * 2), "reject", "reject", "duplicate object key"),
    ("bad_duplicate_metadata_key", raw(b'{"__metadata__":{"k":"1","k":"2"}}'), "reject", "accept",
     "duplicate object key"),
    ("bad_duplicate_field", raw(b'{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', F4B),
     "reject", "reject", "duplicate object key"),
    ("bad_nul_in_name", raw(b'{"a\\u0000b":' + ENTRY + b"}", F4B), "reject", "accept", "not valid JSON"),
    # ---- metadata ----------------------------------------------------------------------------------------
    ("bad_metadata_int_value", raw(js({"__metadata__": {"format": "pt", "n": 1}, "a": t()}), F4B), "reject",
     "reject", "__metadata__ key 'n': value is not a string"),
    ("bad_metadata_null_value", raw(js({"__metadata__": {"x": None}})), "reject", "reject",
     "__metadata__ key 'x': value is not a string"),
    ("bad_metadata_not_object", raw(js({"__metadata__": ["format", "pt"]})), "reject", "reject",
     "__metadata__ is not an object"),
    # ---- entry structure ---------------------------------------------------------------------------------
    ("bad_entry_not_object", raw(js({"a": 5})), "reject", "reject", "tensor 'a': entry is not an object"),
    ("bad_missing_dtype", raw(js({"a": {"shape": [1], "data_offsets": [0, 4]}}), F4B), "reject", "reject",
     "tensor 'a': missing dtype"),
    ("bad_missing_shape", raw(js({"a": {"dtype": "F32", "data_offsets": [0, 4]}}), F4B), "reject", "reject",
     "tensor 'a': missing shape"),
    ("bad_missing_offsets", raw(js({"a": {"dtype": "F32", "shape": [1]}}), F4B), "reject", "reject",
     "tensor 'a': missing data_offsets"),
    ("bad_unknown_dtype", raw(js({"a": t(dtype="F17")}), F4B), "reject", "reject", "tensor 'a': unknown dtype 'F17'"),
    ("bad_dtype_lowercase", raw(js({"a": t(dtype="f32")}), F4B), "reject", "reject", "unknown dtype 'f32'"),
    ("bad_dtype_not_string", raw(js({"a": t(dtype=5)}), F4B), "reject", "reject", "tensor 'a': dtype is not a string"),
    ("bad_shape_not_array", raw(js({"a": t(shape="4")}), F4B), "reject", "reject", "tensor 'a': shape is not an array"),
    ("bad_shape_negative", raw(js({"a": t(shape=(-1,))}), F4B), "reject", "reject",
     "tensor 'a': shape[0] is not a non-negative integer"),
    ("bad_shape_float", raw(js({"a": t(shape=(1.0,))}), F4B), "reject", "reject",
     "shape[0] is not a non-negative integer"),
    ("bad_shape_too_many_dims", raw(js({"a": t(shape=(1,) * 9)}), F4B), "reject", "accept",
     "shape has 9 dimensions, more than the 8 supported"),
    ("bad_offsets_three", raw(js({"a": t(offs=(0, 4, 4))}), F4B), "reject", "reject",
     "data_offsets is not an array [begin, end]"),
    ("bad_offsets_one", raw(js({"a": t(offs=(0,))}), F4B), "reject", "reject", "data_offsets is not an array"),
    ("bad_offsets_negative", raw(js({"a": t(offs=(-4, 0))}), F4B), "reject", "reject",
     "data_offsets are not non-negative integers"),
    ("bad_offsets_end_before_begin", raw(js({"a": t(offs=(4, 0))}), F4B), "reject", "reject",
     "data_offsets [4,0] end before they begin"),
    # ---- sizes ---------------------------------------------------------------------------------------------
    ("bad_numel_overflow", raw(js({"a": t(shape=(2**32, 2**32, 2), offs=(0, 4))}), F4B), "reject", "reject",
     "element count of shape [4294967296, 4294967296, 2] overflows"),
    ("bad_nbytes_overflow", raw(js({"a": t(shape=(2**62,), offs=(0, 4))}), F4B), "reject", "reject",
     "overflows"),
    ("bad_size_mismatch", raw(js({"lm_head.weight": t(dtype="BF16", shape=(4, 4), offs=(0, 64))}), bytes(64)),
     "reject", "reject", "tensor 'lm_head.weight': data_offsets [0,64] do not match shape [4, 4] x BF16 (32 bytes)"),
    ("bad_f4_odd_count", raw(js({"a": t(dtype="F4", shape=(3,), offs=(0, 2))}), b"\x00\x00"), "reject", "reject",
     "not a whole number of bytes"),
    ("bad_f6_odd_count", raw(js({"a": t(dtype="F6_E2M3", shape=(3,), offs=(0, 3))}), b"\x00" * 3), "reject",
     "reject", "not a whole number of bytes"),
    # ---- tiling --------------------------------------------------------------------------------------------
    ("bad_first_offset_not_zero", raw(js({"a": t(offs=(4, 8))}), F4B * 2), "reject", "reject",
     "tensor 'a': data_offsets [4,8]: the first tensor must begin at 0"),
    ("bad_gap", raw(js({"a": t(), "b": t(offs=(8, 12))}), F4B * 3), "reject", "reject",
     "tensor 'b': data_offsets [8,12] leave a gap after tensor 'a'"),
    ("bad_overlap", raw(js({"a": t(shape=(2,), offs=(0, 8)), "b": t(shape=(2,), offs=(4, 12))}), F4B * 3), "reject",
     "reject", "tensor 'b': data_offsets [4,12] overlap tensor 'a'"),
    ("bad_same_offsets", raw(js({"a": t(), "b": t()}), F4B), "reject", "reject", "overlap tensor 'a'"),
    ("bad_zero_size_beyond_end", raw(js({"a": t(), "z": t(shape=(0,), offs=(8, 8))}), F4B), "reject", "reject",
     "tensor 'z': data_offsets [8,8] leave a gap"),
    ("bad_trailing_bytes", raw(js({"a": t()}), F4B + b"\x00"), "reject", "reject", "1 trailing bytes after the last tensor"),
    ("bad_data_but_no_tensors", raw(js({"__metadata__": {"format": "pt"}}), F4B), "reject", "reject",
     "4 trailing bytes"),
    ("bad_truncated", raw(js({"a": t(shape=(2,), offs=(0, 8))}), F4B), "reject", "reject", "file is truncated"),
    ("bad_truncated_huge_offsets", raw(js({"a": t(dtype="U8", shape=(2**59,), offs=(0, 2**59))})), "reject",
     "reject", "file is truncated"),
    # ---- valid edge cases ------------------------------------------------------------------------------------
    ("ok_rank0", raw(js({"s": t(shape=())}), F4B), "accept", "accept", "1"),
    ("ok_zero_size", raw(js({"a": t(), "z0": t(shape=(0,), offs=(0, 0)), "z1": t(shape=(3, 0), offs=(4, 4)),
                              "z2": t(dtype="BF16", shape=(0, 5), offs=(4, 4))}), F4B), "accept", "accept", "4"),
    ("ok_zero_size_only", raw(js({"z": t(shape=(0,), offs=(0, 0))})), "accept", "accept", "1"),
    ("ok_only_metadata", raw(js({"__metadata__": {"format": "pt"}})), "accept", "accept", "0"),
    ("ok_empty_object", raw(b"{}"), "accept", "accept", "0"),
    ("ok_header_whitespace", raw(b' \n{"a":' + ENTRY + b"}\t\r\n        ", F4B), "accept", "accept", "1"),
    ("ok_metadata_null", raw(js({"__metadata__": None, "a": t()}), F4B), "accept", "accept", "1"),
    ("ok_unknown_entry_field", raw(js({"a": t(comment="x", extra=[1, 2])}), F4B), "accept", "accept", "1"),
    ("ok_header_order_not_offset_order", raw(js({"b": t(offs=(4, 8)), "a": t()}), F4B * 2), "accept", "accept",
     "2"),
    ("ok_f4_even", raw(js({"a": t(dtype="F4", shape=(2, 2), offs=(0, 2))}), b"\x12\x34"), "accept", "accept", "1"),
    ("ok_8_dims", raw(js({"a": t(shape=(1,) * 8)}), F4B), "accept", "accept", "1"),
]


def all_dtypes_case():
    """One tensor of every safetensors dtype, 8 elements each, in reference writer order."""
    dts = [("F64", 64), ("I64", 64), ("U64", 64), ("C64", 64), ("F32", 32), ("I32", 32), ("U32", 32),
           ("BF16", 16), ("F16", 16), ("I16", 16), ("U16", 16), ("BOOL", 8), ("U8", 8), ("I8", 8),
           ("F8_E4M3", 8), ("F8_E5M2", 8), ("F8_E8M0", 8), ("F8_E4M3FNUZ", 8), ("F8_E5M2FNUZ", 8),
           ("F6_E2M3", 6), ("F6_E3M2", 6), ("F4", 4)]
    hdr, off = {}, 0
    for name, bits in dts:
        n = 8 * bits // 8
        hdr["t_" + name.lower()] = t(dtype=name, shape=(2, 4), offs=(off, off + n))
        off += n
    return ("ok_all_dtypes", raw(js(hdr), bytes(i % 251 for i in range(off))),
            "accept", "accept", str(len(dts)))


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = CASES + [all_dtypes_case()]
    names = [c[0] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    for f in os.listdir(OUT):  # drop files of cases that no longer exist
        if f.endswith(".safetensors") and f[: -len(".safetensors")] not in names:
            os.unlink(os.path.join(OUT, f))
    rows = []
    for name, data, ours, ref, detail in cases:
        assert "\t" not in detail and "\n" not in detail
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as fh:
            fh.write(data)
        rows.append(f"{name}.safetensors\t{ours}\t{ref}\t{detail}\n")
    with open(os.path.join(OUT, "EXPECTED.tsv"), "w") as fh:
        fh.write("# file\tours\treference\tdetail  (generated by tests/attack/make_attack_files.py)\n")
        fh.writelines(rows)
    print(f"wrote {len(cases)} files to {OUT}")


if __name__ == "__main__":
    main()
