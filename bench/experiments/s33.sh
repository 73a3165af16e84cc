#!/usr/bin/env bash
# Thirty-third session, on the GPU machine after scripts/device/stage.sh (carry .device).
# Predictions written before the run:
#   s33.sh first  on an H200: the full benchmark with the peers (final_run) at c389534, the first
#                 H200 run with the 25 ms warm-up. Prediction (thirty-first session): the 2^27-byte
#                 bf16 forward rows (8192 x 8192, 65536 x 1024) rise from 0.87-0.90 (AM3) to
#                 0.92-0.95 of copy; the 2^27-byte scans (linear_recurrence, cumsum_mid, last-axis
#                 cumsum bf16) 3-10% above AM3 (with the thirty-second session's RG-LRU changes,
#                 rg_lru_bwd bf16 0.54 -> 0.56-0.58); rows of 2^28 bytes and more within 1.5%.
#                 On any other GPU: what did not run after the thirty-second session's RG-LRU
#                 changes: stdlib_scan_gpu_test's IssueShapes and Big cases, compute-sanitizer
#                 memcheck and racecheck on rg_lru and rg_lru_bwd (bf16, f32) at (2, 4097, 258).
#                 Expected: all pass, sanitizers report 0 errors.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  first)
    cat .device/COMMIT
    if nvidia-smi -L | grep -q H200; then
      final_run
    else
      nvidia-smi -L
      k=.device/bin/kdsl
      cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
      for kd in "rg_lru_bwd bf16" "rg_lru_bwd f32" "rg_lru bf16"; do
        set -- $kd
        for tool in memcheck racecheck; do
          echo "== $tool $1 $2 (2, 4097, 258)"
          timeout 90 "$cs" --tool $tool --error-exitcode 9 $k run stdlib/rg_lru.kdsl \
            -k $1 --dtype $2 --shape B=2,L=4097,D=258 --verify 2>&1 |
            grep -E "SUMMARY|verify|rror" | head -6
          echo "exit ${PIPESTATUS[0]}"
        done
      done
      echo "== stdlib_scan_gpu_test IssueShapes+Big (${SECONDS} s)"
      timeout $(( 560 - SECONDS )) .device/bin/stdlib_scan_gpu_test --gtest_brief=1 \
        --gtest_filter='*IssueShapes*:*Big*' 2>&1 | tail -8
      echo "done at ${SECONDS} s"
    fi
    ;;
  probe)
    # rg_lru_bwd bf16 (1, 32768, 2048): where its warps stall (Nsight Compute's per-reason stall
    # ratios, never recorded before: AO2 gave only 6.59 cycles per issued instruction with 4 warps
    # per scheduler), then the look-back pipelining and occupancy hints against the default, two
    # rounds (last tried on the bf16 scans in the twelfth session, W2, before the packed look-back,
    # the 2-row layout and the kept math). Prediction: long-scoreboard (the loads at each tile's
    # start) and barrier (the look-back's two syncthreads) together over half the stall cycles;
    # pipeline=1 (next tile's loads in registers during the look-back) spills at 128 registers
    # and is slower; pipeline=2 (cp.async into shared memory) within -5% to +10% of the default;
    # t=4 with ctas=3 or 4 slower (twice the chunks in the look-back chain).
    nvidia-smi -L
    if nvidia-smi -L | grep -q H200; then
      final_run  # (the first full H200 run with the 25 ms warm-up: s33.sh first's prediction)
      [ "$SECONDS" -gt 330 ] && { echo "probe skipped: ${SECONDS} s used"; exit 0; }
    fi
    args=(run stdlib/rg_lru.kdsl -k rg_lru_bwd --dtype bf16 --shape B=1,L=32768,D=2048)
    k=.device/bin/kdsl
    $k "${args[@]}" --bench 2>&1 | grep -oE 'bench: .*us'
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    timeout 200 "$ncu" --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.per_cycle_active,smsp__warps_active.avg.per_cycle_active' \
      -k regex:'kdsl_rg_lru_bwd_bf16_n32768$' --launch-count 1 --csv .device/bin/kdsl "${args[@]}" \
      > "$out/stalls.csv" 2>&1
    grep -E 'stalled|issue_active|warps_active' "$out/stalls.csv" | awk -F'","' '{print $(NF-2), $NF}' |
      sort -k2 -g -r | head -30
    # (KDSL_SCAN_SCHEDULE: pipeline, ctas and keep are not --schedule keys)
    envs=(default pipeline=1 pipeline=2 ctas=3 t=4,vr=2,lp=1 t=4,vr=2,lp=1,ctas=3
          t=4,vr=2,lp=1,ctas=4 t=8,vr=2,lp=1,wp=4 t=8,vr=2,lp=1,wp=16 keep=0,ctas=3)
    for e in "${envs[@]}"; do
      [ "$e" = default ] && e=
      KDSL_SCAN_SCHEDULE=$e $k -q compile stdlib/rg_lru.kdsl -k rg_lru_bwd --dtype bf16 \
        --shape B=1,L=32768,D=2048 >/dev/null 2>&1 &
    done
    wait
    for round in 1 2; do
      for e in "${envs[@]}"; do
        v=(); [ "$round" = 1 ] && v=(--verify)
        printf '%s %-24s ' "$round" "$e"
        [ "$e" = default ] && e=
        KDSL_SCAN_SCHEDULE=$e timeout 60 $k "${args[@]}" --bench --reps 40 "${v[@]}" 2>&1 |
          grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|verify [a-z_]+: [a-zA-Z]+|error:.*" | tr '\n' ' '
        echo
      done
    done 2>&1 | tee "$out/probe.txt"
    # bff2980 against c389534 (.device/bin/kdsl_old), same sources: rsqrt(max(u, 2.5e-7)) as
    # rsqrt.approx.ftz of max.NaN (5 fewer SASS instructions per element of about 133: the max's
    # compare, NaN test and select, ptxas's subnormal rescaling around rsqrt). Prediction:
    # rg_lru_bwd bf16 1.5-3% faster (instruction cuts gave about half their share in AO3), f32
    # 0-2%; the other kernels' code is unchanged.
    cases=("rg_lru rg_lru_bwd bf16 B=1,L=32768,D=2048 default"
           "rg_lru rg_lru_bwd f32 B=1,L=32768,D=2048 default")
    k=.device/bin/kdsl_old precompile
    k=.device/bin/kdsl precompile
    ab_rounds 3 2>&1 | tee "$out/ab.txt"
    cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    for tool in memcheck racecheck; do
      echo "== $tool rg_lru_bwd bf16 (2, 4097, 258)"
      timeout 90 "$cs" --tool $tool --error-exitcode 9 .device/bin/kdsl run stdlib/rg_lru.kdsl \
        -k rg_lru_bwd --dtype bf16 --shape B=2,L=4097,D=258 --verify 2>&1 | grep -E "SUMMARY|verify|rror" | head -6
      echo "exit ${PIPESTATUS[0]}"
    done
    echo "done at ${SECONDS} s"
    ;;
  h200)
    # Only on an H200: the full benchmark with the peers (final_run) at the staged code, the
    # first H200 run with the 25 ms warm-up; s33.sh first's prediction. Exits at once elsewhere.
    nvidia-smi -L | grep -q H200 || { nvidia-smi -L; echo "not an H200: nothing run"; exit 0; }
    final_run
    ;;
  *)
    echo "usage: s33.sh first|probe|h200" >&2
    exit 2
    ;;
esac
