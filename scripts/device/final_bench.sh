#!/usr/bin/env bash
# The benchmark run on the GPU machine (after stage.sh): launch overhead, kdsl's normalization and
# scan benchmarks, and the comparison with PyTorch eager and torch.compile. The peers' times:
#   KDSL_PEERS=run       ../shared/peers/peers.py (stage.sh copies it to .device/peers.py) runs in
#                        this command after kdsl's benchmarks, on the same GPU: same-run ratios
#                        (80-90 s on an H200; its output is kept as $OUT/peers_run/peers.json)
#   KDSL_PEERS=recorded  the times peers.py recorded on another run (.device/peers.json); the
#                        default when that file is present
#   KDSL_PEERS=time      bench/peers_compare.py times eager and torch.compile itself (also the
#                        default without .device/peers.json); no Triton recurrence peer
# KDSL_TUNE=1 first tunes the normalization kernels furthest from the copy bandwidth. Results
# under $OUT (launch.txt, kdsl_norm.json, kdsl_scan.json, h200.json, norm_gbps.png, tune.txt,
# bench.txt, peers.txt).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD" PYTHONUNBUFFERED=1
out="${OUT:-/tmp}"
k=.device/bin/kdsl
cat .device/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
# Launch overhead (issue 6): twice, so the second process finds the disk cache warm; then the
# warm in-memory launches.
{
  .device/bin/kdsl_bench_launch --first-launch
  .device/bin/kdsl_bench_launch --first-launch
  .device/bin/kdsl_bench_launch --launches 20000
} 2>&1 | tee "$out/launch.txt"
# The benchmarks' specializations, compiled with the machine's cores (KDSL_PRECOMPILE=0 skips
# this when stage.sh kept a cache precompiled elsewhere that holds them).
if [ "${KDSL_PRECOMPILE:-1}" != 0 ]; then
  bash scripts/device/precompile_tests.sh "$KDSL_CACHE_DIR" "$k" 2>&1 | tail -2
  bash scripts/device/precompile_scan_tests.sh "$KDSL_CACHE_DIR" "$k" 2>&1 | tail -2
fi
[ "${KDSL_TUNE:-0}" = 1 ] && {
  for spec in "rms_norm.kdsl rms_norm_bwd bf16 M=8192,N=8192" "layer_norm.kdsl layer_norm bf16 M=8192,N=8192" \
              "layer_norm.kdsl layer_norm_bwd bf16 M=8192,N=8192" "softmax.kdsl softmax bf16 M=8192,N=8192" \
              "softmax.kdsl softmax_bwd bf16 M=8192,N=8192" "rms_norm.kdsl rms_norm bf16 M=1024,N=8192"; do
    set -- $spec
    timeout 60 $k tune stdlib/$1 -k $2 --dtype $3 --shape $4 --reps 20 2>&1 | tail -4
  done
} | tee "$out/tune.txt"
timeout 240 .device/bin/kdsl_bench_norm "$out/kdsl_norm.json" --reps 30 2>&1 | tee "$out/bench.txt"
inputs=("$out/kdsl_norm.json")
if [ -x .device/bin/kdsl_bench_scan ]; then
  timeout 240 .device/bin/kdsl_bench_scan "$out/kdsl_scan.json" 2>&1 | tee -a "$out/bench.txt"
  [ -s "$out/kdsl_scan.json" ] && inputs+=("$out/kdsl_scan.json")
fi
peers=()
mode="${KDSL_PEERS:-recorded}"
case "$mode" in
  run | recorded | time) ;;
  *) echo "KDSL_PEERS=$mode: expected run, recorded or time; using recorded"; mode=recorded ;;
esac
if [ "$mode" = run ] && [ ! -s .device/peers.py ]; then
  echo "KDSL_PEERS=run: no .device/peers.py (stage.sh copies ../shared/peers/peers.py); using recorded"
elif [ "$mode" = run ]; then
  mkdir -p "$out/peers_run"
  rm -f "$out/peers_run/peers.json"  # never a previous run's file
  start=$(date +%s)
  timeout "${KDSL_PEERS_TIMEOUT:-330}" python3 .device/peers.py "$out/peers_run" > "$out/peers_run/log.txt" 2>&1
  rc=$?
  echo "peers.py: exit $rc, $(( $(date +%s) - start )) s"
  if [ $rc -eq 0 ] && [ -s "$out/peers_run/peers.json" ]; then
    peers=(--peers "$out/peers_run/peers.json" --same-run)
  else
    tail -5 "$out/peers_run/log.txt"
    echo "peers.py did not finish: the recorded peers are used instead"
  fi
fi
[ ${#peers[@]} -eq 0 ] && [ "$mode" != time ] && [ -s .device/peers.json ] && peers=(--peers .device/peers.json)
timeout 240 python3 bench/peers_compare.py "${peers[@]}" "$out" "${inputs[@]}" 2>&1 | tee "$out/peers.txt" | tail -60
