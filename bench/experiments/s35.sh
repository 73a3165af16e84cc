#!/usr/bin/env bash
# Thirty-fifth session, on the GPU machine after scripts/device/stage.sh with KDSL_KEEP_CACHE=1
# (the benchmark's specializations and this script's variants precompiled here for sm_90; carry
# .device). Predictions written before the run:
#   s35.sh first  On an H200: the full benchmark with the peers (final_run, KDSL_PRECOMPILE=0),
#                 the first H200 run with the 25 ms warm-up (aa226f8); prediction as s34.sh's
#                 (2^27-byte bf16 forward rows 0.87-0.90 -> 0.92-0.95 of copy, 2^27-byte scans
#                 3-10% above AM3, rg_lru_bwd bf16 0.54 -> 0.56-0.59, rows of 2^28 bytes and more
#                 within 1.5% of AM3); then `variants` with the time left.
#                 On any other GPU: `variants`, then `ab` (s34.sh's, prediction there), then
#                 Nsight Compute's warp states on LayerNorm backward's default at 4096 x 32768.
#   s35.sh second (after AR1) On an H200: the full run as in `first`, then `variants` once.
#                 On any other GPU: `more_checks`, then the SASS of LayerNorm backward's default
#                 at bf16 4096 x 32768 (to count its instructions per element on the CPU
#                 machine; AR1 found it near issue-bound on the H100).
#   more_checks   3652a7d's sums of a scan's result (+= into an InOut element, a cast with +=, a
#                 negated sum, integer and complex sums into elements; bench/experiments/
#                 scaled_more.kdsl), run only in the CPU emulation so far: `kdsl run --verify`
#                 at several chunks and compute-sanitizer once. Expected: verify ok on every
#                 output, memcheck 0 errors, racecheck 0 hazards.
#   variants      LayerNorm and RMSNorm backward bf16 4096 x 32768, the rows furthest below 0.85
#                 on the H200 (AM3: 0.654 and 0.820). LayerNorm backward's default runs one CTA
#                 of 1024 threads (64 registers) per SM, so one row per SM at a time: on the H100
#                 (311 us) and the H200 (290 us) it takes nearly the same time although the
#                 H200's copy is 40% faster, which says the row's serial chain (staged load,
#                 partials pushed across the cluster, mbarrier wait, dx) limits it, not DRAM.
#                 The variant on 8 CTAs of 512 threads with min_ctas=2 (64 registers, no spill;
#                 ptxas here) holds two rows per SM. Prediction: on the H200 290 -> 220-250 us;
#                 on the H100 within 5% of the default (0.85 of its copy already). RMSNorm
#                 backward (already two CTAs of 512 per SM) with 3 or 4 stages: within 3%.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
cases=(
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 default"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,stage=2,smem_columns=0,min_ctas=2"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,stage=3,smem_columns=0,min_ctas=2"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 default"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,stage=3,smem_columns=0,min_ctas=2"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,stage=4,smem_columns=0,min_ctas=2"
)
variants() { rounds "${1:-2}" first; }
# rg_lru_bwd from stdlib against the variant file $1 (default: rg_lru_scaled.kdsl), bf16 and f32,
# three rounds alternating, --verify in round 1.
ab() {
  local round dt f v variant=${1:-bench/experiments/rg_lru_scaled.kdsl}
  for round in 1 2 3; do
    for dt in bf16 f32; do
      for f in stdlib/rg_lru.kdsl "$variant"; do
        v=(); [ "$round" = 1 ] && v=(--verify)
        printf '%s %-4s %-40s ' "$round" "$dt" "$f"
        timeout 60 .device/bin/kdsl run "$f" -k rg_lru_bwd --dtype $dt --shape B=1,L=32768,D=2048 \
          --bench --reps 40 "${v[@]}" 2>&1 | grep -oE 'bench: .*us|verify [a-z_]+: [a-z]+' | tr '\n' ' '
        echo
      done
    done
  done
}
# Nsight Compute's stall reasons (cycles per issued instruction), issue rate, warps active and
# DRAM throughput of the first launch of KERNEL at bf16 4096 x 32768 with HINT.
stalls() {
  local name=$1 f=$2 kn=$3 hint=$4 h=() ncu
  [ -n "$hint" ] && h=(--schedule "$hint")
  ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
  echo "== stalls $kn ${hint:-default}"
  timeout 150 "$ncu" --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.per_cycle_active,smsp__warps_active.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum' \
    -k regex:"kdsl_${kn}_bf16_n32768\$" --launch-count 1 --csv .device/bin/kdsl run "$f" -k "$kn" \
    --dtype bf16 --shape M=4096,N=32768 "${h[@]}" > "$out/stalls_$name.csv" 2>&1
  grep -E 'stalled|issue_active|warps_active|dram__|duration' "$out/stalls_$name.csv" |
    awk -F'","' '{print $(NF-2), $NF}' | sort -k2 -g -r | head -16
}
more_checks() {
  local f=bench/experiments/scaled_more.kdsl k=.device/bin/kdsl
  local cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  for c in "scaled_more f32 B=2,L=4097,D=258" "scaled_more bf16 B=1,L=32768,D=256" \
           "int_sums - B=2,L=4097,D=258" "complex_sums - B=2,L=4097,D=258"; do
    set -- $c
    dt=(); [ "$2" != - ] && dt=(--dtype "$2")
    echo "== $1 $2 $3"
    timeout 90 $k run $f -k $1 "${dt[@]}" --shape $3 --verify 2>&1 | grep -E 'verify|rror' | head -9
  done
  for tool in memcheck racecheck; do
    echo "== $tool scaled_more bf16 B=2,L=4097,D=258"
    timeout 120 "$cs" --tool $tool --error-exitcode 9 $k run $f -k scaled_more --dtype bf16 \
      --shape B=2,L=4097,D=258 --verify 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verify|rror" | head -8
    echo "exit ${PIPESTATUS[0]}"
  done
}
case "${1:-}" in
  second)
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      # (Straight into $out, so that what finished comes back if the call's limit cuts it.)
      OUT="$out" KDSL_PEERS=run KDSL_PRECOMPILE=0 bash scripts/device/final_bench.sh 2>&1 |
        tail -60
      echo "== variants at ${SECONDS} s"
      [ "$SECONDS" -lt 470 ] && variants 1
    else
      more_checks
      echo "== sass at ${SECONDS} s"
      timeout 60 .device/bin/kdsl emit stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16 \
        --shape M=4096,N=32768 --sass > "$out/layer_norm_bwd_4096x32768.sass" 2>&1
      wc -l "$out/layer_norm_bwd_4096x32768.sass"
    fi
    echo "done at ${SECONDS} s"
    ;;
  precompile)  # on the CPU machine: k=build/kdsl KDSL_CACHE_DIR=.device/cache s35.sh precompile
    precompile
    for dt in bf16 f32; do
      ${k} -q compile bench/experiments/rg_lru_scaled.kdsl -k rg_lru_bwd --dtype $dt \
        --shape B=1,L=32768,D=2048 --arch sm_90
    done
    ;;
  first)
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      KDSL_PRECOMPILE=0 final_run
      echo "== variants at ${SECONDS} s"
      [ "$SECONDS" -lt 470 ] && variants 1
    else
      variants 2
      echo "== ab at ${SECONDS} s"
      ab
      echo "== ncu at ${SECONDS} s"
      stalls lnbwd stdlib/layer_norm.kdsl layer_norm_bwd ""
      stalls lnbwd8 stdlib/layer_norm.kdsl layer_norm_bwd cluster=8,group=4096,stage=2,smem_columns=0,min_ctas=2
    fi
    echo "done at ${SECONDS} s"
    ;;
  variants) nvidia-smi -L; variants 2; echo "done at ${SECONDS} s" ;;
  more) nvidia-smi -L; more_checks; echo "done at ${SECONDS} s" ;;
  last)
    # The session's last device time (too little for the full run): more_checks on any GPU;
    # on an H200 also `variants` once (the H200 half of the prediction above); else the SASS.
    cat .device/COMMIT
    nvidia-smi -L
    more_checks
    echo "== at ${SECONDS} s"
    if nvidia-smi -L | grep -q H200; then
      variants 1
    else
      timeout 60 .device/bin/kdsl emit stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16 \
        --shape M=4096,N=32768 --sass > "$out/layer_norm_bwd_4096x32768.sass" 2>&1
      wc -l "$out/layer_norm_bwd_4096x32768.sass"
    fi
    echo "done at ${SECONDS} s"
    ;;
  lib) ;;  # `source s35.sh lib` (s36.sh) takes the functions above alone
  *) echo "usage: s35.sh first|second|variants|more|precompile"; exit 2 ;;
esac
