#!/usr/bin/env bash
# Twenty-eighth session. No GPU machine was lent in this session, so nothing here has run yet;
# the modes are ready for the next session's device calls (after scripts/device/stage.sh, carry
# .device). Predictions written before any run:
#   s28.sh unroll  streamed rows of 32 chunks per thread or more, fully unrolled by default,
#                  against the chunk loop rolled 16 or 8 chunks at a time (`unroll`, now tuning
#                  candidates). ptxas (13.0, sm_90), default / unroll=16: softmax f32 N = 262144
#                  64 registers and 1152 bytes of spill stores / 32 and none; softmax bf16
#                  N = 524288 64 and 1016 / 31 and none; log_softmax f32 N = 262144 64 and 968 /
#                  32; softmax_bwd f32 N = 262144 (cluster of 4 x 256) 255 and 480 / 32; RMSNorm
#                  f32 N = 262144 (cluster of 4 x 256) 254 / 32; LayerNorm f32 255 / 57, bf16
#                  (32 chunks) 128 / 48. Prediction: where the default spills, unroll=16 5-20%
#                  faster; where it does not (the clusters at 254-255 registers, one CTA of 256
#                  per SM), within 5% either way: the rolled loop keeps fewer loads in flight per
#                  thread (twenty-sixth session) but more CTAs fit.
#   s28.sh cluster  backward rows with column reductions at bf16 4096 x 32768 on a cluster that
#                  takes 2 SMs instead of 4. The default clusters (RMSNorm backward 8 x 512 at
#                  two CTAs per SM, LayerNorm backward 4 x 1024 at one) fit 30 at once, 120 of 132
#                  SMs (AF4). A cluster of 2 x 1024, or 4 x 512 at two CTAs per SM, would fit
#                  about 66 (132 SMs) if the GPCs hold 14 to 18 SMs each. ptxas: RMSNorm
#                  backward cluster=2,group=2048 64 registers, 16 bytes spilled (accumulators in
#                  shared memory); cluster=4,group=2048,min_ctas=2 64 registers, 20 bytes spilled.
#                  Prediction: RMSNorm backward 234 -> 215-225 us if the grid grows to 132 SMs;
#                  LayerNorm backward (32 bytes spilled, 128 KiB of accumulators in shared memory)
#                  within 5% of its 290. The runtime's -v log line ("persistent grid of at most N
#                  CTAs ... clusters") shows the grid each got.
#   s28.sh mask    README's masked softmax: the bool mask read in one 8-byte access per 8
#                  elements (85105e0) instead of 8 one-byte loads. Old binary
#                  (.device/bin/kdsl_old, b6b2d3f) against new. Prediction: bf16 4096 x 4096
#                  (96 MiB moved) within 3% (the byte loads hit the same sectors), f32 8192 x 8192
#                  within 3%; --verify ok.
#   s28.sh push    softmax and log_softmax rows on a cluster push both of their reductions'
#                  partials with st.async, an mbarrier per point of the row (d66499a), where
#                  they took a cluster barrier per combine; and rows beyond one CTA of 1024
#                  threads (91a72dc) on the smallest cluster that holds them. Old binary
#                  (.device/bin/kdsl_old, b6b2d3f) against new, two rounds, --verify on the new
#                  one in round 1; compute-sanitizer memcheck and racecheck on two small cluster
#                  cases. Prediction: softmax bf16 512 x 262144 252 -> 215-235 us and log_softmax
#                  262 -> 225-245 (RMSNorm gained 11.5% from the same change at one point of the
#                  row, AK4); softmax bf16 2048 x 65536 with cluster=8,group=8192 381 -> 250-330
#                  (a hint, still slower than the default's 208); the default rows elsewhere
#                  unchanged (same generated code); softmax bf16 8 x 1048576 (old: an error) and
#                  f32 8 x 524289 run, --verify ok, time not predicted.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/experiments/s18.sh lib
out="${OUT:-/tmp}"
case "${1:-}" in
  unroll)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for spec in "softmax softmax f32 M=512,N=262144" "softmax softmax bf16 M=256,N=524288" \
                "softmax log_softmax f32 M=512,N=262144" "softmax softmax_bwd f32 M=512,N=262144" \
                "rms_norm rms_norm f32 M=512,N=262144" "layer_norm layer_norm f32 M=512,N=262144" \
                "layer_norm layer_norm bf16 M=512,N=262144"; do
      for h in default unroll=16 unroll=8; do cases+=("$spec $h"); done
    done
    precompile
    rounds 2 first 2>&1 | tee "$out/unroll.txt"
    ;;
  cluster)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=()
    for spec in "rms_norm rms_norm_bwd bf16 M=4096,N=32768" "layer_norm layer_norm_bwd bf16 M=4096,N=32768" \
                "rms_norm add_rms_norm_bwd bf16 M=4096,N=32768"; do
      for h in default cluster=2,group=2048 cluster=4,group=2048,min_ctas=2 \
               cluster=4,group=2048,cache_rows=1,stage=2,min_ctas=2; do
        cases+=("$spec $h")
      done
    done
    precompile
    rounds 2 first 2>&1 | tee "$out/cluster.txt"
    for c in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd"; do
      set -- $c
      for h in "" cluster=2,group=2048; do
        ${k} -v run "stdlib/$1.kdsl" -k "$2" --dtype bf16 --shape M=4096,N=32768 \
          ${h:+--schedule $h} 2>&1 | grep "persistent grid"
      done
    done | tee -a "$out/cluster.txt"
    ;;
  push)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    cases=(
      "softmax softmax bf16 M=512,N=262144 default"
      "softmax log_softmax bf16 M=512,N=262144 default"
      "softmax softmax bf16 M=1024,N=196608 default"
      "softmax softmax bf16 M=2048,N=65536 cluster=8,group=8192"
      "softmax softmax bf16 M=2048,N=65536 default"
      "rms_norm rms_norm bf16 M=512,N=262144 default"
    )
    precompile
    k=.device/bin/kdsl_old precompile
    ab_rounds 2 2>&1 | tee "$out/push.txt"
    for c in "bf16 M=8,N=1048576" "f32 M=8,N=524289"; do
      set -- $c
      printf 'new-only %-5s %-16s ' "$1" "$2"
      timeout 120 ${k} run stdlib/softmax.kdsl -k softmax --dtype "$1" --shape "$2" --verify --bench \
        --reps 20 2>&1 | grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|verify [a-z_]+: [a-zA-Z]+|error:.*" |
        tr '\n' ' '
      echo
    done 2>&1 | tee -a "$out/push.txt"
    for c in "softmax bf16 M=5,N=262144" "log_softmax f32 M=3,N=100000 cluster=2,group=2048"; do
      set -- $c
      h=(); [ -n "${4:-}" ] && h=(--schedule "$4")
      for tool in memcheck racecheck; do
        printf '%s %s %s %s ' "$tool" "$1" "$2" "$3"
        timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool "$tool" ${k} run stdlib/softmax.kdsl \
          -k "$1" --dtype "$2" --shape "$3" "${h[@]}" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tr '\n' ' '
        echo
      done
    done 2>&1 | tee -a "$out/push.txt"
    ;;
  mask)
    nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem --format=csv,noheader
    # README's kernel, from README.md (the quick start's masked_softmax.kdsl).
    sed -n '/^`masked_softmax.kdsl`:/,/^```$/p' README.md | sed '1,3d;$d' > /tmp/masked_softmax.kdsl
    for round in 1 2; do
      for shape in "bf16 M=4096,N=4096" "f32 M=8192,N=8192"; do
        set -- $shape
        for b in kdsl_old kdsl; do
          extra=()
          [ "$round" = 1 ] && [ "$b" = kdsl ] && extra=(--verify)
          printf '%s %-8s %-5s %-15s ' "$round" "$b" "$1" "$2"
          timeout 60 ".device/bin/$b" run /tmp/masked_softmax.kdsl -k masked_softmax --dtype "$1" \
            --shape "$2" --bench --reps 40 "${extra[@]}" 2>&1 |
            grep -oE "bench: [0-9.]+ us|[0-9.]+ of the same-run|verify [a-z_]+: [a-zA-Z]+|error:.*" |
            tr '\n' ' '
          echo
        done
      done
    done 2>&1 | tee "$out/mask.txt"
    ;;
  final)
    final_run
    ;;
  *)
    echo "usage: s28.sh unroll|cluster|push|mask|final" >&2
    exit 2
    ;;
esac
