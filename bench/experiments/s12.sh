#!/usr/bin/env bash
# Twelfth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s12.sh profile   the SASS (cuobjdump, through `kdsl emit --sass`) of the bf16 scan kernels
#                    and Nsight Compute's executed instructions per opcode for rg_lru_bwd and
#                    linear_recurrence bf16 at (1, 32768, 2048), written to $OUT
#   s12.sh pipeline  the bf16 scan kernels with the scan schedule's pipelining (the next tile's
#                    loads during the look-back: pipeline=1 registers, 2 cp.async) and more CTAs
#                    per SM (ctas=), through KDSL_SCAN_SCHEDULE, against the default; the
#                    variants precompiled in parallel, then two rounds alternating
#   s12.sh ab        181631e's kdsl (.device/bin/kdsl_old) against this one, same run,
#                    alternating A, B, A, B: scan kernels with a custom combine (branch-free
#                    combine) and RG-LRU (approximate expm1 for 16-bit data)
#   s12.sh ab2       the same for the launch bounds of the memory-bound 2-row layout (2e9cd75):
#                    the backward recurrences and cumprods whose registers it caps
#   s12.sh ab3       243fab3's kdsl (.device/bin/kdsl_old) against this one (519a709: one square
#                    root in rg_lru_bwd, ex2.approx.ftz in sigmoid and expm1) on RG-LRU; then
#                    numerics_gpu_test, the RG-LRU cases of stdlib_scan_gpu_test, compute-sanitizer
#   s12.sh checks    numerics_gpu_test; stdlib_scan_gpu_test on every Small case, ScanGpu.* and
#                    the issue shapes of RG-LRU and the linear recurrences
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
out="${OUT:-/tmp}"
k=.device/bin/kdsl
cat .device/COMMIT
scan=B=1,L=32768,D=2048
ab_cases() {  # "file kernel dtype"...: .device/bin/kdsl_old against $k, two rounds each
  for c in "$@"; do
    set -- $c
    bash scripts/device/ab.sh .device/bin/kdsl_old $k stdlib/$1.kdsl $2 $3 $scan 2
  done
}
case "${1:-}" in
  profile)
    for c in "rg_lru rg_lru_bwd" "rg_lru rg_lru" "linear_recurrence linear_recurrence" \
             "linear_recurrence linear_recurrence_bwd" "scan cumsum_mid"; do
      set -- $c
      for dt in bf16 f32; do
        $k emit stdlib/$1.kdsl -k $2 --dtype $dt --shape $scan --sass > "$out/$2_$dt.sass" 2>&1 &
      done
    done
    wait
    ls -la "$out"
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    for c in "rg_lru rg_lru_bwd" "linear_recurrence linear_recurrence"; do
      set -- $c
      echo "== ncu $2 bf16: executed instructions per opcode"
      timeout 150 "$ncu" --kernel-name regex:"$2_bf16_n32768\$" --launch-count 1 \
        --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,gpu__time_duration.sum \
        --print-metric-instances values \
        $k run stdlib/$1.kdsl -k $2 --dtype bf16 --shape $scan --bench --reps 1 --warmup 0 2>&1 |
        grep -vE "^\s*$" | tail -20
    done
    ;;
  pipeline)
    cases="scan:cumsum_mid:$scan linear_recurrence:linear_recurrence:$scan
           linear_recurrence:linear_recurrence_bwd:$scan scan:cumsum:M=2048,N=32768
           rg_lru:rg_lru_bwd:$scan scan:cumsum_mid:B=4,L=2048,D=2048"
    variants="default pipeline=1 pipeline=2 ctas=3 ctas=4 pipeline=2,ctas=3"
    s=$(date +%s)
    for c in $cases; do for v in $variants; do echo "$c $v"; done; done | xargs -P "$(nproc)" -L 1 sh -c \
      'IFS=: read f kern sh <<E
$0
E
      [ "$1" = default ] && v= || v=$1
      KDSL_SCAN_SCHEDULE=$v '"$k"' -q compile stdlib/$f.kdsl -k $kern --dtype bf16 --shape $sh >/dev/null 2>&1 ||
        echo "cannot compile $0 $1"'
    echo "precompiled in $(( $(date +%s) - s )) s"
    for c in $cases; do
      IFS=: read f kern sh <<<"$c"
      for round in 1 2; do
        for v in $variants; do
          [ "$v" = default ] && e= || e=$v
          line=$(KDSL_SCAN_SCHEDULE=$e $k run stdlib/$f.kdsl -k $kern --dtype bf16 --shape $sh --bench \
                 --reps 30 --warmup 5 2>&1 | grep -E "bench:|error" | head -1)
          us=$(echo "$line" | sed -n 's/bench: \([0-9.]*\) us median.*/\1/p')
          ratio=$(echo "$line" | sed -n 's/.*GB\/s over [0-9]* bytes, \([0-9.]*\) of the same-run.*/\1/p')
          printf '%-22s %-16s %-20s %9s us  %s of copy\n' "$kern" "$sh" "$v" "${us:-?}" "${ratio:-$line}"
        done
      done
    done
    echo "done in $(( $(date +%s) - s )) s"
    ;;
  ab)
    ab_cases "rg_lru rg_lru_bwd bf16" "rg_lru rg_lru bf16" "rg_lru rg_lru_bwd f32" \
      "linear_recurrence linear_recurrence bf16" "linear_recurrence linear_recurrence_bwd bf16" \
      "linear_recurrence linear_recurrence f32" "scan cumsum_mid bf16"
    ;;
  ab2)
    ab_cases "linear_recurrence linear_recurrence_bwd bf16" \
      "linear_recurrence linear_recurrence_h0_bwd bf16" "scan cumprod_exclusive_mid_bwd bf16" \
      "scan cumprod_mid_bwd bf16" "linear_recurrence linear_recurrence_bwd f32" \
      "linear_recurrence linear_recurrence bf16" "linear_recurrence linear_recurrence_h0 bf16" \
      "rg_lru rg_lru_bwd bf16"
    ;;
  ab3)
    ab_cases "rg_lru rg_lru_bwd bf16" "rg_lru rg_lru bf16" "rg_lru rg_lru_bwd f32" "rg_lru rg_lru_bwd f16"
    echo "== numerics_gpu_test"
    timeout 60 .device/bin/numerics_gpu_test 2>&1 | grep -E "largest|FAIL|PASSED" | head -40
    echo "== stdlib_scan_gpu_test (RG-LRU)"
    timeout 200 .device/bin/stdlib_scan_gpu_test --gtest_brief=1 \
      --gtest_filter='*Small/rg_lru*:*IssueShapes/rg_lru*' 2>&1 | tail -6
    for tool in memcheck racecheck; do
      echo "== $tool rg_lru_bwd bf16 (2, 4097, 258)"
      timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $k run stdlib/rg_lru.kdsl \
        -k rg_lru_bwd --dtype bf16 --shape B=2,L=4097,D=258 --verify 2>&1 |
        grep -E "SUMMARY|verify|rror" | head -6
      echo "exit ${PIPESTATUS[0]}"
    done
    ;;
  checks)
    echo "== numerics_gpu_test"
    timeout 200 .device/bin/numerics_gpu_test 2>&1 | grep -E "largest|FAIL|PASSED|OK \]" | head -60
    echo "== stdlib_scan_gpu_test"
    timeout 300 .device/bin/stdlib_scan_gpu_test --gtest_brief=1 \
      --gtest_filter='*Small/*:ScanGpu.*:*IssueShapes/rg_lru*:*IssueShapes/linear_recurrence*' 2>&1 | tail -15
    ;;
  *) echo "usage: $0 profile|pipeline|ab|ab2|ab3|checks"; exit 2 ;;
esac
