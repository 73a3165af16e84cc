#!/usr/bin/env bash
# Thirty-fourth session, on the GPU machine after scripts/device/stage.sh with KDSL_KEEP_CACHE=1
# (the benchmark's 38 specializations precompiled here for sm_90; carry .device).
# Predictions written before the run:
#   s34.sh h200  on an H200: the full benchmark with the peers (final_run, KDSL_PRECOMPILE=0) at
#                fa36f7a, the first H200 run with the 25 ms warm-up (aa226f8). Prediction (the
#                thirty-first session's): the 2^27-byte bf16 forward rows (8192 x 8192,
#                65536 x 1024) rise from 0.87-0.90 (AM3) to 0.92-0.95 of copy; the 2^27-byte
#                scans (linear_recurrence, cumsum_mid, last-axis cumsum bf16) 3-10% above AM3;
#                rg_lru_bwd bf16 0.54 -> 0.56-0.59 (the thirty-second and thirty-third sessions'
#                instruction cuts, 6% on the H100); rows of 2^28 bytes and more within 1.5% of AM3.
#                On any other GPU: the GPU test binaries at fa36f7a (the first full GPU test run
#                since the thirty-third session's changes: wide scan states, scalar rounding),
#                after --verify and compute-sanitizer on the wide scan states (wide_scan.py),
#                expected all to pass (AQ1, done). Since d9d2863, on any GPU: scaled_checks.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
# d9d2863's scaled sums of a scan's result (tile partials scaled per thread), run only in the
# CPU emulation so far: --verify against the interpreter on the GPU at several chunks, f32 and
# bf16, and compute-sanitizer once. Expected: verify ok on every output, 0 errors, 0 hazards.
scaled_checks() {
  local f=bench/experiments/scaled_sums.kdsl k=.device/bin/kdsl
  local cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  for c in "scaled f32 B=2,L=4097,D=258" "scaled bf16 B=1,L=32768,D=256" "scaled bf16 B=3,L=333,D=5" \
           "scaled_rows - M=3,N=5000" "scaled_rows - M=64,N=32768"; do
    set -- $c
    dt=(); [ "$2" != - ] && dt=(--dtype "$2")
    echo "== $1 $2 $3"
    timeout 90 $k run $f -k $1 "${dt[@]}" --shape $3 --verify 2>&1 | grep -E 'verify|rror' | head -9
  done
  for tool in memcheck racecheck; do
    echo "== $tool scaled bf16 B=2,L=4097,D=258"
    timeout 120 "$cs" --tool $tool --error-exitcode 9 $k run $f -k scaled --dtype bf16 \
      --shape B=2,L=4097,D=258 --verify 2>&1 | grep -E "SUMMARY|rror|not ok" | head -4
    echo "exit ${PIPESTATUS[0]}"
  done
}
case "${1:-}" in
  h200)
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      KDSL_PRECOMPILE=0 final_run
      scaled_checks
      # Then, with the time left, kdsl tune on the backward rows furthest from 0.85 in AM3
      # (layer_norm_bwd 0.654, rms_norm_bwd 0.820 at bf16 4096 x 32768): does any candidate
      # schedule beat the default on the H200? (On the H100, AL2: none of four hints did.)
      # Prediction: within 3% of the default; the gap is not the schedule's choice.
      for spec in "layer_norm layer_norm_bwd" "rms_norm rms_norm_bwd"; do
        set -- $spec
        left=$(( 440 - SECONDS ))
        [ "$left" -lt 40 ] && { echo "tune $2 skipped: ${SECONDS} s used"; continue; }
        echo "== tune $2 bf16 M=4096,N=32768 (${SECONDS} s)"
        timeout "$left" .device/bin/kdsl tune stdlib/$1.kdsl -k $2 --dtype bf16 \
          --shape M=4096,N=32768 --reps 20 2>&1 | tail -12
      done
    else
      # (AQ1 ran the wide scan states and every GPU test binary on an H100 at 821b83f.)
      scaled_checks
    fi
    echo "done at ${SECONDS} s"
    ;;
  last)
    # The session's last device time (about 540 s): the H200 full run alone (s34.sh h200's
    # prediction); on another GPU nothing (AQ1 and AQ2 ran the checks).
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then KDSL_PRECOMPILE=0 final_run; fi
    echo "done at ${SECONDS} s"
    ;;
  ab)
    # rg_lru_bwd with dLambda's factor outside the sum (d9d2863 allows it):
    # dlam[d] += sum(dr) * (C * sigmoid(-lam[d])) instead of sum(dr * (C * sigmoid(-lam[d]))), one
    # FMUL less per element (of about 120 instructions). Prediction: bf16 (1, 32768, 2048) 0.3-1%
    # faster, f32 within 0.5%; --verify ok on both.
    nvidia-smi -L
    for round in 1 2 3; do
      for dt in bf16 f32; do
        for f in stdlib/rg_lru.kdsl bench/experiments/rg_lru_scaled.kdsl; do
          v=(); [ "$round" = 1 ] && v=(--verify)
          printf '%s %-4s %-40s ' "$round" "$dt" "$f"
          .device/bin/kdsl run "$f" -k rg_lru_bwd --dtype $dt --shape B=1,L=32768,D=2048 \
            --bench --reps 40 "${v[@]}" 2>&1 | grep -oE 'bench: .*us|verify [a-z_]+: [a-z]+' | tr '\n' ' '
          echo
        done
      done
    done
    echo "done at ${SECONDS} s"
    ;;
  *) echo "usage: s34.sh h200|last|ab"; exit 2 ;;
esac
