#!/usr/bin/env bash
# Twenty-sixth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s26.sh stream  streamed rows (cache_rows=0: each phase re-reads the row, the second time
#                 mostly from L2, as torch.compile's looped reductions do) with the phase's chunk
#                 loop unrolled `unroll` chunks at a time (new hint). Fully unrolled, the
#                 compiler issues every chunk's loads first: ptxas gives softmax_bwd bf16
#                 N = 32768 on 512 threads 78 registers (one CTA per SM), 31 with unroll=1 (four);
#                 the default streamed softmax bf16 N = 65536 117 registers, 32 with unroll=1.
#                 Hints on the rows where torch.compile is faster and on the streamed default,
#                 same binary, two rounds, --verify on the hinted runs in round 1.
#                 Prediction: softmax_bwd bf16 4096 x 32768 214 -> 195-205 us with one of the
#                 unroll=1 variants (torch.compile: 195, the same two reads); the streamed
#                 softmax bf16 2048 x 65536 207 -> 150-170 us; rms_norm f32 8192 x 10240 within
#                 3% of the default either way; layer_norm bf16 8192 x 8192 streamed slower than
#                 the default (two reads of a row that fits the registers).
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  stream)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    u=cache_rows=0,unroll=1
    ui=cache_rows=0,cache_invariant=0,unroll=1
    cases=(
      "softmax softmax_bwd bf16 M=4096,N=32768 default"
      "softmax softmax_bwd bf16 M=4096,N=32768 $u,persistent=0,group=1024"
      "softmax softmax_bwd bf16 M=4096,N=32768 $u,persistent=0,group=512"
      "softmax softmax_bwd bf16 M=4096,N=32768 $u,persistent=0,group=256"
      "softmax softmax_bwd bf16 M=4096,N=32768 $u,group=512"
      "softmax softmax_bwd bf16 M=4096,N=32768 $u,group=1024"
      "softmax softmax_bwd bf16 M=4096,N=32768 cache_rows=0,unroll=2,persistent=0,group=512"
      "softmax softmax_bwd bf16 M=32768,N=4096 default"
      "softmax softmax_bwd bf16 M=32768,N=4096 $u,persistent=0,group=512"
      "softmax softmax_bwd bf16 M=32768,N=4096 $u,persistent=0,group=256"
      "softmax softmax_bwd f32 M=8192,N=10240 default"
      "softmax softmax_bwd f32 M=8192,N=10240 $u,persistent=0,group=512"
      "softmax softmax_bwd f32 M=8192,N=10240 $u,persistent=0,group=256"
      "rms_norm rms_norm f32 M=8192,N=10240 default"
      "rms_norm rms_norm f32 M=8192,N=10240 $ui,persistent=0,group=512"
      "rms_norm rms_norm f32 M=8192,N=10240 $ui,persistent=0,group=256"
      "rms_norm rms_norm bf16 M=4096,N=32768 default"
      "rms_norm rms_norm bf16 M=4096,N=32768 $ui,persistent=0,group=512"
      "softmax softmax bf16 M=4096,N=32768 default"
      "softmax softmax bf16 M=4096,N=32768 $u,persistent=0,group=512"
      "softmax softmax bf16 M=2048,N=65536 default"
      "softmax softmax bf16 M=2048,N=65536 unroll=1"
      "softmax softmax bf16 M=2048,N=65536 unroll=2"
      "softmax softmax bf16 M=2048,N=65536 unroll=1,persistent=0"
      "softmax softmax bf16 M=2048,N=65536 unroll=1,group=1024"
      "softmax log_softmax bf16 M=2048,N=65536 default"
      "softmax log_softmax bf16 M=2048,N=65536 unroll=1"
      "layer_norm layer_norm bf16 M=8192,N=8192 default"
      "layer_norm layer_norm bf16 M=8192,N=8192 $ui,persistent=0,group=256"
    )
    precompile
    rounds 2 first 2>&1 | tee "$out/stream.txt"
    ;;
  final)
    final_run
    ;;
  *)
    echo "usage: s26.sh stream|final" >&2
    exit 2
    ;;
esac
