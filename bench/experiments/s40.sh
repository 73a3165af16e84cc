#!/usr/bin/env bash
# Fortieth session, on the GPU machine after scripts/device/stage.sh (carry .device), with
# .device/bin/kdsl built from the committed code, and .device/bin/kdsl_lbl4 / kdsl_lbl8 the same
# binary with KDSL_SCAN_SCHEDULE=lbl=4 / lbl=8 (the packed look-back walked by 4 or 8 threads per
# row, each reading one predecessor's word per round; halved to fit the CTA: rg_lru_bwd bf16's
# tile of 64 rows in 256 threads takes 4 at most).
#   s40.sh precompile  (here) the benchmark's specializations (as s36.sh precompile, without its
#                      experiments), the rg_lru IssueShapes tests', and the variants' cases.
#   s40.sh first  On an H200: `ab 2` and `rows`, else `ab 3`; then stdlib_scan_gpu_test's
#                 IssueShapes rg_lru and rg_lru_bwd (not run since the ticket split, 5dcb567).
#   `rows`        s35.sh's variants (two rounds, --verify on the hinted cases in round 1): LayerNorm
#                 and RMSNorm backward bf16 4096 x 32768 with two rows per SM (clusters of 8 CTAs
#                 of 512, min_ctas=2), never run on an H200. AM3 had them at 0.654 and 0.820 of
#                 copy there, in nearly the H100's time: a per-row chain (one row per SM at a
#                 time) would explain that. Prediction (AR1's, kept): LayerNorm backward 220-250
#                 us on the H200 with two rows per SM against about 285 for the default; RMSNorm
#                 backward within 3% (its default already has 8 CTAs of 512).
#   s40.sh bench  The full benchmark with the peers timed in the same run (final_bench.sh,
#                 KDSL_PEERS=run, committed code), on an H200 only. Prediction (for the code since
#                 the thirtieth session, AM3): rg_lru_bwd bf16 (1, 32768, 2048) 0.56-0.60 of copy
#                 (the H100's 7-8% since AM3 carried over at the same clock), LayerNorm backward
#                 bf16 4096 x 32768 0.66-0.69 (the H100's 4.4%), every other row within 3% of
#                 AM3's time.
#   `ab`          kdsl against kdsl_lbl8 and kdsl_lbl4, alternating, --verify on kdsl_lbl4 in
#                 round 1, on rg_lru_bwd bf16 and f32, cumsum_mid, linear_recurrence and its
#                 backward bf16 at (1, 32768, 2048) and the last-axis cumsum bf16 2048 x 32768;
#                 then compute-sanitizer memcheck and racecheck with --verify of kdsl_lbl4 on
#                 rg_lru_bwd and cumsum_mid bf16 (2, 4097, 258) and of kdsl_lbl8 on cumsum_mid.
#                 Prediction (before the run): rg_lru_bwd bf16 2-6% faster with lbl=4 (its tiles
#                 of 64 rows x 64 positions keep about 8 chunks of a row tile in flight, so a walk
#                 passes several aggregates: the barrier stall, 1.39 of 6.9 cycles per
#                 instruction in AP2, is mostly that walk); rg_lru_bwd f32 within 1% (256 row
#                 tiles: about one chunk of a row tile in flight, walks of one step); the
#                 memory-bound scans 0-3% faster; lbl=8 within 1% of lbl=4 (walks rarely pass
#                 more than 4 aggregates); sanitizers clean, --verify ok.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp}"
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
source bench/experiments/s35.sh lib  # (s18.sh lib: bench, ab_rounds)
rows_cases=("${cases[@]}")  # s35.sh's: two rows per SM for the long backward rows
ab_cases=("rg_lru rg_lru_bwd bf16 B=1,L=32768,D=2048 default"
  "rg_lru rg_lru_bwd f32 B=1,L=32768,D=2048 default"
  "scan cumsum_mid bf16 B=1,L=32768,D=2048 default"
  "linear_recurrence linear_recurrence bf16 B=1,L=32768,D=2048 default"
  "linear_recurrence linear_recurrence_bwd bf16 B=1,L=32768,D=2048 default"
  "scan cumsum bf16 M=2048,N=32768 default")
san_cases=("kdsl_lbl4 rg_lru rg_lru_bwd" "kdsl_lbl4 scan cumsum_mid" "kdsl_lbl8 scan cumsum_mid")
wrappers() {
  for v in 4 8; do
    printf '#!/bin/sh\nKDSL_SCAN_SCHEDULE=lbl=%s exec "$(dirname "$0")/kdsl" "$@"\n' $v > .device/bin/kdsl_lbl$v
    chmod +x .device/bin/kdsl_lbl$v
  done
}
ab() {
  wrappers
  cases=("${ab_cases[@]}")
  ab_rounds "$1" kdsl kdsl_lbl8 kdsl_lbl4
  local cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)" tool c
  for c in "${san_cases[@]}"; do
    set -- $c
    for tool in memcheck racecheck; do
      echo "== $tool $3 bf16 B=2,L=4097,D=258 ($1)"
      timeout 120 "$cs" --tool $tool --error-exitcode 9 ".device/bin/$1" run \
        "stdlib/$2.kdsl" -k "$3" --dtype bf16 --shape B=2,L=4097,D=258 --verify 2>&1 |
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verify|rror" | head -8
      echo "exit ${PIPESTATUS[0]}"
    done
  done
}
rows() {
  cases=("${rows_cases[@]}")
  k=.device/bin/kdsl rounds 2 first
}
issue_rg() {
  echo "== stdlib_scan_gpu_test IssueShapes rg_lru at ${SECONDS} s"
  timeout 300 .device/bin/stdlib_scan_gpu_test --gtest_filter='*IssueShapes/rg_lru*' 2>&1 | tail -15
}
case "${1:-}" in
  precompile)  # here: KDSL_CACHE_DIR=$PWD/.device/cache bash bench/experiments/s40.sh precompile
    k=build/kdsl
    norm=(rms_norm:rms_norm rms_norm:rms_norm_bwd layer_norm:layer_norm layer_norm:layer_norm_bwd
          softmax:softmax softmax:softmax_bwd)
    for kn in "${norm[@]}"; do
      $k -q compile "stdlib/${kn%%:*}.kdsl" -k "${kn#*:}" --dtype bf16 --shape N=8192,4096,32768,1024 \
        --arch sm_90 | tail -1
      $k -q compile "stdlib/${kn%%:*}.kdsl" -k "${kn#*:}" --dtype f32 --shape N=10240 --arch sm_90 |
        tail -1
    done
    for kn in linear_recurrence:linear_recurrence linear_recurrence:linear_recurrence_bwd \
              rg_lru:rg_lru rg_lru:rg_lru_bwd scan:cumsum_mid; do
      $k -q compile "stdlib/${kn%%:*}.kdsl" -k "${kn#*:}" --dtype bf16,f32 --shape L=2048,8192,32768 \
        --arch sm_90 | tail -1
    done
    $k -q compile stdlib/linear_recurrence.kdsl -k linear_recurrence --dtype c64 \
      --shape L=2048,8192,32768 --arch sm_90 | tail -1
    $k -q compile stdlib/linear_recurrence.kdsl -k complex_linear_recurrence_bwd \
      --shape L=2048,8192,32768 --arch sm_90 | tail -1
    $k -q compile stdlib/scan.kdsl -k cumsum --dtype bf16,f32 --shape N=2048,8192,32768 \
      --arch sm_90 | tail -1
    cases=("${rows_cases[@]}")
    precompile  # (s18.sh: each case with its hint)
    for v in lbl=4 lbl=8; do
      for c in "${ab_cases[@]}"; do
        set -- $c
        KDSL_SCAN_SCHEDULE=$v $k -q compile "stdlib/$1.kdsl" -k "$2" --dtype "$3" --shape "$4" \
          --arch sm_90 | tail -1
      done
      for c in "${san_cases[@]}"; do
        set -- $c
        KDSL_SCAN_SCHEDULE=$v $k -q compile "stdlib/$2.kdsl" -k "$3" --dtype bf16 --shape L=4097 \
          --arch sm_90 | tail -1
      done
    done
    ;;
  first)
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      ab 2
      echo "== rows at ${SECONDS} s"
      rows
    else
      ab 3
    fi
    issue_rg
    echo "done at ${SECONDS} s"
    ;;
  bench)
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      OUT="$out" KDSL_PEERS=run KDSL_PRECOMPILE=0 bash scripts/device/final_bench.sh 2>&1 | tail -80
    else
      echo "not an H200: no benchmark"
    fi
    echo "done at ${SECONDS} s"
    ;;
  ab) ab "${2:-3}" ;;
  rows) rows ;;
  *) echo "usage: s40.sh precompile|first|bench|ab [ROUNDS]|rows" >&2; exit 2 ;;
esac
