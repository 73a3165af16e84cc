#!/usr/bin/env bash
# Tenth session, on the GPU machine after scripts/device/stage.sh (carry .device, with the previous
# commit's kdsl staged as .device/bin/kdsl_old):
#   scan_s10.sh ab     same-run A/B of the scan.columns pointer stepping (kdsl_old against kdsl) on
#                      the middle-axis scan kernels at (1, 32768, 2048), alternating A, B, A, B
#   scan_s10.sh layouts  the previous default layout (as a hint) against the new default
#   scan_s10.sh tune   kdsl tune on four middle-axis kernels, then kdsl run --verify --bench, which
#                      follows the tuned record (a cache directory of its own)
#   scan_s10.sh sanitize  compute-sanitizer on the new addressing (bench/experiments/scan_layout_sanitize.sh
#                      plus RG-LRU with its shifted loads)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
cat .device/COMMIT
shape=B=1,L=32768,D=2048
case "${1:-}" in
  ab)
    for c in "scan cumsum_mid f32" "scan cumsum_mid bf16" "linear_recurrence linear_recurrence f32" \
             "linear_recurrence linear_recurrence bf16" "linear_recurrence linear_recurrence_bwd bf16" \
             "rg_lru rg_lru bf16" "rg_lru rg_lru_bwd bf16" "rg_lru rg_lru_bwd f32"; do
      set -- $c
      bash scripts/device/ab.sh .device/bin/kdsl_old .device/bin/kdsl stdlib/$1.kdsl $2 $3 $shape 2
    done
    ;;
  layouts)
    # The previous default layout (commit c62304a, as a hint) against the new default, same binary.
    for c in "scan cumsum_mid f32 t=16,lp=2,vr=2" "scan cumsum_mid bf16 t=16,lp=2,vr=4" \
             "linear_recurrence linear_recurrence f32 t=8,lp=2,vr=2" \
             "linear_recurrence linear_recurrence bf16 t=8,lp=2,vr=4" \
             "linear_recurrence linear_recurrence_bwd bf16 t=8,lp=2,vr=4"; do
      set -- $c
      HINT_A=$4 bash scripts/device/ab.sh .device/bin/kdsl .device/bin/kdsl stdlib/$1.kdsl $2 $3 $shape 2
    done
    ;;
  tune)
    export KDSL_CACHE_DIR="$PWD/.device/cache_tuned"
    mkdir -p "$KDSL_CACHE_DIR" && chmod 700 "$KDSL_CACHE_DIR"
    for c in "scan cumsum_mid f32" "scan cumsum_mid bf16" "linear_recurrence linear_recurrence bf16" \
             "linear_recurrence linear_recurrence_bwd bf16" "rg_lru rg_lru_bwd bf16"; do
      set -- $c
      echo "== tune $2 $3 $shape"
      .device/bin/kdsl tune stdlib/$1.kdsl -k $2 --dtype $3 --shape $shape 2>&1 | tail -40
      .device/bin/kdsl run stdlib/$1.kdsl -k $2 --dtype $3 --shape $shape --verify --bench 2>&1 |
        grep -E "schedule|tuned|verify|bench:|error|warning" | head -8
    done
    ;;
  sanitize)
    bash bench/experiments/scan_layout_sanitize.sh
    cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    for tool in memcheck racecheck; do
      for c in "rg_lru_bwd bf16 B=2,L=4097,D=258" "rg_lru f32 B=3,L=1000,D=100"; do
        set -- $c
        out=$("$cs" --tool $tool --error-exitcode 9 .device/bin/kdsl run stdlib/rg_lru.kdsl -k $1 --dtype $2 --shape $3 --verify 2>&1)
        echo "$tool $1 $2 $3: exit $?; $(echo "$out" | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|verify' | tr '\n' ' ')"
      done
    done
    ;;
  *) echo "usage: $0 ab|tune|sanitize"; exit 2 ;;
esac
