#!/usr/bin/env bash
# Installs the Debian 12 packages fpgallm needs, only those missing. Safe to run often.
set -euo pipefail

packages=(
  build-essential cmake g++ clang libclang-rt-14-dev ccache curl
  libcli11-dev nlohmann-json3-dev libfmt-dev libpcre2-dev libicu-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-dev pybind11-dev python3-pybind11 python3-numpy python3-torch python3-pytest python3-regex python3-sentencepiece
  libopenmpi-dev openmpi-bin
  libopenblas-openmp-dev   # the reference engine's batched pass (cblas_sgemm on OpenMP threads)
  chromium
  verilator yosys   # the RTL matrix unit: Verilator tests and Yosys mapping (label rtl, docs/rtl.md)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# OpenAI's JavaScript client (npm, pinned by its package-lock.json) for the serve test that
# uses it as a real client; that test says it is skipped where npm is absent.
client="$(dirname "$0")/../tests/serve/openai_client"
if command -v npm >/dev/null && [ ! -f "$client/node_modules/openai/package.json" ]; then
  echo "install-deps: npm ci in tests/serve/openai_client" >&2
  (cd "$client" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "install-deps: npm ci failed; the openai client test will be skipped" >&2
fi
