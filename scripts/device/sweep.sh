#!/usr/bin/env bash
# Times one kernel at one shape under several schedule hints (kdsl run --bench --schedule),
# printing one line per variant. Usage (GPU machine, after stage.sh):
#   scripts/device/sweep.sh FILE KERNEL DTYPE SHAPE "HINT1" "HINT2" ...   ("" = the default)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}"
file=$1 kernel=$2 dtype=$3 shape=$4
shift 4
for hint in "$@"; do
  line=$(.device/bin/kdsl run "$file" -k "$kernel" --dtype "$dtype" --shape "$shape" --bench \
         --reps 30 --warmup 5 --schedule "$hint" 2>&1 | grep -E "bench:|error" | head -1)
  us=$(echo "$line" | sed -n 's/bench: \([0-9.]*\) us median.*/\1/p')
  ratio=$(echo "$line" | sed -n 's/.*GB\/s over [0-9]* bytes, \([0-9.]*\) of the same-run.*/\1/p')
  printf '%-18s %-12s %-5s %-16s %-36s %9s us  %s of copy\n' "$kernel" "$shape" "$dtype" "" "${hint:-default}" "${us:-?}" "${ratio:-$line}"
done
