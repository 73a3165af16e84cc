# Runs torch.compile's RMSNorm forward at (M, N) bf16 once, for `ncu` to profile; also prints
# do_bench's median with its L2 flush and without it, so the flush's cost can be separated.
import sys
import torch
import torch.nn.functional as F
import triton

M, N = int(sys.argv[1]), int(sys.argv[2])
x = torch.randn(M, N, dtype=torch.bfloat16, device="cuda")
w = torch.randn(N, dtype=torch.bfloat16, device="cuda")
f = torch.compile(lambda x, w: F.rms_norm(x, (N,), w, 1e-6), dynamic=False)
f(x, w)
torch.cuda.synchronize()
if len(sys.argv) > 3:
    flushed = triton.testing.do_bench(lambda: f(x, w), warmup=25, rep=100, return_mode="median")
    print(f"torch.compile rms_norm {M}x{N}: do_bench {flushed * 1e3:.2f} us (L2 flushed by zero_)")
