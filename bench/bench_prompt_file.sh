#!/usr/bin/env bash
# `run --prompt-file` on prompts of 0.25 to 4 MB (issue 34): no bundled model's context holds
# them, so each run tokenizes the whole prompt and refuses it in one line naming the context.
# Prints the seconds of each size and the seconds per MB, which stay flat when the time is
# linear in the prompt's length. Usage: bench/bench_prompt_file.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build}/fpgallm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
story=$(head -n 1 "$here/models/tinystories-valid-sample.txt")
echo "| prompt MB | exit | seconds | seconds per MB |"
echo "| --- | --- | --- | --- |"
for quarter_mb in 1 2 4 8 16; do
  bytes=$((quarter_mb * 262144))
  : >"$tmp/p.txt"
  while [ "$(stat -c %s "$tmp/p.txt")" -lt "$bytes" ]; do printf '%s\n' "$story" >>"$tmp/p.txt"; done
  truncate -s "$bytes" "$tmp/p.txt"
  start=$(date +%s.%N)
  set +e
  "$bin" run "$here/models/stories260K.bin" -z "$here/models/tok512.bin" -n 0 --prompt-file "$tmp/p.txt" >/dev/null 2>"$tmp/err"
  status=$?
  set -e
  end=$(date +%s.%N)
  awk -v mb="$(echo "$quarter_mb / 4" | bc -l)" -v s="$(echo "$end - $start" | bc -l)" -v st="$status" \
    'BEGIN { printf "| %.2f | %d | %.3f | %.3f |\n", mb, st, s, s / mb }'
done
echo "last stderr: $(cat "$tmp/err")"
