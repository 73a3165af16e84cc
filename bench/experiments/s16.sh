#!/usr/bin/env bash
# Sixteenth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s16.sh check   the new default (16-bit light middle-axis scans rescan; linear_recurrence
#                  bf16/f16 with 32 steps): stdlib_scan_gpu_test (every case), compute-sanitizer
#                  memcheck and racecheck on the three rescanning kernels at a shape of several
#                  chunks with a tail, --verify at (1, 32768, 2048)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
k=.device/bin/kdsl
cat .device/COMMIT
case "${1:-}" in
  check)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    s=$(date +%s)
    bash scripts/device/precompile_scan_tests.sh "$KDSL_CACHE_DIR" "$k" 2>&1 | tail -2
    echo "precompiled in $(( $(date +%s) - s )) s"
    cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    for c in "scan cumsum_mid" "linear_recurrence linear_recurrence" "linear_recurrence linear_recurrence_bwd"; do
      set -- $c
      for tool in memcheck racecheck; do
        echo "== compute-sanitizer $tool $2 bf16 B=2,L=3001,D=96"
        timeout 120 "$cs" --tool $tool --error-exitcode 9 $k run stdlib/$1.kdsl -k $2 --dtype bf16 \
          --shape B=2,L=3001,D=96 --verify 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verify|error" | cut -c1-150
        echo "exit ${PIPESTATUS[0]}"
      done
      echo "== $2 bf16 (1, 32768, 2048)"
      $k run stdlib/$1.kdsl -k $2 --dtype bf16 --shape B=1,L=32768,D=2048 --verify --bench --reps 50 2>&1 |
        grep -E "verify|bench:|error" | cut -c1-170
    done
    s=$(date +%s)
    timeout "${LIMIT:-300}" .device/bin/stdlib_scan_gpu_test --gtest_brief=1 2>&1 | tail -12
    echo "stdlib_scan_gpu_test exit ${PIPESTATUS[0]} in $(( $(date +%s) - s )) s"
    ;;
  *) echo "usage: s16.sh check" >&2; exit 2 ;;
esac
