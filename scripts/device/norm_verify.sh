#!/usr/bin/env bash
# Every stdlib normalization kernel at the issue's long rows, verified against the CPU float64
# reference with the scheduler's default (after stage.sh; carry .device): bf16 300 x 32768 (rows
# on a persistent grid; LayerNorm backward on a cluster of two CTAs per row) and f32 300 x 10240
# (one CTA per row). Optional arguments are added to every `kdsl run` (e.g. --schedule cluster=2).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="${KDSL_CACHE_DIR:-$PWD/.device/cache}" KDSL_SOURCE_DIR="$PWD"
fail=0
for fk in rms_norm:rms_norm rms_norm:rms_norm_bwd rms_norm:add_rms_norm rms_norm:add_rms_norm_bwd \
          layer_norm:layer_norm layer_norm:layer_norm_bwd softmax:softmax softmax:softmax_bwd \
          softmax:log_softmax softmax:log_softmax_bwd; do
  for ds in bf16:M=300,N=32768 f32:M=300,N=10240; do
    out=$(timeout 120 .device/bin/kdsl run "stdlib/${fk%%:*}.kdsl" -k "${fk#*:}" --dtype "${ds%%:*}" \
          --shape "${ds#*:}" --verify "$@" 2>&1)
    rc=$?
    [ $rc -eq 0 ] || fail=1
    printf '%-18s %-5s %-16s rc=%d %s\n' "${fk#*:}" "${ds%%:*}" "${ds#*:}" $rc \
      "$(echo "$out" | grep -c '^verify .*: ok') outputs ok, $(echo "$out" | grep -c '^verify .*: FAILED') failed"
    [ $rc -eq 0 ] || echo "$out" | tail -5
  done
done
exit $fail
