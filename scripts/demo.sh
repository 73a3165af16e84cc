#!/usr/bin/env bash
# The main job: installs what is missing, builds kdsl (Release), then runs the RMSNorm demo:
# checks the stdlib, shows the generated CUDA's schedule, and runs stdlib/rms_norm.kdsl at
# (8192, 8192) bf16 on the GPU with verification against the CPU float64 reference and timing
# against a same-run device-to-device copy; then the C++ embedding example. Without a GPU it says
# so, still compiles the kernel with NVRTC and runs it on the CPU reference (smaller shape).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build="${KDSL_BUILD_DIR:-build-release}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKDSL_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target kdsl_cli rms_norm_example
kdsl="$build/kdsl"
echo "== kdsl check stdlib/*.kdsl"
"$kdsl" check stdlib/*.kdsl
echo "== kdsl list stdlib/rms_norm.kdsl"
"$kdsl" list stdlib/rms_norm.kdsl
echo "== kdsl emit --explain (the schedule kdsl chose, and why)"
"$kdsl" emit stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape N=8192 --explain
echo "== kdsl run (GPU when there is one)"
set +e
"$kdsl" run stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape M=8192,N=8192 --verify --bench
rc=$?
set -e
if [ "$rc" -eq 4 ]; then
  echo "(no GPU here: the kernel was compiled by NVRTC and run on the CPU reference instead)"
  "$kdsl" run stdlib/rms_norm.kdsl -k rms_norm --dtype bf16 --shape M=64,N=8192 --device cpu
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
else
  echo "== examples/rms_norm_example (the C++ API embedded in a program)"
  "$build/examples/rms_norm_example" stdlib/rms_norm.kdsl
fi
