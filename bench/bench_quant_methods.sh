#!/usr/bin/env bash
# Issue 30, must-show 2 and 7: llama.cpp's own 4-bit files of stories260K beside fpgallm's
# int4 methods, and the time each `fpgallm quantize --method` takes.
#
# (a) llama-quantize: $LLAMA_QUANTIZE, else BUILD_DIR/llamacpp-tools/<archive>/build-quantize/
#     bin/llama-quantize, built here when missing from ../shared/vendor/llama.cpp-*.tar.gz (the
#     source tree tests/python/test_qwen_llamacpp.py extracts into BUILD_DIR/llamacpp-tools/
#     <archive>/src, reused; Release, -DGGML_NATIVE=OFF, -DBUILD_SHARED_LIBS=OFF, LLAMA_CURL,
#     tests and server off, ccache when on PATH; target llama-quantize only, -j$JOBS, default 1).
#     Beside it, ggml_typed_copy (source below, compiled against that build's libggml-base.a):
#     writes a GGUF whose tensors are converted by ggml_quantize_chunk, the function
#     llama-quantize calls, for the types llama-quantize refuses on this model (see (b)).
# (b) `fpgallm convert models/stories260K.bin -z models/tok512.bin` to an f32 GGUF;
#     `llama-quantize F32 OUT TYPE 1` for Q4_0, Q4_K_M and IQ4_NL, its log kept (each fallback
#     it prints is listed). stories260K's ffn_down has 172 columns, a multiple of neither 32 nor
#     256: llama-quantize's fallback table covers the K-quants (ffn_down ends at F16) but not
#     Q4_0 or IQ4_NL, for which it stops with "Unsupported tensor size encountered". For those
#     two the script then writes the file llama-quantize would have written had its fallback
#     reached F16 as for the K-quants: ggml_typed_copy with TYPE for every matrix, F16 for
#     ffn_down, Q8_0 for the tied token embedding (llama-quantize's own choice, Q6_K falling back
#     to Q8_0, which its log shows before it stops; the script checks the tensors it converted
#     before stopping against the substitute); and, to see what the classifier costs, the same
#     with the embedding in TYPE too. Each file is scored by `fpgallm eval FILE --text HELD`,
#     HELD the held-out half of models/tinystories-valid-sample.txt written to a file as
#     `fpgallm quantize` splits it (src/calib/calib.cpp split_text: non-blank lines are stories,
#     the first n/2 calibrate, the rest are held out less any story equal to a calibration
#     story), and the f32 GGUF on HELD gives the fp32 perplexity; `eval` on a llama.cpp file has
#     no calibration file to recognize, so the held-out half has to be its own file. The script
#     checks that HELD's token count and fp32 perplexity are those `fpgallm quantize` reports.
#     Bytes: the file; BPW: llama.cpp's formula (llama_model_loader: all tensor bytes * 8 / all
#     elements, norms included; llama-quantize of this version prints sizes in MB, not BPW).
# (c) `fpgallm quantize --scheme w4a8 --group 32 --method M --json` timed (wall; CPU = user +
#     sys of the child, resource.getrusage) for rtn, awq, gptq, gptq --search-scales, awq+gptq:
#     on stories260K with the whole sample (9 stories calibrate), and on a synthesized
#     stories110m (`fpgallm synth --preset stories110m`, random weights, with the 32000-piece
#     tokenizer of bench/tok32000.py) with a small calibration text: the first stories of the
#     sample with distinct beginnings, each cut at its last sentence end within 300 bytes, 4 of
#     them (2 calibrate, 2 held out). The command includes loading, the fp32 and quantized
#     held-out evaluations and writing the file; "quantize s" is the command's own `seconds`
#     (calibration passes and the method). OMP_NUM_THREADS=$THREADS (default 1). A run longer
#     than $QM_TIMEOUT seconds (default 600) is stopped and reported as not finished.
#     S110M_METHODS (default "rtn awq gptq gptq+ss awq+gptq") picks the stories110m runs;
#     S110M_METHODS=none skips them.
# Usage: bench/bench_quant_methods.sh [BUILD_DIR]   (markdown on stdout, progress on stderr)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
bin=$build/fpgallm
[ -x "$bin" ] || { echo "bench_quant_methods: no $bin (build first)" >&2; exit 2; }
py=/usr/bin/python3
jobs=${JOBS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

archive=$(ls "$here"/../shared/vendor/llama.cpp-*.tar.gz 2>/dev/null | head -1 || true)
[ -n "$archive" ] || { echo "bench_quant_methods: no ../shared/vendor/llama.cpp-*.tar.gz" >&2; exit 2; }
cache=$build/llamacpp-tools/$(basename "$archive" .tar.gz)
qbuild=$cache/build-quantize
quantize=${LLAMA_QUANTIZE:-$qbuild/bin/llama-quantize}
copy=$qbuild/bin/ggml_typed_copy
if [ ! -x "$quantize" ] || [ ! -f "$qbuild/ggml/src/libggml-base.a" ]; then
  mkdir -p "$cache"
  (
    flock 9  # the lock tests/python/test_qwen_llamacpp.py takes around the same source tree
    if [ ! -f "$cache/src/llama.cpp/CMakeLists.txt" ]; then
      echo "bench_quant_methods: extracting $archive ..." >&2
      rm -rf "$cache/src.partial" && mkdir -p "$cache/src.partial"
      tar -xzf "$archive" -C "$cache/src.partial"
      rm -rf "$cache/src" && mv "$cache/src.partial" "$cache/src"
    fi
    mkdir -p "$cache/src/llama.cpp/models"  # the archive leaves models/ out
  ) 9>"$cache/.lock"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  if [ ! -f "$qbuild/CMakeCache.txt" ]; then
    cmake -S "$cache/src/llama.cpp" -B "$qbuild" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=ON \
      -DLLAMA_BUILD_COMMON=ON "${launcher[@]}" >/dev/null
  fi
  targets=(--target ggml-base)
  [ -n "${LLAMA_QUANTIZE:-}" ] || targets=(--target llama-quantize)
  echo "bench_quant_methods: building ${targets[*]} in $qbuild with -j$jobs (minutes) ..." >&2
  cmake --build "$qbuild" "${targets[@]}" -j"$jobs" >/dev/null
fi
[ -x "$quantize" ] || { echo "bench_quant_methods: no llama-quantize at $quantize" >&2; exit 2; }

# ggml_typed_copy, rebuilt when this script is newer than it.
if [ ! -x "$copy" ] || [ "$0" -nt "$copy" ]; then
  mkdir -p "$qbuild/bin"
  cat >"$tmp/ggml_typed_copy.cpp" <<'CPP'
// ggml_typed_copy IN OUT TYPE [SUBSTRING=TYPE ...]: IN's metadata and tensors; every F32 2-D
// ".weight" tensor that is not a norm converted by ggml_quantize_chunk (what llama-quantize
// calls) to the type of the first SUBSTRING its name contains, else TYPE.
// ggml_typed_copy --stat FILE: its tensors' types, bytes, elements and bits per weight.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <strings.h>
#include <utility>
#include <vector>
#include "ggml.h"
#include "gguf.h"

static ggml_type parse(const char* s) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* n = ggml_type_name(static_cast<ggml_type>(t));
    if (n && std::strcmp(n, "NONE") != 0 && strcasecmp(n, s) == 0) return static_cast<ggml_type>(t);
  }
  std::fprintf(stderr, "unknown type %s\n", s);
  std::exit(2);
}

int main(int argc, char** argv) {
  const bool stat = argc == 3 && std::strcmp(argv[1], "--stat") == 0;
  if (!stat && argc < 4) {
    std::fprintf(stderr, "usage: %s IN OUT TYPE [SUBSTRING=TYPE ...] | --stat FILE\n", argv[0]);
    return 2;
  }
  ggml_context* meta = nullptr;
  gguf_init_params ip{stat, &meta};
  gguf_context* in = gguf_init_from_file(argv[stat ? 2 : 1], ip);
  if (!in) { std::fprintf(stderr, "cannot read %s\n", argv[stat ? 2 : 1]); return 1; }
  std::map<std::string, int> types;
  std::size_t bytes = 0, elements = 0;
  if (stat) {
    for (int64_t i = 0; i < gguf_get_n_tensors(in); ++i) {
      const ggml_tensor* t = ggml_get_tensor(meta, gguf_get_tensor_name(in, i));
      ++types[ggml_type_name(t->type)];
      bytes += ggml_nbytes(t);
      elements += ggml_nelements(t);
    }
    for (const auto& [n, c] : types) std::printf("type %s %d\n", n.c_str(), c);
    std::printf("total %zu %zu %.4f\n", bytes, elements, 8.0 * bytes / elements);
    return 0;
  }
  const ggml_type def = parse(argv[3]);
  std::vector<std::pair<std::string, ggml_type>> rules;
  for (int i = 4; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (!eq) { std::fprintf(stderr, "bad rule %s\n", argv[i]); return 2; }
    rules.emplace_back(std::string(argv[i], static_cast<std::size_t>(eq - argv[i])), parse(eq + 1));
  }
  gguf_context* out = gguf_init_empty();
  gguf_set_kv(out, in);
  std::vector<std::vector<char>> keep;
  for (int64_t i = 0; i < gguf_get_n_tensors(in); ++i) {
    const char* name = gguf_get_tensor_name(in, i);
    ggml_tensor* t = ggml_get_tensor(meta, name);
    const std::string n = name;
    ggml_type to = t->type;
    if (t->type == GGML_TYPE_F32 && ggml_n_dims(t) == 2 && n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0 &&
        n.find("_norm") == std::string::npos) {
      to = def;
      for (const auto& r : rules)
        if (n.find(r.first) != std::string::npos) { to = r.second; break; }
    }
    gguf_add_tensor(out, t);
    if (to != t->type) {
      if (t->ne[0] % ggml_blck_size(to) != 0) {
        std::fprintf(stderr, "%s: %lld columns, not a multiple of %s's block of %lld\n", name, (long long)t->ne[0],
                     ggml_type_name(to), (long long)ggml_blck_size(to));
        return 1;
      }
      const int64_t rows = ggml_nrows(t);
      keep.emplace_back(ggml_row_size(to, t->ne[0]) * rows);
      ggml_quantize_chunk(to, static_cast<const float*>(t->data), keep.back().data(), 0, rows, t->ne[0], nullptr);
      gguf_set_tensor_type(out, name, to);
      gguf_set_tensor_data(out, name, keep.back().data());
    }
    std::printf("tensor %s %s\n", name, ggml_type_name(to));
  }
  if (!gguf_write_to_file(out, argv[2], false)) { std::fprintf(stderr, "cannot write %s\n", argv[2]); return 1; }
  return 0;
}
CPP
  ${CXX:-g++} -O2 -std=c++17 "$tmp/ggml_typed_copy.cpp" -I "$cache/src/llama.cpp/ggml/include" \
    "$qbuild/ggml/src/libggml-base.a" -lm -lpthread -o "$copy"
fi

echo "bench_quant_methods: converting stories260K, synthesizing stories110m ..." >&2
"$bin" convert "$here/models/stories260K.bin" -z "$here/models/tok512.bin" -o "$tmp/s260k-f32.gguf" >/dev/null
s110m_methods=${S110M_METHODS:-rtn awq gptq gptq+ss awq+gptq}
if [ "$s110m_methods" != none ]; then
  "$bin" synth --preset stories110m -o "$tmp/s110m.bin" >/dev/null 2>&1
  "$py" "$here/bench/tok32000.py" "$here/models/tok512.bin" "$tmp/tok32000.bin"  # 32000 pieces, as bench_prefill.sh
fi

OMP_NUM_THREADS=${THREADS:-1} "$py" - "$here" "$bin" "$tmp" "$quantize" "$copy" "$archive" "${QM_TIMEOUT:-600}" \
  "$s110m_methods" <<'PY'
import json, os, re, resource, subprocess, sys, time
here, bin, tmp, quantize, copy, archive, timeout, s110m_methods = sys.argv[1:9]
timeout = float(timeout)
sample = os.path.join(here, "models", "tinystories-valid-sample.txt")
f32 = os.path.join(tmp, "s260k-f32.gguf")
start_load = open("/proc/loadavg").read().split()[:3]

def log(msg):
    print("bench_quant_methods: " + msg, file=sys.stderr, flush=True)

def stories(path):  # engine::split_stories
    out = []
    for line in open(path, encoding="utf-8", newline="").read().split("\n"):
        if line.endswith("\r"): line = line[:-1]
        if line.strip(" \t"): out.append(line)
    return out

# The held-out half, as calib::split_text builds it.
st = stories(sample)
half = len(st) // 2
seen = set(st[:half])
held = [s for s in st[half:] if s not in seen]
held_path = os.path.join(tmp, "heldout.txt")
open(held_path, "w", encoding="utf-8", newline="").write("\n".join(held) + "\n")

def timed(cmd, limit=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t0, None
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return p, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

def evaluate(path):
    p = subprocess.run([bin, "eval", path, "--text", held_path, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return json.loads(p.stdout), None

def stat(path):
    out = subprocess.run([copy, "--stat", path], check=True, capture_output=True, text=True).stdout.split("\n")
    types = {l.split()[1]: int(l.split()[2]) for l in out if l.startswith("type ")}
    total = [l.split()[1:] for l in out if l.startswith("total ")][0]
    return types, float(total[2])

def types_text(types):
    return ", ".join("%s x%d" % (t.upper(), n) for t, n in sorted(types.items(), key=lambda kv: -kv[1]))

# ---- (b) llama.cpp's files
fp32, err = evaluate(f32)
assert fp32, err
llama_rows, notes = [], []
for qtype in ("Q4_0", "Q4_K_M", "IQ4_NL"):
    out = os.path.join(tmp, "s260k-%s.gguf" % qtype)
    log("llama-quantize %s ..." % qtype)
    p = subprocess.run([quantize, f32, out, qtype, "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = p.stdout
    fallbacks = re.findall(r"tensor cols (\d+) x (\d+) are not divisible by (\d+), required for (\w+)"
                           r"(?: - using fallback quantization (\w+))?", text)
    segments = [(seg.split()[0], seg) for seg in re.split(r"\n\[\s*\d+/\s*\d+\]", text)[1:] if seg.split()]
    converted = {n: m.group(1) for n, seg in segments for m in [re.search(r"converting to (\w+)", seg)] if m}
    last = segments[-1][0] if segments else "?"
    summary = {}
    for cols, rows, blk, want, got in fallbacks:
        want = want.split("llama_model_quantize")[0]  # the log has no newline before the failure
        key = "%s -> %s" % (want, got or "none (stops)")
        summary.setdefault(key, []).append("%sx%s" % (cols, rows))
    fb_text = "; ".join("%s: %d tensor(s) (%s)" % (k, len(v), ", ".join(sorted(set(v)))) for k, v in summary.items())
    files = []
    if p.returncode == 0:
        files.append((qtype, "llama-quantize", out, "`llama-quantize s260k-f32.gguf s260k-%s.gguf %s 1`" % (qtype, qtype)))
        notes.append("%s: llama-quantize exit 0; fallbacks %s; %s; %s" % (
            qtype, fb_text or "none", (re.findall(r"WARNING: .*fallback quantization", text) or [""])[0],
            ", ".join(re.findall(r"(?:model|quant) size\s*=\s*[0-9.]+ MB", text))))
    else:
        why = [l for l in text.splitlines() if "Unsupported" in l]
        notes.append("%s: llama-quantize exit %d (%s) at %s (%s columns); fallbacks before it: %s" % (
            qtype, p.returncode, " / ".join(w.strip() for w in why), last, fallbacks[-1][0] if fallbacks else "?",
            fb_text or "none"))
        t = qtype.lower()
        for label, rules in (("F16 ffn_down, Q8_0 embedding", ["token_embd.weight=q8_0", "ffn_down=f16"]),
                             ("F16 ffn_down, %s embedding" % qtype, ["ffn_down=f16"])):
            sub = os.path.join(tmp, "s260k-%s-%s.gguf" % (qtype, "q8emb" if "Q8_0" in label else "4emb"))
            r = subprocess.run([copy, f32, sub, t] + rules, check=True, capture_output=True, text=True).stdout
            chosen = dict(l.split()[1:3] for l in r.splitlines() if l.startswith("tensor "))
            if "Q8_0" in label:  # the tensors llama-quantize converted before it stopped
                for name, typ in converted.items():
                    if chosen.get(name, "").lower() != typ.lower():
                        notes.append("%s substitute: %s is %s, llama-quantize chose %s" % (qtype, name, chosen.get(name), typ))
            files.append(("%s (%s)" % (qtype, label), "ggml_quantize_chunk", sub,
                          "`ggml_typed_copy s260k-f32.gguf OUT %s %s`" % (t, " ".join(rules))))
    for name, how, path, cmd in files:
        types, bpw = stat(path)
        ev, err = evaluate(path)
        llama_rows.append((name, how, ev, err, os.path.getsize(path), bpw, types_text(types), cmd))

print("# generated by bench/bench_quant_methods.sh on %s, %d cores, load average %s at the start" %
      (time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), os.cpu_count(), start_load))
print("fpgallm: %s (built %s)" % (bin, time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(os.path.getmtime(bin)))))
print()
print("llama.cpp from %s; held-out half of %s: %d stories, %d tokens (`fpgallm eval FILE --text HELD`)" %
      (os.path.basename(archive), os.path.relpath(sample, here), len(held), fp32["tokens"]))
print()
print("| file | made by | perplexity | vs fp32 | file bytes | BPW | tensor types | command |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- | --- |")
types, bpw = stat(f32)
print("| fp32 | `fpgallm convert` | %.4f ± %.4f | — | %d | %.2f | %s | `fpgallm convert models/stories260K.bin -z models/tok512.bin -o s260k-f32.gguf` |" % (
    fp32["perplexity"], fp32["perplexity_err"], os.path.getsize(f32), bpw, types_text(types)))
for name, how, ev, err, size, bpw, types, cmd in llama_rows:
    if ev:
        print("| %s | %s | %.4f ± %.4f | %+.2f%% | %d | %.2f | %s | %s |" % (
            name, how, ev["perplexity"], ev["perplexity_err"], 100 * (ev["perplexity"] / fp32["perplexity"] - 1),
            size, bpw, types, cmd))
    else:
        print("| %s | %s | fpgallm eval failed: %s | | %d | %.2f | %s | %s |" % (name, how, err, size, bpw, types, cmd))
print()
for n in notes: print("- " + n)
print()
sys.stdout.flush()

# ---- (c) quantize time per method
methods = {"rtn": ["--method", "rtn"], "awq": ["--method", "awq"], "gptq": ["--method", "gptq"],
           "gptq+ss": ["--method", "gptq", "--search-scales"], "awq+gptq": ["--method", "awq+gptq"]}
label = {"gptq+ss": "gptq --search-scales"}

def small_text(path, n=4, limit=300):
    out = []
    for s in stories(sample):
        cut = s[:limit]
        k = cut.rfind(". ")
        cut = cut[:k + 1] if k > 0 else cut
        if cut not in out: out.append(cut)
        if len(out) == n: break
    open(path, "w", encoding="utf-8").write("\n".join(out) + "\n")

calib110 = os.path.join(tmp, "calib110.txt")
small_text(calib110)
runs = [("stories260K", os.path.join(here, "models", "stories260K.bin"), [], sample, m) for m in methods]
if s110m_methods != "none":
    runs += [("stories110m (synthesized)", os.path.join(tmp, "s110m.bin"), ["-z", os.path.join(tmp, "tok32000.bin")],
              calib110, m) for m in s110m_methods.split()]
print("| model | method | calibration tokens (stories) | held-out tokens | wall s | CPU s | quantize s | held-out perplexity (fp32) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
checked = False
for model, path, extra, calib, m in runs:
    log("quantize %s %s ..." % (model, m))
    cmd = [bin, "quantize", path] + extra + ["--calib", calib, "--scheme", "w4a8", "--group", "32"] + methods[m] + [
        "-o", os.path.join(tmp, "q.gguf"), "--json"]
    p, wall, cpu = timed(cmd, timeout)
    name = label.get(m, m)
    if p is None:
        print("| %s | %s | | | > %.0f | | | did not finish in %.0f s (stopped) |" % (model, name, wall, timeout))
    elif p.returncode != 0:
        why = "signal %d" % -p.returncode if p.returncode < 0 else "exit %d" % p.returncode
        last = (p.stderr.strip().splitlines() or ["no message on stderr"])[-1]
        print("| %s | %s | | | %.1f | %.1f | | failed: %s, %s |" % (model, name, wall, cpu, why, last))
    else:
        j = json.loads(p.stdout)
        print("| %s | %s | %d (%d) | %d | %.1f | %.1f | %.1f | %.4f (%.4f) |" % (
            model, name, j["calibration"]["tokens"], j["calibration"]["stories"], j["held_out"]["tokens"], wall, cpu,
            j["seconds"], j["perplexity"], j["fp32_perplexity"]))
        if model == "stories260K" and not checked:  # HELD is the half quantize holds out
            assert j["held_out"]["tokens"] == fp32["tokens"], (j["held_out"], fp32["tokens"])
            assert abs(j["fp32_perplexity"] - fp32["perplexity"]) < 1e-9 * fp32["perplexity"], (j["fp32_perplexity"], fp32)
            checked = True
    sys.stdout.flush()
print()
print("load average at the end: %s; OMP_NUM_THREADS=%s" % (open("/proc/loadavg").read().split()[:3],
                                                          os.environ.get("OMP_NUM_THREADS")))
PY
