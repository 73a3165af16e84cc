#!/usr/bin/env bash
# Nsight Compute on the normalization kernels furthest from the copy bandwidth (fifth session,
# 2026-11-30), on the GPU machine after scripts/device/stage.sh (carry .device). For each kernel
# and shape it prints, per launched kernel (the row kernel and, for backward kernels, the
# column-reduction finalize kernel): duration, DRAM bytes and throughput, grid, block, registers
# and achieved occupancy. ncu flushes the caches before each profiled launch.
#   bench/experiments/norm_ncu.sh [KERNEL:DTYPE:SHAPE[:HINT] ...]   (default: the list below)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size
metrics+=,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active

cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  for s in M=1024,N=8192 M=8192,N=8192 M=32768,N=4096 M=65536,N=1024 M=4096,N=32768; do
    cases+=("rms_norm_bwd:bf16:$s" "layer_norm_bwd:bf16:$s")
  done
  cases+=("rms_norm_bwd:f32:M=8192,N=10240" "layer_norm_bwd:f32:M=8192,N=10240"
          "rms_norm:bf16:M=1024,N=8192" "layer_norm:bf16:M=1024,N=8192"
          "rms_norm:bf16:M=8192,N=8192" "layer_norm:bf16:M=8192,N=8192")
fi
for c in "${cases[@]}"; do
  IFS=: read -r kernel dtype shape hint <<<"$c"
  file=stdlib/${kernel%_bwd}.kdsl
  echo "== $kernel $dtype $shape ${hint:-default}"
  timeout 120 "$ncu" --metrics "$metrics" -k regex:kdsl_ --launch-skip 2 --launch-count 2 \
    --csv --print-units base \
    .device/bin/kdsl run "$file" -k "$kernel" --dtype "$dtype" --shape "$shape" \
    ${hint:+--schedule "$hint"} --bench --reps 2 --warmup 1 2>&1 |
    python3 bench/experiments/ncu_table.py
done
