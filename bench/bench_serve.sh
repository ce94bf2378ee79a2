#!/usr/bin/env bash
# The load table of docs/serving.md: `fpgallm bench-serve` at 1, 4, 16 and 64 concurrent
# clients against `fpgallm serve` on the bundled model (reference engine, one replica,
# --max-batch 64), with the demo design's card figures (--predict-card; the design of
# `make demo`, out/demo/design.json, deployed into a temporary folder when absent).
# Prompts: sentences of models/tinystories-valid-sample.txt. Each row starts a fresh server.
# Usage: bench/bench_serve.sh [BUILD_DIR] [MAX_TOKENS]   (markdown on stdout, progress on stderr)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
max_tokens=${2:-64}
bin=$build/fpgallm
model=$here/models/stories260K.bin
tmp=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT

design=$here/out/demo/design.json
if [ ! -f "$design" ]; then
  echo "bench_serve: deploying the demo design into $tmp/demo" >&2
  "$bin" deploy "$model" --device u280 -o "$tmp/demo" >/dev/null
  design=$tmp/demo/design.json
fi

/usr/bin/python3 - "$here/models/tinystories-valid-sample.txt" >"$tmp/prompts.txt" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text)]
print("\n".join([s for s in sentences if 20 <= len(s) <= 120][:64]))
PY

printf '| clients | requests | failed | TTFT p50 / p99 ms | per-token p50 / p99 ms | end-to-end p50 / p99 ms | requests/s | tokens/s | tokens/s vs 1 client | card queries/s | card queries/W |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
base=
for clients in 1 4 16 64; do
  requests=$(( clients * 8 > 64 ? clients * 8 : 64 ))
  "$bin" serve "$model" --port 0 --max-batch 64 --max-queue 256 --predict-card --design "$design" >"$tmp/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do grep -q 'http://' "$tmp/serve.log" && break; sleep 0.1; done
  port=$(grep -o 'http://[^ ]*' "$tmp/serve.log" | sed 's/.*://')
  "$bin" bench-serve "http://127.0.0.1:$port" --prompts "$tmp/prompts.txt" -c "$clients" -n "$requests" \
    --max-tokens "$max_tokens" --json >"$tmp/$clients.json"
  kill "$server"; wait "$server" 2>/dev/null || true; server=
  row=$(/usr/bin/python3 - "$tmp/$clients.json" "${base:-0}" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); base = float(sys.argv[2]) or j["output_tokens_per_second"]
ms = lambda d, k: "%.2f" % (1e3 * j[d][k])
pair = lambda d: "%s / %s" % (ms(d, "p50"), ms(d, "p99"))
c = j.get("card", {})
print("| %d | %d | %d | %s | %s | %s | %.1f | %.0f | %.2fx | %.0f | %.2f |" % (
    j["concurrency"], j["sent"], j["failed"], pair("time_to_first_token_seconds"),
    pair("time_per_output_token_seconds"), pair("request_seconds"), j["requests_per_second"],
    j["output_tokens_per_second"], j["output_tokens_per_second"] / base,
    c.get("queries_per_second", 0), c.get("queries_per_watt", 0)))
PY
)
  echo "$row"
  [ -z "$base" ] && base=$(/usr/bin/python3 -c "import json;print(json.load(open('$tmp/1.json'))['output_tokens_per_second'])")
  echo "bench_serve: $clients clients done" >&2
done
echo
echo "max_tokens $max_tokens, temperature 0; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); design $design"
