#!/usr/bin/env bash
# Scan-schedule exploration on the GPU machine (after scripts/device/stage.sh; carry .device):
# times the scan kernels of issue 4 at (1, 32768, 2048) under KDSL_SCAN_SCHEDULE variants
# (scripts/device/sweep.sh) and profiles two of them with Nsight Compute into $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
shape=B=1,L=32768,D=2048
sw() { bash scripts/device/sweep.sh "$@"; }
nvidia-smi -L; cat .device/COMMIT
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
