#!/usr/bin/env bash
# Eleventh session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   rglru_s11.sh tune   kdsl tune on rg_lru and rg_lru_bwd (DTYPE, default bf16) at (1, 32768, 2048)
#                       (the candidates precompiled in parallel first), then kdsl run --verify
#                       --bench following the record (a cache of its own)
#   rglru_s11.sh ab     the layout of 16-bit heavy-math scans before this session (as a hint)
#                       against the new default, same binary, alternating A, B, A, B
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_SOURCE_DIR="$PWD"
k=.device/bin/kdsl
cat .device/COMMIT
shape=B=1,L=32768,D=2048
case "${1:-}" in
  tune)
    export KDSL_CACHE_DIR="$PWD/.device/cache_tuned"
    mkdir -p "$KDSL_CACHE_DIR" && chmod 700 "$KDSL_CACHE_DIR"
    s=$(date +%s)
    dt=${DTYPE:-bf16}
    for kern in ${KERNELS:-rg_lru_bwd rg_lru}; do
      for t in 4 8 16; do for lp in 1 2 4; do for vr in 1 2 4; do
        echo "$kern t=$t,lp=$lp,vr=$vr"
      done; done; done
    done | xargs -P "$(nproc)" -L 1 sh -c \
      "$k -q compile stdlib/rg_lru.kdsl -k \$0 --dtype $dt --shape $shape --schedule \$1 >/dev/null 2>&1 || echo \"cannot compile \$0 \$1\""
    echo "precompiled the candidates in $(( $(date +%s) - s )) s"
    for kern in ${KERNELS:-rg_lru_bwd rg_lru}; do
      echo "== tune $kern $dt $shape ($(( $(date +%s) - s )) s)"
      timeout 200 $k tune stdlib/rg_lru.kdsl -k $kern --dtype $dt --shape $shape 2>&1 | tail -32
      $k run stdlib/rg_lru.kdsl -k $kern --dtype $dt --shape $shape --verify --bench 2>&1 |
        grep -E "schedule|tuned|verify|bench:|error|warning" | head -8
    done
    ;;
  ab)
    export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}"
    for c in "rg_lru rg_lru bf16 t=8,lp=2,vr=1 2" "rg_lru rg_lru_bwd bf16 t=8,lp=2,vr=1 2" \
             "rg_lru rg_lru f16 t=8,lp=2,vr=1 1" "scan logcumsumexp_mid bf16 t=16,lp=2,vr=1 1" \
             "scan logcumsumexp_reverse_mid_bwd bf16 t=16,lp=2,vr=1 1"; do
      set -- $c
      HINT_A=$4 bash scripts/device/ab.sh $k $k stdlib/$1.kdsl $2 $3 $shape $5
    done
    ;;
  *) echo "usage: $0 tune|ab"; exit 2 ;;
esac
