#!/usr/bin/env bash
# Row-schedule sweeps of 2026-11-30 (fourth session) on the GPU machine (after
# scripts/device/stage.sh; carry .device): the normalization shapes furthest from the copy
# bandwidth or slower than the best PyTorch peer (bench/RESULTS.md), each under schedule hints
# through scripts/device/sweep.sh. The results are in bench/RESULTS.md.
#   bench/experiments/norm_sweep.sh 1   threads per row, grid kind, cached weights, prefetch
#   bench/experiments/norm_sweep.sh 2   thread-block clusters (cluster=K), mostly at N = 32768
#   bench/experiments/norm_sweep.sh 3   one CTA per row with fewer, larger threads
#   bench/experiments/norm_sweep.sh 4   clusters with the two-level reduction (each CTA's total,
#                                       then K totals through distributed shared memory);
#                                       prefetching the next row in backward kernels
#   bench/experiments/norm_sweep.sh 5   (fifth session) rows staged in shared memory with
#                                       cp.async (stage=D), backward and persistent kernels
#   bench/experiments/norm_sweep.sh 6   backward kernels: column accumulators in registers
#                                       (smem_columns=0) with staged rows
#   bench/experiments/norm_sweep.sh 7   N = 32768 backward kernels on clusters with register
#                                       accumulators and staged rows
#   bench/experiments/norm_sweep.sh 8   (sixth session) forward kernels: persistent CTAs with
#                                       the next rows staged, at a fixed number of threads per row
#   bench/experiments/norm_sweep.sh 9   (seventh session) min_ctas on the backward kernels; run
#                                       with experiments/reread_staged_rows.patch applied
#                                       (staged rows read again from shared memory in each
#                                       later phase, fewer registers; rejected)
#   bench/experiments/norm_sweep.sh 10  forward kernels that read the row again from L2 in each
#                                       phase (cache_rows=0) instead of holding it in registers
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.device/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KDSL_CACHE_DIR="$PWD/.device/cache" KDSL_SOURCE_DIR="$PWD"
sw() { bash scripts/device/sweep.sh "$@"; }
nvidia-smi -L
cat .device/COMMIT

sweep1() {
  sw stdlib/layer_norm.kdsl layer_norm f32 M=8192,N=10240 "" group=512 group=256 \
    cache_invariant=0 group=512,cache_invariant=0 group=256,cache_invariant=0 persistent=0 \
    persistent=0,group=512 persistent=0,group=256 persistent=0,group=256,cache_invariant=0 \
    persistent=0,group=512,cache_invariant=0
  sw stdlib/rms_norm.kdsl rms_norm f32 M=8192,N=10240 "" group=512 group=256 persistent=0 \
    persistent=0,group=512 persistent=0,group=256 cache_invariant=0
  sw stdlib/layer_norm.kdsl layer_norm bf16 M=8192,N=8192 "" prefetch=0 group=512 group=128 \
    cache_invariant=0 persistent=0 persistent=0,group=512 persistent=0,group=128 \
    persistent=0,cache_invariant=0
  sw stdlib/layer_norm.kdsl layer_norm bf16 M=4096,N=32768 "" prefetch=0 cache_invariant=1 \
    persistent=0 persistent=0,group=512 group=512
  sw stdlib/rms_norm.kdsl rms_norm bf16 M=4096,N=32768 "" persistent=1 persistent=1,prefetch=1 \
    group=512 persistent=0,group=1024
  sw stdlib/rms_norm.kdsl rms_norm bf16 M=1024,N=8192 "" group=256 group=1024 group=128 \
    persistent=1 persistent=1,group=512 persistent=1,group=256 pack=0
  for k in "layer_norm layer_norm" "rms_norm rms_norm" "softmax softmax"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=65536,N=1024 "" group=64 group=32 group=256 persistent=0 \
      persistent=1 persistent=0,group=64 persistent=1,group=64 cache_invariant=0
  done
  sw stdlib/softmax.kdsl softmax f32 M=8192,N=10240 "" group=512 group=256 persistent=0 \
    persistent=0,group=512 persistent=0,group=256
  sw stdlib/rms_norm.kdsl rms_norm_bwd bf16 M=8192,N=8192 "" group=512 group=1024 group=128 \
    smem_columns=0 cache_rows=0 cache_invariant=0
  sw stdlib/layer_norm.kdsl layer_norm_bwd bf16 M=8192,N=8192 "" group=512 group=1024 \
    group=128 smem_columns=0 cache_rows=0 cache_invariant=0
  sw stdlib/rms_norm.kdsl rms_norm_bwd bf16 M=4096,N=32768 "" cache_rows=1 cache_invariant=1
  sw stdlib/layer_norm.kdsl layer_norm_bwd bf16 M=32768,N=4096 "" group=256 group=1024 \
    smem_columns=0 cache_invariant=0
  sw stdlib/softmax.kdsl softmax_bwd bf16 M=4096,N=32768 "" persistent=0 prefetch=1 group=512
}

sweep2() {
  local c="cluster=2 cluster=4 cluster=8 cluster=2,group=2048 cluster=4,group=2048 \
           cluster=4,group=4096 cluster=8,group=4096 cluster=8,group=8192"
  for k in "rms_norm rms_norm" "layer_norm layer_norm" "softmax softmax" "rms_norm rms_norm_bwd" \
           "layer_norm layer_norm_bwd" "softmax softmax_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=4096,N=32768 "" $c cluster=2,persistent=0,group=2048 \
      cluster=4,persistent=0,group=4096 cluster=2,prefetch=0 cluster=4,prefetch=0
  done
  for k in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=8192,N=8192 "" cluster=2 cluster=4 cluster=2,group=2048 \
      cluster=4,group=2048
    sw stdlib/$1.kdsl $2 f32 M=8192,N=10240 "" cluster=2 cluster=4 cluster=2,group=2048
    sw stdlib/$1.kdsl $2 bf16 M=32768,N=4096 "" cluster=2 cluster=4 cluster=2,group=1024
  done
  sw stdlib/rms_norm.kdsl rms_norm bf16 M=1024,N=8192 "" cluster=2,group=1024 \
    cluster=4,group=1024 cluster=2,group=1024,persistent=0 cluster=4,group=2048,persistent=0
}

# Candidates for the default threads per row (one CTA per row, about 64 register words of row
# elements per thread) at the issue's shapes.
sweep3() {
  for k in "rms_norm rms_norm" "layer_norm layer_norm" "softmax softmax" "softmax softmax_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=8192,N=8192 "" persistent=0,group=64 persistent=0,group=128 \
      persistent=0,group=256
    sw stdlib/$1.kdsl $2 bf16 M=32768,N=4096 "" persistent=0,group=32 persistent=0,group=64 \
      persistent=0,group=128 group=64 group=128
    sw stdlib/$1.kdsl $2 bf16 M=65536,N=1024 "" persistent=0,group=16 group=16
  done
  sw stdlib/softmax.kdsl softmax_bwd f32 M=8192,N=10240 "" persistent=0,group=256 \
    persistent=0,group=512
}

sweep4() {
  for k in "rms_norm rms_norm" "layer_norm layer_norm" "softmax softmax" "rms_norm rms_norm_bwd" \
           "layer_norm layer_norm_bwd" "softmax softmax_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=4096,N=32768 "" cluster=2 cluster=4 cluster=8
  done
  for k in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=8192,N=8192 "" prefetch=1 prefetch=1,group=512 cluster=2
    sw stdlib/$1.kdsl $2 bf16 M=32768,N=4096 "" prefetch=1 cluster=2
    sw stdlib/$1.kdsl $2 bf16 M=65536,N=1024 "" prefetch=1
  done
  sw stdlib/rms_norm.kdsl rms_norm bf16 M=1024,N=8192 "" cluster=2 cluster=4 persistent=0,cluster=2
  sw stdlib/layer_norm.kdsl layer_norm bf16 M=1024,N=8192 "" group=256 cluster=2
}

sweep5() {
  local st="stage=2 stage=3 stage=4"
  for k in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=8192,N=8192 "" $st group=1024,stage=3
    sw stdlib/$1.kdsl $2 bf16 M=32768,N=4096 "" $st group=256,stage=3
    sw stdlib/$1.kdsl $2 bf16 M=65536,N=1024 "" $st group=64,stage=3
    sw stdlib/$1.kdsl $2 bf16 M=1024,N=8192 "" stage=2 stage=3
    sw stdlib/$1.kdsl $2 f32 M=8192,N=10240 "" stage=2 stage=3
    sw stdlib/$1.kdsl $2 bf16 M=4096,N=32768 "" stage=2 cluster=4,stage=2 cluster=4,stage=3
  done
  for k in "rms_norm rms_norm" "layer_norm layer_norm" "softmax softmax" "softmax softmax_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=4096,N=32768 "" stage=2 stage=3 group=512,stage=2
    sw stdlib/$1.kdsl $2 bf16 M=8192,N=8192 "" persistent=1,stage=2 persistent=1,stage=3
  done
  sw stdlib/rms_norm.kdsl rms_norm bf16 M=1024,N=8192 "" persistent=1,stage=2 \
    persistent=1,group=512,stage=2 persistent=1,group=256,stage=3
  sw stdlib/layer_norm.kdsl layer_norm bf16 M=1024,N=8192 "" persistent=1,stage=2 \
    persistent=1,group=256,stage=2
}

sweep6() {
  local r="smem_columns=0,cache_rows=1"
  for k in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd" "rms_norm add_rms_norm_bwd"; do
    set -- $k
    for s in M=8192,N=8192 M=1024,N=8192; do
      sw stdlib/$1.kdsl $2 bf16 $s "" stage=2 $r $r,stage=2 $r,stage=3 group=1024,$r,stage=2 \
        group=1024,stage=2
    done
    for s in M=32768,N=4096 M=65536,N=1024; do
      sw stdlib/$1.kdsl $2 bf16 $s "" stage=2 $r $r,stage=2 $r,stage=3
    done
    sw stdlib/$1.kdsl $2 f32 M=8192,N=10240 "" $r group=1024,$r,stage=2
  done
}

sweep7() {
  local r="smem_columns=0,cache_rows=1"
  for k in "rms_norm rms_norm_bwd" "layer_norm layer_norm_bwd"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=4096,N=32768 "" cluster=4,$r cluster=4,$r,stage=2 \
      cluster=2,$r,stage=2 cluster=4,group=2048,$r cluster=8,group=4096,$r \
      cluster=8,group=4096,$r,stage=2
  done
  sw stdlib/softmax.kdsl softmax_bwd bf16 M=4096,N=32768 "" cluster=4,stage=2 cluster=2,stage=2 \
    cluster=4,group=2048 cluster=2,group=1024,stage=2
}

sweep8() {
  local p="persistent=1"
  sw stdlib/rms_norm.kdsl rms_norm bf16 M=8192,N=8192 "" min_ctas=4 $p,group=512,stage=2 \
    $p,group=512,stage=3 $p,group=512,stage=4 $p,group=256,stage=3 $p,group=1024,stage=3 \
    $p,group=256,stage=4,min_ctas=4
  sw stdlib/rms_norm.kdsl rms_norm bf16 M=4096,N=32768 "" stage=2 stage=3 group=1024,stage=2 \
    group=1024,stage=3
  sw stdlib/rms_norm.kdsl rms_norm bf16 M=65536,N=1024 "" $p,group=64,stage=3 $p,group=128,stage=3 \
    $p,group=32,stage=4
  sw stdlib/layer_norm.kdsl layer_norm bf16 M=8192,N=8192 "" $p,group=256,stage=2 \
    $p,group=256,stage=3 $p,group=512,stage=3 $p,group=128,stage=3
  sw stdlib/layer_norm.kdsl layer_norm bf16 M=4096,N=32768 "" stage=2 stage=3 group=1024,stage=2
  sw stdlib/softmax.kdsl softmax bf16 M=8192,N=8192 "" $p,group=256,stage=2 $p,group=256,stage=3 \
    $p,group=512,stage=3
  sw stdlib/softmax.kdsl softmax bf16 M=65536,N=1024 "" $p,group=32,stage=3 $p,group=64,stage=3
}
sweep9() {
  sw stdlib/layer_norm.kdsl layer_norm_bwd bf16 M=8192,N=8192 "" min_ctas=2 min_ctas=2,stage=3 \
    group=1024 group=256,min_ctas=4
  sw stdlib/layer_norm.kdsl layer_norm_bwd bf16 M=1024,N=8192 "" min_ctas=2 group=256,min_ctas=4
  sw stdlib/rms_norm.kdsl rms_norm_bwd bf16 M=8192,N=8192 "" min_ctas=2 group=512 \
    group=512,min_ctas=4 group=256,min_ctas=4
  sw stdlib/rms_norm.kdsl rms_norm_bwd bf16 M=1024,N=8192 "" min_ctas=2 group=512,min_ctas=4
  sw stdlib/rms_norm.kdsl rms_norm_bwd bf16 M=32768,N=4096 "" min_ctas=3 min_ctas=4 \
    group=256,min_ctas=4
  sw stdlib/rms_norm.kdsl add_rms_norm_bwd bf16 M=8192,N=8192 "" min_ctas=2
}
sweep10() {
  local r="cache_rows=0"
  for k in "rms_norm rms_norm" "layer_norm layer_norm" "softmax softmax"; do
    set -- $k
    sw stdlib/$1.kdsl $2 bf16 M=4096,N=32768 "" $r $r,group=1024 $r,group=256 $r,persistent=1 \
      $r,persistent=1,group=1024
    sw stdlib/$1.kdsl $2 bf16 M=8192,N=8192 "" $r $r,group=256 $r,group=512 $r,persistent=0 \
      $r,persistent=0,group=256
    sw stdlib/$1.kdsl $2 bf16 M=65536,N=1024 "" $r $r,persistent=0 $r,group=64
  done
  sw stdlib/softmax.kdsl softmax_bwd bf16 M=4096,N=32768 "" $r $r,group=1024 $r,persistent=1
  sw stdlib/rms_norm.kdsl rms_norm_bwd bf16 M=4096,N=32768 "" $r $r,group=1024
}

sweep"${1:-1}"
