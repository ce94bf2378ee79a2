#!/bin/sh
# Builds the libFuzzer targets with clang in their own build folder, writes seed files, and
# runs each fuzzer for a few thousand inputs. Usage: fuzz/run.sh [BUILD_DIR] [--build-only]
# Environment: FUZZ_RUNS (default 3000), FUZZ_SECONDS per fuzzer (default 20), FUZZ_TARGETS
# (default: the checkpoint readers llama2c gguf safetensors tokenizer; the parsers are
# design results_csv text hf_config tokenizer_json), FUZZ_JOBS (parallel compile jobs for the
# build, default nproc; 1 on a shared machine).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build-fuzz}
build_only=${2:-}
runs=${FUZZ_RUNS:-3000}
seconds=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-$(nproc)}
cxx=${FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
if [ -z "$cxx" ]; then
  echo "fuzz/run.sh: clang++ not found (scripts/install-deps.sh installs clang)" >&2
  exit 1
fi
cmake -S "$here" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$build" -j "$jobs"
[ "$build_only" = "--build-only" ] && exit 0

corpus="$build/corpus"
rm -rf "$corpus"
"$build/make_seeds" "$corpus"
status=0
for name in ${FUZZ_TARGETS:-llama2c gguf safetensors tokenizer}; do
  mkdir -p "$build/artifacts/$name"
  echo "== fuzz_$name: $runs runs, at most ${seconds}s"
  if ! "$build/fuzz_$name" -runs="$runs" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
       -artifact_prefix="$build/artifacts/$name/" "$corpus/$name" 2>"$build/fuzz_$name.log"; then
    tail -n 40 "$build/fuzz_$name.log" >&2
    status=1
  fi
  grep -E "^(#[0-9]+ *DONE|Done)" "$build/fuzz_$name.log" || tail -n 2 "$build/fuzz_$name.log"
done
exit $status
