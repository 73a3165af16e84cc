#!/usr/bin/env bash
# Installs the Debian packages kdsl builds against (idempotent; needs root or sudo).
# The CUDA 13 toolkit (NVRTC, cuda.h) is expected in /usr/local/cuda or $CUDA_HOME.
set -euo pipefail
pkgs=(cmake g++ make tao-pegtl-dev libspdlog-dev libfmt-dev libgtest-dev libcli11-dev libxxhash-dev
      libutf8proc-dev nlohmann-json3-dev libdlpack-dev clang libclang-rt-14-dev python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "kdsl setup: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "kdsl setup: no CUDA toolkit found at $cuda (need nvrtc.h and libnvrtc); set CUDA_HOME" >&2
  exit 1
fi
