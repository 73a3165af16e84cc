#!/usr/bin/env bash
# Sixteenth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s16.sh check   the new default (16-bit light middle-axis scans rescan; linear_recurrence
#                  bf16/f16 with 32 steps): stdlib_scan_gpu_test (every case), compute-sanitizer
#                  memcheck and racecheck on the three rescanning kernels at a shape of several
#                  chunks with a tail, --verify at (1, 32768, 2048)
#   s16.sh multi   rms_norm_bwd f32 8192 x 10240 went 250.9 -> 295.1 us between Y and this
#                  session's final_bench: A = kdsl_old (ae3a59b, before the fourteenth
#                  session's cross-warp butterfly), B = kdsl, L = kdsl with KDSL_EXP_LOOP=1 (the
#                  ordered loop on one CTA as well; a switch of this run's working tree only),
#                  $ROUNDS rounds (2); then the SASS of A and B there ($OUT/*.sass)
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
  multi)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=("rms_norm rms_norm_bwd f32 M=8192,N=10240" "layer_norm layer_norm_bwd f32 M=8192,N=10240"
           "rms_norm rms_norm_bwd f32 M=8192,N=8192" "softmax softmax_bwd f32 M=8192,N=10240"
           "rms_norm rms_norm_bwd bf16 M=8192,N=8192" "layer_norm layer_norm_bwd bf16 M=8192,N=8192")
    variants="A: B: L:KDSL_EXP_LOOP=1"
    for c in "${cases[@]}"; do
      set -- $c
      for v in $variants; do
        b=$k; [ ${v%%:*} = A ] && b=.device/bin/kdsl_old
        e=${v#*:}; env $e $b compile stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 >/dev/null 2>&1 &
      done
    done
    wait
    for round in $(seq "${ROUNDS:-2}"); do
      for c in "${cases[@]}"; do
        set -- $c
        for v in $variants; do
          b=$k; [ ${v%%:*} = A ] && b=.device/bin/kdsl_old
          e=${v#*:}
          printf '%s %s %-16s %-5s %-15s ' $round ${v%%:*} $2 $3 $4
          env $e $b run stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 --bench --reps 50 2>&1 |
            grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|error:.*" | tr '\n' ' '
          echo
        done
      done
    done
    for v in A B; do
      b=$k; [ $v = A ] && b=.device/bin/kdsl_old
      $b emit stdlib/rms_norm.kdsl -k rms_norm_bwd --dtype f32 --shape M=8192,N=10240 --sass \
        > "${OUT:-/tmp}/rms_norm_bwd_f32_10240_$v.sass" 2>&1
      f="${OUT:-/tmp}/rms_norm_bwd_f32_10240_$v.sass"
      echo "$v: $(grep -cE '^ +/\*[0-9a-f]{4}\*/' "$f") instructions, $(grep -c LDG "$f") LDG, $(grep -c SHFL "$f") SHFL, $(grep -c 'LDS' "$f") LDS, $(grep -c BAR "$f") BAR"
    done
    ;;
  *) echo "usage: s16.sh check|multi" >&2; exit 2 ;;
esac
