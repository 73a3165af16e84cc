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
#   s24.sh ab     (after probe: tune found no faster layout for the recurrences or the last-axis
#                 cumsum; cumsum_mid bf16 64 steps 81.9 against 85.2 us; softmax and log_softmax
#                 at 4096 x 32768 2.0-2.6% faster on 1024 threads staged, 25% slower at 65536)
#                 .device/bin/kdsl_old is df5bc88 (the session's start, codegen-wise), against
#                 the new defaults (1024-thread staged long softmax rows, 64-step rescanned
#                 16-bit cumsum tiles over L >= 8192) and the warp prefixes the look-back threads
#                 now leave in shared memory (phase B read them instead of combining up to 7
#                 warps' aggregates per row: a chain of shared loads and combines per tile).
#                 --verify on the new binary in round 1, two rounds, alternating; the scan GPU
#                 tests of the kernels concerned; compute-sanitizer memcheck and racecheck on
#                 the new schedules at small shapes (a partial 64-step tile, 1024-thread rows).
#                 Prediction: softmax / log_softmax bf16 and f16 4096 x 32768 2-3% faster;
#                 cumsum_mid bf16 at (1, 32768, 2048) 3-5% faster, at (1, 32768, 1024) and
#                 (1, 8192, 2560) 0-5%, at (4, 2048, 2048) (32 steps still) 0-2% from the
#                 warp prefixes; the recurrences and RG-LRU 0-3% (up to 7 fewer dependent
#                 shared loads and combines per row and tile; rg_lru_bwd has 16 elements per
#                 thread and tile, so it gains most per element); rg_lru_bwd also takes its
#                 shifted gate_a from the unshifted load's registers (7 of 8 loads a thread and
#                 tile fewer, about 3 of 150 instructions an element): 2-5% in all.
#   s24.sh final  scripts/device/final_bench.sh with the peers timed in the same run.
#   s24.sh f32    (after final: linear_recurrence_bwd f32 at (1, 32768, 2048) took 447 us, 0.706
#                 of copy, against 388 in AG4 and 362 in AF3; 1-10% slower at the other shapes
#                 since AF3, while bf16 got faster) the binaries of 94ba19e (before 32-bit scan
#                 positions), df5bc88 (AG4's code), e893d0b (final's code) and the new one, which
#                 writes the warps' prefixes after the inclusive prefix is published instead of
#                 before (the look-back thread of a chunk of 128 positions did 8 shared loads,
#                 combines and stores before the next chunks could see its prefix). Two rounds,
#                 --verify on the new binary in round 1; bf16 rows e893d0b against new.
#                 Prediction: the new binary recovers e893d0b's loss at (1, 32768, 2048) (447 ->
#                 about 390 us); the AG4 loss against 94ba19e (about 7%) stays, from the 32-bit
#                 positions (kdsl_p64, the new code with 64-bit positions, shows it in one
#                 binary); the bf16 rows within 1% of e893d0b. The last-axis cumsum f32
#                 2048 x 32768 (141.5 us in AG4, 147.4 in final: a look-back along the row) too.
#                 Then softmax_bwd bf16 4096 x 32768 (0.92x of torch.compile in final; a
#                 cluster of 4 CTAs of 256 by default) with other clusters and one CTA per row:
#                 expected within 3% of the default (Q6 and R5 measured the cluster faster).
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
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
    ncu_source lr 'kdsl_linear_recurrence_bf16_n32768$' run stdlib/linear_recurrence.kdsl \
      -k linear_recurrence --dtype bf16 --shape $scan_shape
    ls -la "$out"
    ;;
  ab)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "softmax softmax bf16 M=4096,N=32768 default"
      "softmax log_softmax bf16 M=4096,N=32768 default"
      "softmax softmax f16 M=4096,N=32768 default"
      "scan cumsum_mid bf16 $scan_shape default"
      "scan cumsum_mid bf16 B=1,L=32768,D=1024 default"
      "scan cumsum_mid bf16 B=1,L=8192,D=2560 default"
      "scan cumsum_mid bf16 B=4,L=2048,D=2048 default"
      "scan cumprod_mid bf16 $scan_shape default"
      "scan cumsum_mid f32 $scan_shape default"
      "linear_recurrence linear_recurrence bf16 $scan_shape default"
      "linear_recurrence linear_recurrence_bwd bf16 $scan_shape default"
      "rg_lru rg_lru bf16 $scan_shape default"
      "rg_lru rg_lru_bwd bf16 $scan_shape default"
      "scan cumsum bf16 M=4096,N=8192 default"
    )
    k=.device/bin/kdsl precompile
    k=.device/bin/kdsl_old precompile
    {
      ab_rounds 2
      s=$(date +%s)
      f='*Small/*_mid*:*Small/linear*:*Small/rg_lru*:ScanGpu.*'
      f+=':*IssueShapes/cumsum_mid*:*IssueShapes/linear_recurrence:*IssueShapes/rg_lru_bwd*'
      timeout 200 .device/bin/stdlib_scan_gpu_test --gtest_filter="$f" 2>&1 | grep -E "OK|FAIL|PASSED|tests ran" | tail -40
      echo "stdlib_scan_gpu_test in $(( $(date +%s) - s )) s"
      timeout 100 .device/bin/stdlib_norm_gpu_test --gtest_filter='*softmax*' 2>&1 | tail -3
      cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
      while read -r f kn dt sh; do
        $k run "stdlib/$f.kdsl" -k "$kn" --dtype "$dt" --shape "$sh" > /dev/null 2>&1
        for tool in memcheck racecheck; do
          r=$(timeout 120 "$cs" --tool $tool --error-exitcode 9 $k run "stdlib/$f.kdsl" -k "$kn" \
              --dtype "$dt" --shape "$sh" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tail -1)
          echo "$kn $dt $sh $tool rc=${PIPESTATUS[0]} $r"
        done
      done <<'CASES'
softmax softmax bf16 M=300,N=32768
softmax log_softmax f16 M=37,N=32776
scan cumsum_mid bf16 B=1,L=9000,D=64
scan cumprod_reverse_exclusive_mid f16 B=2,L=8200,D=6
linear_recurrence linear_recurrence bf16 B=1,L=5000,D=64
rg_lru rg_lru_bwd bf16 B=1,L=3000,D=128
CASES
    } 2>&1 | tee "$out/ab.txt"
    ;;
  final)
    final_run
    ;;
  f32)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    # kdsl_p64: the new binary with 64-bit positions along the scan axis (KDSL_SCAN_SCHEDULE)
    printf '#!/bin/sh\nKDSL_SCAN_SCHEDULE=pos64=1 exec "$(dirname "$0")/kdsl" "$@"\n' > .device/bin/kdsl_p64
    chmod +x .device/bin/kdsl_p64
    bins=(kdsl_94 kdsl_old kdsl_e89 kdsl_p64 kdsl)
    cases=(
      "linear_recurrence linear_recurrence_bwd f32 $scan_shape default"
      "linear_recurrence linear_recurrence_bwd f32 B=1,L=32768,D=1024 default"
      "linear_recurrence linear_recurrence_bwd f32 B=4,L=2048,D=2048 default"
      "scan cumsum f32 M=2048,N=32768 default"
    )
    for b in "${bins[@]}"; do k=.device/bin/$b precompile; done
    {
      ab_rounds 2 "${bins[@]}"
      cp .device/bin/kdsl_e89 .device/bin/kdsl_old
      cases=(
        "linear_recurrence linear_recurrence_bwd bf16 $scan_shape default"
        "linear_recurrence linear_recurrence bf16 $scan_shape default"
        "rg_lru rg_lru_bwd bf16 $scan_shape default"
        "scan cumsum_mid bf16 $scan_shape default"
      )
      k=.device/bin/kdsl precompile
      k=.device/bin/kdsl_old precompile
      ab_rounds 2
      cases=(
        "softmax softmax_bwd bf16 M=4096,N=32768 default"
        "softmax softmax_bwd bf16 M=4096,N=32768 cluster=2"
        "softmax softmax_bwd bf16 M=4096,N=32768 cluster=8"
        "softmax softmax_bwd bf16 M=4096,N=32768 cluster=4,group=2048"
        "softmax softmax_bwd bf16 M=4096,N=32768 cluster=8,group=2048"
        "softmax softmax_bwd bf16 M=4096,N=32768 persistent=0"
      )
      precompile
      rounds 2 first
    } 2>&1 | tee "$out/f32.txt"
    ;;
  *)
    echo "usage: s24.sh probe|ab|final|f32" >&2
    exit 2
    ;;
esac
