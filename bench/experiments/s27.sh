#!/usr/bin/env bash
# Twenty-seventh session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s27.sh cluster  long forward rows held in registers on a thread-block cluster instead of
#                  streamed (re-read per reduction phase). Softmax and log_softmax (two
#                  dependent reductions) at bf16 N = 65536 stream on one CTA of 512 threads by
#                  default; RMSNorm and LayerNorm at N = 262144 stream on a cluster of 4 x 256.
#                  A cluster of 8 CTAs of 1024 threads holds a 65536-element bf16 row in one
#                  16-byte chunk per thread (32 registers, ptxas), a 262144-element row in 4
#                  (64 registers). Same binary, two rounds, --verify on the hinted runs of round
#                  1; then PyTorch eager and torch.compile on the same shapes
#                  (long_rows_peers.py). Prediction: softmax bf16 2048 x 65536 208 -> 140-155 us
#                  with cluster=8,group=8192 or cluster=4,group=4096 (one read of the row instead
#                  of two, 0.85-0.92 of copy); at 512 x 262144 the same ratio for softmax, RMSNorm
#                  and LayerNorm (their defaults read the row twice: about 0.6 of copy); RMSNorm
#                  at 2048 x 65536 (already register-resident on 4 x 256) within 3% of the
#                  default; f32 softmax 2048 x 65536 (512 MB of rows, 8 elements a thread)
#                  likewise 1.3x faster.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  cluster)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    c8=cluster=8,group=8192
    c4=cluster=4,group=4096
    cases=(
      "softmax softmax bf16 M=2048,N=65536 default"
      "softmax softmax bf16 M=2048,N=65536 $c8"
      "softmax softmax bf16 M=2048,N=65536 $c4"
      "softmax softmax bf16 M=2048,N=65536 cluster=8,group=4096"
      "softmax softmax bf16 M=2048,N=65536 cluster=4,group=2048"
      "softmax log_softmax bf16 M=2048,N=65536 default"
      "softmax log_softmax bf16 M=2048,N=65536 $c8"
      "softmax log_softmax bf16 M=2048,N=65536 $c4"
      "softmax softmax bf16 M=1024,N=131072 default"
      "softmax softmax bf16 M=1024,N=131072 $c8"
      "softmax softmax bf16 M=512,N=262144 default"
      "softmax softmax bf16 M=512,N=262144 $c8"
      "softmax softmax bf16 M=512,N=262144 cluster=8,group=4096"
      "softmax softmax f32 M=2048,N=65536 default"
      "softmax softmax f32 M=2048,N=65536 $c8"
      "softmax softmax_bwd bf16 M=2048,N=65536 default"
      "softmax softmax_bwd bf16 M=2048,N=65536 $c8"
      "rms_norm rms_norm bf16 M=2048,N=65536 default"
      "rms_norm rms_norm bf16 M=2048,N=65536 $c8"
      "rms_norm rms_norm bf16 M=2048,N=65536 $c4"
      "rms_norm rms_norm bf16 M=512,N=262144 default"
      "rms_norm rms_norm bf16 M=512,N=262144 $c8"
      "layer_norm layer_norm bf16 M=2048,N=65536 default"
      "layer_norm layer_norm bf16 M=2048,N=65536 $c8"
      "layer_norm layer_norm bf16 M=512,N=262144 default"
      "layer_norm layer_norm bf16 M=512,N=262144 $c8"
    )
    precompile
    rounds 2 first 2>&1 | tee "$out/cluster.txt"
    timeout 300 python3 bench/experiments/long_rows_peers.py 2>&1 | grep '^{' | tee "$out/peers_long.txt"
    ;;
  final)
    final_run
    ;;
  *)
    echo "usage: s27.sh cluster|final" >&2
    exit 2
    ;;
esac
