#!/usr/bin/env bash
# Thirty-seventh session, on the GPU machine after `s36.sh precompile` here and
# `KDSL_KEEP_CACHE=1 scripts/device/stage.sh build` (carry .device). Predictions written before
# the run:
#   s37.sh run  On an H200: the full benchmark with the peers
#               (final_bench.sh, KDSL_PEERS=run, KDSL_PRECOMPILE=0), the first H200 run since
#               AM3 and the first with the 25 ms warm-up (aa226f8). Prediction (as s34-s36):
#               2^27-byte bf16 forward rows 0.87-0.90 -> 0.92-0.95 of copy, 2^27-byte scans 3-10%
#               above AM3, rg_lru_bwd bf16 0.54 -> 0.56-0.59, rows of 2^28 bytes and more within
#               1.5% of AM3. Then s35.sh's `variants` once (LayerNorm backward bf16 4096 x 32768
#               on two rows per SM: 290 -> 220-250 us predicted on the H200), then Nsight
#               Compute's stall reasons on LayerNorm backward's default there (on the H100 it
#               ran at 0.85 of copy, on the H200 at 0.65: prediction, long scoreboard and
#               barrier/membar waits over half the stall cycles, issue active under 0.5).
#               On any other GPU (the H100s lent since the thirty-first session), `rows`:
#               softmax backward and RMSNorm forward bf16 4096 x 32768, the two rows furthest
#               behind torch.compile on the H100 in AT1 (274.2 against 265.4 us and 186.3
#               against 181.7), under other layouts, two rounds, --verify on the hinted cases in
#               round 1. Prediction: softmax backward on 1 or 2 CTAs a row (no cluster, or a
#               cluster of 2) within 3% of the default cluster of 4, `stage=2` 0-3% faster,
#               streamed rows (`cache_rows=0`, the second read from L2, as torch.compile) 5-15%
#               slower as on the H200 (twenty-sixth session); RMSNorm forward on 1024 threads a
#               row or on two rows' cp.async staging within 2% of its default (512 threads).
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s35.sh lib
rows_cases=(
  "softmax softmax_bwd bf16 M=4096,N=32768 default"
  "softmax softmax_bwd bf16 M=4096,N=32768 cluster=2,group=1024"
  "softmax softmax_bwd bf16 M=4096,N=32768 cluster=1,group=1024"
  "softmax softmax_bwd bf16 M=4096,N=32768 cluster=8,group=1024"
  "softmax softmax_bwd bf16 M=4096,N=32768 stage=2"
  "softmax softmax_bwd bf16 M=4096,N=32768 cluster=1,group=1024,cache_rows=0"
  "rms_norm rms_norm bf16 M=4096,N=32768 default"
  "rms_norm rms_norm bf16 M=4096,N=32768 group=1024"
  "rms_norm rms_norm bf16 M=4096,N=32768 persistent=1,stage=2"
)
rows() { cases=("${rows_cases[@]}"); rounds "${1:-2}" first; }
case "${1:-}" in
  precompile)  # on the CPU machine, after s36.sh precompile: KDSL_CACHE_DIR=.device/cache
    k=build/kdsl
    cases=("${rows_cases[@]}")
    precompile
    ;;
  rows) nvidia-smi -L; rows "${2:-2}"; echo "done at ${SECONDS} s" ;;
  run)
    cat .device/COMMIT
    nvidia-smi -L
    # (AT2 ran `rows` on an H100; a later landing on any other GPU runs the GPU tests of the
    # CLI, the runtime and the numerics on this session's code, then stops.)
    # (AT3 ran them; later landings stop at once: set KDSL_S37_TESTS=1 to run them again.)
    if ! nvidia-smi -L | grep -q H200; then
      if [ "${KDSL_S37_TESTS:-0}" = 1 ]; then
        OUT="$out" KDSL_PRECOMPILE=0 KDSL_TEST_TIMEOUT=150 bash scripts/device/gpu_checks.sh \
          cli_gpu_test runtime_gpu_test numerics_gpu_test 2>&1 | tail -25
      fi
      echo "not an H200: done at ${SECONDS} s"; exit 0
    fi
    # (Straight into $out, so that what finished comes back if the call's limit cuts it.)
    OUT="$out" KDSL_PEERS=run KDSL_PRECOMPILE=0 bash scripts/device/final_bench.sh 2>&1 | tail -60
    echo "== variants at ${SECONDS} s"
    [ "$SECONDS" -lt 440 ] && variants 1
    echo "== stalls at ${SECONDS} s"
    [ "$SECONDS" -lt 480 ] && stalls lnbwd_h200 stdlib/layer_norm.kdsl layer_norm_bwd ""
    echo "done at ${SECONDS} s"
    ;;
  *) echo "usage: s37.sh precompile|run|rows [ROUNDS]"; exit 2 ;;
esac
