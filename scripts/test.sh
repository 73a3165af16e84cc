#!/usr/bin/env bash
# Sets up, builds and runs the kdsl test suite (GPU tests skip, saying so, without a CUDA driver),
# then installs kdsl and builds the outside-project example against it (scripts/test_install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build="${KDSL_BUILD_DIR:-build}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKDSL_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
# The installed package, used by an outside project (examples/embed), from the tree just built.
bash scripts/test_install.sh "$build"
