# Twenty-first session: what torch.compile (Inductor/Triton) generates for the rows where it beats
# kdsl (AD5: RMSNorm forward bf16 8192 x 8192, 65536 x 1024, 4096 x 32768 and f32 8192 x 10240;
# softmax backward bf16 4096 x 32768). Compiles them as ../shared/peers/peers.py does (inputs
# that require grad, dynamic=False), once each, so that the Inductor and Triton caches (set by
# TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR) hold the generated kernels, the chosen configs
# (*.best_config) and the PTX. Times each compiled forward (and the softmax backward) with
# do_bench as peers.py does. Usage: python3 triton_probe.py
import torch
import torch.nn.functional as F
import triton

dev = "cuda"
DT = {"bf16": torch.bfloat16, "f32": torch.float32}


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


for dt, M, N in (("bf16", 8192, 8192), ("bf16", 65536, 1024), ("bf16", 4096, 32768), ("f32", 8192, 10240)):
    x = torch.randn(M, N, dtype=DT[dt], device=dev, requires_grad=True)
    w = torch.randn(N, dtype=DT[dt], device=dev, requires_grad=True)
    g = torch.compile(lambda x, w: F.rms_norm(x, (N,), w, 1e-6), dynamic=False)
    g(x, w)
    torch.cuda.synchronize()
    print(f"rms_norm fwd {dt} {M}x{N}: {bench(lambda: g(x, w)):.1f} us", flush=True)
    torch.compiler.reset()

M, N = 4096, 32768
x = torch.randn(M, N, dtype=torch.bfloat16, device=dev, requires_grad=True)
dy = torch.randn(M, N, dtype=torch.bfloat16, device=dev)
g = torch.compile(lambda x: torch.softmax(x, -1), dynamic=False)
y = g(x)
torch.autograd.grad(y, (x,), dy, retain_graph=True)
torch.cuda.synchronize()
print(f"softmax bwd bf16 {M}x{N}: {bench(lambda: torch.autograd.grad(y, (x,), dy, retain_graph=True)):.1f} us",
      flush=True)
