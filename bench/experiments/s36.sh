#!/usr/bin/env bash
# Thirty-sixth session, on the GPU machine after `s36.sh precompile` here and
# `KDSL_KEEP_CACHE=1 scripts/device/stage.sh build` (carry .device). The cache of the thirty-
# fifth session's way (every test specialization, 143 MB) is over the 64 MiB a call may carry, so
# `precompile` fills it with the benchmark's specializations alone. Predictions written before
# the run:
#   s36.sh run  On an H200: the full benchmark with the peers (final_bench.sh, KDSL_PEERS=run,
#               KDSL_PRECOMPILE=0), the first H200 run with the 25 ms warm-up (aa226f8).
#               Prediction as s34.sh's and s35.sh's: 2^27-byte bf16 forward rows 0.87-0.90 ->
#               0.92-0.95 of copy, 2^27-byte scans 3-10% above AM3, rg_lru_bwd bf16 0.54 ->
#               0.56-0.59, rows of 2^28 bytes and more within 1.5% of AM3. Then s35.sh's
#               `variants` once (LayerNorm backward bf16 4096 x 32768 on two rows per SM:
#               290 -> 220-250 us predicted on the H200), then s35.sh's `more_checks` (verify ok
#               on every output, memcheck 0 errors, racecheck 0 hazards) with the time left.
#               (AS1, an H100, ran `more_checks`, `wide` and the SASS.) Since AS1: `ab` (below)
#               twice before `variants`, no `more_checks`; on any other GPU `ab` three times.
#   wide        Any GPU. AR1 found LayerNorm backward bf16 4096 x 32768 near issue-bound on the
#               H100 (issue active 0.73). Its default gives each thread 8 elements of a row
#               (4096 threads a row), so the per-row chain (two warp reductions, the pushes,
#               the mbarrier wait, the 128-partial sums, 64-bit row offsets) is spread over 8
#               elements only. 2048 threads a row (16 elements each, 111-116 registers, no spill;
#               ptxas here) halve that share. Cases: cluster=4 x 512 (one CTA an SM, 16 warps),
#               stage 2 and 3; cluster=8 x 256 with min_ctas=2 (two rows an SM); the same for
#               RMSNorm backward (87-96 registers). Prediction: LayerNorm backward on the H100
#               323 -> 295-315 us, on the H200 290 -> 235-260 us; RMSNorm backward within 3% on
#               the H100 (already 0.81 of its copy there), 232 -> 215-230 on the H200. Two rounds,
#               --verify on the hinted cases in round 1.
#   ab          Any GPU, after a856647's change (lanes 0..K-1 of a warp each push its row partial to
#               one CTA of the cluster, instead of lane 0 pushing to each in turn; .device/bin/
#               kdsl_old is 14b64c2's binary): old against new, alternating, --verify on the new
#               binary in round 1, on the three benchmark rows whose code changed (LayerNorm,
#               RMSNorm and softmax backward bf16 4096 x 32768). The warp issues one push block
#               instead of K = 4 (LayerNorm backward: about 2 x 22 of its loop's 363 instructions
#               a row). Prediction: LayerNorm backward 0-4% faster on the H100 (311-313 us),
#               290 -> 265-285 us on the H200; RMSNorm and softmax backward (one push a row)
#               0-2% faster.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s35.sh lib
wide_cases=(
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 default"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=2,smem_columns=0"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=3,smem_columns=0"
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=2048,cache_rows=1,stage=2,smem_columns=0,min_ctas=2"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 default"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 cluster=4,group=2048,cache_rows=1,stage=2,smem_columns=0"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 cluster=8,group=2048,cache_rows=1,stage=2,smem_columns=0,min_ctas=2"
)
wide() { cases=("${wide_cases[@]}"); rounds "${1:-2}" first; }
ab_cases=(
  "layer_norm layer_norm_bwd bf16 M=4096,N=32768 default"
  "rms_norm rms_norm_bwd bf16 M=4096,N=32768 default"
  "softmax softmax_bwd bf16 M=4096,N=32768 default"
)
ab() { cases=("${ab_cases[@]}"); ab_rounds "${1:-2}"; }
case "${1:-}" in
  precompile)  # on the CPU machine: KDSL_CACHE_DIR=.device/cache s36.sh precompile
    k=build/kdsl
    norm=(rms_norm:rms_norm rms_norm:rms_norm_bwd layer_norm:layer_norm layer_norm:layer_norm_bwd
          softmax:softmax softmax:softmax_bwd)
    for kn in "${norm[@]}"; do
      $k -q compile "stdlib/${kn%%:*}.kdsl" -k "${kn#*:}" --dtype bf16 --shape N=8192,4096,32768,1024 \
        --arch sm_90 | tail -1
      $k -q compile "stdlib/${kn%%:*}.kdsl" -k "${kn#*:}" --dtype f32 --shape N=10240 --arch sm_90 |
        tail -1
    done
    for kn in linear_recurrence:linear_recurrence linear_recurrence:linear_recurrence_bwd \
              rg_lru:rg_lru rg_lru:rg_lru_bwd scan:cumsum_mid; do
      $k -q compile "stdlib/${kn%%:*}.kdsl" -k "${kn#*:}" --dtype bf16,f32 --shape L=2048,8192,32768 \
        --arch sm_90 | tail -1
    done
    $k -q compile stdlib/linear_recurrence.kdsl -k linear_recurrence --dtype c64 \
      --shape L=2048,8192,32768 --arch sm_90 | tail -1
    $k -q compile stdlib/linear_recurrence.kdsl -k complex_linear_recurrence_bwd \
      --shape L=2048,8192,32768 --arch sm_90 | tail -1
    $k -q compile stdlib/scan.kdsl -k cumsum --dtype bf16,f32 --shape N=2048,8192,32768 \
      --arch sm_90 | tail -1
    precompile  # s35.sh's variants
    cases=("${wide_cases[@]}")
    precompile
    for c in "scaled_more f32 B=2,L=4097,D=258" "scaled_more bf16 B=1,L=32768,D=256" \
             "scaled_more bf16 B=2,L=4097,D=258" "int_sums - B=2,L=4097,D=258" \
             "complex_sums - B=2,L=4097,D=258"; do
      set -- $c
      dt=(); [ "$2" != - ] && dt=(--dtype "$2")
      $k -q compile bench/experiments/scaled_more.kdsl -k $1 "${dt[@]}" --shape $3 --arch sm_90 |
        tail -1
    done
    ;;
  run)
    cat .device/COMMIT
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      # (Straight into $out, so that what finished comes back if the call's limit cuts it.)
      OUT="$out" KDSL_PEERS=run KDSL_PRECOMPILE=0 bash scripts/device/final_bench.sh 2>&1 |
        tail -60
      echo "== ab at ${SECONDS} s"
      [ "$SECONDS" -lt 400 ] && ab 2
      echo "== variants at ${SECONDS} s"
      [ "$SECONDS" -lt 440 ] && variants 1
    else
      ab 3
    fi
    echo "done at ${SECONDS} s"
    ;;
  wide) nvidia-smi -L; wide "${2:-2}"; echo "done at ${SECONDS} s" ;;
  ab) nvidia-smi -L; ab "${2:-2}"; echo "done at ${SECONDS} s" ;;
  *) echo "usage: s36.sh precompile|run|wide|ab [ROUNDS]"; exit 2 ;;
esac
