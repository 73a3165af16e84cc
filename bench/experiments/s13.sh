#!/usr/bin/env bash
# Thirteenth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s13.sh small   short rows at 1024 x 8192 bf16: the hand-written bounds of
#                  bench/experiments/rms1024.cu (.device/exp/rms1024: rows in registers or
#                  copied to shared memory, a copy of the same bytes), then kdsl's rms_norm,
#                  layer_norm and softmax with schedule hints that put more rows in flight
#   s13.sh sweep   schedule hints on the rows where torch.compile was faster in the same-run
#                  benchmark (X2): rms_norm and layer_norm f32 8192 x 10240, rms_norm_bwd bf16
#                  4096 x 32768; variants compiled in parallel first, then two rounds
#                  alternating, --verify on the first; then numerics_gpu_test
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
out="${OUT:-/tmp}"
k=.device/bin/kdsl
cat .device/COMMIT
source bench/experiments/sweep_lib.sh
case "${1:-}" in
  small)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    .device/exp/rms1024 1024
    .device/exp/rms1024 2048
    for kern in "rms_norm rms_norm" "layer_norm layer_norm" "softmax softmax"; do
      set -- $kern
      for s in default group=256,min_ctas=4 group=128,min_ctas=4 group=256 \
               persistent=1,group=256,stage=2 persistent=1,group=512,stage=2; do
        h=(); [ "$s" = default ] || h=(--schedule "$s")
        printf '%-10s %-34s ' "$2" "$s"
        $k run stdlib/$1.kdsl -k $2 --dtype bf16 --shape M=1024,N=8192 "${h[@]}" --verify --bench \
          --reps 100 2>&1 | grep -E "us|error|FAIL" | tr '\n' ' '
        echo
      done
    done
    ;;
  sweep)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    f32v="default group=512 group=1024 group=128 persistent=1 persistent=1,prefetch=1
          group=512,persistent=1 group=512,persistent=1,prefetch=1 group=512,min_ctas=2
          persistent=1,stage=2 group=512,persistent=1,stage=2 cache_invariant=1"
    bwdv="default cluster=8,group=4096,smem_columns=0 cluster=8,group=4096 cluster=4,smem_columns=0
          cluster=2,group=2048 cluster=2,group=2048,smem_columns=0 cluster=4,prefetch=1
          cluster=8,group=4096,smem_columns=0,prefetch=1"
    cases=()
    for v in $f32v; do cases+=("rms_norm rms_norm f32 M=8192,N=10240 $v" "layer_norm layer_norm f32 M=8192,N=10240 $v"); done
    for v in $bwdv; do cases+=("rms_norm rms_norm_bwd bf16 M=4096,N=32768 $v"); done
    sweep_cases
    timeout 120 .device/bin/numerics_gpu_test 2>&1 | tail -4
    ;;
  sweep2)  # after X3: the f32 forward with its weights cached, and the N = 32768 backward clusters
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=()
    for v in default cache_invariant=1 group=512,cache_invariant=1 cache_invariant=1,min_ctas=2 \
             group=512,cache_invariant=1,min_ctas=2 group=128,cache_invariant=1; do
      cases+=("rms_norm rms_norm f32 M=8192,N=10240 $v" "rms_norm rms_norm f32 M=8192,N=8192 $v")
    done
    for v in default group=512,cache_invariant=1; do
      cases+=("layer_norm layer_norm f32 M=8192,N=10240 $v")
    done
    for v in default cluster=8,group=4096,smem_columns=0; do
      cases+=("rms_norm rms_norm_bwd bf16 M=4096,N=32768 $v" "rms_norm rms_norm_bwd bf16 M=300,N=32768 $v"
              "rms_norm rms_norm_bwd f32 M=4096,N=32768 $v" "rms_norm add_rms_norm_bwd bf16 M=4096,N=32768 $v")
    done
    for v in default cluster=4,smem_columns=0 cluster=8,group=4096,smem_columns=0 cluster=8,group=4096; do
      cases+=("layer_norm layer_norm_bwd bf16 M=4096,N=32768 $v")
    done
    sweep_cases
    ;;
  final)  # the new N = 32768 backward defaults: GPU test, --verify, sanitizers; then the
           # same-run benchmark (final_bench.sh with KDSL_PEERS=run); at most 8 files in $OUT
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    timeout 150 .device/bin/stdlib_norm_gpu_test --gtest_filter='*RowsOf32K*' 2>&1 | grep -E "OK|FAIL|PASSED|SKIP" | tail -14
    for c in "rms_norm rms_norm_bwd bf16" "rms_norm add_rms_norm_bwd bf16" "layer_norm layer_norm_bwd bf16" \
             "rms_norm rms_norm_bwd f32"; do
      set -- $c
      echo "== $2 $3 4096 x 32768"
      $k run stdlib/$1.kdsl -k $2 --dtype $3 --shape M=4096,N=32768 --verify --bench --reps 100 2>&1 |
        grep -E "verify|bench:" | cut -c1-170
    done
    cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    for c in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd" "rms_norm add_rms_norm_bwd"; do
      set -- $c
      for tool in memcheck racecheck; do
        echo "== compute-sanitizer $tool $2 bf16 M=6,N=32768"
        timeout 120 "$cs" --tool $tool --error-exitcode 9 $k run stdlib/$1.kdsl -k $2 --dtype bf16 \
          --shape M=6,N=32768 --verify 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verify|error" | cut -c1-150
        echo "exit ${PIPESTATUS[0]}"
      done
    done
    ;;
  *) echo "usage: s13.sh small|sweep|sweep2|final" >&2; exit 2 ;;
esac
