#!/usr/bin/env bash
# The correctness run on the GPU machine (after scripts/device/stage.sh here; carry .device):
# compiles every specialization the GPU tests use with the machine's cores (unless .device/cache
# already has them), runs the GPU tests, the example and the issue-2 RMSNorm runs. With
# KDSL_DEVICE_FUZZ=SECONDS it also fuzzes the front end on the spare cores meanwhile
# (scripts/device/fuzz.sh). The test logs come back as $OUT/gpu_logs.tgz.
# Usage: scripts/device/gpu_checks.sh [TEST_BINARY...]   (default: every *_gpu_test)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
out="${OUT:-/tmp}"
logs="$(mktemp -d)"
bin=.device/bin
nvidia-smi -L
cat .device/COMMIT 2>/dev/null
start=$(date +%s)
if [ "${KDSL_PRECOMPILE:-1}" = 1 ]; then
  bash scripts/device/precompile_tests.sh "$KDSL_CACHE_DIR" "$bin/kdsl" 2>&1 | tail -3
  bash scripts/device/precompile_scan_tests.sh "$KDSL_CACHE_DIR" "$bin/kdsl" 2>&1 | tail -3
  echo "precompiled in $(( $(date +%s) - start )) s"
fi
if [ -n "${KDSL_DEVICE_FUZZ:-}" ]; then
  bash scripts/device/fuzz.sh start "$KDSL_DEVICE_FUZZ" "${KDSL_FUZZ_WORKERS:-$(( $(nproc) - 3 ))}"
fi
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  tests=(driver_gpu_test stdlib_norm_gpu_test numerics_gpu_test group_norm_gpu_test runtime_gpu_test
         ieee_gpu_test cli_gpu_test stdlib_scan_gpu_test big_gpu_test)
fi
for b in "${tests[@]}"; do
  echo "== $b ($(( $(date +%s) - start )) s)"
  timeout "${KDSL_TEST_TIMEOUT:-420}" stdbuf -oL "$bin/$b" --gtest_brief=1 >"$logs/$b.log" 2>&1
  echo "exit $?"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|error|exception' "$logs/$b.log" |
    tail -12
done
if [ -x "$bin/rms_norm_example" ]; then
  echo "== rms_norm_example"
  "$bin/rms_norm_example" 2>&1 | tail -5
fi
echo "== issue 2: kdsl run rms_norm --verify --bench"
for spec in "bf16 M=1024,N=8192" "bf16 M=8192,N=8192" "f32 M=8192,N=10240" "f16 M=4096,N=4096"; do
  set -- $spec
  "$bin/kdsl" run stdlib/rms_norm.kdsl -k rms_norm --dtype "$1" --shape "$2" --verify --bench 2>&1 |
    tail -6
done
if [ -n "${KDSL_DEVICE_FUZZ:-}" ]; then bash scripts/device/fuzz.sh wait; fi
tar czf "$out/gpu_logs.tgz" -C "$logs" .
echo "total $(( $(date +%s) - start )) s"
