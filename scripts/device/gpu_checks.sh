#!/usr/bin/env bash
# Runs on the GPU machine (after scripts/device/stage.sh and precompile_tests.sh here):
# the GPU tests and the issue-2 RMSNorm runs. Logs go to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
out="${OUT:-/tmp}"
bin=.device/bin
nvidia-smi -L
git rev-parse --short HEAD 2>/dev/null || true
for t in "${@:-driver_gpu_test stdlib_norm_gpu_test numerics_gpu_test group_norm_gpu_test runtime_gpu_test}"; do
  for b in $t; do
    echo "== $b"
    "$bin/$b" --gtest_brief=1 2>&1 | tee "$out/$b.log" | tail -25
  done
done
