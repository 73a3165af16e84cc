#!/usr/bin/env bash
# Thirty-first session, on the GPU machine after scripts/device/stage.sh (carry .device).
# Predictions written before the run:
#   s31.sh calib  the row schedules' own limit: bench/experiments/calibrate.kdsl's copy_rows
#                 (y = x row by row: RMSNorm forward's traffic without the reduction) and
#                 scale_rows (y = x * w: with a loop-invariant vector) at the issue-5 forward
#                 shapes (bf16 8192 x 8192, 32768 x 4096, 4096 x 32768, 65536 x 1024; f32
#                 8192 x 10240), beside rms_norm, layer_norm and softmax there; two rounds. Never
#                 measured before. Prediction: copy_rows 0.93-0.97 of copy at every shape, so the
#                 forward kernels' 0.87-0.90 rows (rms_norm 8192 x 8192 and 65536 x 1024,
#                 layer_norm 8192 x 8192 and 65536 x 1024, softmax 4096 x 32768; AM3) lose 4-8%
#                 to their reductions and barriers, not to the access pattern. If copy_rows is
#                 itself at 0.87-0.90 there, the schedule (rows per CTA, CTAs per SM, grid) is
#                 the limit and the next step is the schedule, not the math.
#   s31.sh lead   bf16 softmax on the cluster of 8 without the next row prefetched (AM6, H100:
#                 6.5% faster at 512 x 262144) at 512 x 262144 and 1024 x 131072, the default
#                 against prefetch=0, two rounds, --verify on the hints. Prediction: on the H200
#                 prefetch=0 within 3% of the default (the H100's gain not carried over: the
#                 H200's faster memory leaves less for the prefetch to hide, either way).
#   s31.sh checks the GPU tests that did not run at 9574c73 (stdlib_scan_gpu_test, the rest)
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  calib)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for s in "bf16 M=8192,N=8192" "bf16 M=32768,N=4096" "bf16 M=4096,N=32768" "bf16 M=65536,N=1024" \
             "f32 M=8192,N=10240"; do
      set -- $s
      for kn in "../bench/experiments/calibrate copy_rows" "../bench/experiments/calibrate scale_rows" \
                "rms_norm rms_norm" "layer_norm layer_norm" "softmax softmax"; do
        cases+=("$kn $1 $2 default")
      done
    done
    # copy_rows with LayerNorm's thread counts (128 a row at N = 8192, 16 at 1024)
    cases+=("../bench/experiments/calibrate copy_rows bf16 M=8192,N=8192 group=128")
    cases+=("../bench/experiments/calibrate copy_rows bf16 M=65536,N=1024 group=16")
    precompile
    rounds 2 none 2>&1 | tee "$out/calib.txt"
    ;;
  lead)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for spec in "softmax softmax bf16 M=512,N=262144" "softmax softmax bf16 M=1024,N=131072" \
                "softmax log_softmax bf16 M=512,N=262144"; do
      for h in default prefetch=0; do cases+=("$spec $h"); done
    done
    precompile
    rounds 2 first 2>&1 | tee "$out/lead.txt"
    ;;
  *)
    echo "usage: s31.sh calib|lead" >&2
    exit 2
    ;;
esac
