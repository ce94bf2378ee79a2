"""Qwen2 and Qwen3 written as GGUF by `fpgallm convert` and `fpgallm synth`, checked with
llama.cpp's own Python package (gguf-py, from ../shared/vendor's llama.cpp source): its
GGUFReader reads the file, its SpecialVocab reads the Hugging Face folder as
convert_hf_to_gguf.py does, and its tensor name map gives the names llama.cpp expects.
That llama.cpp predates Qwen3's C++ support; gguf-py knows the qwen3 architecture's names."""
import json
import pathlib
import subprocess
import sys
import tarfile

import numpy as np
import pytest

from conftest import REPO, fpgallm_binary
from fpgallm import _core
from hf_formats import SPECIALS
from test_qwen_models import synthesize, trained_vocab  # noqa: F401 (a fixture)

VENDOR = REPO.parent / "shared" / "vendor"
CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.fixture(scope="module")
def gguf_py(tmp_path_factory):
    archives = sorted(VENDOR.glob("llama.cpp-*.tar.gz"))
    if not archives:
        pytest.skip(f"no llama.cpp source archive in {VENDOR}")
    d = tmp_path_factory.mktemp("gguf-py")
    with tarfile.open(archives[0]) as tar:
        members = [m for m in tar.getmembers() if "/gguf-py/gguf/" in m.name and m.isfile()]
        tar.extractall(d, members=members)
    root = next(d.glob("*/gguf-py"))
    sys.path.insert(0, str(root))
    try:
        import gguf
    finally:
        sys.path.remove(str(root))
    return gguf


def field(reader, key):
    """A metadata value as gguf-py's gguf_dump decodes it (parts indexed by data)."""
    f = reader.fields.get(key)
    if f is None:
        return None
    value_type = type(f.types[0])

    def one(i, t):
        return bytes(f.parts[i]).decode("utf-8") if t == value_type.STRING else f.parts[i].tolist()[0]

    if f.types[0] == value_type.ARRAY:
        return [one(i, f.types[-1]) for i in f.data]
    return one(f.data[0], f.types[0])


def qwen_folder(name, tmp_path, vocab, merges):
    cfg, w, folder, _ = synthesize(name, tmp_path, vocab, merges, seed=31 + len(name))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": False, "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE, "model_max_length": 128}))
    return cfg, w, folder


def greedy(path, *extra):
    out = subprocess.run([fpgallm_binary(), "run", str(path), "-t", "0", "-n", "24", "-i", "Once upon", "--json", *extra],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["tokens"]


@pytest.mark.parametrize("name", ["qwen2", "qwen3"])
def test_convert_writes_what_llama_cpp_reads(name, tmp_path, trained_vocab, gguf_py):
    gguf = gguf_py
    vocab, merges = trained_vocab
    cfg, w, folder = qwen_folder(name, tmp_path, vocab, merges)
    n_vocab = cfg["vocab_size"]
    special = gguf.SpecialVocab(folder, load_merges=True, n_vocab=n_vocab)
    tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    tokens_by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    tokens_by_id.update({a["id"]: a["content"] for a in tj["added_tokens"]})
    # This gguf-py has no QWEN3: its names are QWEN2's and the per-head q/k norms, which only
    # STABLELM's map holds together with all of QWEN2's.
    arch = getattr(gguf.MODEL_ARCH, name.upper(), None) or gguf.MODEL_ARCH.STABLELM
    name_map = gguf.get_tensor_name_map(arch, cfg["num_hidden_layers"])
    for storage in ("f32", "f16", "q8_0"):
        path = tmp_path / f"{name}-{storage}.gguf"
        subprocess.run([fpgallm_binary(), "convert", str(folder), "--to", "gguf", "--type", storage, "-o", str(path)],
                       capture_output=True, text=True, check=True)
        r = gguf.GGUFReader(path)
        assert field(r, "general.architecture") == name
        assert field(r, "tokenizer.ggml.model") == "gpt2"
        assert field(r, "tokenizer.ggml.pre") == "qwen2"
        assert field(r, "tokenizer.ggml.tokens") == [tokens_by_id.get(i, f"[PAD{i}]") for i in range(n_vocab)]
        types = field(r, "tokenizer.ggml.token_type")
        assert types == [3 if tokens_by_id.get(i) in SPECIALS else 1 if i in tokens_by_id else 5 for i in range(n_vocab)]
        # What convert_hf_to_gguf.py's SpecialVocab takes from the same folder.
        assert field(r, "tokenizer.ggml.merges") == special.merges
        for typ, tid in special.special_token_ids.items():
            assert field(r, f"tokenizer.ggml.{ {'pad': 'padding'}.get(typ, typ) }_token_id") == tid, typ
        assert field(r, "tokenizer.ggml.add_bos_token") == special.add_special_token.get("bos", False)
        assert field(r, "tokenizer.chat_template") == special.chat_template
        # Every tensor under the name llama.cpp maps the Hugging Face one to, in Hugging Face row order.
        tensors = {t.name: t for t in r.tensors}
        expected = {name_map.get_name(k, try_suffixes=(".weight", ".bias")): k for k in w}
        assert set(tensors) == set(expected)
        for gname, hf_name in expected.items():
            t = tensors[gname]
            assert list(reversed([int(x) for x in t.shape])) == list(w[hf_name].shape), gname
            if storage == "f32" or w[hf_name].ndim == 1:
                got = np.asarray(t.data, dtype=np.float32).reshape(w[hf_name].shape)
                assert got.tobytes() == w[hf_name].tobytes(), gname
        # fpgallm reads its own file back as the same model and vocabulary.
        m = _core.load(str(path))
        assert _core.bpe_tokenizer(m).encode(b"Once upon a time <|im_end|>") == \
            _core.BpeTokenizer.from_hf_json(str(folder / "tokenizer.json")).encode(b"Once upon a time <|im_end|>")
        if storage == "f32":
            assert greedy(path) == greedy(folder)
    chat = subprocess.run([fpgallm_binary(), "run", str(tmp_path / f"{name}-f32.gguf"), "--chat", "-t", "0", "-n", "40",
                           "-i", "Hi", "--json"], capture_output=True, text=True, check=True)
    im_start = len(vocab) + SPECIALS.index("<|im_start|>")
    assert json.loads(chat.stdout)["tokens"][0] == im_start


def test_synth_carries_a_tokenizer_json(tmp_path, trained_vocab, gguf_py):
    """synth -z tokenizer.json: the file carries that vocabulary, padded to the preset's
    (stories260k's 512 tokens: a Qwen preset's 151,936-token embedding is too big for a test)."""
    vocab, merges = trained_vocab
    _, _, folder = qwen_folder("qwen2", tmp_path, vocab, merges)
    out = tmp_path / "synth.gguf"
    subprocess.run([fpgallm_binary(), "synth", "--preset", "stories260k", "-z", str(folder / "tokenizer.json"), "-o",
                    str(out)], capture_output=True, text=True, check=True)
    r = gguf_py.GGUFReader(out)
    assert field(r, "tokenizer.ggml.model") == "gpt2"
    tokens = field(r, "tokenizer.ggml.tokens")
    assert len(tokens) == 512 and tokens[-1] == "[PAD511]"
    assert field(r, "tokenizer.ggml.merges") == gguf_py.SpecialVocab(folder, load_merges=True).merges
    prompt = _core.BpeTokenizer.from_hf_json(str(folder / "tokenizer.json")).encode(b"Once upon")
    assert greedy(out)[:len(prompt)] == prompt
    # A folder written by synth carries the vocabulary as tokenizer.json, which `run` reads.
    subprocess.run([fpgallm_binary(), "synth", "--preset", "stories260k", "-z", str(folder), "-o", str(tmp_path / "st")],
                   capture_output=True, text=True, check=True)
    assert greedy(tmp_path / "st") == greedy(out)


@pytest.mark.parametrize("name", ["qwen2", "qwen3"])
def test_quantize_calibrates_with_the_models_own_vocabulary(name, tmp_path, trained_vocab, gguf_py):
    """quantize of a Qwen folder without -z: calibration and held-out text in its own BPE,
    the GGUF carries that vocabulary (as convert writes it), and run --chat and eval take it."""
    from conftest import SAMPLE_TEXT
    vocab, merges = trained_vocab
    _, _, folder = qwen_folder(name, tmp_path, vocab, merges)
    q = tmp_path / f"{name}-w8a8.gguf"
    out = subprocess.run([fpgallm_binary(), "quantize", str(folder), "--calib", SAMPLE_TEXT, "--scheme", "w8a8", "-o",
                          str(q), "--json"], capture_output=True, text=True, check=True)
    j = json.loads(out.stdout)
    text = pathlib.Path(SAMPLE_TEXT).read_text(encoding="utf-8")
    stories = [s for s in text.split("\n") if s]
    tok = _core.BpeTokenizer.from_hf_json(str(folder / "tokenizer.json"))
    held = stories[len(stories) // 2:]
    seen = set(stories[:len(stories) // 2])
    expected_tokens = sum(len(tok.encode(s.encode("utf-8"), parse_special=False)) - 1 for s in held if s not in seen)
    assert j["held_out"]["tokens"] == expected_tokens
    convert = tmp_path / f"{name}-f32.gguf"
    subprocess.run([fpgallm_binary(), "convert", str(folder), "--to", "gguf", "-o", str(convert)], capture_output=True,
                   text=True, check=True)
    rq, rc = gguf_py.GGUFReader(q), gguf_py.GGUFReader(convert)
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id", "tokenizer.chat_template"):
        assert field(rq, key) == field(rc, key), key
    chat = subprocess.run([fpgallm_binary(), "run", str(q), "--chat", "-t", "0", "-n", "40", "-i", "Hi", "--json"],
                          capture_output=True, text=True, check=True)
    assert json.loads(chat.stdout)["tokens"][0] == len(vocab) + SPECIALS.index("<|im_start|>")
    ev = subprocess.run([fpgallm_binary(), "eval", str(folder), "--text", SAMPLE_TEXT, "--quant", str(q), "--json"],
                        capture_output=True, text=True, check=True)
    assert json.loads(ev.stdout)["tokens"] == expected_tokens


def test_a_vocabulary_gguf_cannot_name_is_one_line(tmp_path, trained_vocab):
    """A tokenizer.json whose pre-tokenizer regex is none of GGUF's tokenizer.ggml.pre names
    cannot be carried: one line naming the tokenizer and the output, exit 2, no file."""
    vocab, merges = trained_vocab
    _, _, folder = qwen_folder("qwen2", tmp_path, vocab, merges)
    tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+|."
    custom = tmp_path / "custom.json"
    custom.write_text(json.dumps(tj), encoding="utf-8")
    out = tmp_path / "x.gguf"
    r = subprocess.run([fpgallm_binary(), "synth", "--preset", "stories260k", "-z", str(custom), "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert str(custom) in r.stderr and str(out) in r.stderr and "internal error" not in r.stderr
    assert not out.exists()
