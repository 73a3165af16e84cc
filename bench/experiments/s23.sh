#!/usr/bin/env bash
# Twenty-third session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s23.sh probe  1. The cluster rows at bf16 4096 x 32768 (LayerNorm backward 0.65-0.67 of copy on
#                    a cluster of 4 CTAs of 1024, one CTA per SM; RMSNorm backward 0.81 on 8 of
#                    512, two per SM) with hints: LayerNorm backward on 8 CTAs of 512 with the
#                    column accumulators in registers and two CTAs per SM (64 registers, no
#                    spill), staged 2 and 3 deep; RMSNorm backward staged 3 deep. --verify on each
#                    hinted case in round 1, two rounds.
#                    Prediction: LayerNorm backward on 8 x 512, two per SM, about as fast as
#                    RMSNorm backward's layout relative to its bytes: 285 -> 250-265 us (the same
#                    overlap of one CTA's exchange with the other's work that RMSNorm has); RMSNorm
#                    backward stage=3 within 2% of the default.
#                 2. Nsight Compute on rg_lru_bwd bf16 (1, 32768, 2048) (0.45 of copy, bound by
#                    instructions): executed instructions per SASS line, warp states, to find
#                    where the instructions per element go now.
#   s23.sh math   (after probe: rg_lru_bwd bf16 executes 167 instructions per element; about 31
#                 of them are ptxas's rescaling around the unflushed ex2.approx, rcp.approx,
#                 sqrt.approx and div.full, and the branch of expm1) e^x as the square of a flushed
#                 half power, sigmoid as a flushed reciprocal of (1 + e^-x) / 4 (subnormal results
#                 kept both ways); .device/bin/kdsl_old is a24c590. --verify on every new case,
#                 old against new alternating, three rounds; numerics_gpu_test and ieee_gpu_test;
#                 Nsight Compute warp states of softmax bf16 4096 x 32768.
#                 Prediction: rg_lru_bwd bf16 13 of 167 instructions fewer per element: 4-8%
#                 faster (562 -> 520-540 us); rg_lru bf16 (two sigmoids and one exp per element)
#                 3-6%; softmax and log_softmax bf16 (two exps per element in softmax, four
#                 instructions fewer of about 25) 0-5%, most at 4096 x 32768 (1 CTA of 512 per
#                 SM, 105 registers), where it is furthest from copy (0.86); f32 rows unchanged
#                 (full-precision math).
#   s23.sh pos    (after math: rg_lru_bwd bf16 560 -> 519 us) positions along the scan axis in
#                 32-bit arithmetic where L + CL <= 2^30 (the bounds of rg_lru_bwd's shifted
#                 accesses were tested per element with 64-bit compares); .device/bin/kdsl_old is
#                 94ba19e. --verify on every new case, old against new, three rounds; the Small
#                 and IssueShapes cases of stdlib_scan_gpu_test; two softmax hints at bf16
#                 4096 x 32768 (1024 threads, staged 2 and 3 deep; 59-64 registers, 32 warps
#                 per SM, against 512 threads with 105).
#                 Prediction: the scan kernels with shifted accesses (rg_lru_bwd) 1-3% faster
#                 (about 5 of 155 instructions per element), the others within 1%; the softmax
#                 hints no faster than the default (earlier sweeps found none).
#   s23.sh final  scripts/device/final_bench.sh with the peers timed in the same run.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  probe)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "layer_norm layer_norm_bwd bf16 M=4096,N=32768 default"
      "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,smem_columns=0,min_ctas=2,stage=2"
      "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,smem_columns=0,min_ctas=2,stage=3"
      "layer_norm layer_norm_bwd bf16 M=4096,N=32768 cluster=8,group=4096,min_ctas=2,stage=2"
      "layer_norm layer_norm_bwd bf16 M=4096,N=32768 stage=3"
      "rms_norm rms_norm_bwd bf16 M=4096,N=32768 default"
      "rms_norm rms_norm_bwd bf16 M=4096,N=32768 stage=3"
      "rms_norm rms_norm_bwd bf16 M=4096,N=32768 cluster=2,group=2048,smem_columns=0"
      "rms_norm add_rms_norm_bwd bf16 M=4096,N=32768 default"
    )
    precompile
    rounds 2 first 2>&1 | tee "$out/probe.txt"
    args=(run stdlib/rg_lru.kdsl -k rg_lru_bwd --dtype bf16 --shape B=1,L=32768,D=2048)
    .device/bin/kdsl "${args[@]}" --bench --reps 5 | grep -oE 'bench: [0-9.]+ us' | tee -a "$out/probe.txt"
    ncu_source rg_lru_bwd 'kdsl_rg_lru_bwd_bf16_n32768$' "${args[@]}"
    ls -la "$out"
    ;;
  math)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "softmax softmax bf16 M=4096,N=32768 default"
      "softmax softmax bf16 M=8192,N=8192 default"
      "softmax softmax bf16 M=32768,N=4096 default"
      "softmax softmax bf16 M=65536,N=1024 default"
      "softmax softmax bf16 M=1024,N=8192 default"
      "softmax log_softmax bf16 M=4096,N=32768 default"
      "softmax log_softmax bf16 M=8192,N=8192 default"
      "rg_lru rg_lru bf16 B=1,L=32768,D=2048 default"
      "rg_lru rg_lru_bwd bf16 B=1,L=32768,D=2048 default"
      "rg_lru rg_lru_bwd f16 B=1,L=32768,D=2048 default"
      "scan logcumsumexp_bwd bf16 M=4096,N=8192 default"
    )
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    {
      ab_rounds 3
      timeout 120 .device/bin/numerics_gpu_test 2>&1 | grep -E "largest|OK|FAIL|PASSED|tests ran"
      timeout 120 .device/bin/ieee_gpu_test 2>&1 | tail -3
      ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
      timeout 120 "$ncu" --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
        --section Occupancy --section LaunchStats -k regex:'kdsl_softmax_bf16_n32768$' \
        --launch-count 1 .device/bin/kdsl run stdlib/softmax.kdsl -k softmax --dtype bf16 \
        --shape M=4096,N=32768 2>&1 | grep -E "^    [A-Z]" | grep -vE "^    (Section|-)"
    } 2>&1 | tee "$out/math.txt"
    ;;
  pos)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "rg_lru rg_lru_bwd bf16 B=1,L=32768,D=2048 default"
      "rg_lru rg_lru_bwd f16 B=1,L=32768,D=2048 default"
      "rg_lru rg_lru_bwd f32 B=1,L=32768,D=2048 default"
      "rg_lru rg_lru bf16 B=1,L=32768,D=2048 default"
      "linear_recurrence linear_recurrence bf16 B=1,L=32768,D=2048 default"
      "linear_recurrence linear_recurrence_bwd bf16 B=1,L=32768,D=2048 default"
      "scan cumsum_mid bf16 B=1,L=32768,D=2048 default"
      "scan cumsum_mid f32 B=1,L=32768,D=2048 default"
      "scan cumsum bf16 M=4096,N=8192 default"
      "scan logcumsumexp_bwd bf16 M=4096,N=8192 default"
    )
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    {
      ab_rounds 3
      cases=(
        "softmax softmax bf16 M=4096,N=32768 default"
        "softmax softmax bf16 M=4096,N=32768 group=1024,stage=2"
        "softmax softmax bf16 M=4096,N=32768 group=1024,stage=3"
      )
      precompile
      rounds 2 first
      s=$(date +%s)
      timeout 200 .device/bin/stdlib_scan_gpu_test --gtest_filter='*Small*:*IssueShapes*' 2>&1 | tail -3
      echo "stdlib_scan_gpu_test in $(( $(date +%s) - s )) s"
    } 2>&1 | tee "$out/pos.txt"
    ;;
  final)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    rm -rf /tmp/fb && mkdir -p /tmp/fb
    OUT=/tmp/fb KDSL_PEERS=run bash scripts/device/final_bench.sh > /tmp/fb/final_bench.txt 2>&1
    tail -45 /tmp/fb/final_bench.txt
    cp /tmp/fb/final_bench.txt /tmp/fb/h200.json /tmp/fb/kdsl_norm.json /tmp/fb/kdsl_scan.json \
       /tmp/fb/norm_gbps.png /tmp/fb/launch.txt "$out/" 2>&1
    cp /tmp/fb/peers_run/peers.json "$out/peers_run.json" 2>&1
    ls -la "$out"
    ;;
  *)
    echo "usage: s23.sh probe|math|pos|final" >&2
    exit 2
    ;;
esac
