#!/usr/bin/env bash
# Forward normalization kernels below 0.90 of copy (sixth session, 2026-11-30), on the GPU machine
# after scripts/device/stage.sh (carry .device):
#   1. a device-to-device copy of the same byte counts (PyTorch, triton.testing.do_bench) to see
#      what the copy itself reaches at 128-512 MiB instead of 1 GiB;
#   2. Nsight Compute sections (speed of light, scheduler and warp-state statistics, occupancy)
#      on one launch of each kernel;
#   3. the SASS instruction mix of the row kernels (cuobjdump through kdsl emit --sass).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
nvidia-smi -L
cat .device/COMMIT
echo "== copy bandwidth by size (torch, do_bench, L2 flushed)"
python3 - <<'PY'
import torch, triton
for mib in (32, 64, 128, 256, 512, 1024):
    n = mib * 2**20
    a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
    ms = triton.testing.do_bench(lambda: b.copy_(a), warmup=25, rep=200, return_mode="median")
    print(f"copy {mib:5d} MiB: {ms*1e3:9.2f} us  {2*n/ms/1e6:7.1f} GB/s")
PY
sections="--section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats"
for c in "$@"; do
  IFS=: read -r kernel dtype shape hint <<<"$c"
  file=stdlib/${kernel%_bwd}.kdsl
  echo "== ncu $kernel $dtype $shape ${hint:-default}"
  timeout 120 "$ncu" $sections -k regex:kdsl_ --launch-skip 2 --launch-count 1 \
    .device/bin/kdsl run "$file" -k "$kernel" --dtype "$dtype" --shape "$shape" \
    ${hint:+--schedule "$hint"} --bench --reps 2 --warmup 1 2>&1 |
    grep -E "^    [A-Z].*[0-9]$|Section:"
  echo "-- SASS instruction mix"
  .device/bin/kdsl emit "$file" -k "$kernel" --dtype "$dtype" --shape "$shape" \
    ${hint:+--schedule "$hint"} --sass 2>/dev/null |
    grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+[A-Z][A-Z0-9_.]*' | awk '{print $2}' | sed 's/\..*//' |
    sort | uniq -c | sort -rn | head -18 | tr '\n' ' '
  echo
done
