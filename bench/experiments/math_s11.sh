#!/usr/bin/env bash
# Eleventh session, on the GPU machine after scripts/device/stage.sh (carry .device):
#   math_s11.sh ab      same-binary A/B of the f32 math rule (cuda::approx_math): KDSL_MATH=accurate
#                       (CUDA's full-precision functions, the code before) against the default
#                       (PTX approximations for 16-bit data), alternating A, B, A, B
#   math_s11.sh ncu     Nsight Compute on rg_lru_bwd bf16 at (1, 32768, 2048) (both math modes:
#                       throughput, warp states, instruction mix) and the SASS of the default's
#                       cubin, written to $OUT
#   math_s11.sh checks  the GPU tests the rule touches: numerics_gpu_test (the error bounds of
#                       each approximated function), stdlib_norm_gpu_test (f16 and bf16 norms),
#                       and stdlib_scan_gpu_test on RG-LRU and logcumsumexp
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
out="${OUT:-/tmp}"
k=.device/bin/kdsl
cat .device/COMMIT
bench_line() {  # MODE FILE KERNEL DTYPE SHAPE
  local line us ratio
  line=$(KDSL_MATH=$1 $k run "$2" -k "$3" --dtype "$4" --shape "$5" --bench --reps 30 --warmup 5 2>&1 |
         grep -E "bench:|error" | head -1)
  us=$(echo "$line" | sed -n 's/bench: \([0-9.]*\) us median.*/\1/p')
  ratio=$(echo "$line" | sed -n 's/.*GB\/s over [0-9]* bytes, \([0-9.]*\) of the same-run.*/\1/p')
  printf '%-22s %-5s %-18s %-9s %9s us  %s of copy\n' "$3" "$4" "$5" "$1" "${us:-?}" "${ratio:-$line}"
}
case "${1:-}" in
  ab)
    scan=B=1,L=32768,D=2048
    for c in "rg_lru rg_lru bf16 $scan 2" "rg_lru rg_lru_bwd bf16 $scan 2" \
             "rg_lru rg_lru f16 $scan 1" "rg_lru rg_lru_bwd f16 $scan 1" \
             "scan logcumsumexp_mid bf16 $scan 1" "softmax softmax bf16 M=4096,N=32768 2" \
             "softmax softmax bf16 M=8192,N=8192 1" "layer_norm layer_norm bf16 M=8192,N=8192 1"; do
      set -- $c
      for ((i = 0; i < $5; ++i)); do
        bench_line accurate stdlib/$1.kdsl $2 $3 $4
        bench_line auto stdlib/$1.kdsl $2 $3 $4
      done
    done
    ;;
  ncu)
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    for mode in accurate auto; do
      echo "== ncu rg_lru_bwd bf16, KDSL_MATH=$mode"
      KDSL_MATH=$mode timeout 200 "$ncu" --kernel-name regex:'rg_lru_bwd_bf16_n32768$' --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section InstructionStats --section Occupancy --section LaunchStats \
        $k run stdlib/rg_lru.kdsl -k rg_lru_bwd --dtype bf16 --shape B=1,L=32768,D=2048 --bench --reps 1 \
        --warmup 0 2>&1 | grep -vE "^\s*$|----" | grep -E "Duration|Throughput|Ipc|Issue Slots|Registers|Occupancy|Warp Cycles|Executed Instructions |Stall|inst" | head -40
    done
    cub=$(grep -l "rg_lru_bwd_bf16_n32768" -r "$KDSL_CACHE_DIR" 2>/dev/null | head -3)
    echo "cache entries: $cub"
    for f in $cub; do
      # An entry is a header then the cubin: cut from the ELF magic.
      off=$(grep -obUaP "\x7fELF" "$f" | head -1 | cut -d: -f1)
      [ -n "$off" ] && tail -c +$((off + 1)) "$f" > "$out/$(basename "$f").cubin" &&
        cuobjdump -sass "$out/$(basename "$f").cubin" > "$out/$(basename "$f").sass" 2>&1
    done
    ls -la "$out"
    ;;
  checks)
    for t in numerics_gpu_test stdlib_norm_gpu_test; do
      echo "== $t"
      timeout 300 .device/bin/$t --gtest_brief=1 2>&1 | grep -vE "^\[ +(OK|RUN) " | tail -40
    done
    echo "== stdlib_scan_gpu_test (RG-LRU, logcumsumexp)"
    timeout 300 .device/bin/stdlib_scan_gpu_test --gtest_brief=1 \
      --gtest_filter='*Small/rg_lru*:*Small/logcumsumexp*:*IssueShapes/rg_lru*' 2>&1 | tail -15
    ;;
  *) echo "usage: $0 ab|ncu|checks"; exit 2 ;;
esac
