#!/usr/bin/env bash
# Builds the front-end fuzzer (clang, libFuzzer, ASan + UBSan; -DKDSL_FUZZ=ON in its own build
# folder) and runs it for SECONDS on the seed corpus plus the corpus kept from earlier runs.
# A crash, leak, UB report or an input slower than the timeout stops it with exit status 1 and
# writes the input to BUILD_DIR/fuzz-artifacts/; keep it in tests/fuzz_regressions/ once fixed.
#
# Usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR] [extra libFuzzer flags...]
#   SECONDS: 60 by default; BUILD_DIR: build-fuzz by default.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build="${2:-build-fuzz}"
shift $(( $# < 2 ? $# : 2 ))
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DKDSL_FUZZ=ON -DKDSL_WERROR=ON -DKDSL_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target kdsl_frontend_fuzz
rm -rf "$build/fuzz-seeds"
python3 fuzz/make_seeds.py "$build/fuzz-seeds"
mkdir -p "$build/fuzz-corpus" "$build/fuzz-artifacts"
# -timeout: an input the front end takes seconds over is a hang (they take milliseconds);
# -rss_limit_mb: a leak or a blow-up shows long before the machine runs short.
# detect_leaks: LeakSanitizer checks each input that allocated more than it freed.
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
"$build/fuzz/kdsl_frontend_fuzz" "$build/fuzz-corpus" "$build/fuzz-seeds" \
  -dict=fuzz/kdsl.dict -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=20000 \
  -artifact_prefix="$build/fuzz-artifacts/" -print_final_stats=1 "$@"
