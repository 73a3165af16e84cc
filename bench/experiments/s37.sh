#!/usr/bin/env bash
# Thirty-seventh session, on the GPU machine after `s36.sh precompile` here and
# `KDSL_KEEP_CACHE=1 scripts/device/stage.sh build` (carry .device). Predictions written before
# the run:
#   s37.sh run  On an H200 only (on any other GPU it prints the device and stops, to keep the
#               budget for another H200 request): the full benchmark with the peers
#               (final_bench.sh, KDSL_PEERS=run, KDSL_PRECOMPILE=0), the first H200 run since
#               AM3 and the first with the 25 ms warm-up (aa226f8). Prediction (as s34-s36):
#               2^27-byte bf16 forward rows 0.87-0.90 -> 0.92-0.95 of copy, 2^27-byte scans 3-10%
#               above AM3, rg_lru_bwd bf16 0.54 -> 0.56-0.59, rows of 2^28 bytes and more within
#               1.5% of AM3. Then s35.sh's `variants` once (LayerNorm backward bf16 4096 x 32768
#               on two rows per SM: 290 -> 220-250 us predicted on the H200), then Nsight
#               Compute's stall reasons on LayerNorm backward's default there (on the H100 it
#               ran at 0.85 of copy, on the H200 at 0.65: prediction, long scoreboard and
#               barrier/membar waits over half the stall cycles, issue active under 0.5).
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s35.sh lib
case "${1:-}" in
  run)
    cat .device/COMMIT
    nvidia-smi -L
    if ! nvidia-smi -L | grep -q H200; then echo "not an H200: stopping"; exit 0; fi
    # (Straight into $out, so that what finished comes back if the call's limit cuts it.)
    OUT="$out" KDSL_PEERS=run KDSL_PRECOMPILE=0 bash scripts/device/final_bench.sh 2>&1 | tail -60
    echo "== variants at ${SECONDS} s"
    [ "$SECONDS" -lt 440 ] && variants 1
    echo "== stalls at ${SECONDS} s"
    [ "$SECONDS" -lt 480 ] && stalls lnbwd_h200 stdlib/layer_norm.kdsl layer_norm_bwd ""
    echo "done at ${SECONDS} s"
    ;;
  *) echo "usage: s37.sh run"; exit 2 ;;
esac
