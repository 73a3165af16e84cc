#!/usr/bin/env bash
# Scan-schedule sweeps of 2026-11-29 on the GPU machine (after scripts/device/stage.sh; carry
# .device), each at (1, 32768, 2048) through scripts/device/sweep.sh with KDSL_SCAN_SCHEDULE
# variants; the results are in bench/RESULTS.md.
#   bench/experiments/scan_sweep.sh 1   tile shapes, rows per access, register pipelining, and
#                                       Nsight Compute on two variants (into $OUT)
#   bench/experiments/scan_sweep.sh 2   the staged cp.async pipeline (pipeline=2) and register
#                                       caps (ctas=N)
#   bench/experiments/scan_sweep.sh 3   the packed look-back against packed=0, tile lengths
#   bench/experiments/scan_sweep.sh 4   16-byte accesses of several rows (vr) and 64- to 256-byte
#                                       rows per position, with the packed look-back (2026-11-30)
#   bench/experiments/scan_sweep.sh 5 DT  8-byte accesses of 128- and 256-byte rows per position
#                                       and the steps per thread, every middle-axis scan kernel in
#                                       dtype DT (f32 or bf16; one GPU each), 2026-11-30
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
shape=B=1,L=32768,D=2048
sw() { bash scripts/device/sweep.sh "$@"; }
nvidia-smi -L
cat .device/COMMIT

sweep1() {
  sw stdlib/linear_recurrence.kdsl linear_recurrence f32 $shape "" scan:pipeline=1 scan:lp=1 \
    scan:lp=1,pipeline=1 scan:vr=4 scan:vr=4,pipeline=1 scan:vr=4,t=4 scan:vr=4,t=4,pipeline=1 \
    scan:vr=4,lp=2,t=4 scan:vr=4,lp=2,t=4,pipeline=1 scan:t=16 scan:t=4 scan:wp=4 \
    scan:vr=4,wp=4,t=4 scan:vr=2,lp=2 scan:vr=2,lp=2,pipeline=1
  sw stdlib/linear_recurrence.kdsl linear_recurrence bf16 $shape "" scan:pipeline=1 scan:lp=1 \
    scan:vr=8 scan:vr=8,lp=4 scan:vr=8,lp=4,pipeline=1 scan:vr=4,lp=2 scan:vr=4,lp=2,pipeline=1 \
    scan:vr=2,lp=1 scan:vr=2,lp=1,pipeline=1 scan:vr=8,lp=4,t=4 scan:vr=8,lp=4,t=4,pipeline=1
  for k in "linear_recurrence linear_recurrence_bwd" "scan cumsum_mid" "rg_lru rg_lru_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 f32 $shape "" scan:pipeline=1 scan:vr=4 scan:vr=4,pipeline=1 \
      scan:vr=4,t=4,pipeline=1 scan:lp=1,pipeline=1 scan:vr=2,lp=2,pipeline=1
  done
  ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
  for hint in "" "vr=4,pipeline=1"; do
    KDSL_SCAN_SCHEDULE="$hint" timeout 120 "$ncu" --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      -k regex:kdsl_linear_recurrence -c 1 .device/bin/kdsl run stdlib/linear_recurrence.kdsl \
      -k linear_recurrence --dtype f32 --shape $shape --bench --reps 1 --warmup 0 \
      >"${OUT:-/tmp}/ncu_lr_f32_$(echo "${hint:-default}" | tr ",=" "__").txt" 2>&1
    echo "ncu ${hint:-default}: exit $?"
  done
}

sweep2() {
  lr=stdlib/linear_recurrence.kdsl
  sw $lr linear_recurrence f32 $shape "" scan:t=16 scan:pipeline=2 scan:pipeline=2,ctas=4 \
    scan:pipeline=2,ctas=3 scan:t=16,pipeline=2,ctas=3 scan:t=16,ctas=3 scan:vr=4,t=4,pipeline=2 \
    scan:vr=4,t=4,pipeline=2,ctas=3 scan:vr=2,lp=2,t=8,pipeline=2 scan:t=16,pipeline=2 \
    scan:wp=4,pipeline=2 scan:t=32
  sw $lr linear_recurrence bf16 $shape "" scan:vr=8,lp=4,t=4 scan:vr=8,lp=4,t=4,pipeline=2 \
    scan:vr=8,lp=4,t=4,pipeline=2,ctas=3 scan:vr=4,lp=2,t=4,pipeline=2 scan:vr=2,lp=1,t=8,pipeline=2 \
    scan:vr=2,lp=1,t=8,pipeline=2,ctas=3 scan:vr=8,lp=4,t=2,pipeline=2 scan:t=16
  sw $lr linear_recurrence_bwd f32 $shape "" scan:t=16 scan:pipeline=2 scan:pipeline=2,ctas=4 \
    scan:t=16,pipeline=2,ctas=3 scan:vr=4,t=4,pipeline=2
  sw $lr linear_recurrence_bwd bf16 $shape "" scan:vr=8,lp=4,t=4 scan:vr=8,lp=4,t=4,pipeline=2 \
    scan:vr=2,lp=1,t=8,pipeline=2
  sw stdlib/scan.kdsl cumsum_mid f32 $shape "" scan:t=16 scan:pipeline=2 scan:pipeline=2,ctas=4 \
    scan:t=16,pipeline=2
  sw stdlib/rg_lru.kdsl rg_lru_bwd f32 $shape "" scan:t=16 scan:pipeline=2 scan:pipeline=2,ctas=3
  sw stdlib/scan.kdsl cumsum f32 M=2048,N=32768 "" scan:pipeline=2
}

sweep3() {
  lr=stdlib/linear_recurrence.kdsl
  for d in f32 bf16; do
    sw $lr linear_recurrence $d $shape "" scan:packed=0 scan:t=4 scan:t=16 scan:t=32
    sw $lr linear_recurrence_bwd $d $shape "" scan:packed=0 scan:t=8 scan:t=16 scan:t=32
    sw stdlib/scan.kdsl cumsum_mid $d $shape "" scan:packed=0 scan:t=8 scan:t=32
    sw stdlib/rg_lru.kdsl rg_lru_bwd $d $shape "" scan:packed=0 scan:t=4 scan:t=8
    sw stdlib/rg_lru.kdsl rg_lru $d $shape "" scan:packed=0 scan:t=8 scan:t=16
  done
  sw $lr linear_recurrence c64 $shape "" scan:packed=0 scan:t=8
  sw stdlib/scan.kdsl cumsum f32 M=2048,N=32768 "" scan:packed=0
  sw stdlib/scan.kdsl cumsum bf16 M=2048,N=32768 "" scan:packed=0
}

sweep4() {
  lr=stdlib/linear_recurrence.kdsl
  local bf=(scan:vr=8,lp=4,t=2 scan:vr=8,lp=4,t=4 scan:vr=4,lp=2,t=4 scan:vr=4,lp=2,t=8
            scan:vr=2,lp=1,t=8 scan:vr=2,lp=2,t=8 scan:vr=4,lp=4,t=4)
  local fp=(scan:vr=4,lp=4,t=2 scan:vr=4,lp=4,t=4 scan:vr=4,lp=4,t=8 scan:vr=2,lp=2,t=8
            scan:vr=2,lp=2,t=16 scan:vr=4,lp=2,t=4)
  for d in bf16 f32; do
    local v=("${fp[@]}")
    [ $d = bf16 ] && v=("${bf[@]}")
    sw stdlib/scan.kdsl cumsum_mid $d $shape "" "${v[@]}"
    sw $lr linear_recurrence $d $shape "" "${v[@]}"
    sw $lr linear_recurrence_bwd $d $shape "" "${v[@]}"
    sw stdlib/rg_lru.kdsl rg_lru_bwd $d $shape "" "${v[@]}"
  done
  sw stdlib/rg_lru.kdsl rg_lru bf16 $shape "" "${bf[@]}"
}

sweep5() {
  local v
  if [ "$1" = f32 ]; then
    v=(scan:vr=2,lp=2,t=4 scan:vr=2,lp=2,t=8 scan:vr=2,lp=2,t=16 scan:vr=2,lp=1,t=4
       scan:vr=2,lp=1,t=8 scan:vr=2,lp=1,t=16 scan:vr=4,lp=4,t=8 scan:vr=2,lp=2,t=8,ctas=2
       scan:vr=2,lp=2,t=16,ctas=2 scan:vr=1,lp=2,t=8 scan:vr=1,lp=2,t=4 scan:vr=2,lp=2,t=2)
  else
    v=(scan:vr=4,lp=2,t=4 scan:vr=4,lp=2,t=8 scan:vr=4,lp=2,t=16 scan:vr=4,lp=1,t=4
       scan:vr=4,lp=1,t=8 scan:vr=4,lp=1,t=16 scan:vr=2,lp=2,t=8 scan:vr=2,lp=2,t=16
       scan:vr=2,lp=1,t=16 scan:vr=4,lp=2,t=8,ctas=2 scan:vr=2,lp=2,t=4 scan:vr=1,lp=2,t=8)
  fi
  sw stdlib/scan.kdsl cumsum_mid $1 $shape "" "${v[@]}"
  sw stdlib/linear_recurrence.kdsl linear_recurrence $1 $shape "" "${v[@]}"
  sw stdlib/linear_recurrence.kdsl linear_recurrence_bwd $1 $shape "" "${v[@]}"
  sw stdlib/rg_lru.kdsl rg_lru $1 $shape "" "${v[@]}"
  sw stdlib/rg_lru.kdsl rg_lru_bwd $1 $shape "" "${v[@]}"
}

case "${1:-}" in
  1) sweep1 ;;
  2) sweep2 ;;
  3) sweep3 ;;
  4) sweep4 ;;
  5) sweep5 "${2:-f32}" ;;
  *) echo "usage: bench/experiments/scan_sweep.sh 1|2|3|4|5 [DT]" >&2; exit 2 ;;
esac
