export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/cuda/lib64 KDSL_CACHE_DIR=$PWD/.device/cache KDSL_SOURCE_DIR=$PWD
sw() { bash scripts/device/sweep.sh "$@"; }
for k in softmax log_softmax; do
  sw stdlib/softmax.kdsl $k bf16 M=4096,N=32768 "" group=512 group=512,stage=2 group=512,stage=3 group=256,stage=2 group=256 cluster=2 cluster=2,stage=2
done
sw stdlib/softmax.kdsl softmax f32 M=2048,N=65536 "" group=512,stage=2 group=1024,stage=2
sw stdlib/rms_norm.kdsl add_rms_norm_bwd bf16 M=8192,N=8192 "" stage=2 stage=3
sw stdlib/rms_norm.kdsl add_rms_norm_bwd bf16 M=65536,N=1024 "" stage=2 stage=3
sw stdlib/rms_norm.kdsl rms_norm_bwd bf16 M=32768,N=4096 group=256,stage=2 group=256,stage=4 group=128,stage=3
sw stdlib/rms_norm.kdsl rms_norm_bwd f16 M=8192,N=8192 "" stage=2
ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
for c in "layer_norm layer_norm_bwd M=32768,N=4096 default" "layer_norm layer_norm_bwd M=32768,N=4096 stage=2" "rms_norm rms_norm_bwd M=8192,N=8192 default" "rms_norm rms_norm_bwd M=8192,N=8192 stage=2"; do
  set -- $c
  h=$4; [ "$h" = default ] && h=""
  echo "=== $2 $3 $4"
  timeout 100 $ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis -k regex:'kdsl_.*_n[0-9]+$' --launch-skip 1 --launch-count 1 \
    .device/bin/kdsl run stdlib/$1.kdsl -k $2 --dtype bf16 --shape $3 ${h:+--schedule $h} --bench --reps 2 --warmup 1 > $OUT/ncu_$2_$4.txt 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Dynamic Shared|Warp Cycles Per Issued|Stall|Issued Warp|Mem Busy|Max Bandwidth|Bank" $OUT/ncu_$2_$4.txt | head -40
done
