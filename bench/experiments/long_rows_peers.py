# PyTorch eager and torch.compile on long bf16 rows (forward softmax, RMSNorm, LayerNorm), timed as
# ../shared/peers/peers.py times its rows (triton.testing.do_bench, median, L2 flushed), with a
# 1 GiB copy in the same run. Usage: python3 long_rows_peers.py [DTYPE [MxN ...]] (default bf16,
# 2048x65536 512x262144; one JSON line per figure)
import json
import sys

import torch
import torch.nn.functional as F
import triton


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3  # us


n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
copy_us = bench(lambda: b.copy_(a))
print(json.dumps({"op": "copy", "us": copy_us, "GBps": 2 * n / copy_us / 1e3}), flush=True)
del a, b

dtype = getattr(torch, {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[
    sys.argv[1] if len(sys.argv) > 1 else "bf16"])
shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[2:]] or [(2048, 65536), (512, 262144)]
for M, N in shapes:
    x = torch.randn(M, N, dtype=dtype, device="cuda")
    w = torch.randn(N, dtype=dtype, device="cuda")
    bias = torch.randn(N, dtype=dtype, device="cuda")
    kernels = {
        "softmax": (lambda x: torch.softmax(x, -1), (x,)),
        "rms_norm": (lambda x, w: F.rms_norm(x, (N,), w, 1e-6), (x, w)),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, (N,), w, b, 1e-5), (x, w, bias)),
    }
    for name, (f, args) in kernels.items():
        for mode in ("eager", "compile"):
            g = f if mode == "eager" else torch.compile(f, dynamic=False)
            g(*args)
            torch.cuda.synchronize()
            us = bench(lambda: g(*args))
            gbps = 2 * M * N * x.element_size() / us / 1e3
            print(json.dumps({"kernel": name, "mode": mode, "dtype": str(dtype), "M": M, "N": N, "us": us,
                              "of_copy": gbps / (2 * (1 << 30) / copy_us / 1e3)}), flush=True)
