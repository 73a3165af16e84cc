#!/usr/bin/env python3
"""Writes the fuzzer's seed corpus into OUTDIR: every .kdsl module of the tree (stdlib, tests/error,
tests/data) and the modules embedded in tests/*_test.cpp as raw strings, each behind two selector
bytes (fuzz/front_end_input.h: N, alignment, target, dtype binding); well-formed modules get
several selectors. The regression inputs of tests/fuzz_regressions are copied as they are.

Usage: fuzz/make_seeds.py OUTDIR"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)

# (byte 0, byte 1): N = 1, 7, 33, 1000, 65537 with bindings 0-2; N = 1000 unaligned and strided;
# N = 8192 for sm_80; N = 1024 with every binding.
VARIANTS = [(0x00, 0), (0x03, 1), (0x06, 2), (0x0A, 0), (0x0F, 1), (0x3A, 2), (0x4D, 0), (0x8B, 0)]

def write(name, selectors, source):
    for sel, which in selectors:
        (out / f"{name}-{sel:02x}{which:02x}").write_bytes(bytes([sel, which]) + source)

count = 0
for folder, selectors in [("stdlib", VARIANTS), ("tests/data", VARIANTS), ("tests/error", [(0x0A, 0)])]:
    for f in sorted((root / folder).glob("*.kdsl")):
        write(f"{folder.replace('/', '_')}_{f.stem}", selectors, f.read_bytes())
        count += len(selectors)
for f in sorted((root / "tests").glob("*_test.cpp")):
    blocks = re.findall(r'R"\((.*?)\)"', f.read_text(), re.S)
    for i, block in enumerate(b for b in blocks if "@kernel" in b or "def " in b):
        write(f"{f.stem}_{i}", VARIANTS[:3], block.encode())
        count += 3
for f in sorted((root / "tests/fuzz_regressions").glob("*")):
    if f.is_file() and f.name != "README.md":
        (out / f"regression_{f.name}").write_bytes(f.read_bytes())
        count += 1
print(f"{count} seeds in {out}")
