#!/usr/bin/env bash
# The RTL matrix unit's bigger checks, too slow for CI (docs/rtl.md):
#   1. Verilator on the 32x64 and 64x64 units as well (test_rtl built with
#      -DFPGALLM_RTL_BIG_SHAPES=ON in its own build folder), timed;
#   2. Yosys's mapping of every shape of bench/rtl_resources.cpp beside hw::resources, the
#      table of docs/rtl.md (stat output cached in bench/rtl_cache, keyed by the RTL's hash).
# Usage: bench/rtl_matrix_unit.sh [BUILD] [BIG_BUILD]   (defaults build, build-rtl-big)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
big=${2:-build-rtl-big}
cpu() { if [ -x /work/bin/cpu ]; then /work/bin/cpu "$@"; else "$@"; fi; }

cmake -S . -B "$big" -DCMAKE_BUILD_TYPE=Release -DFPGALLM_RTL_BIG_SHAPES=ON -DFPGALLM_BUILD_BENCH=OFF >/dev/null
start=$(date +%s)
cpu cmake --build "$big" -j1 --target test_rtl >"$big/rtl_build.log"
echo "test_rtl with the big shapes: built in $(( $(date +%s) - start )) s"
start=$(date +%s)
cpu "$big/tests/rtl/test_rtl" --gtest_filter='RtlMatrixUnit*:RtlRequant*' --gtest_brief=1
echo "Verilator tests, all shapes: $(( $(date +%s) - start )) s"

cpu cmake --build "$build" -j1 --target rtl_resources >/dev/null
cpu "$build/bench/rtl_resources" --cache bench/rtl_cache --fit --csv bench/rtl_resources.csv
