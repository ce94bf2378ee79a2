#!/usr/bin/env bash
# Multi-card execution and distributed explore under mpirun (issue 10).
#  1. C simulation of the synthesized stories110m (fpgallm synth, W8A8) through the
#     accelerator backend with 1, 2 and 4 ranks (tensor split) and 2 and 4 (pipeline
#     split): tokens/s, per-rank resident weights and peak RSS, and the card-to-card bytes
#     per token each rank sent (run --json, counted by dist::) against the performance
#     model's prediction for the same design (simulate --json predicted_link_bytes_per_token,
#     perf::card_transfers) and the simulator's links.
#  2. explore --all-presets over every device with 1, 2 and 4 ranks: wall times, the
#     measured speed-up (one-rank wall / N-rank wall) and the one each run reports.
# Usage: bench/bench_mpi.sh [BUILD_DIR] [STEPS]   (defaults: build, 12 positions per run)
# Needs Open MPI (mpiexec) and /usr/bin/python3. Writes nothing outside a temp folder.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
steps=${2:-12}
bin=$build/fpgallm
[ -x "$bin" ] || { echo "bench_mpi: no $bin (build first)" >&2; exit 2; }
command -v mpiexec >/dev/null || { echo "bench_mpi: mpiexec not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
py=/usr/bin/python3
cores=$(grep -c ^processor /proc/cpuinfo)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Open MPI in containers: root, more ranks than cores (waiting ranks yield the core instead
# of polling), no cross-memory-attach.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
  OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1
mpi() { local n=$1; shift; mpiexec --oversubscribe -np "$n" "$@"; }
now() { date +%s.%N; }

echo "bench_mpi: synthesizing stories110m and quantizing it (W8A8) ..." >&2
"$bin" synth --preset stories110m -o "$tmp/s110m.bin" >/dev/null 2>&1
"$py" "$here/bench/tok32000.py" "$here/models/tok512.bin" "$tmp/tokenizer.bin"
printf '%s\n' 'Once upon a time there was a little cat who liked to play in the sun with her best friend, the brown dog.' \
  'The dog ran to the park and found a big red ball under the old tree near the pond.' >"$tmp/calib.txt"
"$bin" quantize "$tmp/s110m.bin" --calib "$tmp/calib.txt" --scheme w8a8 -o "$tmp/q.gguf" >/dev/null 2>&1

configs="none:1 tensor:2 tensor:4 pipeline:2 pipeline:4"
for c in $configs; do
  split=${c%%:*} n=${c##*:}
  echo "{\"name\": \"bench-$split-$n\", \"device\": \"u280\", \"parallel\": {\"cards\": $n, \"split\": \"$split\"}}" \
    >"$tmp/$split$n.json"
  echo "bench_mpi: run, $split split, $n rank(s), $steps positions ..." >&2
  t0=$(now)
  if [ "$n" = 1 ]; then
    "$bin" run "$tmp/s110m.bin" --backend accel --quant "$tmp/q.gguf" --design "$tmp/$split$n.json" -n "$steps" -t 0 \
      -i "Once" --json >"$tmp/run-$split$n.json" 2>"$tmp/run-$split$n.err"
  else
    mpi "$n" "$bin" run "$tmp/s110m.bin" --backend accel --quant "$tmp/q.gguf" --design "$tmp/$split$n.json" -n "$steps" \
      -t 0 -i "Once" --json >"$tmp/run-$split$n.json" 2>"$tmp/run-$split$n.err"
  fi
  awk "BEGIN { print $(now) - $t0 }" >"$tmp/wall-$split$n"
  if [ "$n" -gt 1 ]; then
    "$bin" simulate stories110m --design "$tmp/$split$n.json" --context "$steps" --json >"$tmp/sim-$split$n.json" 2>/dev/null
  fi
done

for n in 1 2 4; do
  echo "bench_mpi: explore --all-presets, $n rank(s) ..." >&2
  # What launching alone costs: the same ranks listing the presets.
  t0=$(now)
  if [ "$n" = 1 ]; then "$bin" presets >/dev/null 2>&1; else mpi "$n" "$bin" presets >/dev/null 2>&1; fi
  awk "BEGIN { print $(now) - $t0 }" >"$tmp/launch-wall$n"
  t0=$(now)
  if [ "$n" = 1 ]; then "$bin" explore --all-presets --json >"$tmp/explore$n.json" 2>/dev/null
  else mpi "$n" "$bin" explore --all-presets --json >"$tmp/explore$n.json" 2>/dev/null; fi
  awk "BEGIN { print $(now) - $t0 }" >"$tmp/explore-wall$n"
done

"$py" - "$tmp" "$configs" "$steps" "$cores" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
tmp, configs, steps, cores, load0, load1 = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), *sys.argv[4:7]
def rd(name): return open(f'{tmp}/{name}').read()
print(f'stories110m (synthesized, W8A8), accelerator backend (HLS kernels in C simulation), greedy, {steps} positions '
      f'from "Once"; {cores} cores, load average {load0} at the start and {load1} at the end (other jobs included):\n')
print('| split | ranks | tokens/s | run wall s | same tokens as 1 rank | weights per rank MB (whole) | peak RSS per rank MB '
      '| RSS at the end per rank MB | sent bytes/token per rank (executed) | predicted (perf) | executed / predicted '
      '| simulated links |')
print('| --- | ---: | ---: | ---: | --- | --- | --- | --- | --- | --- | --- | --- |')
rss = lambda r: f"{r['rss_bytes'] / 1e6:.0f}" if 'rss_bytes' in r else '-'
base = json.loads(rd('run-none1.json'))
for c in configs:
    split, n = c.split(':')
    j = json.loads(rd(f'run-{split}{n}.json'))
    wall = float(rd(f'wall-{split}{n}'))
    same = 'yes' if j['tokens'] == base['tokens'] else 'NO'
    ranks = j['ranks']
    if int(n) == 1:
        print(f"| {split} | 1 | {j['tokens_per_s']:.2f} | {wall:.1f} | - | {ranks[0]['weight_bytes'] / 1e6:.1f} | "
              f"{ranks[0]['peak_rss_bytes'] / 1e6:.0f} | {rss(ranks[0])} | - | - | - | - |")
        continue
    sim = json.loads(rd(f'sim-{split}{n}.json'))
    pred, simb = sim['predicted_link_bytes_per_token'], sim['link_bytes_per_token']
    sent = [r['sent_bytes_per_token'] for r in ranks]
    ratio = [s / p if p else float('nan') for s, p in zip(sent, pred)]
    f = lambda v, fmt: ' / '.join(fmt.format(x) for x in v)
    print(f"| {split} | {n} | {j['tokens_per_s']:.2f} | {wall:.1f} | {same} | "
          f"{f([r['weight_bytes'] / 1e6 for r in ranks], '{:.1f}')} ({j['whole_weight_bytes'] / 1e6:.1f}) | "
          f"{f([r['peak_rss_bytes'] / 1e6 for r in ranks], '{:.0f}')} | {' / '.join(rss(r) for r in ranks)} | "
          f"{f(sent, '{:.0f}')} | {f(pred, '{:.0f}')} | "
          f"{f(ratio, '{:.5f}')} | {f(simb, '{:.0f}')} |")
print('\nexplore --all-presets over every device of data/devices.json:\n')
print('| ranks | wall s | launch alone s | measured speed-up (1-rank wall / wall) | reported speed-up (summed CPU / wall) '
      '| explore CPU s per rank | balance | output equals 1 rank |')
print('| ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |')
e1 = json.loads(rd('explore1.json')); w1 = float(rd('explore-wall1')); e1.pop('timing')
for n in (1, 2, 4):
    e = json.loads(rd(f'explore{n}.json')); w = float(rd(f'explore-wall{n}')); t = e.pop('timing')
    launch = float(rd(f'launch-wall{n}'))
    cpu = ' / '.join(f'{x:.2f}' for x in t['rank_explore_cpu_s'])
    print(f"| {n} | {w:.2f} | {launch:.2f} | {w1 / w:.2f} | {t['speedup']:.2f} | {cpu} | {t['balance']:.2f} | "
          f"{'yes' if e == e1 else 'NO'} |")
PY
