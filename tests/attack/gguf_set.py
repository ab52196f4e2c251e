#!/usr/bin/env python3
"""Copy a GGUF file with some metadata values replaced (stdlib only), for tests of metadata validation.

    python3 gguf_set.py IN OUT KEY=TYPE:VALUE ...     TYPE: u32, i32, u64, f32 (VALUE may be nan, inf, -1e3)

A key that is absent is added. Tensor infos and data are copied unchanged (tensor offsets are relative to the
data section, which starts at the next multiple of the alignment after the header).
"""
import struct
import sys

FMT = {"u32": (4, "<I"), "i32": (5, "<i"), "f32": (6, "<f"), "u64": (10, "<Q")}
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main():
    src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    buf = open(src, "rb").read()
    magic, version, n_t, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version == 3, "GGUF v3 expected"
    pos = 24

    def rd_str(p):
        (n,) = struct.unpack_from("<Q", buf, p)
        return buf[p + 8:p + 8 + n], p + 8 + n

    kvs = []  # (key bytes, raw type+value bytes)
    for _ in range(n_kv):
        key, p = rd_str(pos)
        (t,) = struct.unpack_from("<I", buf, p)
        q = p + 4
        if t == 8:
            _, q = rd_str(q)
        elif t == 9:
            (et, cnt) = struct.unpack_from("<IQ", buf, q)
            q += 12
            for _ in range(cnt):
                if et == 8:
                    _, q = rd_str(q)
                else:
                    q += SIZES[et]
        else:
            q += SIZES[t]
        kvs.append([key, buf[p:q]])
        pos = q
    tis_start = pos
    for _ in range(n_t):
        _, p = rd_str(pos)
        (nd,) = struct.unpack_from("<I", buf, p)
        pos = p + 4 + 8 * nd + 4 + 8
    tis = buf[tis_start:pos]
    align = 32
    for k, v in kvs:
        if k == b"general.alignment":
            align = struct.unpack_from("<I", v, 4)[0]
    data_off = pos + (-pos) % align

    for e in edits:
        key, tv = e.split("=", 1)
        typ, val = tv.split(":", 1)
        code, fmt = FMT[typ]
        num = float(val) if typ == "f32" else int(val)
        raw = struct.pack("<I", code) + struct.pack(fmt, num)
        for kv in kvs:
            if kv[0] == key.encode():
                kv[1] = raw
                break
        else:
            kvs.append([key.encode(), raw])

    head = struct.pack("<4sIQQ", b"GGUF", 3, n_t, len(kvs))
    head += b"".join(struct.pack("<Q", len(k)) + k + v for k, v in kvs) + tis
    new_off = len(head) + (-len(head)) % align
    data = buf[data_off:]
    open(dst, "wb").write(head + b"\0" * (new_off - len(head)) + data)


if __name__ == "__main__":
    main()
