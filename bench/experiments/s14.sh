#!/usr/bin/env bash
# Fourteenth session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   s14.sh sweep  schedule hints on the backward rows furthest from copy (N = 32768 on clusters
#                 with staged rows, N = 8192, 4096 and 1024) and on the forward rows torch.compile
#                 won in Y; variants compiled in parallel first, then two rounds (the whole
#                 list, twice), --verify in the first
#   s14.sh ncu ["FILE KERNEL SHAPE [HINT]"...]
#                 Nsight Compute on the defaults: duration, DRAM throughput, occupancy and its
#                 register/shared-memory limits, and the warp stall reasons per issued instruction
#   s14.sh ab     .device/bin/kdsl_old (the previous commit) against .device/bin/kdsl on the
#                 normalization rows, alternating; stdlib_norm_gpu_test; --verify at large shapes
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
k=.device/bin/kdsl
cat .device/COMMIT
source bench/experiments/sweep_lib.sh
case "${1:-}" in
  sweep)
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=()
    S=M=4096,N=32768
    c8=cluster=8,group=4096,smem_columns=0
    c4=cluster=4,smem_columns=0
    for v in default $c8,stage=2 $c8,stage=3 $c8,stage=4 $c8,min_ctas=3 $c8,stage=2,min_ctas=3 \
             $c4,stage=2 $c4,stage=3; do
      cases+=("rms_norm rms_norm_bwd bf16 $S $v")
    done
    for v in default $c4,stage=2 $c4,stage=3 $c8,stage=2 $c8,stage=3 $c4,cache_invariant=0; do
      cases+=("layer_norm layer_norm_bwd bf16 $S $v")
    done
    for v in default $c8,stage=2 $c8,stage=3; do cases+=("rms_norm add_rms_norm_bwd bf16 $S $v"); done
    for v in default cluster=2 cluster=8 cluster=8,group=2048 cluster=4,stage=2; do
      cases+=("softmax softmax_bwd bf16 $S $v")
    done
    for v in default group=1024 cluster=2 cluster=4 cluster=2,group=1024 persistent=1,group=1024,stage=2; do
      cases+=("rms_norm rms_norm bf16 $S $v")
    done
    for v in default stage=3 stage=4 group=1024 group=1024,stage=2 group=1024,stage=3; do
      cases+=("layer_norm layer_norm_bwd bf16 M=8192,N=8192 $v")
    done
    for v in default stage=3 stage=4; do cases+=("rms_norm rms_norm_bwd bf16 M=8192,N=8192 $v"); done
    for v in default min_ctas=3 cache_invariant=0 group=256 stage=2,smem_columns=0; do
      cases+=("layer_norm layer_norm_bwd bf16 M=32768,N=4096 $v")
    done
    for v in default stage=3 group=64; do
      cases+=("rms_norm rms_norm_bwd bf16 M=65536,N=1024 $v" "layer_norm layer_norm_bwd bf16 M=65536,N=1024 $v")
    done
    sweep_cases
    ;;
  ncu)
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    m=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size
    m+=,launch__block_size,launch__registers_per_thread,launch__occupancy_limit_registers
    m+=,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps
    m+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__cluster_max_active
    for r in long_scoreboard barrier membar short_scoreboard wait lg_throttle mio_throttle \
             not_selected math_pipe_throttle dispatch_stall no_instruction drain selected; do
      m+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
    done
    shift
    [ $# -gt 0 ] || set -- "rms_norm rms_norm_bwd M=4096,N=32768" "rms_norm rms_norm_bwd M=32768,N=4096" \
      "layer_norm layer_norm_bwd M=4096,N=32768" "layer_norm layer_norm_bwd M=8192,N=8192" \
      "layer_norm layer_norm_bwd M=32768,N=4096"
    for c in "$@"; do  # "file kernel shape [hint]"
      set -- $c
      h=(); [ -n "${4:-}" ] && h=(--schedule "$4")
      echo "== $2 bf16 $3 ${4:-default}"
      timeout 120 "$ncu" --metrics "$m" -k regex:"kdsl_.*[0-9]\$" --launch-skip 2 --launch-count 1 \
        --csv --print-units base $k run stdlib/$1.kdsl -k $2 --dtype bf16 --shape $3 "${h[@]}" --bench \
        --reps 2 --warmup 1 2>&1 | python3 bench/experiments/ncu_metrics.py
    done
    ;;
  ab)  # the previous commit's kdsl (.device/bin/kdsl_old) against this one, alternating; then
       # stdlib_norm_gpu_test and --verify at the large shapes
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=()
    for s in M=1024,N=8192 M=8192,N=8192 M=65536,N=1024 M=4096,N=32768; do
      cases+=("rms_norm rms_norm bf16 $s" "layer_norm layer_norm bf16 $s")
    done
    cases+=("softmax softmax bf16 M=8192,N=8192" "softmax softmax bf16 M=4096,N=32768"
            "rms_norm rms_norm f32 M=8192,N=10240" "softmax softmax_bwd bf16 M=4096,N=32768")
    for s in M=8192,N=8192 M=32768,N=4096 M=65536,N=1024 M=4096,N=32768; do
      cases+=("rms_norm rms_norm_bwd bf16 $s" "layer_norm layer_norm_bwd bf16 $s")
    done
    cases+=("layer_norm layer_norm_bwd f32 M=8192,N=10240" "rms_norm add_rms_norm_bwd bf16 M=4096,N=32768")
    for c in "${cases[@]}"; do
      set -- $c
      for b in .device/bin/kdsl_old $k; do
        $b compile stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 >/dev/null 2>&1 &
      done
      while [ "$(jobs -r | wc -l)" -ge 16 ]; do wait -n; done
    done
    wait
    for c in "${cases[@]}"; do
      set -- $c
      bash scripts/device/ab.sh .device/bin/kdsl_old $k stdlib/$1.kdsl $2 $3 $4 2
    done
    timeout 200 .device/bin/stdlib_norm_gpu_test 2>&1 | grep -E "OK|FAIL|PASSED|SKIP" | tail -24
    for c in "rms_norm rms_norm_bwd bf16 M=4096,N=32768" "layer_norm layer_norm_bwd bf16 M=32768,N=4096" \
             "layer_norm layer_norm bf16 M=8192,N=8192" "softmax softmax_bwd bf16 M=4096,N=32768"; do
      set -- $c
      echo "== verify $2 $3 $4: $($k run stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 --verify 2>&1 | grep -iE "verif|error" | cut -c1-150)"
    done
    ;;
  abc)  # run S4: A = kdsl_old, B = kdsl, C = kdsl with the environment in $ENV_C, two rounds
    : "${ENV_C:?set ENV_C to the environment of variant C, e.g. KDSL_EXP_X=1}"
    VARIANTS="B: C:${ENV_C// /,}" ROUNDS=2 bash "$0" multi
    ;;
  multi)  # codegen variants of one binary by experiment toggles: A = kdsl_old, then one per
          # environment in $VARIANTS ("NAME:VAR=VAL,VAR=VAL NAME2:..." ; "B:" = no toggle); $ROUNDS
          # rounds (1). Commas separate variables, so a value cannot contain one.
          # The KDSL_EXP_* switches of runs S4 and S5 (bench/RESULTS.md) lived only in that run's
          # working tree; the committed code has none, so use "B:".
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader
    cases=("layer_norm layer_norm bf16 M=4096,N=32768" "rms_norm rms_norm bf16 M=1024,N=8192"
           "rms_norm rms_norm bf16 M=4096,N=32768" "layer_norm layer_norm_bwd bf16 M=32768,N=4096"
           "layer_norm layer_norm_bwd bf16 M=4096,N=32768" "layer_norm layer_norm_bwd bf16 M=8192,N=8192"
           "layer_norm layer_norm_bwd f32 M=8192,N=10240" "rms_norm rms_norm_bwd bf16 M=32768,N=4096"
           "rms_norm rms_norm_bwd bf16 M=8192,N=8192" "softmax softmax_bwd bf16 M=4096,N=32768"
           "rms_norm add_rms_norm_bwd bf16 M=4096,N=32768")
    for c in "${cases[@]}"; do
      set -- $c
      .device/bin/kdsl_old compile stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 >/dev/null 2>&1 &
      for v in $VARIANTS; do
        e=${v#*:}; env ${e//,/ } $k compile stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 >/dev/null 2>&1 &
      done
      while [ "$(jobs -r | wc -l)" -ge 15 ]; do wait -n; done
    done
    wait
    for round in $(seq "${ROUNDS:-1}"); do
    for c in "${cases[@]}"; do
      set -- $c
      for v in A:old $VARIANTS; do
        b=$k; [ ${v%%:*} = A ] && b=.device/bin/kdsl_old
        e=${v#*:}; [ ${v%%:*} = A ] && e=
        printf '%s %s %-16s %-5s %-15s ' $round ${v%%:*} $2 $3 $4
        env ${e//,/ } $b run stdlib/$1.kdsl -k $2 --dtype $3 --shape $4 --bench --reps 50 2>&1 |
          grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|error:.*" | tr '\n' ' '
        echo
      done
    done
    done
    ;;
  *) echo "usage: s14.sh sweep|ncu|ab|abc|multi" >&2; exit 2 ;;
esac
