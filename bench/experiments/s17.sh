#!/usr/bin/env bash
# Prepared in the sixteenth session for the next one with a GPU (not yet run), on the GPU machine
# after scripts/device/stage.sh (carry .device):
#   s17.sh rows   the last-axis cumsum (scan.rows) at issue 5's shapes: bf16 reaches 0.761 of copy
#                 where f32 reaches 0.881 (AA3). Its tiles hold 2 steps of 8 bf16 (8 KB a tile)
#                 where f32 holds 4 steps of 4 (16 KB): the register budget of 40 words along the
#                 last axis predates the packed look-back and was never re-tuned. Times t = 1 to 8
#                 and 4 or 16 warps along the positions against the default, same binary, $ROUNDS
#                 rounds (2), --verify in the first at 2048 x 32768.
#                 Prediction: bf16 with t=4 (16 KB tiles, as f32) 5-10% faster at 2048 x 32768
#                 (82.9 -> 75-79 us, 0.76 -> 0.80-0.84 of copy); f32 unchanged by t=4 (its default).
#   s17.sh combine  the two combines of a row reduction's warps' partials (the schedule hint
#                 butterfly=0/1, one of them the default) on the normalization rows of issue 5,
#                 same binary, $ROUNDS rounds (2). Prediction: rms_norm_bwd f32 8192 x 10240 about
#                 251 us with butterfly=0 against 292 (as AA5); the other rows within 2% or slower
#                 with butterfly=0, except those AA5 did not time (unknown).
#   s17.sh ncu    Nsight Compute stall reasons per issued instruction on rms_norm_bwd and
#                 layer_norm_bwd f32 8192 x 10240 with either combine (why 0.66 us more a row)
#   s17.sh tune   kdsl tune (every candidate's time) on the normalization rows under issue 5's
#                 targets, $TUNE_LIMIT s each (60)
#   s17.sh check  the session's new defaults: --verify at the benchmark shapes; compute-sanitizer
#                 memcheck and racecheck at small shapes with tails; stdlib_norm_gpu_test; the
#                 last-axis cumsum cases of stdlib_scan_gpu_test; LayerNorm backward f32 at
#                 N = 8192 and 12288 with and without 512 threads and the prefetch (is 10240 alone?)
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
k=.device/bin/kdsl
cat .device/COMMIT
case "${1:-}" in
  rows)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=()
    for s in M=2048,N=32768 M=1024,N=32768 M=2560,N=8192 M=8192,N=2048; do
      for v in default t=1 t=2 t=4 t=8 t=4,wp=4 t=2,wp=16; do cases+=("bf16 $s $v"); done
      for v in default t=2 t=8; do cases+=("f32 $s $v"); done
    done
    for c in "${cases[@]}"; do
      set -- $c
      e=; [ "$3" != default ] && e="$3"
      KDSL_SCAN_SCHEDULE="$e" $k -q compile stdlib/scan.kdsl -k cumsum --dtype $1 --shape $2 >/dev/null 2>&1 &
      while [ "$(jobs -r | wc -l)" -ge 15 ]; do wait -n; done
    done
    wait
    for round in $(seq "${ROUNDS:-2}"); do
      for c in "${cases[@]}"; do
        set -- $c
        e=; [ "$3" != default ] && e="$3"
        extra=; [ "$round" = 1 ] && [ "$2" = M=2048,N=32768 ] && extra=--verify
        printf '%s cumsum %-5s %-15s %-10s ' $round $1 $2 $3
        KDSL_SCAN_SCHEDULE="$e" $k run stdlib/scan.kdsl -k cumsum --dtype $1 --shape $2 --bench --reps 50 $extra 2>&1 |
          grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|verify [a-z_]+: [a-zA-Z]+|error:.*" | tr '\n' ' '
        echo
      done
    done
    ;;
  combine)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=()
    for s in M=1024,N=8192 M=8192,N=8192 M=32768,N=4096 M=4096,N=32768 M=65536,N=1024; do
      cases+=("rms_norm rms_norm_bwd bf16 $s" "layer_norm layer_norm_bwd bf16 $s" "softmax softmax_bwd bf16 $s")
    done
    for c in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd" "softmax softmax_bwd" "rms_norm rms_norm" \
             "layer_norm layer_norm"; do
      cases+=("$c f32 M=8192,N=10240")
    done
    cases+=("rms_norm rms_norm bf16 M=65536,N=1024" "layer_norm layer_norm bf16 M=8192,N=8192"
            "layer_norm layer_norm bf16 M=65536,N=1024" "softmax softmax bf16 M=4096,N=32768")
    for c in "${cases[@]}"; do
      set -- $c
      for b in 0 1; do
        $k compile stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 --schedule butterfly=$b >/dev/null 2>&1 &
      done
      $k compile stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 >/dev/null 2>&1 &
      while [ "$(jobs -r | wc -l)" -ge 15 ]; do wait -n; done
    done
    wait
    for round in $(seq "${ROUNDS:-2}"); do
      for c in "${cases[@]}"; do
        set -- $c
        for v in default butterfly=0 butterfly=1; do
          h=(); [ $v != default ] && h=(--schedule $v)
          [ "$round" = 1 ] && [ $v != default ] && case $4 in M=8192,N=*) h+=(--verify) ;; esac
          printf '%s %-16s %-5s %-15s %-11s ' $round $2 $3 $4 $v
          $k run stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 "${h[@]}" --bench --reps 40 2>&1 |
            grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|verify [a-z_]+: [a-zA-Z]+|does not apply|error:.*" | tr '\n' ' '
          echo
        done
      done
    done
    ;;
  ncu)
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    m=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
    m+=,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
    m+=,smsp__inst_executed.sum,sm__cycles_elapsed.avg,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
    for r in long_scoreboard barrier membar short_scoreboard wait lg_throttle mio_throttle \
             not_selected math_pipe_throttle dispatch_stall no_instruction drain selected; do
      m+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
    done
    for c in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd"; do
      for b in 0 1; do
        set -- $c
        echo "== $2 f32 M=8192,N=10240 butterfly=$b"
        timeout 120 "$ncu" --metrics "$m" -k regex:"kdsl_.*[0-9]\$" --launch-skip 2 --launch-count 1 \
          --csv --print-units base $k run stdlib/$1.kdsl -k $2 --dtype f32 --shape M=8192,N=10240 \
          --schedule butterfly=$b --bench --reps 2 --warmup 1 2>&1 | python3 bench/experiments/ncu_metrics.py
      done
    done
    ;;
  tune)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    for c in "rms_norm rms_norm_bwd f32 M=8192,N=10240" "rms_norm rms_norm_bwd bf16 M=8192,N=8192" \
             "rms_norm rms_norm_bwd bf16 M=65536,N=1024" "layer_norm layer_norm_bwd bf16 M=8192,N=8192" \
             "layer_norm layer_norm_bwd bf16 M=32768,N=4096" "layer_norm layer_norm_bwd f32 M=8192,N=10240" \
             "layer_norm layer_norm bf16 M=8192,N=8192" "layer_norm layer_norm bf16 M=65536,N=1024" \
             "rms_norm rms_norm bf16 M=65536,N=1024" "softmax softmax bf16 M=4096,N=32768"; do
      set -- $c
      s=$(date +%s)
      timeout "${TUNE_LIMIT:-60}" $k tune stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 --reps 30 --dry-run 2>&1
      echo "($2 $3 $4: exit $?, $(( $(date +%s) - s )) s)"
    done
    ;;
  check)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    for c in "rms_norm rms_norm_bwd f32 M=8192,N=10240" "layer_norm layer_norm_bwd f32 M=8192,N=10240" \
             "scan cumsum bf16 M=2048,N=32768" "scan cumsum f32 M=2048,N=32768"; do
      set -- $c
      printf '%-16s %-5s %-15s ' $2 $3 $4
      $k run stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 --verify --bench --reps 30 2>&1 |
        grep -oE "bench: [0-9.]+ us|verify [a-z_]+: [a-zA-Z]+|error:.*" | tr '\n' ' '
      echo
    done
    for c in "rms_norm rms_norm_bwd f32 M=37,N=10240" "layer_norm layer_norm_bwd f32 M=37,N=10240" \
             "layer_norm layer_norm_bwd f32 M=300,N=11000" "scan cumsum bf16 M=3,N=33001" \
             "scan cumsum f32 M=3,N=33001"; do
      set -- $c
      for tool in memcheck racecheck; do
        printf '%-10s %-16s %-5s %-15s ' $tool $2 $3 $4
        timeout 120 "$cs" --tool $tool --error-exitcode 9 $k run stdlib/$1.kdsl -k $2 --dtype $3 \
          --shape $4 --verify 2>&1 | grep -oE "ERROR SUMMARY.*|RACECHECK SUMMARY.*|verify [a-z_]+: [a-zA-Z]+" | tr '\n' ' '
        echo "exit ${PIPESTATUS[0]}"
      done
    done
    for n in 8192 12288; do
      for v in default group=512,prefetch=1 group=1024,prefetch=0; do
        h=(); [ $v != default ] && h=(--schedule $v)
        printf 'layer_norm_bwd f32 M=8192,N=%-6s %-22s ' $n $v
        $k run stdlib/layer_norm.kdsl -k layer_norm_bwd --dtype f32 --shape M=8192,N=$n "${h[@]}" --bench --reps 30 2>&1 |
          grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|error:.*" | tr '\n' ' '
        echo
      done
    done
    s=$(date +%s)
    timeout 100 .device/bin/stdlib_norm_gpu_test --gtest_brief=1 2>&1 | tail -4
    echo "stdlib_norm_gpu_test exit ${PIPESTATUS[0]} in $(( $(date +%s) - s )) s"
    s=$(date +%s)
    timeout 100 .device/bin/stdlib_scan_gpu_test --gtest_brief=1 --gtest_filter='*Small/*:*IssueShapes/cumsum*:-*_mid*' 2>&1 | tail -4
    echo "stdlib_scan_gpu_test (last-axis Small cases, cumsum issue shapes) exit ${PIPESTATUS[0]} in $(( $(date +%s) - s )) s"
    ;;
  scantests)  # the last-axis cases of stdlib_scan_gpu_test (check's filter missed them)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    s=$(date +%s)
    bash scripts/device/precompile_scan_tests.sh "$KDSL_CACHE_DIR" "$k" 2>&1 | tail -1
    timeout "${LIMIT:-150}" .device/bin/stdlib_scan_gpu_test --gtest_brief=1 \
      --gtest_filter='*Small/*:*IssueShapes/cumsum*:-*_mid*' 2>&1 | tail -6
    echo "stdlib_scan_gpu_test exit ${PIPESTATUS[0]} in $(( $(date +%s) - s )) s"
    ;;
  *) echo "usage: s17.sh rows|combine|ncu|tune|check|scantests" >&2; exit 2 ;;
esac
