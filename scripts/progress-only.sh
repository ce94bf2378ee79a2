#!/usr/bin/env bash
# Runs `make`'s build or test command and shows what a person wants to read: for a build,
# one short line per file compiled (warnings and errors in full), no "Entering directory",
# "Built target" or dependency-scanning lines; for ctest, a line every 10% of the tests,
# every failure with its output, and ctest's summary. The exit status is the command's.
# Usage: scripts/progress-only.sh build|test COMMAND [ARGS...]
set -uo pipefail
mode=$1
shift
case $mode in
  build)
    "$@" 2>&1 | awk '
      /gmake\[[0-9]+\]: (Entering|Leaving) directory|make\[[0-9]+\]: (Entering|Leaving) directory/ { next }
      /^\[ *[0-9]+%\] (Built target|Linking)|Consolidate compiler generated|Scanning dependencies of/ { next }
      /^\[ *[0-9]+%\] Building/ {
        # "[ 45%] Building CXX object src/model/CMakeFiles/fpgallm_model.dir/model.cpp.o" -> "[ 45%] src/model/model.cpp"
        pct = substr($0, 1, index($0, "]")); file = $NF
        sub(/CMakeFiles\/[^\/]*\.dir\//, "", file); sub(/\.o$/, "", file)
        print pct " " file; fflush(); next
      }
      { print; fflush() }'
    status=$?
    [ $status -eq 0 ] && echo "build: up to date"
    exit $status
    ;;
  test)
    "$@" 2>&1 | awk '
      /^ *Start +[0-9]+: / { next }
      /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: .* Passed +[0-9.]+ sec$/ {
        split($1, f, "/"); decile = int(10 * f[1] / f[2])
        if (decile > shown) { shown = decile; printf "tests: %d of %d done\n", f[1], f[2]; fflush() }
        next
      }
      /^(Internal ctest changing into directory|Test project )/ { next }
      { print; fflush() }'
    ;;
  *)
    echo "usage: $0 build|test COMMAND [ARGS...]" >&2
    exit 2
    ;;
esac
