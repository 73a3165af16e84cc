#!/usr/bin/env bash
# Fortieth session, on the GPU machine after scripts/device/stage.sh (carry .device), with
# .device/bin/kdsl built from the committed code and wrappers (written by `ab`) that run it with
# KDSL_SCAN_SCHEDULE set: kdsl_lbl4 (lbl=4: the packed look-back walked by 4 threads per row, each
# reading one predecessor's word per round; halved to fit the CTA), kdsl_tkp (tkp=1: the CTA's
# next ticket taken once the tile's look-back is done, its atomicAdd in flight during phase B) and
# kdsl_lbl4tkp (both). The lbl and tkp keys were removed after AW1 (slower or no faster); to run
# `ab` or `race` again, apply bench/experiments/lookback_lanes_tkp_s40.patch and rebuild first.
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
#   `ab`          kdsl, kdsl_tkp, kdsl_lbl4tkp and kdsl_lbl4, alternating, --verify on the three
#                 variants in round 1, on rg_lru_bwd bf16 and f32, cumsum_mid, linear_recurrence
#                 and its backward bf16 at (1, 32768, 2048) and the last-axis cumsum bf16
#                 2048 x 32768; then compute-sanitizer memcheck and racecheck with --verify of
#                 kdsl_lbl4tkp on rg_lru_bwd and cumsum_mid bf16 (2, 4097, 258).
#                 Prediction (before the run), lbl=4: rg_lru_bwd bf16 2-6% faster (its tiles of
#                 64 rows x 64 positions keep about 8 chunks of a row tile in flight, so a walk
#                 passes several aggregates: the barrier stall, 1.39 of 6.9 cycles per
#                 instruction in AP2, is mostly that walk); rg_lru_bwd f32 within 1% (256 row
#                 tiles: about one chunk of a row tile in flight, walks of one step); the
#                 memory-bound scans 0-3% faster (cumsum last axis: 4 chunks a row, its walks
#                 find an inclusive prefix at once: within 1%). tkp=1: 1-4% faster on every
#                 kernel (an L2 atomic's round trip, about 0.5-1 us, taken off each tile's
#                 critical path: tiles of 1.7 us (cumsum_mid) to 7 us (rg_lru_bwd bf16), partly
#                 hidden today by the SM's other CTA); both together about the sum. Sanitizers
#                 clean, --verify ok.
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
san_cases=("kdsl_lbl4tkp rg_lru rg_lru_bwd" "kdsl_lbl4tkp scan cumsum_mid")
variants=("kdsl_tkp tkp=1" "kdsl_lbl4tkp lbl=4,tkp=1" "kdsl_lbl4 lbl=4")
wrappers() {
  local v
  for v in "${variants[@]}"; do
    set -- $v
    printf '#!/bin/sh\nKDSL_SCAN_SCHEDULE=%s exec "$(dirname "$0")/kdsl" "$@"\n' "$2" > ".device/bin/$1"
    chmod +x ".device/bin/$1"
  done
}
ab() {
  local round c b extra
  wrappers
  for round in $(seq "$1"); do
    for c in "${ab_cases[@]}"; do
      for b in kdsl kdsl_tkp kdsl_lbl4tkp kdsl_lbl4; do
        extra=(); [ "$round" = 1 ] && [ "$b" != kdsl ] && extra=(--verify)
        printf '%s %-12s ' "$round" "$b"
        k="timeout 60 .device/bin/$b" bench $c "${extra[@]}"
      done
    done
  done
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
# s36.sh's wide cases: 2048 threads a row (16 elements a thread) for the long backward rows, 6-18%
# slower on an H100 (AS1). After AW1-AW2 (LayerNorm backward bf16 4096 x 32768 7% faster on the
# H200 than on the H100, every other backward row 32-40%): does the H200 answer fewer threads a
# row differently? Prediction: within 5% of the default either way on LayerNorm backward (the
# H100's loss came with half the warps; the H200's limit is not the bytes), RMSNorm backward
# slower as on the H100.
wide_cases=(
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 default"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=2,smem_columns=0"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=3,smem_columns=0"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=2048,cache_rows=1,stage=2,smem_columns=0,min_ctas=2"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 default"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=2,smem_columns=0")
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
    cases=("${rows_cases[@]}" "${wide_cases[@]}")
    precompile  # (s18.sh: each case with its hint)
    for v in "${variants[@]}"; do
      v=${v#* }
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
  last)  # `race`, then s36.sh's `wide` cases, one round, on the H200 (see below)
    cat .device/COMMIT
    nvidia-smi -L
    echo "== wide at ${SECONDS} s"
    cases=("${wide_cases[@]}")
    k=.device/bin/kdsl rounds 1 first
    RACE_CASES="scan cumsum_mid" bash "$0" race
    echo "done at ${SECONDS} s"
    ;;
  race)  # after AW1's racecheck warnings on kdsl_lbl4tkp: each variant alone, racecheck only,
         # with lane 0 alone reading the warps' aggregates (the c == 0 tiles had no __syncwarp
         # between the other lanes' reads and lane 0's writes of them). Prediction: 0 hazards.
    wrappers
    cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    for b in kdsl_lbl4 kdsl_tkp; do
      race_cases=("rg_lru rg_lru_bwd" "scan cumsum_mid")
      [ -n "${RACE_CASES:-}" ] && race_cases=("$RACE_CASES")
      for c in "${race_cases[@]}"; do
        set -- $c
        echo "== racecheck $2 bf16 B=2,L=4097,D=258 ($b)"
        timeout 120 "$cs" --tool racecheck --error-exitcode 9 ".device/bin/$b" run \
          "stdlib/$1.kdsl" -k "$2" --dtype bf16 --shape B=2,L=4097,D=258 --verify 2>&1 |
          grep -E "RACECHECK SUMMARY|verify [a-z_]+: [a-z]+|Warning|Error" | head -8
        echo "exit ${PIPESTATUS[0]}"
      done
    done
    ;;
  *) echo "usage: s40.sh precompile|first|bench|ab [ROUNDS]|rows|race|last" >&2; exit 2 ;;
esac
