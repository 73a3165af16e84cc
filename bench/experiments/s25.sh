#!/usr/bin/env bash
# Twenty-fifth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s25.sh ab     RG-LRU backward keeps phase A's sigmoid and exp of gate_a (computed at t + 1
#                 for the reverse scan) for phase B, which needed them at t, one step on, and
#                 computed them again (ScanSchedule::keep_math); the 16-bit heavy-math layout now
#                 asks for two CTAs per SM in its launch bounds (ptxas gave 164 registers without
#                 them). One binary, four variants by KDSL_SCAN_SCHEDULE wrappers:
#                   kdsl_old  keep=0,ctas=0  (the previous code: no kept values, no bounds)
#                   kdsl_k0   keep=0         (the bounds alone)
#                   kdsl_k1n  keep=1,ctas=0  (kept values, 164 registers: one CTA per SM)
#                   kdsl      the new default
#                 two rounds, alternating, --verify on the default in round 1; then
#                 compute-sanitizer memcheck and racecheck on the kept tiles and on the complex
#                 (unpacked) look-back, and the RG-LRU cases of stdlib_scan_gpu_test.
#                 Prediction: rg_lru_bwd bf16 and f16 at (1, 32768, 2048) 4-7% faster (one
#                 sigmoid and one exp of about 167 instructions an element, about 12, are gone;
#                 128 registers and the same 12-byte spill as before); f32 (full-precision
#                 expf and sigmoid, 122 registers either way) 5-10%; kdsl_k1n slower than the
#                 default (half the warps per SM); rg_lru bf16 within 1% (the bounds only).
#   s25.sh sanitize  scripts/device/sanitize.sh (memcheck and racecheck on every schedule, the
#                 cases of tests/sanitize_cases.cpp), last run in full in the fifth session.
#   s25.sh final  scripts/device/final_bench.sh with the peers timed in the same run.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
scan_shape=B=1,L=32768,D=2048
case "${1:-}" in
  ab)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    for w in "kdsl_old keep=0,ctas=0" "kdsl_k0 keep=0" "kdsl_k1n keep=1,ctas=0"; do
      set -- $w
      printf '#!/bin/sh\nKDSL_SCAN_SCHEDULE=%s exec "$(dirname "$0")/kdsl" "$@"\n' "$2" > .device/bin/$1
      chmod +x .device/bin/$1
    done
    bins=(kdsl_old kdsl_k0 kdsl_k1n kdsl)
    cases=(
      "rg_lru rg_lru_bwd bf16 $scan_shape default"
      "rg_lru rg_lru_bwd f16 $scan_shape default"
      "rg_lru rg_lru_bwd f32 $scan_shape default"
      "rg_lru rg_lru bf16 $scan_shape default"
    )
    for b in "${bins[@]}"; do k=.device/bin/$b precompile; done
    {
      ab_rounds 2 "${bins[@]}"
      cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
      while read -r f kn dt sh; do
        dta=(); [ "$dt" != - ] && dta=(--dtype "$dt")  # -: the kernel has no generic
        $k run "stdlib/$f.kdsl" -k "$kn" "${dta[@]}" --shape "$sh" > /dev/null 2>&1
        for tool in memcheck racecheck; do
          r=$(timeout 120 "$cs" --tool $tool --error-exitcode 9 $k run "stdlib/$f.kdsl" -k "$kn" \
              "${dta[@]}" --shape "$sh" --verify 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verify" | tr '\n' ' ')
          echo "$kn $dt $sh $tool rc=${PIPESTATUS[0]} $r"
        done
      done <<'CASES'
rg_lru rg_lru_bwd bf16 B=1,L=3000,D=128
rg_lru rg_lru_bwd f32 B=2,L=1000,D=40
rg_lru rg_lru_bwd f16 B=3,L=333,D=5
linear_recurrence linear_recurrence c64 B=1,L=3000,D=64
linear_recurrence complex_linear_recurrence_bwd - B=1,L=3000,D=64
CASES
      s=$(date +%s)
      f='*rg_lru*:*IssueShapes/linear_recurrence_bwd*'
      timeout 150 .device/bin/stdlib_scan_gpu_test --gtest_filter="$f" 2>&1 | grep -E "OK|FAIL|PASSED|tests ran" | tail -40
      echo "stdlib_scan_gpu_test in $(( $(date +%s) - s )) s"
    } 2>&1 | tee "$out/ab.txt"
    ;;
  sanitize)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    KDSL_SANITIZE_TOOLS="memcheck racecheck" bash scripts/device/sanitize.sh "${2:-420}" 2>&1 | tail -80 | tee "$out/sanitize.txt"
    ;;
  final)
    final_run
    ;;
  *)
    echo "usage: s25.sh ab|sanitize [SECONDS]|final" >&2
    exit 2
    ;;
esac
