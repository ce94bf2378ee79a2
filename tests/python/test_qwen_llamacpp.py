"""The GGUF files fpgallm writes for a tiny Qwen2 (`convert --to gguf --type f32|f16|q8_0` and
`quantize --scheme w8a8`), run in llama.cpp itself: the vendored llama.cpp c392e50
(../shared/vendor), built once per build folder into <build>/llamacpp-tools (libllama and
ggml only, -DGGML_NATIVE=OFF, Release, ccache when on PATH) with llamacpp/oracle.cpp, a small
program against libllama's C API: llama_tokenize with parse_special on or off (the switch of
llama-tokenize's --no-parse-special), llama_chat_apply_template with the file's template,
and greedy decoding that prints each step's logits. On the same file, llama.cpp and fpgallm
must give
  - the same prompt ids (fpgallm: `run --json`, and its tokenizer on a longer, mixed text);
  - every added token (<|im_start|>, <|im_end|>, <|endoftext|>) in a prompt as its id from
    tokenizer.json, and with special parsing off (llama.cpp's parse_special=false, fpgallm's
    `run --special-as-text`) the same byte-level ids, which are those of an independent
    GPT-2 encoder (hf_formats.Gpt2Encoder) on the text;
  - the same logits on the same tokens, within what the files' arithmetic allows, and the same
    greedy tokens (compare_greedy: f32 all of them; f16, q8_0 and w8a8 up to the first step
    where rounding alone parts the paths, and at least a stated number);
  - and `run --chat` works on each file, with the ids of llama.cpp's ChatML prompt.
Qwen3: this llama.cpp predates Qwen3's C++ support (its loader says "unknown model
architecture: 'qwen3'"), so the Qwen3 files are checked with gguf-py's reader from the same
archive (as test_qwen_gguf_write.py does in depth): architecture, the vocabulary the Qwen2
file carries (checked in llama.cpp above), and each tensor's ggml type; and llama.cpp is
checked to refuse them with that message rather than load them."""
import fcntl
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest

from conftest import REPO, SAMPLE_TEXT, fpgallm_binary
from fpgallm import _core
from hf_formats import QWEN2_PATTERN, SPECIALS, Gpt2Encoder
from test_qwen_gguf_write import field, gguf_py, qwen_folder  # noqa: F401 (gguf_py is a fixture)
from test_qwen_models import trained_vocab  # noqa: F401 (a fixture)

VENDOR = REPO.parent / "shared" / "vendor"
ORACLE_SOURCE = pathlib.Path(__file__).parent / "llamacpp" / "oracle.cpp"
POSITIONS = 64  # prompt and generated tokens together, within the tiny models' 128-position context
PROMPT = "Once upon a time, there was a little girl named Lily. She"
CHAT = "Tell me a story about a dog."
STORAGE = ("f32", "f16", "q8_0", "w8a8")
# Largest |fpgallm - llama.cpp| over a position's logits, over the largest |logit| of
# llama.cpp's, on the same tokens. f32: fp32 in both (the oracle makes llama.cpp's KV cache
# F32), only the order of the sums differs (measured: under 5e-7). f16 and q8_0: ggml converts
# each activation row to the weights' type (F16, or Q8_0 blocks of 32 int8 codes) before its
# dot products, fpgallm multiplies the stored weights in fp32 (measured: 6e-4 and 2.1e-2; for
# q8_0 that is less than llama.cpp's own distance from the f32 file's logits, 3.1e-2). w8a8:
# fpgallm runs the file's static per-tensor int8 activation scales, llama.cpp its dynamic
# Q8_0 blocks (measured: 2.8e-2). Measured over seven prompts of up to 100 positions.
LOGIT_TOLERANCE = {"f32": 5e-6, "f16": 2e-3, "q8_0": 4e-2, "w8a8": 5e-2}
# Fewest leading generated tokens on which the greedy paths must agree (compare_greedy); f32
# files must agree on all of them.
MIN_COMPARED = {"f16": 8, "q8_0": 8, "w8a8": 8}


def _timed_run(cmd):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{(r.stdout + r.stderr)[-4000:]}"
    return time.monotonic() - t0


@pytest.fixture(scope="module")
def oracle():
    """llamacpp_oracle, built once into <build>/llamacpp-tools/<archive>/ and reused; make
    brings it up to date (a no-op when nothing changed)."""
    archives = sorted(VENDOR.glob("llama.cpp-*.tar.gz"))
    if not archives:
        pytest.skip(f"no llama.cpp source archive in {VENDOR}: llama.cpp is not run")
    if not shutil.which("cmake"):
        pytest.skip("no cmake on PATH to build llama.cpp")
    archive = archives[0]
    cache = pathlib.Path(fpgallm_binary()).resolve().parent / "llamacpp-tools" / archive.name.removesuffix(".tar.gz")
    cache.mkdir(parents=True, exist_ok=True)
    src, build, project = cache / "src", cache / "build", cache / "project"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time
        if not (src / "llama.cpp" / "CMakeLists.txt").exists():
            partial = cache / "src.partial"
            shutil.rmtree(partial, ignore_errors=True)
            with tarfile.open(archive) as tar:
                tar.extractall(partial)
            shutil.rmtree(src, ignore_errors=True)
            partial.rename(src)
        (src / "llama.cpp" / "models").mkdir(exist_ok=True)  # the archive leaves models/ out
        project.mkdir(exist_ok=True)
        lists = (f"cmake_minimum_required(VERSION 3.14)\nproject(fpgallm_llamacpp_oracle C CXX)\n"
                 f"add_subdirectory(\"{src / 'llama.cpp'}\" llama.cpp EXCLUDE_FROM_ALL)\n"
                 f"add_executable(llamacpp_oracle \"{ORACLE_SOURCE}\")\n"
                 f"target_link_libraries(llamacpp_oracle PRIVATE llama)\n"
                 f"target_compile_features(llamacpp_oracle PRIVATE cxx_std_17)\n")
        if not (project / "CMakeLists.txt").exists() or (project / "CMakeLists.txt").read_text() != lists:
            (project / "CMakeLists.txt").write_text(lists)
        if not (build / "CMakeCache.txt").exists():
            launcher = []
            if shutil.which("ccache"):
                launcher = ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
            _timed_run(["cmake", "-S", str(project), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                        "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DGGML_NATIVE=OFF", *launcher])
        seconds = _timed_run(["cmake", "--build", str(build), "--target", "llamacpp_oracle", "-j2"])
        print(f"\nllamacpp_oracle: up to date in {seconds:.1f} s ({build})", file=sys.stderr)
    return build / "llamacpp_oracle"


def llama(oracle, model, prompt, positions=0, *options, tmp_path):
    """The oracle's {prompt, generated, prompt_logits, logits} for model and the prompt text
    (bytes or str); positions 0: the prompt's ids only."""
    pf = tmp_path / "llama-prompt.txt"
    pf.write_bytes(prompt if isinstance(prompt, bytes) else prompt.encode("utf-8"))
    r = subprocess.run([str(oracle), str(model), str(pf), str(positions), *options], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")[-3000:]
    return json.loads(r.stdout)


def fpgallm_run(model, prompt, positions, *options, tmp_path):
    """`fpgallm run --json` greedy: (prompt ids, generated ids)."""
    pf = tmp_path / "fpgallm-prompt.txt"
    pf.write_bytes(prompt if isinstance(prompt, bytes) else prompt.encode("utf-8"))
    r = subprocess.run([fpgallm_binary(), "run", str(model), "--prompt-file", str(pf), "-t", "0", "-n", str(positions),
                        "--json", *options], capture_output=True, check=True)
    j = json.loads(r.stdout)
    return j["tokens"][:j["prompt_tokens"]], j["tokens"][j["prompt_tokens"]:]


def fpgallm_logits(storage, model, tokens):
    """The logits `fpgallm run MODEL` computes at each position of tokens (the w8a8 file runs
    as its simulated quantization, as `run` runs a file from `fpgallm quantize`)."""
    if storage == "w8a8":
        q = _core.load_quant(str(model))
        t = _core.Transformer(q.model, q)
    else:
        t = _core.Transformer(_core.load(str(model)))
    return t.logits(tokens).astype(np.float64)


def compare_greedy(storage, model, llama_out, fp_prompt, fp_generated):
    """llama.cpp's greedy tokens against `fpgallm run`'s on the same file, in three parts.
    1. Logits: fpgallm's (as `run` computes them) on llama.cpp's token sequence, at every
       prompt position and generated step, against llama.cpp's at the same position: the
       largest difference over the vocabulary is within LOGIT_TOLERANCE[storage] of the largest
       |logit|. This is what catches a wrong tensor, layout or operation.
    2. Greedy tokens: compared from the first generated token up to the first step where
       fpgallm's argmax on llama.cpp's context differs from llama.cpp's (after it the two greedy
       paths part for rounding alone: such a step is necessarily a near tie, llama.cpp's top-two
       margin within twice the difference bounded in 1), and `fpgallm run`'s own tokens must
       be llama.cpp's on all the steps compared, stopping where llama.cpp stops.
    3. At least MIN_COMPARED[storage] generated tokens are compared (f32: all of them)."""
    P, gen = llama_out["prompt"], llama_out["generated"]
    assert fp_prompt == P
    assert gen and len(gen) == len(llama_out["logits"]) and len(llama_out["prompt_logits"]) == len(P) - 1
    lf = fpgallm_logits(storage, model, P + gen[:-1])
    ll = np.asarray(llama_out["prompt_logits"] + llama_out["logits"], dtype=np.float64)
    assert lf.shape == ll.shape
    rel = np.abs(lf - ll).max(axis=1) / np.abs(ll).max(axis=1)
    worst = int(np.argmax(rel))
    assert rel[worst] <= LOGIT_TOLERANCE[storage], \
        f"{model.name} position {worst}: max |fpgallm - llama.cpp| / max |llama.cpp| = {rel[worst]:.3g}"
    steps = lf[len(P) - 1:]
    agree = [int(np.argmax(f)) == g for f, g in zip(steps, gen)]
    compared = agree.index(False) if False in agree else len(gen)
    assert fp_generated[:compared] == gen[:compared], f"{model.name}: fpgallm {fp_generated}, llama.cpp {gen}"
    if compared == len(gen):
        assert fp_generated == gen, f"{model.name}: fpgallm {fp_generated}, llama.cpp {gen}"
    need = len(gen) if storage == "f32" else min(MIN_COMPARED[storage], len(gen))
    assert compared >= need, f"{model.name}: greedy paths part at step {compared} of {len(gen)}"
    return compared, float(rel.max())


def write_files(name, folder, tmp_path):
    """fpgallm's GGUF files of the folder: convert f32, f16, q8_0, and quantize w8a8."""
    files = {}
    for storage in ("f32", "f16", "q8_0"):
        files[storage] = tmp_path / f"{name}-{storage}.gguf"
        subprocess.run([fpgallm_binary(), "convert", str(folder), "--to", "gguf", "--type", storage, "-o",
                        str(files[storage])], capture_output=True, check=True)
    files["w8a8"] = tmp_path / f"{name}-w8a8.gguf"
    subprocess.run([fpgallm_binary(), "quantize", str(folder), "--calib", SAMPLE_TEXT, "--scheme", "w8a8", "-o",
                    str(files["w8a8"])], capture_output=True, check=True)
    return files


@pytest.fixture(scope="module")
def qwen2_files(tmp_path_factory, trained_vocab):
    tmp = tmp_path_factory.mktemp("qwen2")
    vocab, merges = trained_vocab
    _, _, folder = qwen_folder("qwen2", tmp, vocab, merges)
    return folder, write_files("qwen2", folder, tmp)


def reference_encoder(trained_vocab):
    """GPT-2's encoder.py with the trained vocabulary and Qwen2's split pattern (hf_formats)."""
    vocab, merges = trained_vocab
    return Gpt2Encoder({t: i for i, t in enumerate(vocab)}, merges, QWEN2_PATTERN)


def mixed_text():
    """Stories and the pre-tokenizer's corners: contractions in both cases, digits, runs of
    spaces and newlines, tabs, \\r\\n, punctuation runs, letters outside ASCII, CJK, emoji."""
    stories = pathlib.Path(SAMPLE_TEXT).read_text(encoding="utf-8")[:3000]
    corners = ("I'm sure it's THEY'RE, we'LL, you'd, he'S -- don't 'twas '  '\n"
               "Year 2024: 3.14159 x 1,000,000 = 42!!! ...?! (a)[b]{c} <tag/> #hash @at $5 %20 ^_^ ~`|\\\n"
               "  two  spaces,   three,\tand a tab\t\there.\n\n\n  \n new  lines \r\n crlf\r\rcr \n"
               "café naïve Straße Ærø élan ÉCOLE Ωμέγα Привет мир 世界你好 こんにちは 한국어 🙂👍🏽\n"
               "e\u0301 \u00a0nbsp\u2003em\n"
               "trailing spaces   ")
    return stories + "\n" + corners


def test_tokenizer_matches_llama_cpp(oracle, qwen2_files, trained_vocab, tmp_path):
    """llama.cpp's tokenizer on fpgallm's file gives fpgallm's ids for mixed text; every added
    token maps to its tokenizer.json id; with the switch off both give the byte-level ids of
    an independent GPT-2 encoder."""
    folder, files = qwen2_files
    reference = reference_encoder(trained_vocab)
    tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    added = {a["content"]: a["id"] for a in tj["added_tokens"]}
    assert set(added) == set(SPECIALS)

    text = mixed_text().encode("utf-8")
    for storage, path in files.items():  # every file carries the vocabulary
        tok = _core.bpe_tokenizer(_core.load(str(path)))
        got = llama(oracle, path, text, tmp_path=tmp_path)["prompt"]
        assert got == tok.encode(text, add_bos=True, parse_special=True), storage
        assert got == reference.encode(text), storage

    # Added tokens, also back to back and inside words.
    chat = ("<|im_start|>system\nYou are kind.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
            "Once<|im_end|><|endoftext|>a<|im_start|>b <|im_end|> <|endoftext|>")
    pieces = chat.replace("<|", "\0<|").replace("|>", "|>\0").split("\0")
    expected = []
    for p in pieces:
        expected += [added[p]] if p in added else reference.encode(p.encode("utf-8"))
    as_text = reference.encode(chat.encode("utf-8"))
    assert not set(as_text) & set(added.values())
    path = files["f32"]
    lp = llama(oracle, path, chat, tmp_path=tmp_path)["prompt"]
    lt = llama(oracle, path, chat, 0, "--no-parse-special", tmp_path=tmp_path)["prompt"]
    fp, _ = fpgallm_run(path, chat, 128, tmp_path=tmp_path)
    ft, _ = fpgallm_run(path, chat, 128, "--special-as-text", tmp_path=tmp_path)
    assert lp == expected and fp == expected
    assert [t for t in lp if t in added.values()] == [added[p] for p in pieces if p in added]
    assert lt == as_text and ft == as_text


@pytest.mark.parametrize("storage", STORAGE)
def test_greedy_tokens_match_llama_cpp(storage, oracle, qwen2_files, tmp_path):
    _, files = qwen2_files
    path = files[storage]
    out = llama(oracle, path, PROMPT, POSITIONS, tmp_path=tmp_path)
    fp_prompt, fp_gen = fpgallm_run(path, PROMPT, POSITIONS, tmp_path=tmp_path)
    compared, worst = compare_greedy(storage, path, out, fp_prompt, fp_gen)
    print(f"\n{path.name}: {compared} of {len(out['generated'])} greedy tokens equal; "
          f"max relative logit difference {worst:.3g}", file=sys.stderr)


@pytest.mark.parametrize("storage", STORAGE)
def test_chat_runs_with_llama_cpps_prompt(storage, oracle, qwen2_files, trained_vocab, tmp_path):
    """`run --chat` on each file: exit 0, the ids of llama.cpp's ChatML prompt (its
    llama_chat_apply_template on the file's tokenizer.chat_template), then the greedy tokens
    compared as above."""
    _, files = qwen2_files
    vocab, _ = trained_vocab
    path = files[storage]
    out = llama(oracle, path, CHAT, POSITIONS, "--chat", tmp_path=tmp_path)
    fp_prompt, fp_gen = fpgallm_run(path, CHAT, POSITIONS, "--chat", tmp_path=tmp_path)
    ref = reference_encoder(trained_vocab)
    im_start, im_end = len(vocab) + SPECIALS.index("<|im_start|>"), len(vocab) + SPECIALS.index("<|im_end|>")
    assert out["prompt"] == [im_start, *ref.encode(f"user\n{CHAT}".encode()), im_end, *ref.encode(b"\n"), im_start,
                             *ref.encode(b"assistant\n")]
    compare_greedy(storage, path, out, fp_prompt, fp_gen)


def test_qwen3_files_read_by_gguf_py(oracle, qwen2_files, trained_vocab, gguf_py, tmp_path):
    """Qwen3 in gguf-py only: this llama.cpp has no qwen3 architecture. `run --chat` works on
    each file."""
    vocab, merges = trained_vocab
    _, w, folder = qwen_folder("qwen3", tmp_path, vocab, merges)
    files = write_files("qwen3", folder, tmp_path)
    T = gguf_py.GGMLQuantizationType
    q2 = gguf_py.GGUFReader(qwen2_files[1]["f32"])
    for storage, path in files.items():
        r = gguf_py.GGUFReader(path)
        assert field(r, "general.architecture") == "qwen3"
        for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                    "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id", "tokenizer.chat_template"):
            assert field(r, key) == field(q2, key), (storage, key)
        assert len(r.tensors) == len(w)
        for t in r.tensors:
            # convert: every matrix in the type asked for (all these have whole blocks of 32
            # columns), vectors F32; quantize w8a8: the linear layers and the output head as
            # Q8_0, the embedding table F32.
            if len(t.shape) == 1 or storage == "f32" or (storage == "w8a8" and t.name == "token_embd.weight"):
                want = T.F32
            else:
                want = {"f16": T.F16, "q8_0": T.Q8_0, "w8a8": T.Q8_0}[storage]
            assert t.tensor_type == want, (storage, t.name, t.tensor_type)
        chat = subprocess.run([fpgallm_binary(), "run", str(path), "--chat", "-t", "0", "-n", "40", "-i", CHAT, "--json"],
                              capture_output=True, text=True, check=True)
        assert json.loads(chat.stdout)["tokens"][0] == len(vocab) + SPECIALS.index("<|im_start|>")
    # llama.cpp refuses the file by its architecture (no crash, no model).
    pf = tmp_path / "p.txt"
    pf.write_text(PROMPT)
    r = subprocess.run([str(oracle), str(files["f32"]), str(pf), "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
    assert "unknown model architecture: 'qwen3'" in r.stderr
