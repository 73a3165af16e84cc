#!/usr/bin/env bash
# Times one kernel at one shape under several schedule hints (kdsl run --bench --schedule),
# printing one line per variant. Usage (GPU machine, after stage.sh):
#   scripts/device/sweep.sh FILE KERNEL DTYPE SHAPE "HINT1" "HINT2" ...   ("" = the default)
# A hint "scan:t=4,vr=4" sets KDSL_SCAN_SCHEDULE (the scan schedule's knobs, src/schedule_scan.h)
# instead of --schedule (the row schedule's).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}"
file=$1 kernel=$2 dtype=$3 shape=$4
shift 4
for hint in "$@"; do
  if [ "${hint#scan:}" != "$hint" ]; then
    line=$(KDSL_SCAN_SCHEDULE="${hint#scan:}" .device/bin/kdsl run "$file" -k "$kernel" \
           --dtype "$dtype" --shape "$shape" --bench --reps 30 --warmup 5 2>&1 |
           grep -E "bench:|error" | head -1)
  else
    line=$(.device/bin/kdsl run "$file" -k "$kernel" --dtype "$dtype" --shape "$shape" --bench \
           --reps 30 --warmup 5 --schedule "$hint" 2>&1 | grep -E "bench:|error" | head -1)
  fi
  us=$(echo "$line" | sed -n 's/bench: \([0-9.]*\) us median.*/\1/p')
  ratio=$(echo "$line" | sed -n 's/.*GB\/s over [0-9]* bytes, \([0-9.]*\) of the same-run.*/\1/p')
  printf '%-18s %-12s %-5s %-16s %-36s %9s us  %s of copy\n' "$kernel" "$shape" "$dtype" "" "${hint:-default}" "${us:-?}" "${ratio:-$line}"
done
