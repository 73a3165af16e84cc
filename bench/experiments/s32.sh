#!/usr/bin/env bash
# Thirty-second session, on the GPU machine after scripts/device/stage.sh (carry .device).
# Predictions written before the run:
#   s32.sh first  on an H200: s31.sh warm (old 9574c73 against new, then the full benchmark
#                 with the 25 ms warm-up). Prediction (from the thirty-first session): the
#                 2^27-byte bf16 forward rows (8192 x 8192, 65536 x 1024) rise from 0.87-0.90
#                 (AM3) to 0.92-0.95 of copy; rows of 2^28 bytes and more within 1.5% of AM3.
#                 On any other GPU: the GPU tests that did not run at HEAD (stdlib_norm,
#                 numerics, group_norm, big), all expected to pass.
set -uo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
  first)
    if nvidia-smi -L | grep -q H200; then
      bash bench/experiments/s31.sh warm
    else
      nvidia-smi -L
      bash scripts/device/gpu_checks.sh stdlib_norm_gpu_test numerics_gpu_test group_norm_gpu_test big_gpu_test
    fi
    ;;
  ncu)
    # Nsight Compute on rg_lru_bwd bf16 (1, 32768, 2048) (0.54 of copy on the H200, 0.70 on the
    # H100: bound by instructions) with the SASS lines' executed instructions, to see where the
    # instructions per element go since AG1 (167 then).
    source bench/experiments/s18.sh lib
    out="${OUT:-/tmp}"
    nvidia-smi -L
    args=(run stdlib/rg_lru.kdsl -k rg_lru_bwd --dtype bf16 --shape B=1,L=32768,D=2048)
    .device/bin/kdsl "${args[@]}" --bench 2>&1 | grep -oE 'bench: .*us'
    ncu_source rg_lru_bwd 'kdsl_rg_lru_bwd_bf16_n32768$' "${args[@]}"
    grep -E '"(Elapsed Cycles|Duration|Executed Ipc Active|Issued Warp Per Scheduler|Registers Per Thread|Achieved Occupancy|Executed Instructions|DRAM Throughput)"' "$out/details_rg_lru_bwd.csv" | cut -d, -f13-15
    ;;
  scan)
    # (after ncu: rg_lru_bwd bf16 executes 133 thread instructions per element on the H100, 4 of
    # every 8 accesses' address instructions an element-index subtract, shift and add that NVVM
    # rebuilt from the pointer steps) 1. column pointers stepped by a byte count NVVM cannot see
    # through (b98e3a5): one 64-bit add per access; 2. RG-LRU backward's math without the division
    # and with shared products (ad582d3; the old source is bench/experiments/rg_lru_1dd33a4.kdsl).
    # .device/bin/kdsl_old is 1dd33a4. On an H200 the full benchmark first (final_run, this code).
    # Then old against new binary on old and new sources, --verify on the new binary.
    # Prediction: rg_lru_bwd bf16 4-6% faster from 1 (about 8 of 133 instructions per element,
    # bound by instructions) and 4-6% more from 2; f32 2-4% from 1; linear_recurrence(_bwd) and
    # cumsum_mid (bound by memory and the tile phases) within 2%; the last-axis cumsum (scan.rows)
    # unchanged. Then stdlib_scan_gpu_test's Small and IssueShapes cases (rg_lru_bwd's new math).
    source bench/experiments/s18.sh lib
    out="${OUT:-/tmp}"
    nvidia-smi -L
    n=3
    if nvidia-smi -L | grep -q H200; then final_run; n=2; fi
    cases=(
      "../bench/experiments/rg_lru_1dd33a4 rg_lru_bwd bf16 B=1,L=32768,D=2048 default"
      "rg_lru rg_lru_bwd bf16 B=1,L=32768,D=2048 default"
      "../bench/experiments/rg_lru_1dd33a4 rg_lru_bwd f32 B=1,L=32768,D=2048 default"
      "rg_lru rg_lru_bwd f32 B=1,L=32768,D=2048 default"
      "rg_lru rg_lru bf16 B=1,L=32768,D=2048 default"
      "linear_recurrence linear_recurrence bf16 B=1,L=32768,D=2048 default"
      "linear_recurrence linear_recurrence_bwd bf16 B=1,L=32768,D=2048 default"
      "scan cumsum_mid bf16 B=1,L=32768,D=2048 default"
      "scan cumsum bf16 M=2048,N=32768 default"
    )
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    ab_rounds $n 2>&1 | tee "$out/scan.txt"
    if [ "$SECONDS" -gt 420 ]; then echo "stdlib_scan_gpu_test skipped: ${SECONDS} s used"; exit 0; fi
    s=$(date +%s)
    timeout $(( 580 - SECONDS )) .device/bin/stdlib_scan_gpu_test --gtest_brief=1 --gtest_filter='*Small*:*IssueShapes*' 2>&1 | tail -4
    echo "stdlib_scan_gpu_test in $(( $(date +%s) - s )) s"
    ;;
  h200kdsl)
    # (only on an H200; too little device time was left for the peers) kdsl's half of the
    # benchmark with the 25 ms warm-up: bench/kdsl_bench_norm and kdsl_bench_scan, same-run copy.
    # Prediction (thirty-first session): the 2^27-byte bf16 forward rows (8192 x 8192,
    # 65536 x 1024) from 0.867-0.899 (AM3) to 0.92-0.95 of copy; the 2^27-byte scans
    # (linear_recurrence, cumsum_mid, last-axis cumsum bf16) 3-10% higher than AM3; rows of 2^28
    # bytes and more within 1.5% of AM3.
    nvidia-smi -L | grep -q H200 || { nvidia-smi -L; echo "not an H200: nothing run"; exit 0; }
    export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
    export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
    out="${OUT:-/tmp}"
    cat .device/COMMIT
    timeout 170 .device/bin/kdsl_bench_norm "$out/kdsl_norm.json" --reps 30 > "$out/bench_norm.txt" 2>&1
    echo "norm: exit $? at ${SECONDS} s"
    timeout $(( 290 - SECONDS )) .device/bin/kdsl_bench_scan "$out/kdsl_scan.json" > "$out/bench_scan.txt" 2>&1
    echo "scan: exit $? at ${SECONDS} s"
    tail -5 "$out/bench_norm.txt" "$out/bench_scan.txt"
    ;;
  *)
    echo "usage: s32.sh first|ncu|scan|h200kdsl" >&2
    exit 2
    ;;
esac
