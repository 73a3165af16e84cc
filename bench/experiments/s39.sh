#!/usr/bin/env bash
# Thirty-ninth session, on the GPU machine after scripts/device/stage.sh (carry .device), with
# .device/bin/kdsl built from the committed code and .device/bin/kdsl_split the same commit with
# bench/experiments/ticket_split_s38.patch applied (the ticket's thread splits the ticket into
# chunk and row tile once for the CTA, instead of a 64-bit division in every warp).
#   s39.sh precompile  (here) both binaries' specializations into KDSL_CACHE_DIR.
#   s39.sh run    On an H200: the full benchmark with the peers timed in the same run
#                 (final_bench.sh, KDSL_PEERS=run, committed code; prediction as s37.sh's), then
#                 `ab` with two rounds. On any other GPU: `ab` with three rounds.
#   `ab`          kdsl against kdsl_split, alternating, --verify on kdsl_split in round 1, on
#                 rg_lru_bwd bf16 and f32, cumsum_mid, linear_recurrence and its backward bf16 at
#                 (1, 32768, 2048) and the last-axis cumsum bf16 2048 x 32768; then
#                 compute-sanitizer memcheck and racecheck of kdsl_split on rg_lru_bwd and
#                 cumsum_mid bf16 (2, 4097, 258) with --verify. Prediction (written in the
#                 thirty-eighth session, unchanged): rg_lru_bwd bf16 0.5-2% faster (7 of 8 warps
#                 skip the division: about 1.5% of its instructions), f32 0-1%; the memory-bound
#                 scans within 1%; sanitizers clean.
# VARIANT=NAME (both modes) puts .device/bin/NAME in kdsl_split's place (precompile: /tmp/NAME).
# Second half of the session, after AV1 kept the split: VARIANT=kdsl_split32, the committed code
# with the ticket's division done in 32 bits where the tiles fit (a uniform branch; 64 bits
# beyond), against kdsl (the split). AV1 saw cumsum_mid and linear_recurrence_bwd 0.1-1% slower
# with the split, explained (not measured) by the ticket's thread dividing before the
# __syncthreads every warp waits at. Prediction: the memory-bound scans 0-0.5% faster with
# split32 (a 32-bit division is about half the 64-bit one's instructions, on that one thread's
# critical path); rg_lru_bwd within 0.5% (one division per CTA and tile either way).
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s35.sh lib  # (s18.sh lib: bench, ab_rounds)
out="${OUT:-/tmp}"
variant="${VARIANT:-kdsl_split}"
ab_cases=("rg_lru rg_lru_bwd bf16 B=1,L=32768,D=2048 default"
  "rg_lru rg_lru_bwd f32 B=1,L=32768,D=2048 default"
  "scan cumsum_mid bf16 B=1,L=32768,D=2048 default"
  "linear_recurrence linear_recurrence bf16 B=1,L=32768,D=2048 default"
  "linear_recurrence linear_recurrence_bwd bf16 B=1,L=32768,D=2048 default"
  "scan cumsum bf16 M=2048,N=32768 default")
san_cases=("rg_lru rg_lru_bwd" "scan cumsum_mid")
ab() {
  cases=("${ab_cases[@]}")
  ab_rounds "$1" kdsl "$variant"
  local cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)" tool c
  for c in "${san_cases[@]}"; do
    set -- $c
    for tool in memcheck racecheck; do
      echo "== $tool $2 bf16 B=2,L=4097,D=258 ($variant)"
      timeout 120 "$cs" --tool $tool --error-exitcode 9 ".device/bin/$variant" run \
        "stdlib/$1.kdsl" -k "$2" --dtype bf16 --shape B=2,L=4097,D=258 --verify 2>&1 |
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verify|rror" | head -8
      echo "exit ${PIPESTATUS[0]}"
    done
  done
}
case "${1:-}" in
  precompile)  # here: KDSL_CACHE_DIR=$PWD/.device/cache bash s39.sh precompile
    for b in build/kdsl "/tmp/$variant"; do
      for c in "${ab_cases[@]}"; do
        set -- $c
        $b -q compile "stdlib/$1.kdsl" -k "$2" --dtype "$3" --shape "$4" --arch sm_90 &
      done
      for c in "${san_cases[@]}"; do
        set -- $c
        $b -q compile "stdlib/$1.kdsl" -k "$2" --dtype bf16 --shape L=4097 --arch sm_90 &
      done
      wait
    done
    ;;
  run)
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      OUT="$out" KDSL_PEERS=run KDSL_PRECOMPILE=0 bash scripts/device/final_bench.sh 2>&1 | tail -60
      echo "== ab at ${SECONDS} s"
      ab 2
    else
      ab 3
    fi
    echo "done at ${SECONDS} s"
    ;;
  ab) ab "${2:-3}" ;;  # `ab` alone, ROUNDS (default 3) rounds, on any GPU
  *) echo "usage: s39.sh precompile|run|ab [ROUNDS]" >&2; exit 2 ;;
esac
