#!/usr/bin/env bash
# Nineteenth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s19.sh sweep  schedule hints at the backward rows furthest from 0.85 of copy, same binary,
#                 two rounds, --verify on the hinted runs in the first:
#                 - bf16 4096 x 32768 (LayerNorm backward 0.456, RMSNorm backward 0.533, softmax
#                   backward 0.887 but slower than torch.compile). The defaults run a cluster of
#                   4 (LayerNorm) or 8 (RMSNorm) CTAs per row with nothing in flight across rows:
#                   each iteration loads the row, reduces it over the cluster, then writes dx.
#                   Prediction: a candidate that keeps the next row in flight (stage=2 or
#                   prefetch=1 with the accumulators in registers) is at least 20% faster than
#                   the default for LayerNorm backward (417 -> under 335 us), where it does not
#                   spill; 2 CTAs per SM (min_ctas=2) help where they keep 64 registers unspilled.
#                 - bf16 65536 x 1024 (LayerNorm backward 0.762, RMSNorm backward 0.809):
#                   64 threads per row (2 chunks, 4 rows per CTA). Prediction: within 5% of the
#                   default (the sweeps of the fifth session chose 128).
#   s19.sh sweep2 (after sweep: staging two rows on the clusters was 7-10% faster, not 20%; the
#                 default is best for softmax backward and at 65536 x 1024) more rows in flight:
#                 stage=3 and 4. Prediction: if the pipe idles between one row's load and the
#                 next (one row in flight per CTA, the next load issued only after the cluster's
#                 barrier), stage=3 on a cluster of 4 is at least 15% faster than stage=2
#                 (LayerNorm backward 384 -> under 330 us, RMSNorm backward 351 -> under 300);
#                 if the barriers' latency is the limit, within 3% of stage=2. Elsewhere
#                 (one CTA per row) stage=3 within 3% of the default.
#   s19.sh ncu    (after sweep2: stage=3 and 4 on the clusters within 1% of stage=2, so the rows
#                 in flight are not the limit) Nsight Compute on the cluster kernels at
#                 4096 x 32768 and, for comparison, the one-CTA-per-row LayerNorm backward at
#                 32768 x 4096: where the warps wait (barrier, long scoreboard, membar, ...).
#   s19.sh check  (after ncu could not run: no machine) the new defaults at bf16 4096 x 32768
#                 (the cluster rule stages the next row, 7cdf0cd) with --verify, two rounds,
#                 the combine's butterfly as a candidate on them; compute-sanitizer on the new
#                 cases of sanitize_staged.sh; then the ncu mode on the new defaults.
#                 Prediction: LayerNorm backward about 384 us, RMSNorm backward about 321 (as
#                 the hinted runs of sweep and sweep2, the same code).
#   s19.sh push   (the device could not be had for check; meanwhile the cluster combine was
#                 rewritten: each warp writes its partial into every CTA of the cluster, one
#                 cluster barrier per row and no __syncthreads, no remote loads) the old binary
#                 (.device/bin/kdsl_old, 364b8d6: staged, the CTA's total read back remotely)
#                 against the new one on the cluster rows, two rounds, --verify on the new one;
#                 then check's sanitizer cases and the ncu mode.
#                 Prediction: LayerNorm backward bf16 4096 x 32768 384 -> 330-350 us, RMSNorm
#                 backward 321 -> 290-305; softmax backward (80 -> 98 registers, 2 CTAs of 256
#                 per SM instead of 3) within 5% of 214.
#   s19.sh rows   lnbwd.cu's lnbwd_rows (prepared in the eighteenth session, its prediction in
#                 s18.sh: at 65536 x 1024, 2 rows per iteration 10-15% faster than 1)
#   s19.sh ab     .device/bin/kdsl_old (4af81f0) against .device/bin/kdsl on RMSNorm backward
#                 bf16 8192 x 8192 (AC4: 2.0-2.6% slower with the scalars a row ahead), 4 rounds
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
case "${1:-}" in
  sweep)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    s=M=4096,N=32768
    cases=(
      "layer_norm layer_norm_bwd bf16 $s default"
      "layer_norm layer_norm_bwd bf16 $s cluster=4,group=4096,stage=2,smem_columns=0,cache_rows=1"
      "layer_norm layer_norm_bwd bf16 $s cluster=4,group=4096,stage=2,smem_columns=0,cache_rows=1,pack=1"
      "layer_norm layer_norm_bwd bf16 $s cluster=4,group=4096,prefetch=1,smem_columns=0"
      "layer_norm layer_norm_bwd bf16 $s cluster=8,group=4096,smem_columns=0,min_ctas=2"
      "layer_norm layer_norm_bwd bf16 $s cluster=8,group=4096,stage=2,smem_columns=0"
      "layer_norm layer_norm_bwd bf16 $s cluster=8,group=4096,stage=2,smem_columns=0,min_ctas=2"
      "layer_norm layer_norm_bwd bf16 $s cluster=8,group=4096,prefetch=1,smem_columns=0"
      "rms_norm rms_norm_bwd bf16 $s default"
      "rms_norm rms_norm_bwd bf16 $s cluster=8,group=4096,stage=2,smem_columns=0"
      "rms_norm rms_norm_bwd bf16 $s cluster=8,group=4096,prefetch=1,smem_columns=0,pack=1"
      "rms_norm rms_norm_bwd bf16 $s cluster=8,group=4096,prefetch=1,smem_columns=0"
      "rms_norm rms_norm_bwd bf16 $s cluster=4,group=4096,stage=2,smem_columns=0,cache_rows=1"
      "rms_norm rms_norm_bwd bf16 $s cluster=4,group=4096,stage=2,smem_columns=0,cache_rows=1,pack=1"
      "softmax softmax_bwd bf16 $s default"
      "softmax softmax_bwd bf16 $s cluster=8,group=2048,stage=2"
      "softmax softmax_bwd bf16 $s cluster=4,group=2048,stage=2"
      "softmax softmax_bwd bf16 $s cluster=8,group=4096,stage=2"
      "softmax softmax_bwd bf16 $s cluster=4,group=4096"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 default"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 group=64,stage=2"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 default"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 group=64"
    )
    precompile
    rounds 2 first
    ;;
  sweep2)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    s=M=4096,N=32768
    c4=cluster=4,group=4096,smem_columns=0,cache_rows=1
    c8=cluster=8,group=4096,smem_columns=0
    cases=(
      "layer_norm layer_norm_bwd bf16 $s default"
      "layer_norm layer_norm_bwd bf16 $s $c4,stage=2"
      "layer_norm layer_norm_bwd bf16 $s $c4,stage=3"
      "layer_norm layer_norm_bwd bf16 $s $c4,stage=4"
      "layer_norm layer_norm_bwd bf16 $s $c8,stage=3,min_ctas=2"
      "rms_norm rms_norm_bwd bf16 $s default"
      "rms_norm rms_norm_bwd bf16 $s $c8,stage=2"
      "rms_norm rms_norm_bwd bf16 $s $c8,stage=3"
      "rms_norm rms_norm_bwd bf16 $s $c8,stage=4"
      "rms_norm rms_norm_bwd bf16 $s $c4,stage=3"
      "rms_norm rms_norm_bwd bf16 $s $c4,stage=4"
      "softmax softmax_bwd bf16 $s default"
      "softmax softmax_bwd bf16 $s cluster=4,group=2048,stage=3"
      "softmax softmax_bwd bf16 $s cluster=4,group=2048,stage=4"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 group=512,cache_invariant=1,cache_rows=1,smem_columns=0,stage=3"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 default"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 stage=3"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 default"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 stage=3"
      "rms_norm rms_norm_bwd bf16 M=8192,N=8192 stage=3"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 default"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 stage=3"
    )
    precompile
    rounds 2 first
    ;;
  ncu)
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    m=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size
    m+=,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
    m+=,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active
    m+=,sm__cycles_active.avg
    for r in long_scoreboard barrier membar short_scoreboard wait lg_throttle mio_throttle \
             not_selected math_pipe_throttle no_instruction drain selected sleeping misc \
             dispatch_stall branch_resolving tex_throttle imc_miss; do
      m+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
    done
    for c in "layer_norm layer_norm_bwd M=4096,N=32768 default" \
             "rms_norm rms_norm_bwd M=4096,N=32768 default" \
             "layer_norm layer_norm_bwd M=32768,N=4096 default"; do
      set -- $c
      h=(); [ "$4" != default ] && h=(--schedule "$4")
      echo "== $2 bf16 $3 $4"
      timeout 120 "$ncu" --metrics "$m" -k regex:"kdsl_.*[0-9]\$" --launch-skip 2 --launch-count 1 \
        --csv --print-units base $k run stdlib/$1.kdsl -k $2 --dtype bf16 --shape $3 "${h[@]}" \
        --bench --reps 2 --warmup 1 2>&1 | python3 bench/experiments/ncu_metrics.py
    done
    ;;
  check)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    s=M=4096,N=32768
    cases=(
      "layer_norm layer_norm_bwd bf16 $s default"
      "layer_norm layer_norm_bwd bf16 $s cluster=4,group=4096,smem_columns=0,cache_rows=1,stage=2,butterfly=1"
      "layer_norm layer_norm_bwd f16 $s default"
      "rms_norm rms_norm_bwd bf16 $s default"
      "rms_norm rms_norm_bwd bf16 $s cluster=8,group=4096,smem_columns=0,stage=2,butterfly=1"
      "rms_norm add_rms_norm_bwd bf16 $s default"
    )
    precompile
    rounds 2 all
    s=$(date +%s)
    ONLY='_bwd .*N=327' bash scripts/device/sanitize_staged.sh 2>&1
    echo "sanitize_staged (N=327..) exit $? in $(( $(date +%s) - s )) s"
    ;;
  push)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    s=M=4096,N=32768
    cases=(
      "layer_norm layer_norm_bwd bf16 $s default"
      "rms_norm rms_norm_bwd bf16 $s default"
      "softmax softmax_bwd bf16 $s default"
      "rms_norm add_rms_norm_bwd bf16 $s default"
      "rms_norm rms_norm_bwd f32 $s default"
      "layer_norm layer_norm_bwd f16 $s default"
    )
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    for round in 1 2; do
      for c in "${cases[@]}"; do
        for b in kdsl_old kdsl; do
          extra=(); [ "$round" = 1 ] && [ $b = kdsl ] && extra=(--verify)
          printf '%s %-8s ' "$round" "$b"
          k=.device/bin/$b bench $c "${extra[@]}"
        done
      done
    done
    s=$(date +%s)
    ONLY='_bwd .*N=327' bash scripts/device/sanitize_staged.sh 2>&1
    echo "sanitize_staged (N=327..) exit $? in $(( $(date +%s) - s )) s"
    ;;
  rows)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    .device/exp/lnbwd 1024
    .device/exp/lnbwd 4096
    ;;
  ab)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=("rms_norm rms_norm_bwd bf16 M=8192,N=8192 default")
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    for round in 1 2 3 4; do
      for b in kdsl_old kdsl; do
        printf '%s %-8s ' "$round" "$b"
        k=.device/bin/$b bench ${cases[0]}
      done
    done
    ;;
  *) echo "usage: s19.sh sweep|sweep2|ncu|check|push|rows|ab" >&2; exit 2 ;;
esac
