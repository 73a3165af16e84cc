# Thirty-first session: how long the GPU takes to reach its steady memory throughput after an
# idle gap (AN3: kdsl's copy_rows bf16 8192 x 8192 took 107-108 us with 10 warm-up launches and
# 93.2 us after 3000, on an H100). After sleeping S seconds, launches PyTorch's copy of 2^27
# bytes 1500 times back to back, each after an L2 flush (a 256 MB zero_, as do_bench), each timed
# with its own CUDA events, and prints the mean time of each block of 50 launches with the GPU
# time elapsed since the first. Usage: python3 ramp_probe.py
import time

import torch

n = 1 << 26  # bf16 elements: 2^27 bytes
x = torch.randn(n, dtype=torch.bfloat16, device="cuda")
y = torch.empty_like(x)
cache = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")
print(torch.cuda.get_device_name(), flush=True)
for sleep in (3.0, 1.0, 0.2, 0.05, 3.0):
    torch.cuda.synchronize()
    time.sleep(sleep)
    k = 1500
    s = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
    e = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
    for i in range(k):
        cache.zero_()
        s[i].record()
        y.copy_(x)
        e[i].record()
    torch.cuda.synchronize()
    us = [s[i].elapsed_time(e[i]) * 1e3 for i in range(k)]
    since = [s[i].elapsed_time(s[0]) * -1e3 for i in range(k)]
    blocks = [f"{since[b] / 1e3:.0f}ms:{sum(us[b:b + 50]) / 50:.1f}" for b in range(0, k, 50)]
    print(f"after {sleep} s idle, first 5 {[round(u, 1) for u in us[:5]]}, blocks of 50 (start ms: mean us):",
          " ".join(blocks), flush=True)
