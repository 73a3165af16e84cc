#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) on the ninth session's scan.columns layout
# (8-byte accesses of 2 or 4 rows), one launch each at shapes with partial row tiles and a partial
# last chunk. On the GPU machine after scripts/device/stage.sh (carry .device).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD" KDSL_LOG_LEVEL=error
cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
cat .device/COMMIT
status=0
for tool in memcheck racecheck synccheck; do
  for c in "scan cumsum_mid f32 B=2,L=4097,D=258" "linear_recurrence linear_recurrence bf16 B=2,L=4097,D=258" \
           "linear_recurrence linear_recurrence_bwd f16 B=3,L=1000,D=100" "scan cumsum_reverse_exclusive_mid bf16 B=1,L=300,D=68"; do
    set -- $c
    out=$("$cs" --tool $tool --error-exitcode 9 .device/bin/kdsl run stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 2>&1)
    rc=$?
    echo "$tool $2 $3 $4: exit $rc; $(echo "$out" | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tr '\n' ' ')"
    [ $rc = 0 ] || { status=1; echo "$out" | tail -15; }
  done
done
exit $status
