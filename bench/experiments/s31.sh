#!/usr/bin/env bash
# Thirty-first session, on the GPU machine after scripts/device/stage.sh (carry .device).
# Predictions written before the run:
#   s31.sh calib  the row schedules' own limit: bench/experiments/calibrate.kdsl's copy_rows
#                 (y = x row by row: RMSNorm forward's traffic without the reduction) and
#                 scale_rows (y = x * w: with a loop-invariant vector) at the issue-5 forward
#                 shapes (bf16 8192 x 8192, 32768 x 4096, 4096 x 32768, 65536 x 1024; f32
#                 8192 x 10240), beside rms_norm, layer_norm and softmax there; two rounds. Never
#                 measured before. Prediction: copy_rows 0.93-0.97 of copy at every shape, so the
#                 forward kernels' 0.87-0.90 rows (rms_norm 8192 x 8192 and 65536 x 1024,
#                 layer_norm 8192 x 8192 and 65536 x 1024, softmax 4096 x 32768; AM3) lose 4-8%
#                 to their reductions and barriers, not to the access pattern. If copy_rows is
#                 itself at 0.87-0.90 there, the schedule (rows per CTA, CTAs per SM, grid) is
#                 the limit and the next step is the schedule, not the math.
#   s31.sh lead   bf16 softmax on the cluster of 8 without the next row prefetched (AM6, H100:
#                 6.5% faster at 512 x 262144) at 512 x 262144 and 1024 x 131072, the default
#                 against prefetch=0, two rounds, --verify on the hints. Prediction: on the H200
#                 prefetch=0 within 3% of the default (the H100's gain not carried over: the
#                 H200's faster memory leaves less for the prefetch to hide, either way).
#   s31.sh checks the GPU tests that did not run at 9574c73 (stdlib_scan_gpu_test, the rest)
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  calib)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for s in "bf16 M=8192,N=8192" "bf16 M=32768,N=4096" "bf16 M=4096,N=32768" "bf16 M=65536,N=1024" \
             "f32 M=8192,N=10240"; do
      set -- $s
      for kn in "../bench/experiments/calibrate copy_rows" "../bench/experiments/calibrate scale_rows" \
                "rms_norm rms_norm" "layer_norm layer_norm" "softmax softmax"; do
        cases+=("$kn $1 $2 default")
      done
    done
    # copy_rows with LayerNorm's thread counts (128 a row at N = 8192, 16 at 1024)
    cases+=("../bench/experiments/calibrate copy_rows bf16 M=8192,N=8192 group=128")
    cases+=("../bench/experiments/calibrate copy_rows bf16 M=65536,N=1024 group=16")
    precompile
    rounds 2 none 2>&1 | tee "$out/calib.txt"
    ;;
  lead)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for spec in "softmax softmax bf16 M=512,N=262144" "softmax softmax bf16 M=1024,N=131072" \
                "softmax log_softmax bf16 M=512,N=262144"; do
      for h in default prefetch=0; do cases+=("$spec $h"); done
    done
    precompile
    rounds 2 first 2>&1 | tee "$out/lead.txt"
    ;;
  alias)
    # (after calib) AN1's bimodal 2^27-byte rows: PyTorch's copy and multiply with the output at
    # chosen distances from the input (alias_probe.py), then kdsl copy_rows and rms_norm bf16
    # 8192 x 8192 in eight fresh processes each. Prediction: if the relative placement decides,
    # some distances give the slow mode (about 108 us on the H100) for PyTorch's kernels too, and
    # the eight processes split between the two modes.
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    timeout 200 python3 bench/experiments/alias_probe.py 2>&1 | tee "$out/alias.txt"
    cases=("../bench/experiments/calibrate copy_rows bf16 M=8192,N=8192 default"
           "rms_norm rms_norm bf16 M=8192,N=8192 default")
    precompile
    rounds 8 none 2>&1 | tee -a "$out/alias.txt"
    ;;
  clock)
    # (after alias: PyTorch's copy never slow, kdsl's copy_rows mostly slow) whether the slow mode
    # is the GPU's clock ramp in a short process: copy_rows bf16 8192 x 8192 with the default 10
    # warm-up runs and 40 timed ones, with 3000 warm-up runs, with 2000 timed ones, and without
    # the L2 flush, three processes each, the SM clock sampled every 20 ms meanwhile.
    # Prediction: the long warm-up gives about 94 us in every process if the clock is the cause.
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem,clocks.max.sm,power.limit --format=csv,noheader
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active \
      --format=csv,noheader -lms 20 > /tmp/clocks.csv 2>&1 &
    smi=$!
    f=bench/experiments/calibrate.kdsl
    ${k} -q compile $f -k copy_rows --dtype bf16 --shape M=8192,N=8192
    for opts in "--reps 40" "--warmup 3000 --reps 40" "--reps 2000" "--reps 40 --no-flush"; do
      for i in 1 2 3; do
        printf '%s %s: ' "$opts" "$i"; date +%T.%N | cut -c1-12
        ${k} run $f -k copy_rows --dtype bf16 --shape M=8192,N=8192 --bench $opts 2>&1 | grep -oE "bench: [0-9.]+ us"
      done
    done 2>&1 | tee "$out/clock.txt"
    kill $smi
    cp /tmp/clocks.csv "$out/"
    ;;
  ramp)
    # (after clock: 3000 warm-up launches or 2000 timed ones give 93.2 us in every process, 10
    # and 40 give 107-108) how long the ramp lasts after an idle gap (ramp_probe.py), and kdsl's
    # copy_rows with warm-up launches worth about 25, 100 and 300 ms. Prediction: a ramp of
    # 50-300 ms, every idle gap of 0.2 s or more giving it again.
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    timeout 120 python3 bench/experiments/ramp_probe.py 2>&1 | tee "$out/ramp.txt"
    f=bench/experiments/calibrate.kdsl
    for w in 180 720 2200; do
      printf 'warmup %s: ' "$w"
      ${k} run $f -k copy_rows --dtype bf16 --shape M=8192,N=8192 --bench --warmup $w --reps 40 2>&1 | grep -oE "bench: [0-9.]+ us"
      sleep 1
    done 2>&1 | tee -a "$out/ramp.txt"
    ;;
  warm)
    # time_cuda now warms up for at least 25 ms (triton.testing.do_bench's warm-up, which the
    # peers get) besides its warm-up runs. Old binary (.device/bin/kdsl_old: 9574c73, 10 warm-up
    # runs) against new (default --warmup-ms 25), three processes each, alternating; then the full
    # benchmark. Prediction: the new binary at about 93-94 us (H100) or its H200 equivalent in
    # every process for copy_rows and rms_norm bf16 8192 x 8192, the old one mostly 14% slower;
    # in the full benchmark the 2^27-byte bf16 rows (8192 x 8192, 65536 x 1024) rise from
    # 0.87-0.90 to 0.93-0.95 of copy, the larger rows within 1%.
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    for i in 1 2 3; do
      for b in kdsl_old kdsl; do
        for c in "../bench/experiments/calibrate copy_rows bf16 M=8192,N=8192" \
                 "rms_norm rms_norm bf16 M=8192,N=8192" "layer_norm layer_norm bf16 M=65536,N=1024"; do
          printf '%s %-8s ' "$i" "$b"
          k=".device/bin/$b" bench $c default
        done
      done
    done 2>&1 | tee "$out/warm.txt"
    final_run
    ;;
  h200norm)
    # (only where the machine is an H200; the device budget left no room for the whole
    # benchmark) the normalization half of the benchmark with the 25 ms warm-up and the peers
    # timed in the same run. Prediction: the 2^27-byte bf16 rows (8192 x 8192, 65536 x 1024) of
    # the forward kernels from 0.867-0.899 (AM3) to 0.92-0.95 of copy; rows of 2^28 bytes and
    # more within 1.5% of AM3.
    nvidia-smi -L | grep -q H200 || { nvidia-smi -L; echo "not an H200: nothing run"; exit 0; }
    export PYTHONUNBUFFERED=1
    bash scripts/device/precompile_tests.sh "$KDSL_CACHE_DIR" "$k" 2>&1 | tail -1
    timeout 150 .device/bin/kdsl_bench_norm "$out/kdsl_norm.json" --reps 30 > "$out/bench_norm.txt" 2>&1
    mkdir -p /tmp/pr
    start=$(date +%s)
    timeout 130 python3 .device/peers.py /tmp/pr > /tmp/pr/log.txt 2>&1
    echo "peers.py: exit $?, $(( $(date +%s) - start )) s"
    cp /tmp/pr/peers.json "$out/peers_run.json"
    timeout 60 python3 bench/peers_compare.py --peers /tmp/pr/peers.json --same-run "$out" \
      "$out/kdsl_norm.json" > "$out/peers_norm.txt" 2>&1
    tail -42 "$out/peers_norm.txt"
    ;;
  *)
    echo "usage: s31.sh calib|lead|alias|clock|ramp|warm|h200norm" >&2
    exit 2
    ;;
esac
