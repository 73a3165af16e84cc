# Thirty-first session: is the bimodal time of 2^27-byte row kernels (AN1: copy_rows, rms_norm,
# layer_norm, softmax bf16 at 8192 x 8192 and 65536 x 1024 took either about 94 or about 108 us
# on an H100, per process) a matter of where the output lies relative to the input? Times
# PyTorch's copy (y.copy_(x)) and an elementwise multiply (torch.mul(x, 2, out=y)) of 2^27 bytes,
# with x and y views of one buffer at chosen byte distances, then with x and y allocated apart
# (fresh allocations, the cache emptied between trials). do_bench flushes the L2 between runs.
# Usage: python3 alias_probe.py
import torch
from triton.testing import do_bench

torch.manual_seed(0)
n = 1 << 26  # bf16 elements: 2^27 bytes
MB = 1 << 20
big = torch.empty(6 * n, dtype=torch.bfloat16, device="cuda")
big.normal_()


def bench(fn):
    return do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3


print(f"{torch.cuda.get_device_name()} big at {big.data_ptr():#x}", flush=True)
for d in (128 * MB, 128 * MB + 4096, 128 * MB + 64 * 1024, 128 * MB + 512 * 1024, 129 * MB, 130 * MB,
          131 * MB, 132 * MB, 136 * MB, 144 * MB, 160 * MB, 192 * MB, 256 * MB, 257 * MB, 384 * MB):
    x = big[:n]
    y = big[d // 2:d // 2 + n]
    tc = bench(lambda: y.copy_(x))
    tm = bench(lambda: torch.mul(x, 2.0, out=y))
    print(f"distance {d / MB:8.3f} MiB: copy {tc:7.2f} us  mul {tm:7.2f} us", flush=True)
del big
torch.cuda.empty_cache()
for trial in range(10):
    x = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    y = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    tc = bench(lambda: y.copy_(x))
    tm = bench(lambda: torch.mul(x, 2.0, out=y))
    print(f"fresh {trial}: y - x = {(y.data_ptr() - x.data_ptr()) / MB:9.3f} MiB: copy {tc:7.2f} us  "
          f"mul {tm:7.2f} us", flush=True)
    del x, y
    torch.cuda.empty_cache()
