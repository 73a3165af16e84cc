#!/usr/bin/env bash
# Eighteenth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s18.sh hand   bench/experiments/lnbwd.cu (.device/exp/lnbwd, nvcc -O3 -arch=sm_90 here):
#                 hand-written LayerNorm backward bf16 variants at 8192 x 8192, 32768 x 4096 and
#                 65536 x 1024, each checked against a double-precision reference.
#                 Prediction: if kdsl's structure (persistent CTAs, dw and db in registers,
#                 partials summed by a second kernel) is what limits LayerNorm backward, the best
#                 variant stays near kdsl's 0.66-0.71 of copy; if the code is (packed rows, w in
#                 registers, no per-element validity test), one reaches 0.80 or more.
#   s18.sh sweep  schedule hints on LayerNorm and RMSNorm backward bf16 (the rows under 0.85),
#                 same binary, $ROUNDS rounds (2), --verify on the hinted runs in the first
#   s18.sh ncu    Nsight Compute on LayerNorm backward bf16's defaults at the three shapes
#   s18.sh probe  (after hand, sweep and ncu) the hand-written kernel reached 0.85 of copy at
#                 8192 x 8192 with w in registers (0.69 with w re-read per phase, as kdsl's
#                 default) and 0.93 at 32768 x 4096 staged (kdsl staged: 0.59). Times
#                 cache_invariant=1 (w in registers) on kdsl, and puts kdsl's staged kernel and the
#                 hand-written one side by side under Nsight Compute, with their SASS.
#                 Prediction: kdsl with cache_invariant=1 at 8192 x 8192 within 5% of the
#                 hand-written 112 us.
#   s18.sh ab     the old binary (.device/bin/kdsl_old) against the new one on 13 backward rows
#   s18.sh check  packed-row candidates, sanitize_staged.sh, stdlib_norm_gpu_test, --verify
#   s18.sh rows   (prepared for the next GPU session, not yet run) lnbwd.cu's lnbwd_rows: the same
#                 threads take RPT rows per iteration (one barrier and one reduction pass per RPT
#                 rows, twice the bytes in flight per CTA), at 65536 x 1024 (kdsl 0.76 of copy,
#                 the hand-written one-row kernel 0.70) and 32768 x 4096. Build first:
#                   nvcc -O3 -arch=sm_90 -std=c++17 -o .device/exp/lnbwd bench/experiments/lnbwd.cu
#                 Prediction: at 65536 x 1024, 2 rows per iteration 10-15% faster than 1 (about
#                 136 -> 115-122 us); 4 rows at 4 CTAs per SM no faster than 2; at 32768 x 4096,
#                 2 rows within 3% of 1 (already 0.93 of copy).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
k=${k:-.device/bin/kdsl}
cat .device/COMMIT
bench() {  # FILE KERNEL DTYPE SHAPE HINT [extra...]
  local f=$1 kn=$2 dt=$3 sh=$4 v=$5
  shift 5
  local h=()
  [ "$v" != default ] && h=(--schedule "$v")
  printf '%-16s %-5s %-15s %-28s ' "$kn" "$dt" "$sh" "$v"
  ${k} run "stdlib/$f.kdsl" -k "$kn" --dtype "$dt" --shape "$sh" "${h[@]}" --bench --reps 40 "$@" 2>&1 |
    grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|verify [a-z_]+: [a-zA-Z]+|error:.*" | tr '\n' ' '
  echo
}
# Compiles every case ("FILE KERNEL DTYPE SHAPE HINT", the array `cases`) with $k, 15 at a time.
precompile() {
  local c h
  for c in "${cases[@]}"; do
    set -- $c
    h=()
    [ "$5" != default ] && h=(--schedule "$5")
    ${k} -q compile "stdlib/$1.kdsl" -k "$2" --dtype "$3" --shape "$4" "${h[@]}" >/dev/null 2>&1 &
    while [ "$(jobs -r | wc -l)" -ge 15 ]; do wait -n; done
  done
  wait
}
# Times every case, $1 rounds; --verify ($2): "first" on the hinted cases in round 1, or "all".
rounds() {
  local round c extra verify=$2  # ($2 is taken by `set -- $c` below)
  for round in $(seq "$1"); do
    for c in "${cases[@]}"; do
      set -- $c
      extra=()
      if [ "$verify" = all ] || { [ "$round" = 1 ] && [ "$5" != default ]; }; then extra=(--verify); fi
      printf '%s ' "$round"
      bench "$@" "${extra[@]}"
    done
  done
}
# `source s18.sh lib` (s19.sh) takes the functions above alone.
# Old (.device/bin/kdsl_old) against new (.device/bin/kdsl) on every case of `cases`, $1 rounds,
# alternating, --verify on the new binary in round 1; further arguments name the binaries
# (.device/bin/NAME, the last one verified) instead of kdsl_old and kdsl.
ab_rounds() {
  local round c b extra n=$1
  shift
  local bins=("$@")
  [ ${#bins[@]} -gt 0 ] || bins=(kdsl_old kdsl)
  for round in $(seq "$n"); do
    for c in "${cases[@]}"; do
      for b in "${bins[@]}"; do
        extra=(); [ "$round" = 1 ] && [ "$b" = "${bins[-1]}" ] && extra=(--verify)
        printf '%s %-8s ' "$round" "$b"
        k="timeout 60 .device/bin/$b" bench $c "${extra[@]}"
      done
    done
  done
}
# Nsight Compute on the first launch of the kernel matching $2 (a regex) in `kdsl ARGS...`:
# speed of light, warp states, scheduler, instructions, source counters, occupancy; the details
# and the per-SASS-line source page as CSV in $out/details_$1.csv and $out/source_$1.csv.
ncu_source() {
  local name=$1 regex=$2
  shift 2
  local ncu
  ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
  timeout 240 "$ncu" --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section InstructionStats --section SourceCounters --section Occupancy --section LaunchStats \
    -k regex:"$regex" --launch-count 1 -o "/tmp/rep_$name" -f .device/bin/kdsl "$@" \
    > "/tmp/ncu_$name.log" 2>&1
  tail -3 "/tmp/ncu_$name.log"
  "$ncu" -i "/tmp/rep_$name.ncu-rep" --page details --csv > "$out/details_$name.csv" 2>&1
  "$ncu" -i "/tmp/rep_$name.ncu-rep" --page source --csv --print-source sass \
    > "$out/source_$name.csv" 2>&1
}
# The full benchmark with the peers timed in the same run (scripts/device/final_bench.sh,
# KDSL_PEERS=run): its output, JSONs, plot and launch figures into $out.
final_run() {
  nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
  rm -rf /tmp/fb && mkdir -p /tmp/fb
  OUT=/tmp/fb KDSL_PEERS=run bash scripts/device/final_bench.sh > /tmp/fb/final_bench.txt 2>&1
  tail -45 /tmp/fb/final_bench.txt
  cp /tmp/fb/final_bench.txt /tmp/fb/h200.json /tmp/fb/kdsl_norm.json /tmp/fb/kdsl_scan.json \
     /tmp/fb/norm_gbps.png /tmp/fb/launch.txt /tmp/fb/peers.txt "$out/" 2>&1
  cp /tmp/fb/peers_run/peers.json "$out/peers_run.json" 2>&1
  ls -la "$out"
}
[ "${1:-}" = lib ] && return 0
case "${1:-}" in
  hand)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    .device/exp/lnbwd
    ;;
  sweep)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=(
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 group=1024,stage=2"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 group=1024,stage=3"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 stage=3"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 default"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 stage=2"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 stage=3"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 prefetch=1"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 default"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 stage=2"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 stage=3"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 group=256,stage=2"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 prefetch=1"
      "layer_norm layer_norm_bwd bf16 M=1024,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=1024,N=8192 group=1024,stage=2"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 default"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 stage=3"
      "rms_norm rms_norm_bwd bf16 M=8192,N=8192 default"
      "rms_norm rms_norm_bwd bf16 M=8192,N=8192 stage=3"
    )
    precompile
    rounds "${ROUNDS:-2}" first
    ;;
  ncu)
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    m=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
    m+=,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
    m+=,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active
    for r in long_scoreboard barrier short_scoreboard wait lg_throttle mio_throttle not_selected \
             math_pipe_throttle no_instruction drain selected; do
      m+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
    done
    for s in M=8192,N=8192 M=32768,N=4096 M=65536,N=1024; do
      echo "== layer_norm_bwd bf16 $s default"
      timeout 120 "$ncu" --metrics "$m" -k regex:"kdsl_.*[0-9]\$" --launch-skip 2 --launch-count 1 \
        --csv --print-units base $k run stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16 --shape $s \
        --bench --reps 2 --warmup 1 2>&1 | python3 bench/experiments/ncu_metrics.py
    done
    ;;
  probe)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    .device/exp/lnbwd
    cases=(
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 cache_invariant=1"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 cache_invariant=1,group=1024"
      "layer_norm layer_norm_bwd bf16 M=1024,N=8192 cache_invariant=1"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 stage=2"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 stage=2,butterfly=0"
    )
    precompile
    rounds 2 first
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    m=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size
    m+=,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
    m+=,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
    m+=,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active
    m+=,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum
    for r in long_scoreboard barrier short_scoreboard wait lg_throttle mio_throttle not_selected \
             math_pipe_throttle selected; do
      m+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
    done
    for s in "M=32768,N=4096 stage=2" "M=8192,N=8192 cache_invariant=1"; do
      set -- $s
      echo "== kdsl layer_norm_bwd bf16 $1 $2"
      timeout 120 "$ncu" --metrics "$m" -k regex:"kdsl_.*[0-9]\$" --launch-skip 2 --launch-count 1 \
        --csv --print-units base $k run stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16 --shape $1 \
        --schedule $2 --bench --reps 2 --warmup 1 2>&1 | python3 bench/experiments/ncu_metrics.py
    done
    for v in "4096 2" "8192 2"; do
      set -- $v
      echo "== hand lnbwd $1 variant $2"
      timeout 150 "$ncu" --metrics "$m" -k regex:"lnbwd" --launch-skip 2 --launch-count 1 \
        --csv --print-units base .device/exp/lnbwd $1 $2 2>&1 | python3 bench/experiments/ncu_metrics.py
    done
    mkdir -p "${OUT:-/tmp}"
    $k emit stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype bf16 --shape M=32768,N=4096 --schedule stage=2 \
      --sass > "${OUT:-/tmp}/kdsl_lnbwd4096_stage2.sass" 2>&1
    cuobjdump -sass -fun '_Z5lnbwdILi4096ELi512ELi2ELb1ELb1EEvPK5uint4S2_S2_PKfS4_PS0_Pfi' .device/exp/lnbwd \
      > "${OUT:-/tmp}/hand_lnbwd4096.sass" 2>&1
    wc -l "${OUT:-/tmp}"/*.sass
    ;;
  ab)  # .device/bin/kdsl_old (4af81f0) against .device/bin/kdsl (per-row scalars a row ahead)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=(
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 cache_invariant=1"
      "layer_norm layer_norm_bwd bf16 M=1024,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 default"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 stage=2"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 default"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 stage=2"
      "rms_norm rms_norm_bwd bf16 M=8192,N=8192 default"
      "rms_norm rms_norm_bwd bf16 M=32768,N=4096 default"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 default"
      "rms_norm rms_norm_bwd bf16 M=1024,N=8192 default"
      "rms_norm rms_norm_bwd f32 M=8192,N=10240 default"
      "layer_norm layer_norm_bwd f32 M=8192,N=10240 default"
    )
    k=.device/bin/kdsl precompile  # each binary compiles its own code into the cache
    k=.device/bin/kdsl_old precompile
    for round in 1 2; do
      for c in "${cases[@]}"; do
        set -- $c
        for b in kdsl_old kdsl; do
          extra=(); [ "$round" = 1 ] && [ $b = kdsl ] && extra=(--verify)
          printf '%s %-8s ' "$round" "$b"
          k=.device/bin/$b bench "$@" "${extra[@]}"
        done
      done
    done
    ;;
  check)  # the new defaults: packed rows as candidates, compute-sanitizer, the GPU tests, --verify
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=(
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 default"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 group=1024,pack=1,stage=2"
      "layer_norm layer_norm_bwd bf16 M=8192,N=8192 group=512,pack=1,stage=2,cache_invariant=1"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 default"
      "layer_norm layer_norm_bwd bf16 M=32768,N=4096 stage=2,pack=1"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 default"
      "layer_norm layer_norm_bwd bf16 M=65536,N=1024 stage=2,pack=1"
      "rms_norm rms_norm_bwd bf16 M=8192,N=8192 default"
      "rms_norm rms_norm_bwd bf16 M=8192,N=8192 stage=2,pack=1"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 default"
      "rms_norm rms_norm_bwd bf16 M=65536,N=1024 stage=2,pack=1"
    )
    precompile
    rounds 2 all
    for s in M=1024,N=8192 M=4096,N=32768; do
      printf '1 '
      bench layer_norm layer_norm_bwd bf16 $s default --verify
    done
    s=$(date +%s)
    bash scripts/device/sanitize_staged.sh 2>&1
    echo "sanitize_staged exit $? in $(( $(date +%s) - s )) s"
    s=$(date +%s)
    timeout 120 .device/bin/stdlib_norm_gpu_test --gtest_brief=1 2>&1 | tail -4
    echo "stdlib_norm_gpu_test exit ${PIPESTATUS[0]} in $(( $(date +%s) - s )) s"
    ;;
  rows)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    .device/exp/lnbwd 1024
    .device/exp/lnbwd 4096
    ;;
  *) echo "usage: s18.sh hand|sweep|ncu|probe|ab|check|rows" >&2; exit 2 ;;
esac
