#!/usr/bin/env bash
# Stages what a run on the GPU machine needs into .device/ (ignored by git, named in `carry`):
# stripped binaries from the build folder, the shared libraries the GPU machine lacks, and a
# disk cache precompiled here for sm_90 (so the GPU machine spends no time in NVRTC).
# Usage: scripts/device/stage.sh [BUILD_DIR]   (then carry .device)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
rm -rf .device/bin .device/lib
# The disk cache is filled on the GPU machine (its cores compile faster than this machine's)
# unless KDSL_KEEP_CACHE=1 keeps one precompiled here.
[ "${KDSL_KEEP_CACHE:-0}" = 1 ] || rm -rf .device/cache
mkdir -p .device/bin .device/lib .device/cache
for f in "$build"/kdsl "$build"/tests/*_gpu_test "$build"/tests/kdsl_sanitize_cases "$build"/bench/kdsl_bench* \
         "$build"/examples/*_example; do
  [ -x "$f" ] || continue
  strip -o ".device/bin/$(basename "$f")" "$f"
done
for lib in libspdlog.so.1.10 libfmt.so.9 libxxhash.so.0 libutf8proc.so.2; do
  cp -L "/lib/x86_64-linux-gnu/$lib" .device/lib/
done
# The examples link the shared library and the CUDA runtime (for cudaMalloc).
if [ -e "$build/libkdsl.so.0" ]; then strip --strip-unneeded -o .device/lib/libkdsl.so.0 "$build/libkdsl.so.0"; fi
cudart="${CUDA_HOME:-/usr/local/cuda}/lib64/libcudart.so.13"
if [ -e "$cudart" ]; then cp -L "$cudart" .device/lib/; fi
# The front-end fuzzer (scripts/fuzz.sh builds it) and its corpus, for scripts/device/fuzz.sh.
fuzz_build="${KDSL_FUZZ_BUILD:-build-fuzz}"
if [ -x "$fuzz_build/fuzz/kdsl_frontend_fuzz" ]; then
  strip -o .device/bin/kdsl_frontend_fuzz "$fuzz_build/fuzz/kdsl_frontend_fuzz"
  rm -rf .device/fuzz-corpus
  mkdir -p .device/fuzz-corpus
  cp -r "$fuzz_build/fuzz-corpus/." .device/fuzz-corpus/ 2>/dev/null || true
fi
chmod 700 .device/cache
# The peers' recorded times (bench/peers_compare.py --peers), newest file.
rm -f .device/peers.json .device/peers.py
peers="$(ls ../shared/peers/peers-*.json 2>/dev/null | sort | tail -1)" || true
if [ -n "$peers" ]; then cp "$peers" .device/peers.json; fi
# The script that measured them, to time the peers in the same run (final_bench.sh, KDSL_PEERS=run).
if [ -s ../shared/peers/peers.py ]; then cp ../shared/peers/peers.py .device/peers.py; fi
commit="$(git rev-parse --short HEAD)"
git diff --quiet HEAD || commit="$commit (with uncommitted changes)"
echo "$commit" >.device/COMMIT
du -sh .device
