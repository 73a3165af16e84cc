#!/usr/bin/env bash
# Twenty-ninth session, on the GPU machine after scripts/device/stage.sh (carry .device), with
# .device/bin/kdsl_old the binary of f927987 (before the rolled default). Predictions written
# before the run:
#   s29.sh roll    rows streamed in 32 chunks a thread or more roll their chunk loop 8 chunks at
#                  a time by default (s28.sh unroll on an H100: 30-50% faster at N = 262144 for
#                  every kernel timed, fully unrolled spilling or at 255 registers). Old against
#                  new, two rounds, --verify on the new one in round 1. Prediction: the rows
#                  timed there (softmax f32, LayerNorm bf16 at 512 x 262144) as there, within 3%
#                  of the unroll=8 hint's time; the 32-chunk rows not timed there (softmax and
#                  log_softmax bf16 1024 x 131072 on 512 threads, 32 chunks; RMSNorm f32
#                  1024 x 131072; softmax_bwd bf16 512 x 262144; add_rms_norm bf16 512 x 262144)
#                  10-35% faster. Then exploratory hints (no prediction of a rule): 16-chunk
#                  streamed rows (softmax bf16 2048 x 65536 on 512 threads, softmax f32 2048 x
#                  65536 on 1024) with unroll=8 and 4. Then s28.sh push's two rows beyond one CTA
#                  (its loop was broken in the twenty-ninth session's first run).
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  roll)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "softmax softmax f32 M=512,N=262144 default"
      "layer_norm layer_norm bf16 M=512,N=262144 default"
      "softmax softmax bf16 M=1024,N=131072 default"
      "softmax log_softmax bf16 M=1024,N=131072 default"
      "rms_norm rms_norm f32 M=1024,N=131072 default"
      "softmax softmax_bwd bf16 M=512,N=262144 default"
      "rms_norm add_rms_norm bf16 M=512,N=262144 default"
    )
    precompile
    k=.device/bin/kdsl_old precompile
    ab_rounds 2 2>&1 | tee "$out/roll.txt"
    cases=()
    for spec in "softmax softmax bf16 M=2048,N=65536" "softmax softmax f32 M=2048,N=65536"; do
      for h in default unroll=8 unroll=4; do cases+=("$spec $h"); done
    done
    precompile
    rounds 2 first 2>&1 | tee -a "$out/roll.txt"
    for c in "bf16 M=8,N=1048576" "f32 M=8,N=524289"; do
      set -- $c
      printf 'new-only %-5s %-16s ' "$1" "$2"
      timeout 120 ${k} run stdlib/softmax.kdsl -k softmax --dtype "$1" --shape "$2" --verify --bench \
        --reps 20 2>&1 | grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|verify [a-z_]+: [a-zA-Z]+|error:.*" |
        tr '\n' ' '
      echo
    done 2>&1 | tee -a "$out/roll.txt"
    ;;
  peers)
    # The rolled defaults at 512 x 262144 (f32 softmax, RMSNorm, LayerNorm; bf16 LayerNorm, and
    # the cluster-of-8 bf16 softmax and RMSNorm) against PyTorch eager and torch.compile, same
    # run. No prediction (the first such comparison at f32).
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for kn in "softmax softmax" "rms_norm rms_norm" "layer_norm layer_norm"; do
      for d in f32 bf16; do cases+=("$kn $d M=512,N=262144 default"); done
    done
    precompile
    rounds 1 all 2>&1 | tee "$out/peers_long.txt"
    for d in f32 bf16; do
      timeout 150 python3 bench/experiments/long_rows_peers.py $d 512x262144 2>&1 | grep '^{'
    done | tee -a "$out/peers_long.txt"
    ;;
  online)
    # Softmax rows streamed (each phase re-reads the row) with the sum of exp(x - max) online
    # in the max's pass (the new default) against online=0 (the old code: max, then sum, then
    # the output), same binary, two rounds, --verify on the default in round 1. Prediction: the
    # rows that miss L2 on their re-reads (f32 512 x 262144, bf16 1024 x 131072) take about 3/4 of
    # their time (three reads and a write become two and a write): softmax f32 512 x 262144 720
    # -> 540-570 us on an H100 (torch.compile: 550), log_softmax the same, bf16 1024 x 131072 373
    # -> 280-310, f32 2048 x 65536 654 -> 500-540; bf16 2048 x 65536 (re-reads partly from L2,
    # 0.73 of copy) less: 242 -> 205-230. Then compute-sanitizer on the online default and
    # ieee_gpu_test (its softmax cases include rows rising after -inf).
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for spec in "softmax softmax f32 M=512,N=262144" "softmax log_softmax f32 M=512,N=262144" \
                "softmax softmax bf16 M=1024,N=131072" "softmax softmax f32 M=2048,N=65536" \
                "softmax softmax bf16 M=2048,N=65536" "softmax log_softmax bf16 M=2048,N=65536"; do
      for h in default online=0; do cases+=("$spec $h"); done
    done
    precompile
    for round in 1 2; do
      for c in "${cases[@]}"; do
        set -- $c
        extra=(); [ "$round" = 1 ] && [ "$5" = default ] && extra=(--verify)
        printf '%s ' "$round"
        bench "$@" "${extra[@]}"
      done
    done 2>&1 | tee "$out/online.txt"
    for tool in memcheck racecheck; do
      printf '%s softmax f32 M=3,N=262144 (online) ' "$tool"
      timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool "$tool" ${k} run stdlib/softmax.kdsl \
        -k softmax --dtype f32 --shape M=3,N=262144 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY"
    done 2>&1 | tee -a "$out/online.txt"
    timeout 60 .device/bin/ieee_gpu_test --gtest_brief=1 2>&1 | tail -3 | tee -a "$out/online.txt"
    ;;
  online2)
    # The online sum taken a chunk at a time without branches (after `online` found a branch
    # per value 58% slower at 16 chunks a thread, fully unrolled). Default (online from 32
    # chunks) against online=0 and, at 16 chunks, online=1; one round, --verify on the online
    # runs. Prediction: the 32- and 64-chunk rows as in `online` (554, 553, 306 us, within 3%);
    # at 16 chunks online=1 no slower than online=0 (bf16 2048 x 65536 242 -> 215-245, f32
    # 2048 x 65536 654 -> 560-640): the branch was what cost.
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "softmax softmax f32 M=512,N=262144 default" "softmax softmax f32 M=512,N=262144 online=0"
      "softmax softmax bf16 M=1024,N=131072 default" "softmax softmax bf16 M=1024,N=131072 online=0"
      "softmax softmax bf16 M=2048,N=65536 online=1" "softmax softmax bf16 M=2048,N=65536 default"
      "softmax log_softmax bf16 M=2048,N=65536 online=1" "softmax log_softmax bf16 M=2048,N=65536 default"
      "softmax softmax f32 M=2048,N=65536 online=1" "softmax softmax f32 M=2048,N=65536 default"
    )
    precompile
    for c in "${cases[@]}"; do
      set -- $c
      extra=(); [ "$5" != online=0 ] && { [ "$5" != default ] || [ "${4#*N=}" -gt 65536 ]; } && extra=(--verify)
      bench "$@" "${extra[@]}"
    done 2>&1 | tee "$out/online2.txt"
    for tool in memcheck racecheck; do
      printf '%s softmax bf16 M=3,N=65536 online=1 ' "$tool"
      timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool "$tool" ${k} run stdlib/softmax.kdsl \
        -k softmax --dtype bf16 --shape M=3,N=65536 --schedule online=1 2>&1 |
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY"
    done 2>&1 | tee -a "$out/online2.txt"
    timeout 60 .device/bin/ieee_gpu_test --gtest_brief=1 2>&1 | tail -2 | tee -a "$out/online2.txt"
    ;;
  *)
    echo "usage: s29.sh roll|peers|online|online2" >&2
    exit 2
    ;;
esac
