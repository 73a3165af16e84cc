#!/usr/bin/env bash
# Fifteenth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s15.sh scan   KDSL_SCAN_SCHEDULE variants of the 16-bit middle-axis scans (the rescanning
#                 tile, rescan=1, with more CTAs per SM or longer tiles) against the default, same
#                 binary; variants compiled in parallel first, then $ROUNDS rounds (2), --verify in
#                 the first at (1, 32768, 2048) only (the CPU reference takes seconds there)
#   s15.sh check  stdlib_scan_gpu_test on every Small case, ScanGpu.* and the recurrences' issue
#                 shapes, with KDSL_SCAN_SCHEDULE=$SCHED (default rescan=1): every middle-axis
#                 scan kernel through the variant (last-axis scans ignore rescan)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
k=.device/bin/kdsl
cat .device/COMMIT
case "${1:-}" in
  scan)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    r2="lp=2,vr=2"
    cases=()
    for s in B=1,L=32768,D=2048 B=1,L=32768,D=1024 B=4,L=2048,D=2048; do
      # (t=64 with lp=2,vr=2 gets the 2-CTA launch bounds without ctas=2: the same code.)
      for v in default rescan=1 rescan=1,ctas=3 rescan=1,t=64,$r2; do
        cases+=("scan cumsum_mid bf16 $s $v")
      done
      for v in default rescan=1 rescan=1,ctas=3 rescan=1,t=32,$r2 rescan=1,t=32,$r2,ctas=2; do
        cases+=("linear_recurrence linear_recurrence bf16 $s $v")
      done
      for v in default rescan=1 rescan=1,ctas=3 rescan=1,t=32,$r2,ctas=2; do
        cases+=("linear_recurrence linear_recurrence_bwd bf16 $s $v")
      done
    done
    s=$(date +%s)
    for c in "${cases[@]}"; do
      set -- $c
      e=; [ "$5" != default ] && e="$5"
      KDSL_SCAN_SCHEDULE="$e" $k -q compile stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 >/dev/null 2>&1 &
      while [ "$(jobs -r | wc -l)" -ge 15 ]; do wait -n; done
    done
    wait
    echo "compiled in $(( $(date +%s) - s )) s"
    for round in $(seq "${ROUNDS:-2}"); do
      for c in "${cases[@]}"; do
        set -- $c
        e=; [ "$5" != default ] && e="$5"
        extra=; [ "$round" = 1 ] && [ "$4" = B=1,L=32768,D=2048 ] && extra=--verify
        printf '%s %-22s %-5s %-20s %-28s ' $round $2 $3 $4 $5
        KDSL_SCAN_SCHEDULE="$e" $k run stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 --bench --reps 50 $extra 2>&1 |
          grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|verify [a-z_]+: [a-zA-Z]+|error:.*" | tr '\n' ' '
        echo
      done
    done
    ;;
  check)
    export KDSL_SCAN_SCHEDULE="${SCHED-rescan=1}"
    echo "KDSL_SCAN_SCHEDULE=$KDSL_SCAN_SCHEDULE"
    s=$(date +%s)
    bash scripts/device/precompile_scan_tests.sh "$KDSL_CACHE_DIR" "$k" 2>&1 | tail -3
    echo "precompiled in $(( $(date +%s) - s )) s"
    timeout "${LIMIT:-240}" .device/bin/stdlib_scan_gpu_test --gtest_brief=1 \
      --gtest_filter='*Small/*:ScanGpu.*:*IssueShapes/linear_recurrence*:*IssueShapes/cumsum*' 2>&1 | tail -15
    echo "stdlib_scan_gpu_test exit ${PIPESTATUS[0]}"
    ;;
  *) echo "usage: s15.sh scan|check" >&2; exit 2 ;;
esac
