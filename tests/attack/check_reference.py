#!/usr/bin/env python3
"""Check the 'reference' column of tests/attack/safetensors/EXPECTED.tsv against the reference reader.

Opens every catalogue file with safetensors.safe_open (the Rust reader) and reports accept/reject next to our
expected verdict. Exit status 1 when the reference disagrees with the column (the catalogue is then wrong).
Usage: python3 tests/attack/check_reference.py [-v]
"""
import os
import sys

from safetensors import safe_open

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")


def reference_verdict(path):
    try:
        with safe_open(path, "numpy") as f:
            keys = list(f.keys())
            for k in keys:  # numpy lacks some dtypes: opening and listing is the validation we compare
                try:
                    f.get_slice(k)
                except Exception:
                    pass
        return "accept", f"{len(keys)} tensors"
    except Exception as e:  # noqa: BLE001 - any failure is a rejection
        return "reject", str(e).splitlines()[0][:120]


def main():
    verbose = "-v" in sys.argv
    bad = 0
    rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(HERE, "EXPECTED.tsv")) if not l.startswith("#")]
    for name, ours, ref, detail in rows:
        got, msg = reference_verdict(os.path.join(HERE, name))
        flag = "" if got == ref else "  <-- MISMATCH with the reference column"
        diff = "  (deliberate difference)" if ours != ref else ""
        if flag:
            bad += 1
        if verbose or flag or diff:
            print(f"{name:45s} ours={ours:6s} reference={got:6s} {msg}{diff}{flag}")
    print(f"{len(rows)} files, {bad} mismatches with the reference column")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
