"""Writes a .kdsl file with scans of an n-tuple of f32 (even components summed, odd ones by max)
along a middle axis (wide_mid) and the last (wide_rows), as tests/scan_emu_test.cpp's
wide_tuple_source does, for `kdsl run --verify` on the GPU. Usage: wide_scan.py N OUT.kdsl"""
import sys

n, out = int(sys.argv[1]), sys.argv[2]
a = ", ".join(f"a{i}" for i in range(n))
b = ", ".join(f"b{i}" for i in range(n))
comb = ", ".join(f"a{i} + b{i}" if i % 2 == 0 else f"max(a{i}, b{i})" for i in range(n))
names = ", ".join(f"s{i}" for i in range(n))
weighted = " + ".join(f"s{i} * {i % 7 + 1}.0" for i in range(n))


def values(x):
    return ", ".join(f"{x} * {i + 1}.0 + {i % 5}.0" for i in range(n))


open(out, "w").write(f"""
def wide_op(left, right):
    {a} = left
    {b} = right
    return {comb}


@kernel
def wide_mid(x: Tensor[f32, (B, L, D)], *, y: Out[f32, (B, L, D)], z: Out[f32, (B, L, D)]):
    for b, d in parallel(B, D):
        {names} = scan(wide_op, ({values("x[b, :, d]")}))
        y[b, :, d] = {weighted}
        z[b, :, d] = s{n - 1}


@kernel
def wide_rows(x: Tensor[f32, (M, N)], *, y: Out[f32, (M, N)], z: Out[f32, (M, N)]):
    for m in parallel(M):
        {names} = scan(wide_op, ({values("x[m, :]")}), reverse=True)
        y[m, :] = {weighted}
        z[m, :] = s{n - 1}
""")
