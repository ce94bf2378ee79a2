#!/bin/sh
# The C++14 front-end gate of the kernels and of every emitted project: each SOURCE compiles
# with g++ and clang++ at -std=c++14 -pedantic -Werror (-Wall -Wextra; HLS pragmas are
# unknown to both compilers and allowed), once as C simulation and once with
# -D__SYNTHESIS__, where the kernels include the vendor's hls_stream.h: these machines do not
# have it, so tests/kernels/vendor_stub provides a stand-in that declares its interface
# (declarations only: the gate is -fsyntax-only). A host program (a SOURCE named host.cpp)
# compiles once per compiler at -std=c++17, as XRT's headers require, against the stand-in
# for XRT's native C++ API in the same folder (xrt/xrt_device.h, xrt_kernel.h, xrt_bo.h).
# Usage: frontend_gate.sh INCLUDE_DIR SOURCE...
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
include=$1
shift
status=0
for cxx in g++ clang++; do
  if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "frontend_gate: $cxx not found" >&2
    exit 2
  fi
  for mode in csim synthesis host; do
    std=c++14
    flags=""
    [ "$mode" = synthesis ] && flags="-D__SYNTHESIS__ -I$here/tests/kernels/vendor_stub"
    [ "$mode" = host ] && std=c++17 && flags="-I$here/tests/kernels/vendor_stub"
    for src in "$@"; do
      case "$src" in
        */host.cpp | host.cpp) [ "$mode" = host ] || continue ;;
        *) [ "$mode" = host ] && continue ;;
      esac
      if $cxx -std=$std -pedantic -Werror -Wall -Wextra -Wno-unknown-pragmas $flags -I"$include" -fsyntax-only "$src"; then
        echo "ok: $cxx $mode $src"
      else
        echo "FAIL: $cxx $mode $src" >&2
        status=1
      fi
    done
  done
done
exit $status
