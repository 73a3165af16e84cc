#!/usr/bin/env bash
# Fills a disk cache with the sm_90 specializations the scan GPU tests (tests/stdlib_scan_gpu_test)
# and kdsl_bench_scan use, on a machine without a GPU (kdsl compile --arch sm_90), so the GPU
# machine only loads them. Usage: scripts/device/precompile_scan_tests.sh CACHE_DIR [KDSL_BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
export KDSL_CACHE_DIR="$1"
kdsl="${2:-build/kdsl}"
jobs=()
add() {  # file kernel dtype-or-"-" lengths...
  local file=$1 kernel=$2 dtype=$3
  shift 3
  for n in "$@"; do jobs+=("stdlib/$file.kdsl $kernel $dtype $n"); done
}
small="1 7 33 1000 65537 4096"
big="2048 8192 32768"
for op in cumsum cumprod logcumsumexp; do
  for v in "" _exclusive _reverse _reverse_exclusive; do
    for ax in "" _mid; do
      for t in f32 bf16; do
        add scan "$op$v$ax" $t $small
        [ "$op" != cumsum ] && add scan "$op$v${ax}_bwd" $t $small
      done
    done
  done
done
for t in f32 bf16 f16; do
  for k in linear_recurrence linear_recurrence_h0 linear_recurrence_bwd linear_recurrence_h0_bwd; do
    add linear_recurrence $k $t $small
  done
done
for t in f32 bf16; do
  add rg_lru rg_lru $t $small $big 16384
  add rg_lru rg_lru_bwd $t $small $big 16384
  add linear_recurrence linear_recurrence $t $big 16384
  add linear_recurrence linear_recurrence_bwd $t $big
  add scan cumsum_mid $t $big 1
  add scan cumsum $t $big
  add scan logcumsumexp_reverse_mid $t $big
  add scan logcumsumexp_reverse_mid_bwd $t $big
done
add scan cumsum_reverse f32 64
for k in linear_recurrence linear_recurrence_h0; do add linear_recurrence $k c64 $small $big; done
for k in complex_linear_recurrence_bwd complex_linear_recurrence_h0_bwd; do
  add linear_recurrence $k - $small $big
done
printf '%s\n' "${jobs[@]}" | sort -u | xargs -P "$(nproc)" -L 1 sh -c '
  dt=""; [ "$2" != "-" ] && dt="--dtype $2"
  sym=N  # the scanned length: N for the last axis, L for (B, L, D) kernels
  case "$1" in *_mid*|*linear_recurrence*|rg_lru*) sym=L ;; esac
  '"$kdsl"' -q compile "$0" -k "$1" $dt --shape "$sym=$3" --arch sm_90 >/dev/null || echo "FAILED: $0 $1 $2 $3"'
echo "precompiled $(printf '%s\n' "${jobs[@]}" | sort -u | wc -l) specializations into $KDSL_CACHE_DIR"
