#!/usr/bin/env bash
# Prompt processing of the reference engine (issue 33): `fpgallm eval` on the same text one
# token at a time (--no-batch: matrix-vector products) and in blocks of positions
# (matrix-matrix products: OpenBLAS for fp32, fpgallm's int8 kernels for W8A8), for
# stories260K and a synthesized stories110m (`fpgallm synth`, with a 32000-piece tokenizer
# built as bench_mpi.sh builds it), both converted by fpgallm to f32 GGUF files, with
# OMP_NUM_THREADS=1 and 2, in two precisions:
#   f32:  fpgallm's fp32 engine and llama.cpp on the same f32 GGUF file;
#   int8: fpgallm's W8A8 quantized reference on `fpgallm quantize --scheme w8a8` of that file
#         (calibrated on the next 20 KB of the sample text, not the measured text), and
#         llama.cpp on `llama-quantize` Q8_0 of that file (int8 weights in blocks of 32 with
#         an fp16 scale; activations quantized to Q8_0 for the dot products).
# Prints tokens per wall second and per CPU second of each path (whole command, model
# loading included), their ratio, and both perplexities. Where llama.cpp's llama-perplexity
# and llama-quantize are found ($LLAMA_PERPLEXITY / $LLAMA_QUANTIZE, else
# BUILD_DIR/llamacpp/build/bin/, which BUILD_LLAMA=1 builds from
# ../shared/vendor/llama.cpp-*.tar.gz with -DGGML_NATIVE=OFF and AVX-512 only where this
# CPU has it), llama-perplexity runs on the same text with -c 128 -b 128 -t THREADS (and its
# KV cache in f32, as fpgallm keeps it), and
# fpgallm with `eval --window 128`, the same protocol (the whole text cut into windows of
# 128 tokens, the second half of each scored): the same tokens, the same work, and
# perplexities that agree where the two tokenize alike.
# Usage: bench/bench_prefill.sh [BUILD_DIR] [TEXT_BYTES]   (defaults: build, 5000 bytes of
# models/tinystories-valid-sample.txt, whole lines; markdown on stdout, progress on stderr)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
bytes=${2:-5000}
bin=$build/fpgallm
[ -x "$bin" ] || { echo "bench_prefill: no $bin (build first)" >&2; exit 2; }
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

head -c "$bytes" "$here/models/tinystories-valid-sample.txt" | sed '$d' >"$tmp/text.txt"
tail -c +$((bytes + 1)) "$here/models/tinystories-valid-sample.txt" | sed '1d' | head -c 20000 | sed '$d' >"$tmp/calib.txt"
[ -s "$tmp/text.txt" ] || { echo "bench_prefill: TEXT_BYTES $bytes holds no whole line" >&2; exit 2; }
echo "bench_prefill: synthesizing stories110m ..." >&2
"$bin" synth --preset stories110m -o "$tmp/s110m.bin" >/dev/null 2>&1
"$py" "$here/bench/tok32000.py" "$here/models/tok512.bin" "$tmp/tok32000.bin"
"$bin" convert "$here/models/stories260K.bin" -z "$here/models/tok512.bin" -o "$tmp/s260k.gguf" >/dev/null 2>&1
"$bin" convert "$tmp/s110m.bin" -z "$tmp/tok32000.bin" -o "$tmp/s110m.gguf" >/dev/null 2>&1
rm "$tmp/s110m.bin"
for m in s260k s110m; do
  echo "bench_prefill: fpgallm quantize $m w8a8 ..." >&2
  "$bin" quantize "$tmp/$m.gguf" --calib "$tmp/calib.txt" --scheme w8a8 -o "$tmp/$m-w8a8.gguf" >/dev/null 2>&1
done
llama=${LLAMA_PERPLEXITY:-$build/llamacpp/build/bin/llama-perplexity}
llama_quantize=${LLAMA_QUANTIZE:-$build/llamacpp/build/bin/llama-quantize}
vendor=$(ls "$here"/../shared/vendor/llama.cpp-*.tar.gz 2>/dev/null | head -1 || true)
if [ ! -x "$llama" ] && [ "${BUILD_LLAMA:-0}" = 1 ] && [ -n "$vendor" ]; then
  echo "bench_prefill: building llama-perplexity from $vendor into $build/llamacpp (minutes) ..." >&2
  mkdir -p "$build/llamacpp"
  tar -xzf "$vendor" -C "$build/llamacpp"
  mkdir -p "$build/llamacpp/llama.cpp/models"
  avx512=OFF
  grep -qw avx512f /proc/cpuinfo && avx512=ON  # an AVX-512 build dies of SIGILL on a CPU without it
  cmake -S "$build/llamacpp/llama.cpp" -B "$build/llamacpp/build" -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=$avx512 >/dev/null
  cmake --build "$build/llamacpp/build" -j1 --target llama-perplexity llama-quantize >/dev/null
fi
[ -x "$llama" ] || { echo "bench_prefill: no llama-perplexity at $llama: fpgallm only" >&2; llama=; }
if [ -n "$llama" ] && [ -x "$llama_quantize" ]; then
  # stories260K's hidden width (172) is not a multiple of Q8_0's 32-weight block: llama-quantize
  # refuses it, and its int8 row has no llama.cpp column.
  for m in s260k s110m; do
    "$llama_quantize" "$tmp/$m.gguf" "$tmp/$m-q8_0.gguf" Q8_0 >"$tmp/llama-quantize-$m.log" 2>&1 ||
      { echo "bench_prefill: llama-quantize refused $m: $(grep -m1 -i 'not divisible\|error' "$tmp/llama-quantize-$m.log")" >&2; rm -f "$tmp/$m-q8_0.gguf"; }
  done
else
  echo "bench_prefill: no llama-quantize at $llama_quantize: no llama.cpp Q8_0 rows" >&2
fi

"$py" - "$bin" "$tmp" "$llama" <<'PY'
import json, os, re, resource, subprocess, sys, time
bin, tmp, llama = sys.argv[1:4]
text = os.path.join(tmp, "text.txt")
models = [("stories260K", "s260k"), ("stories110m (synthesized)", "s110m")]
precisions = [("f32", "", ""), ("int8", "-w8a8", "-q8_0")]  # fpgallm W8A8 file, llama.cpp Q8_0 file

def timed(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return p, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

def run(model, threads, batched, window=None):
    p, wall, cpu = timed([bin, "eval", model, "--text", text, "--json"] + ([] if batched else ["--no-batch"]) +
                         (["--window", str(window)] if window else []), threads)
    j = json.loads(p.stdout)
    # tokens run: every input position (whole stories), or every window's (the windows' own count)
    return (j["sequences"] * window if window else j["tokens"]), j["perplexity"], wall, cpu

def run_llama(model, threads):
    # Its KV cache in f32 (its default is f16), as fpgallm's reference keeps it.
    p, wall, cpu = timed([llama, "-m", model, "-f", text, "-c", "128", "-b", "128", "-t", str(threads),
                          "-ctk", "f32", "-ctv", "f32"], threads)
    log = p.stdout + p.stderr
    chunks = int(re.search(r"calculating perplexity over (\d+) chunks", log).group(1))
    ppl = re.search(r"Final estimate: PPL = ([0-9.]+)", log)
    return chunks * 128, float(ppl.group(1)) if ppl else float("nan"), wall, cpu

print("# generated by bench/bench_prefill.sh on %s, %d cores, load average %s at the start" %
      (time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), os.cpu_count(), open("/proc/loadavg").read().split()[:3]))
print()
print("| model | weights (fpgallm / llama.cpp) | threads | tokens | per-token tok/s (wall / CPU) | batched tok/s (wall / CPU) | batched / per-token (wall / CPU) | perplexity per-token / batched | windows of 128: tokens | fpgallm --window 128 tok/s (wall / CPU) | llama.cpp -c 128 tok/s (wall / CPU) | fpgallm / llama.cpp (wall / CPU) | perplexity fpgallm / llama.cpp |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name, stem in models:
    for precision, ours, theirs in precisions:
        model = os.path.join(tmp, stem + ours + ".gguf")
        lmodel = os.path.join(tmp, stem + theirs + ".gguf")
        label = "f32 / f32 (same file)" if precision == "f32" else "W8A8 / Q8_0"
        for threads in (1, 2):
            print("bench_prefill: %s %s, %d thread(s) ..." % (name, precision, threads), file=sys.stderr)
            n, p1, w1, c1 = run(model, threads, False)
            n2, p2, w2, c2 = run(model, threads, True)
            assert n == n2
            row = "| %s | %s | %d | %d | %.1f / %.1f | %.1f / %.1f | %.2f / %.2f | %.6f / %.6f |" % (
                name, label, threads, n, n / w1, n / c1, n / w2, n / c2, w1 / w2, c1 / c2, p1, p2)
            nw, pw, ww, cw = run(model, threads, True, 128)
            row += " %d | %.1f / %.1f |" % (nw, nw / ww, nw / cw)
            if llama and os.path.exists(lmodel):
                nl, pl, wl, cl = run_llama(lmodel, threads)
                assert nl == nw, (nl, nw)
                row += " %.1f / %.1f | %.2f / %.2f | %.4f / %.4f |" % (nl / wl, nl / cl, (nw / ww) / (nl / wl), (nw / cw) / (nl / cl), pw, pl)
            else:
                row += " not run | | %.4f / |" % pw
            print(row)
            sys.stdout.flush()
PY
