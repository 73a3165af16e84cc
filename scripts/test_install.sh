#!/usr/bin/env bash
# Installs kdsl into a temporary prefix and builds examples/embed against it with find_package, as
# an outside project would; checks that the installed headers and the exported package need none
# of kdsl's private dependencies and that libkdsl.so exports the public API and nothing internal.
#
# Usage: scripts/test_install.sh [BUILD_DIR]
#   With BUILD_DIR (an already configured and built tree, as scripts/test.sh passes), installs from
#   it; without, configures and builds kdsl (library and command line only) in a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
src="$PWD"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/kdsl-install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install: FAILED: $*" >&2; exit 1; }

build="${1:-}"
if [ -z "$build" ]; then
  build="$tmp/build"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKDSL_WERROR=ON \
        -DKDSL_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target kdsl kdsl_cli
fi
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null

for f in lib/libkdsl.so bin/kdsl include/kdsl/kdsl.h include/kdsl/dlpack.h \
         share/kdsl/stdlib/rms_norm.kdsl lib/cmake/kdsl/kdslConfig.cmake \
         lib/cmake/kdsl/kdslConfigVersion.cmake lib/cmake/kdsl/kdslTargets.cmake; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done

# Public headers include only the standard library, kdsl's own headers and <dlpack/dlpack.h>.
bad_includes="$(grep -h '^#include' "$prefix"/include/kdsl/*.h \
  | grep -Ev '^#include <[a-z_]+>$|^#include "kdsl/[a-z_]+\.h"$|^#include <dlpack/dlpack\.h>$' || true)"
[ -z "$bad_includes" ] || fail "public headers include private dependencies: $bad_includes"
if grep -Eq 'spdlog|fmt::|pegtl|nlohmann|xxhash|nvrtc' "$prefix"/lib/cmake/kdsl/kdslTargets*.cmake; then
  fail "the exported package names a private dependency"
fi

# The shared library exports the public API and hides the internals.
symbols="$(nm -D --defined-only "$prefix/lib/libkdsl.so" | c++filt)"
for api in 'kdsl::Module::load(' 'kdsl::Kernel::launch(' 'kdsl::TensorRef::contiguous(' \
           'kdsl::from_dlpack(DLTensor const&)' 'kdsl::dtype_name(' 'typeinfo for kdsl::ArgumentError'; do
  grep -qF "$api" <<<"$symbols" || fail "libkdsl.so does not export $api"
done
internal="$(grep -E 'kdsl::(detail|ir|ast)::|kdsl::(DiskCache|compile_kernel|run_front_end)' <<<"$symbols" || true)"
[ -z "$internal" ] || fail "libkdsl.so exports internals: $(head -3 <<<"$internal")"

cmake -S "$src/examples/embed" -B "$tmp/embed" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$tmp/embed" -j"$(nproc)" >/dev/null
# Runs it: 0 (results checked on a GPU) or 4 (no GPU; the installed stdlib still parsed).
rc=0
"$tmp/embed/rms_norm_embed" || rc=$?
case $rc in
  0) echo "test_install: ok (installed package built and ran on the GPU)" ;;
  4) echo "test_install: ok (installed package built; no GPU to run it)" ;;
  *) fail "rms_norm_embed exited with status $rc" ;;
esac
