#!/usr/bin/env bash
# Twenty-second session, on the GPU machine after scripts/device/stage.sh (carry .device), with
# the previous commit's kdsl (f7d9c78) staged as .device/bin/kdsl_old:
#   s22.sh ab     The column partials of the backward kernels: the CTA's row groups add theirs
#                 together before storing (one partial per CTA, not R), and the follow-up kernel
#                 that sums them runs at least 256 CTAs, one reduction each, with a tree over its
#                 slices (before: at N = 1024, 32 CTAs for both reductions, one after the other,
#                 each reading 270 KB of partials).
#                 1. Nsight Compute's duration of each kernel (row kernel, finalize), old and new,
#                    at LayerNorm and RMSNorm backward bf16 65536 x 1024 and 8192 x 8192.
#                    Prediction: the old finalize takes 6-10 us at 65536 x 1024 (1056 partials of
#                    2 x 1024 columns, 32 CTAs) and 3-6 us at 8192 x 8192; the new one 1.5-3 us at
#                    both; the row kernels within 2% (65536 x 1024: half the partial stores, about
#                    4.3 MB, at its end: up to 1 us faster).
#                 2. Old against new on the backward rows with column reductions, two rounds,
#                    --verify on the new binary in the first. Prediction: layer_norm_bwd bf16
#                    65536 x 1024 112.8 -> 104-107 us (0.845 -> 0.89-0.91 of copy), rms_norm_bwd
#                    65536 x 1024 109.1 -> 104-107, the 8192 x 8192 rows 1-3% faster, 1024 x 8192
#                    5-10% faster (a short kernel, the finalize a larger share), the cluster rows
#                    (4096 x 32768, 33 partials) and 32768 x 4096 within 1.5%.
#                 3. sanitize_staged.sh (now with a subwarp case, 32 row groups per CTA combined);
#                    stdlib_norm_gpu_test.
#   s22.sh ab2    (after ab: the follow-up kernel took 10.6 -> 5.6 us at LayerNorm backward
#                 65536 x 1024, not the 1.5-3 predicted, and got slower at N = 8192: 5.6 -> 6.8 us
#                 with 512 CTAs of 92 registers, two waves, and a tree of five barriers where
#                 slice 0 had added 32 sums in order; LayerNorm backward 65536 x 1024 120.8 ->
#                 116.3 us end to end, 1024 x 8192 3-5% slower) the slices added in order again,
#                 FC up to 16 (256 CTAs at LayerNorm backward N = 8192, one wave), 32 registers:
#                 Nsight Compute durations on the new binary, old against new on six rows, two
#                 rounds, --verify on the new one in the first; then as `final`.
#                 Prediction: the follow-up kernel at N = 8192 back to 4.4-5.6 us (as before),
#                 at 65536 x 1024 4-5.5 us; the 1024 x 8192 rows within 2% of the old binary;
#                 65536 x 1024 LayerNorm backward 3-4% faster, RMSNorm backward 0-3%.
#   s22.sh ncu    (for the next session) Nsight Compute with source counters on the cluster rows
#                 (LayerNorm and RMSNorm backward bf16 4096 x 32768, 0.58 and 0.69 of copy): where
#                 their warps wait, per SASS instruction, and how many clusters are resident
#                 (the launch statistics and occupancy sections).
#   s22.sh async  (after ncu: the cluster barrier's release waits for each warp's earlier stores,
#                 ERRBAR 19% and the barrier 40% of RMSNorm backward's warp samples at 4096 x
#                 32768) the pushed partials as st.async, each counted on an mbarrier of the
#                 receiving CTA, no cluster barrier per row; .device/bin/kdsl_old is 650c2a8.
#                 --verify on the cluster kernels (4096 x 32768, 300 x 32768, 37 x 32760, 1 x
#                 32768), old against new, three rounds; sanitize_staged.sh on the cluster cases;
#                 stdlib_norm_gpu_test.
#                 Prediction: rms_norm_bwd bf16 4096 x 32768 279 -> 240-255 us, layer_norm_bwd
#                 335 -> 310-325 (ERRBAR 8% and the barrier 7% of its samples).
#   s22.sh syncwarp  (after a review: __syncwarp before each warp's push) --verify and one
#                 round old (650c2a8) against new on the two cluster rows. Prediction: within 1%
#                 of AF5 (285 and 234 us).
#   s22.sh final  scripts/device/final_bench.sh with the peers timed in the same run, then
#                 `kdsl tune --dry-run` at layer_norm_bwd bf16 65536 x 1024.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  ab)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 default"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 default"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 default"
      "rms_norm rms_norm_bwd bf16 M=8192,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=1024,N=8192 default"
      "rms_norm rms_norm_bwd bf16 M=1024,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 default"
      "rms_norm rms_norm_bwd bf16 M=32768,N=4096 default"
      "layer_norm layer_norm_bwd bf16 M=4096,N=32768 default"
      "rms_norm rms_norm_bwd bf16 M=4096,N=32768 default"
      "layer_norm layer_norm_bwd f32 M=8192,N=10240 default"
      "rms_norm rms_norm_bwd f32 M=8192,N=10240 default"
    )
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    {
      ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
      for c in "layer_norm layer_norm_bwd M=65536,N=1024" "rms_norm rms_norm_bwd M=65536,N=1024" \
               "layer_norm layer_norm_bwd M=8192,N=8192" "rms_norm rms_norm_bwd M=8192,N=8192"; do
        set -- $c
        for b in kdsl_old kdsl; do
          echo "== ncu $b $2 $3"
          timeout 60 "$ncu" --clock-control none --metrics gpu__time_duration.sum \
            .device/bin/$b run stdlib/$1.kdsl -k $2 --dtype bf16 --shape $3 2>&1 |
            grep -E '^  kdsl_|gpu__time_duration' | sed -E 's/, Context.*//; s/ +/ /g'
        done
      done
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
      bash scripts/device/sanitize_staged.sh 2>&1
      echo "sanitize_staged exit $? in $(( $(date +%s) - s )) s"
      s=$(date +%s)
      timeout 150 .device/bin/stdlib_norm_gpu_test 2>&1 | tail -3
      echo "stdlib_norm_gpu_test in $(( $(date +%s) - s )) s"
    } 2>&1 | tee "$out/ab.txt"
    ;;
  ab2)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 default"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 default"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 default"
      "rms_norm rms_norm_bwd bf16 M=8192,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=1024,N=8192 default"
      "rms_norm rms_norm_bwd bf16 M=1024,N=8192 default"
    )
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    {
      ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
      for c in "layer_norm layer_norm_bwd M=65536,N=1024" "rms_norm rms_norm_bwd M=65536,N=1024" \
               "layer_norm layer_norm_bwd M=8192,N=8192" "rms_norm rms_norm_bwd M=1024,N=8192"; do
        set -- $c
        echo "== ncu kdsl $2 $3"
        timeout 60 "$ncu" --clock-control none --metrics gpu__time_duration.sum \
          .device/bin/kdsl run stdlib/$1.kdsl -k $2 --dtype bf16 --shape $3 2>&1 |
          grep -E '^  kdsl_|gpu__time_duration' | sed -E 's/, Context.*//; s/ +/ /g'
      done
      for round in 1 2; do
        for c in "${cases[@]}"; do
          for b in kdsl_old kdsl; do
            extra=(); [ "$round" = 1 ] && [ $b = kdsl ] && extra=(--verify)
            printf '%s %-8s ' "$round" "$b"
            k=.device/bin/$b bench $c "${extra[@]}"
          done
        done
      done
    } 2>&1 | tee "$out/ab2.txt"
    bash "$0" final
    ;;
  ncu)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    for c in "layer_norm layer_norm_bwd" "rms_norm rms_norm_bwd"; do
      set -- $c
      .device/bin/kdsl run stdlib/$1.kdsl -k $2 --dtype bf16 --shape M=4096,N=32768 --bench --reps 5 |
        grep -oE 'bench: [0-9.]+ us'
      timeout 200 "$ncu" --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
        --section SourceCounters --section Occupancy --section LaunchStats \
        --section MemoryWorkloadAnalysis -k regex:"kdsl_$2_bf16_n32768\$" --launch-count 1 \
        -o /tmp/rep_$2 -f .device/bin/kdsl run stdlib/$1.kdsl -k $2 --dtype bf16 \
        --shape M=4096,N=32768 > /tmp/ncu_$2.log 2>&1
      tail -2 /tmp/ncu_$2.log
      "$ncu" -i /tmp/rep_$2.ncu-rep --page details --csv > "$out/details_$2.csv" 2>&1
      "$ncu" -i /tmp/rep_$2.ncu-rep --page source --csv --print-source sass > "$out/source_$2.csv" 2>&1
    done
    ls -la "$out"
    ;;
  async)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "layer_norm layer_norm_bwd bf16 M=4096,N=32768 default"
      "rms_norm rms_norm_bwd bf16 M=4096,N=32768 default"
      "rms_norm add_rms_norm_bwd bf16 M=4096,N=32768 default"
    )
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    {
      for c in "layer_norm layer_norm_bwd" "rms_norm rms_norm_bwd" "rms_norm add_rms_norm_bwd"; do
        set -- $c
        for sh in M=300,N=32768 M=37,N=32760 M=1,N=32768 M=4096,N=32768; do
          printf '%-18s %-14s ' "$2" "$sh"
          timeout 60 .device/bin/kdsl run stdlib/$1.kdsl -k $2 --dtype bf16 --shape $sh --verify 2>&1 |
            grep -oE 'verify [a-z_]+: [a-zA-Z]+|error:.*' | tr '\n' ' '
          echo "rc=${PIPESTATUS[0]}"
        done
      done
      for round in 1 2 3; do
        for c in "${cases[@]}"; do
          for b in kdsl_old kdsl; do
            printf '%s %-8s ' "$round" "$b"
            k="timeout 60 .device/bin/$b" bench $c
          done
        done
      done
      s=$(date +%s)
      ONLY='N=32' bash scripts/device/sanitize_staged.sh 2>&1
      echo "sanitize_staged (cluster cases) exit $? in $(( $(date +%s) - s )) s"
      s=$(date +%s)
      timeout 150 .device/bin/stdlib_norm_gpu_test 2>&1 | tail -3
      echo "stdlib_norm_gpu_test in $(( $(date +%s) - s )) s"
    } 2>&1 | tee "$out/async.txt"
    ;;
  syncwarp)
    for c in "layer_norm layer_norm_bwd" "rms_norm rms_norm_bwd"; do
      set -- $c
      for sh in M=37,N=32760 M=4096,N=32768; do
        printf '%-16s %-14s ' "$2" "$sh"
        timeout 60 .device/bin/kdsl run stdlib/$1.kdsl -k $2 --dtype bf16 --shape $sh --verify 2>&1 |
          grep -oE 'verify [a-z_]+: [a-zA-Z]+|error:.*' | tr '\n' ' '
        echo
      done
      for b in kdsl_old kdsl; do
        printf '%-8s ' "$b"
        k="timeout 60 .device/bin/$b" bench $1 $2 bf16 M=4096,N=32768 default
      done
    done
    ;;
  final)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    rm -rf /tmp/fb && mkdir -p /tmp/fb
    OUT=/tmp/fb KDSL_PEERS=run bash scripts/device/final_bench.sh > /tmp/fb/final_bench.txt 2>&1
    tail -45 /tmp/fb/final_bench.txt
    cp /tmp/fb/final_bench.txt /tmp/fb/h200.json /tmp/fb/kdsl_norm.json /tmp/fb/kdsl_scan.json \
       /tmp/fb/norm_gbps.png /tmp/fb/launch.txt "$out/" 2>&1
    cp /tmp/fb/peers_run/peers.json "$out/peers_run.json" 2>&1
    timeout 70 .device/bin/kdsl tune stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16 \
      --shape M=65536,N=1024 --dry-run 2>&1 | tail -30 | tee "$out/tune.txt"
    ls -la "$out"
    ;;
  *) echo "usage: s22.sh ab|ab2|ncu|async|syncwarp|final" >&2; exit 2 ;;
esac
