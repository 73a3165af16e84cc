#!/usr/bin/env bash
# The correctness runs of the ninth session's scan.columns layout (bench/RESULTS.md, T3 to T5), on
# the GPU machine after scripts/device/stage.sh (carry .device):
#   bench/experiments/scan_layout_checks.sh t3   kdsl run --verify --bench of the middle-axis
#                                                 kernels whose default changed, 3 dtypes, 4 shapes
#   bench/experiments/scan_layout_checks.sh t4   the f32 cases T3 reported FAILED, old layout
#                                                 (KDSL_SCAN_SCHEDULE) against the new
#   bench/experiments/scan_layout_checks.sh t5   the same cases and three unchanged kernels
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
# v FILE KERNEL SHAPE DTYPE [SCAN_HINT]: the verify lines of one run
v() {
  KDSL_SCAN_SCHEDULE="${5:-}" .device/bin/kdsl run "stdlib/$1.kdsl" -k "$2" --dtype "$4" \
    --shape "$3" --verify 2>&1 | grep "^verify" | sed "s/^/$2 $4 $3 [${5:-default}] /" | cut -c1-260
}
t3() {
  for d in f32 bf16 f16; do
    for k in "scan cumsum_mid" "scan cumsum_reverse_exclusive_mid" "scan cumprod_mid" \
             "linear_recurrence linear_recurrence" "linear_recurrence linear_recurrence_bwd"; do
      set -- $k
      for shape in B=1,L=32768,D=2048 B=3,L=1000,D=100 B=2,L=4097,D=258 B=1,L=300,D=66; do
        .device/bin/kdsl run "stdlib/$1.kdsl" -k "$2" --dtype $d --shape $shape --verify --bench \
          --reps 20 --warmup 3 2>&1 | grep -E "^verify|^bench" | sed "s/^/$2 $d $shape: /"
      done
    done
  done
}
t4() {
  for s in B=2,L=4097,D=258 B=1,L=32768,D=2048; do
    v scan cumsum_mid $s f32; v scan cumsum_mid $s f32 vr=1,lp=4,t=16
    v scan cumsum_reverse_exclusive_mid $s f32 vr=1,lp=4,t=16
  done
  v linear_recurrence linear_recurrence_bwd B=1,L=32768,D=2048 f32
  v linear_recurrence linear_recurrence_bwd B=1,L=32768,D=2048 f32 vr=1,lp=4,t=8
}
t5() {
  for s in B=2,L=4097,D=258 B=1,L=32768,D=2048; do
    v scan cumsum_mid $s f32; v scan cumsum_reverse_exclusive_mid $s f32
    v linear_recurrence linear_recurrence_bwd $s f32
  done
  v scan cumsum M=2048,N=32768 f32
  v rg_lru rg_lru_bwd B=1,L=32768,D=2048 f32
  v rms_norm rms_norm M=1024,N=8192 f32
}
case "${1:-}" in
  t3) t3 ;;
  t4) t4 ;;
  t5) t5 ;;
  *) echo "usage: bench/experiments/scan_layout_checks.sh t3|t4|t5" >&2; exit 2 ;;
esac
