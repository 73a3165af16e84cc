#!/usr/bin/env bash
# Twenty-fourth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s24.sh probe  1. kdsl tune --dry-run (27 layouts around the default, now compiled in parallel
#                    before the timing loop) on the bf16 scans nearest their targets at the issue
#                    shapes: linear_recurrence (0.787 of copy in AG4, target 0.80), its backward
#                    (0.794), the last-axis cumsum 4096 x 8192 (0.817, target 0.85), cumsum_mid
#                    (0.737). The defaults were last tuned in the tenth session, before rescanning
#                    tiles, flushed approximate math and 32-bit positions.
#                    Prediction: a winner 2-5% faster than the default for at least one of the
#                    recurrences (the tenth session's tune found 9-17% when the default had not
#                    been searched since a code change); cumsum within 2%.
#                 2. softmax and log_softmax bf16 at 4096 x 32768 (staged, 512 threads by the
#                    long-row rule) and 2048 x 65536 (streamed): group=1024 (staged 2 deep at
#                    32768) against the default, two rounds, --verify on each hint in round 1.
#                    Prediction: at 32768 group=1024,stage=2 about 2% faster for both kernels
#                    (AG3: 145 against 148.5 us for softmax); at 65536 no faster.
#                 3. Nsight Compute source counters on linear_recurrence bf16 (1, 32768, 2048):
#                    executed SASS per line, to split the tile's integer (address, bounds) work
#                    from its loads, scan and stores, as AG1 did for rg_lru_bwd (61 of 167
#                    instructions per element were integer work there).
#   s24.sh final  scripts/device/final_bench.sh with the peers timed in the same run.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
scan_shape=B=1,L=32768,D=2048
case "${1:-}" in
  probe)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    {
      for kd in "linear_recurrence linear_recurrence $scan_shape" \
                "linear_recurrence linear_recurrence_bwd $scan_shape" \
                "scan cumsum M=4096,N=8192" "scan cumsum_mid $scan_shape"; do
        set -- $kd
        s=$(date +%s)
        timeout 150 $k tune "stdlib/$1.kdsl" -k "$2" --dtype bf16 --shape "$3" --dry-run --reps 40
        echo "($2: $(( $(date +%s) - s )) s)"
      done
    } 2>&1 | tee "$out/tune.txt"
    cases=(
      "softmax softmax bf16 M=4096,N=32768 default"
      "softmax softmax bf16 M=4096,N=32768 group=1024,stage=2"
      "softmax log_softmax bf16 M=4096,N=32768 default"
      "softmax log_softmax bf16 M=4096,N=32768 group=1024,stage=2"
      "softmax softmax bf16 M=2048,N=65536 default"
      "softmax softmax bf16 M=2048,N=65536 group=1024"
      "softmax log_softmax bf16 M=2048,N=65536 default"
      "softmax log_softmax bf16 M=2048,N=65536 group=1024"
    )
    precompile
    rounds 2 first 2>&1 | tee "$out/softmax.txt"
    args=(run stdlib/linear_recurrence.kdsl -k linear_recurrence --dtype bf16 --shape $scan_shape)
    timeout 200 "$ncu" --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section InstructionStats --section SourceCounters --section Occupancy --section LaunchStats \
      -k regex:'kdsl_linear_recurrence_bf16_n32768$' --launch-count 1 -o /tmp/rep_lr -f \
      $k "${args[@]}" > /tmp/ncu_lr.log 2>&1
    tail -3 /tmp/ncu_lr.log
    "$ncu" -i /tmp/rep_lr.ncu-rep --page details --csv > "$out/details_lr.csv" 2>&1
    "$ncu" -i /tmp/rep_lr.ncu-rep --page source --csv --print-source sass > "$out/source_lr.csv" 2>&1
    ls -la "$out"
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
    echo "usage: s24.sh probe|final" >&2
    exit 2
    ;;
esac
