#!/usr/bin/env bash
# Fills a disk cache with the sm_90 specializations the GPU tests (normalization, numerics, the
# GroupNorm example, runtime) and the benchmarks use, on a machine without a GPU (kdsl compile
# --arch sm_90), so the GPU machine only loads them.
# Usage: scripts/device/precompile_tests.sh CACHE_DIR [KDSL_BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
export KDSL_CACHE_DIR="$1"
kdsl="${2:-build/kdsl}"
jobs=()
for kf in rms_norm:rms_norm rms_norm:rms_norm_bwd rms_norm:add_rms_norm rms_norm:add_rms_norm_bwd \
          layer_norm:layer_norm layer_norm:layer_norm_bwd softmax:softmax softmax:softmax_bwd \
          softmax:log_softmax softmax:log_softmax_bwd; do
  for t in f32 f16 bf16; do
    for n in 1 7 64 760 1000 1024 4096 8192 12288 10240 32768; do
      jobs+=("stdlib/${kf%%:*}.kdsl ${kf##*:} $t N=$n")
    done
  done
done
for t in f32 f16 bf16; do
  for k in 7 64 1000 4096; do
    jobs+=("examples/group_norm.kdsl group_norm $t K=$k")  # group_norm_gpu_test
  done
done
jobs+=("tests/data/col_sum.kdsl col_sum bf16 N=1000")  # runtime_gpu_test
printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -L 1 sh -c \
  "$kdsl"' -q compile "$0" -k "$1" --dtype "$2" --shape "$3" --arch sm_90 >/dev/null || echo "FAILED: $0 $1 $2 $3"'
echo "precompiled ${#jobs[@]} specializations into $KDSL_CACHE_DIR"
