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
#   s30.sh push        (.device/bin/kdsl_old: 19ee900) every row reduction on a cluster pushes
#                      its partials with st.async a 4-byte word at a time, LayerNorm's Welford
#                      state too (before: each CTA's total read back after a cluster barrier per
#                      row, which waits for the previous row's stores); and the f32 rule of
#                      f32cluster. Old against new, two rounds, --verify on the new one in round
#                      1. Prediction: LayerNorm f32 on a cluster of 8 (cluster=8,group=8192; 28
#                      bytes spilled now, none before) 718 -> 450-520 us at 512 x 262144 (RMSNorm
#                      there: 443), 818 -> 450-520 at 1024 x 131072; the LayerNorm defaults on
#                      clusters of 4 x 256 (f32 512 x 262144, 4096 x 32768; bf16 512 x 262144,
#                      2048 x 65536) 2-8% faster; bf16 2048 x 65536 on the cluster of 8 (6.7x its
#                      default on the H200, AK1) within 1.5x of the default. The new f32 defaults
#                      as the hints in f32cluster (softmax 512 x 262144 579 -> 388, RMSNorm 1024 x
#                      131072 571 -> 437); RMSNorm bf16 512 x 262144 (same code) within 1%.
#                      Then compute-sanitizer memcheck and racecheck on three pushed clusters and
#                      stdlib_norm_gpu_test.
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
  push)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "layer_norm layer_norm f32 M=512,N=262144 default"
      "layer_norm layer_norm f32 M=512,N=262144 cluster=8,group=8192"
      "layer_norm layer_norm f32 M=1024,N=131072 cluster=8,group=8192"
      "layer_norm layer_norm f32 M=640,N=196608 cluster=8,group=8192"
      "layer_norm layer_norm f32 M=4096,N=32768 default"
      "layer_norm layer_norm bf16 M=512,N=262144 default"
      "layer_norm layer_norm bf16 M=2048,N=65536 default"
      "layer_norm layer_norm bf16 M=2048,N=65536 cluster=8,group=8192"
      "softmax softmax f32 M=512,N=262144 default"
      "softmax softmax f32 M=1024,N=131072 default"
      "rms_norm rms_norm f32 M=1024,N=131072 default"
      "rms_norm rms_norm bf16 M=512,N=262144 default"
    )
    precompile
    k=.device/bin/kdsl_old precompile
    ab_rounds 2 2>&1 | tee "$out/push.txt"
    for c in "layer_norm f32 M=3,N=262144 cluster=8,group=8192" "layer_norm bf16 M=5,N=65536 default" \
             "softmax f32 M=3,N=262144 default" "layer_norm f32 M=7,N=32768 default"; do
      set -- $c
      h=(); [ "$4" != default ] && h=(--schedule "$4")
      for tool in memcheck racecheck; do
        printf '%s %s %s %s %s ' "$tool" "$@"
        timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool "$tool" ${k} run "stdlib/$1.kdsl" \
          -k "$1" --dtype "$2" --shape "$3" "${h[@]}" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY"
      done
    done 2>&1 | tee -a "$out/push.txt"
    timeout 150 .device/bin/stdlib_norm_gpu_test --gtest_brief=1 2>&1 | tail -4 | tee -a "$out/push.txt"
    ;;
  h200)
    # On the H200 of the push run: LayerNorm f32 on the cluster of 8 (pushed Welford states)
    # against its default at N = 131072 and 196608 (no prediction: whether the long-row rule
    # should take LayerNorm f32 as well); the new f32 defaults at the other shapes; then PyTorch
    # eager and torch.compile at the same f32 shapes, same run.
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "layer_norm layer_norm f32 M=1024,N=131072 default"
      "layer_norm layer_norm f32 M=1024,N=131072 cluster=8,group=8192"
      "layer_norm layer_norm f32 M=640,N=196608 default"
      "layer_norm layer_norm f32 M=640,N=196608 cluster=8,group=8192"
      "softmax softmax f32 M=640,N=196608 default"
      "softmax log_softmax f32 M=512,N=262144 default"
      "rms_norm rms_norm f32 M=512,N=262144 default"
      "rms_norm rms_norm f32 M=640,N=196608 default"
    )
    precompile
    rounds 2 first 2>&1 | tee "$out/h200.txt"
    timeout 200 python3 bench/experiments/long_rows_peers.py f32 512x262144 640x196608 1024x131072 2>&1 |
      grep '^{' | tee -a "$out/h200.txt"
    ;;
  prefetch)
    # Exploratory (no rule predicted): on the cluster of 8, rows of 4 chunks a thread prefetch
    # the next row (f32 N = 131072, bf16 262144); RMSNorm f32 reached less of the copy
    # bandwidth there than at 6 chunks without prefetch (H200, AM4: 0.663 at 1024 x 131072,
    # 0.79 at 640 x 196608). The default against prefetch=0, two rounds, --verify on the hints.
    # Expected: within 5% either way.
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for spec in "rms_norm rms_norm f32 M=1024,N=131072" "softmax softmax f32 M=1024,N=131072" \
                "rms_norm rms_norm bf16 M=512,N=262144" "softmax softmax bf16 M=512,N=262144"; do
      for h in default prefetch=0; do cases+=("$spec $h"); done
    done
    for h in cluster=8,group=8192 cluster=8,group=8192,prefetch=0; do
      cases+=("layer_norm layer_norm f32 M=1024,N=131072 $h")
    done
    precompile
    rounds 2 first 2>&1 | tee "$out/prefetch.txt"
    ;;
  *)
    echo "usage: s30.sh f32cluster|push|h200|prefetch" >&2
    exit 2
    ;;
esac
