#!/usr/bin/env bash
# Thirtieth session, on the GPU machine after scripts/device/stage.sh (carry .device). Predictions
# written before the run:
#   s30.sh f32cluster  long f32 rows held in registers on a cluster of 8 CTAs of 1024 threads
#                      (cluster=8,group=8192: N = 131072 is 4 chunks a thread with the next row
#                      prefetched, 196608 6 chunks, 262144 8 chunks without prefetch; ptxas on the
#                      CPU machine: 52-64 registers, no spill) against the defaults (streamed: the
#                      row read twice, once with the online softmax). The rule gives the cluster
#                      only to 16-bit rows of 3-4 chunks (AK1: bf16 512 x 262144 softmax 1.79x
#                      faster, 0.69 of copy on the H100 in AL1). Prediction: read once, but one
#                      CTA per SM and no prefetch at 6-8 chunks, so 0.55-0.70 of copy: softmax f32
#                      512 x 262144 580 -> 480-600 us on an H100, RMSNorm 596 -> 480-560,
#                      LayerNorm 582 -> 480-580; at 1024 x 131072 (prefetch, like bf16's 4 chunks)
#                      0.65-0.72 of copy, 10-20% faster than streamed. Two rounds, --verify on
#                      the hinted runs of round 1; then PyTorch eager and torch.compile at the same
#                      f32 shapes (long_rows_peers.py), same run.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  f32cluster)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for shape in M=512,N=262144 M=640,N=196608 M=1024,N=131072; do
      for kn in "softmax softmax" "softmax log_softmax" "rms_norm rms_norm" "layer_norm layer_norm"; do
        for h in default cluster=8,group=8192; do cases+=("$kn f32 $shape $h"); done
      done
    done
    precompile
    rounds 2 first 2>&1 | tee "$out/f32cluster.txt"
    timeout 200 python3 bench/experiments/long_rows_peers.py f32 512x262144 640x196608 1024x131072 2>&1 |
      grep '^{' | tee -a "$out/f32cluster.txt"
    ;;
  *)
    echo "usage: s30.sh f32cluster" >&2
    exit 2
    ;;
esac
