#!/usr/bin/env bash
# Times one specialization under two kdsl binaries in the same run, alternating A, B, A, B (so
# drift in clocks or temperature falls on both), on the GPU machine after stage.sh:
#   scripts/device/ab.sh BIN_A BIN_B FILE KERNEL DTYPE SHAPE [ROUNDS=2]
# Prints each round's median time and ratio to the same-run copy for A and for B. HINT_A and
# HINT_B (environment) pass a schedule hint to one side (kdsl run --schedule).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}"
a=$1 b=$2 file=$3 kernel=$4 dtype=$5 shape=$6 rounds=${7:-2}
for ((i = 0; i < rounds; ++i)); do
  for side in a b; do
    bin=$a hint=${HINT_A:-}
    [ $side = b ] && bin=$b hint=${HINT_B:-}
    line=$("$bin" run "$file" -k "$kernel" --dtype "$dtype" --shape "$shape" --bench --reps 30 \
           --warmup 5 ${hint:+--schedule "$hint"} 2>&1 | grep -E "bench:|error" | head -1)
    us=$(echo "$line" | sed -n 's/bench: \([0-9.]*\) us median.*/\1/p')
    ratio=$(echo "$line" | sed -n 's/.*GB\/s over [0-9]* bytes, \([0-9.]*\) of the same-run.*/\1/p')
    printf '%-16s %-5s %-16s %-22s %9s us  %s of copy\n' "$kernel" "$dtype" "$shape" \
      "$(basename "$bin")${hint:+ $hint}" "${us:-?}" "${ratio:-$line}"
  done
done
