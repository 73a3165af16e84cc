#!/usr/bin/env bash
# Forty-first session, on the GPU machine after scripts/device/stage.sh (carry .device), with
# .device/bin/kdsl built from the committed code, whose `push=` schedule key (RowSchedule::push)
# picks how a cluster row's warps push their row partials into the cluster's CTAs:
#   push=0  the default: per reduction, lane 0 of each warp pushes the warp's state to each of
#           the K CTAs in turn (mapa of both addresses for each 4-byte word);
#   push=1  per reduction, lane q pushes to CTA q (the thirty-sixth session's a856647, measured
#           on an H100 only: 0.6-1.0% slower for LayerNorm backward there);
#   push=2  the states of all the reductions combined at one point packed in one struct, lane 0
#           pushing it to each CTA with one vector st.async (v2 for LayerNorm backward's two
#           sums), the addresses mapped once per push, and read back in one load per partial;
#   push=3  both.
# Only the three backward kernels at bf16 N = 32768 run on clusters among the benchmark's rows.
#   s41.sh precompile  (here) every case below.
#   s41.sh first  `ab` two rounds, `sass`, `stalls` (Nsight Compute), `wide` once, then `san`
#                 (last: racecheck is the slowest part; run it with `timeout 570`).
#
# Prediction (before the run). The fortieth session's estimate put LayerNorm backward bf16
# 4096 x 32768 near issue-bound on the H200 (290 us, 0.652 of copy; 7% faster than on the
# H100 where the other backward rows are 32-40% faster). Its PTX loses 23 (push=1), 36 (push=2)
# and 46 (push=3) of the kernel's 599 instructions (ptxas here: 64 registers, no spill, each).
# On the H200: LayerNorm backward push=1 2-6% faster, push=2 2-5%, push=3 4-10% (290 -> 260-280
# us); RMSNorm and softmax backward (one sum each, so push=2 is push=0's words) within 1% for
# push=2 and 0-3% faster for push=1 and 3. On an H100 every variant within 2% of the default (the
# H100 runs these rows at 0.85 of its copy: memory-bound). The SASS of LayerNorm backward's row
# loop 10-15% shorter with push=3. Sanitizers clean and --verify ok on every variant.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp}"
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
source bench/experiments/s35.sh lib  # (s18.sh lib: bench, rounds, precompile; stalls)
ab_cases=()
for kn in layer_norm:layer_norm_bwd rms_norm:rms_norm_bwd softmax:softmax_bwd; do
  for h in default push=1 push=2 push=3; do
    ab_cases+=("${kn%%:*} ${kn#*:} bf16 M=4096,N=32768 $h")
  done
done
# Two rows per SM (s35.sh's clusters of 8 CTAs of 512, min_ctas=2: every SM in use, where the
# default's 30 clusters of 4 CTAs of 1024 leave 12 of the 132 idle; AF4) was 11% slower on the
# H200 (AW1), with twice the pushes a warp. With push=3 a warp's pushes cost the same at any K.
# Prediction: LayerNorm backward 250-290 us with push=3 there (the default 290), RMSNorm
# backward (its default already 8 CTAs of 512 with push=0) 0-4% faster with push=3.
ab_cases+=(
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,stage=2,smem_columns=0,min_ctas=2"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,stage=2,smem_columns=0,min_ctas=2,push=3")
# reread=1 (RowSchedule::reread, written after the device tool lent no machine in the forty-first
# session): the staged rows read again from shared memory in each phase, so that the rows hold no
# registers across the row. That lets LayerNorm backward run 32 elements a thread on clusters of
# 2 CTAs of 512 (127 registers, no spill; without reread 212 bytes of spills): 66 clusters on all
# 132 SMs, and the per-row work of each warp (its butterflies, pushes, the partials' sums, the
# mbarrier) over 4 times the elements. It costs each element of a later phase a shared-memory
# read and its conversion again (the seventh session's S1: 3-23% slower where it saved no
# per-row work). Prediction: LayerNorm backward 225-260 us (the default 290), RMSNorm backward
# 200-225 (230); push=0 on the same layout 0-5% slower than push=3; the clusters of 4 CTAs of 512
# (16 elements a thread, 120 SMs) between the default and the clusters of 2.
for kn in layer_norm:layer_norm_bwd rms_norm:rms_norm_bwd; do
  for h in cluster=2,group=1024,smem_columns=0,stage=2,reread=1,push=3 \
           cluster=4,group=2048,smem_columns=0,stage=2,reread=1,push=3; do
    ab_cases+=("${kn%%:*} ${kn#*:} bf16 M=4096,N=32768 $h")
  done
done
ab_cases+=(
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=2,group=1024,smem_columns=0,stage=3,reread=1,push=3"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=2,group=1024,smem_columns=0,stage=2,reread=1")
# s36.sh's 2048 threads a row for the long backward rows (s40.sh `last`, not run there): 6-18%
# slower on an H100 (AS1). Prediction (the fortieth session's): within 5% of the default either
# way for LayerNorm backward on the H200, RMSNorm backward slower as on the H100.
wide_cases=(
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 default"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=2,smem_columns=0"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=3,smem_columns=0"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=2048,cache_rows=1,stage=2,smem_columns=0,min_ctas=2"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 default"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=2,smem_columns=0")
# compute-sanitizer at 64 rows (a cluster loops over 2 or 3 rows on 30 clusters).
san_cases=("layer_norm layer_norm_bwd push=3" "layer_norm layer_norm_bwd push=1"
  "rms_norm rms_norm_bwd push=3" "softmax softmax_bwd push=2"
  "layer_norm layer_norm_bwd cluster=2,group=1024,smem_columns=0,stage=2,reread=1,push=3")
san() {
  local cs c tool
  cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  for c in "${san_cases[@]}"; do
    set -- $c
    for tool in memcheck racecheck; do
      echo "== $tool $2 bf16 M=64,N=32768 $3"
      timeout 150 "$cs" --tool $tool --error-exitcode 9 .device/bin/kdsl run "stdlib/$1.kdsl" \
        -k "$2" --dtype bf16 --shape M=64,N=32768 --schedule "$3" --verify 2>&1 |
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verify [a-z_]+: [a-z]+|rror" | head -8
      echo "exit ${PIPESTATUS[0]}"
    done
  done
}
# SASS of LayerNorm backward's row kernel per variant: instructions in all, and by opcode.
sass() {
  local h
  for h in push=0 push=1 push=2 push=3; do
    .device/bin/kdsl emit stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16 \
      --shape M=4096,N=32768 --schedule "$h" --sass > "$out/sass_lnbwd_${h/=/}.txt" 2>&1
    grep -cE '/\*[0-9a-f]{4,}\*/ ' "$out/sass_lnbwd_${h/=/}.txt" |
      xargs printf '%s: %s SASS instructions (both kernels; the files are counted per kernel later)\n' "$h"
  done
}
case "${1:-}" in
  precompile)  # here: KDSL_CACHE_DIR=$PWD/.device/cache bash bench/experiments/s41.sh precompile
    k=build/kdsl
    cases=("${ab_cases[@]}" "${wide_cases[@]}")
    precompile
    for c in "${san_cases[@]}"; do
      set -- $c
      $k -q compile "stdlib/$1.kdsl" -k "$2" --dtype bf16 --shape N=32768 --schedule "$3" \
        --arch sm_90 | tail -1
    done
    ;;
  first)
    cat .device/COMMIT
    nvidia-smi -L
    echo "== ab at ${SECONDS} s"
    cases=("${ab_cases[@]}")
    k=.device/bin/kdsl rounds 2 first
    echo "== sass at ${SECONDS} s"
    sass
    echo "== stalls at ${SECONDS} s"
    stalls lnbwd stdlib/layer_norm.kdsl layer_norm_bwd ""
    stalls lnbwd_push3 stdlib/layer_norm.kdsl layer_norm_bwd push=3
    echo "== wide at ${SECONDS} s"
    cases=("${wide_cases[@]}")
    k=.device/bin/kdsl rounds 1 first
    echo "== san at ${SECONDS} s"
    san
    echo "done at ${SECONDS} s"
    ;;
  ab) cases=("${ab_cases[@]}"); k=.device/bin/kdsl rounds "${2:-2}" first ;;
  h200)
    # Forty-second session: `first` ran on an H100 (AX1): push=3 3.7% slower than the default for
    # LayerNorm backward at boost clocks, but 6.6% faster under Nsight Compute (base clocks,
    # 350.8 -> 327.6 us, issue slots 0.73 -> 0.63 of cycles). The H200 ran LayerNorm backward near
    # issue-bound (AW2: 290 us, 0.652 of copy). Prediction: on the H200 push=3 2-8% faster than
    # the default (290 -> 267-284 us), the reread layout on clusters of 2 within 5% either way;
    # RMSNorm backward within 2% for each. On any other GPU it runs the row kernels' GPU tests.
    cat .device/COMMIT
    nvidia-smi -L
    if ! nvidia-smi -L | grep -q H200; then
      # Not an H200: the GPU tests of the row kernels instead (correctness at this commit).
      for t in stdlib_norm_gpu_test numerics_gpu_test ieee_gpu_test group_norm_gpu_test; do
        echo "== $t at ${SECONDS} s"
        timeout 130 ".device/bin/$t" --gtest_brief=1 2>&1 | tail -4
      done
      exit 0
    fi
    cases=()
    for h in default push=1 push=3 cluster=2,group=1024,smem_columns=0,stage=2,reread=1,push=3 \
             cluster=8,group=4096,stage=2,smem_columns=0,min_ctas=2,push=3; do
      cases+=("layer_norm layer_norm_bwd bf16 M=4096,N=32768 $h")
    done
    for h in default push=3 cluster=2,group=1024,smem_columns=0,stage=2,reread=1,push=3; do
      cases+=("rms_norm rms_norm_bwd bf16 M=4096,N=32768 $h")
    done
    k=.device/bin/kdsl rounds "${2:-3}" first
    echo "done at ${SECONDS} s"
    ;;
  *) echo "usage: s41.sh precompile|first|ab [ROUNDS]|h200 [ROUNDS]" >&2; exit 2 ;;
esac
