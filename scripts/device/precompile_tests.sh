#!/usr/bin/env bash
# Fills a disk cache with the sm_90 specializations the GPU tests (normalization, numerics, the
# GroupNorm example, runtime) and the benchmarks use, on a machine without a GPU (kdsl compile
# --arch sm_90), so the GPU machine only loads them.
# Usage: scripts/device/precompile_tests.sh CACHE_DIR [KDSL_BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
export KDSL_CACHE_DIR="$1"
kdsl="${2:-build/kdsl}"
ns=N=1,7,64,760,1000,1024,4096,8192,12288,10240,32768
status=0
# One call per file: every listed kernel x dtype x N, compiled in parallel; prints the summary
# line (and any failure on stderr), exit code 1 when something failed.
compile() { "$kdsl" -q compile "$@" --arch sm_90 | tail -n 1 || status=1; }
compile stdlib/rms_norm.kdsl -k rms_norm,rms_norm_bwd,add_rms_norm,add_rms_norm_bwd \
  --dtype f32,f16,bf16 --shape "$ns"
compile stdlib/layer_norm.kdsl -k layer_norm,layer_norm_bwd --dtype f32,f16,bf16 --shape "$ns"
compile stdlib/softmax.kdsl -k softmax,softmax_bwd,log_softmax,log_softmax_bwd \
  --dtype f32,f16,bf16 --shape "$ns"
compile examples/group_norm.kdsl -k group_norm --dtype f32,f16,bf16 --shape K=7,64,1000,4096  # group_norm_gpu_test
compile tests/data/col_sum.kdsl -k col_sum --dtype bf16 --shape N=1000  # runtime_gpu_test
compile stdlib/scan.kdsl -k cumsum,cumsum_reverse,cumprod,logcumsumexp --dtype f32 \
  --shape N=8,5000  # ieee_gpu_test
echo "precompiled into $KDSL_CACHE_DIR"
exit $status
