"""A model trained through fpgallm.torch goes back to the ecosystem's files: 20 AdamW steps,
fpgallm.save to a llama2.c .bin, a GGUF and a safetensors folder, and `fpgallm run` of each
file gives the torch model's greedy tokens. Also: fpgallm.Tokenizer(path) on its own, the
Hugging Face names and q/k row order of state_dict(hf_names=True) checked against the file
the C++ safetensors writer produces and against Hugging Face's own rotate-half RoPE, docstrings,
and shape errors in one line."""
import inspect
import json
import struct
import subprocess

import numpy as np
import pytest
import torch

import fpgallm
import fpgallm.torch as ft
from conftest import MODEL, SAMPLE_TEXT, TOKENIZER, fpgallm_binary

STEPS = 64
FORMATS = {"bin": "trained.bin", "gguf": "trained.gguf", "safetensors": "trained-st"}


def cli_tokens(path: str) -> list:
    out = subprocess.run([fpgallm_binary(), "run", path, "-z", TOKENIZER, "-t", "0", "-n", str(STEPS), "--json"],
                         check=True, capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)["tokens"]


@pytest.fixture(scope="module")
def trained():
    """stories260K after 20 AdamW steps on one story, with quant="fp32" (the products of
    `fpgallm run`'s engine, so the torch model's greedy tokens are comparable bit for bit)."""
    torch.manual_seed(0)
    tok = fpgallm.Tokenizer(TOKENIZER)
    story = open(SAMPLE_TEXT, encoding="utf-8").read().splitlines()[3]
    ids = torch.tensor([tok.encode(story, True, False)[:65]])
    net = ft.from_pretrained(MODEL, quant="fp32")
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    losses = []
    for _ in range(20):
        logits = net(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return net, tok, losses


def test_training_lowers_the_loss(trained):
    _, _, losses = trained
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_saved_model_runs_in_fpgallm_with_the_torch_tokens(trained, fmt, tmp_path):
    net, tok, _ = trained
    path = str(tmp_path / FORMATS[fmt])
    written = fpgallm.save(net, path, format=fmt, tokenizer=None if fmt == "bin" else tok)
    assert written > 0
    # The file holds the trained weights, not the checkpoint's.
    saved = fpgallm.load(path).weights()
    assert np.array_equal(saved["layers.1.w2"], net.layers[1].feed_forward.w2.weight.detach().numpy())
    assert np.array_equal(saved["layers.0.wq"], net.layers[0].attention.wq.weight.detach().numpy())
    assert not np.array_equal(saved["layers.0.wq"], fpgallm.load(MODEL).weights()["layers.0.wq"])
    tokens = cli_tokens(path)
    assert tokens == net.generate(tokens[:1], STEPS)
    assert tokens != cli_tokens(MODEL), "training changed nothing the greedy tokens show"


def test_save_pretrained_and_state_dicts(trained, tmp_path):
    net, _, _ = trained
    net.save_pretrained(str(tmp_path / "a.gguf"))
    tokens = cli_tokens(str(tmp_path / "a.gguf"))
    assert tokens == net.generate(tokens[:1], STEPS)
    # The module, its state_dict and its Hugging Face-named state_dict write the same file.
    config = fpgallm.load(MODEL).config
    fpgallm.save(net, str(tmp_path / "module.bin"))
    fpgallm.save(net.state_dict(), str(tmp_path / "meta.bin"), config=config)
    fpgallm.save(net.state_dict(hf_names=True), str(tmp_path / "hf.bin"), config=config)
    reference = (tmp_path / "module.bin").read_bytes()
    assert (tmp_path / "meta.bin").read_bytes() == reference
    assert (tmp_path / "hf.bin").read_bytes() == reference
    with pytest.raises(ValueError, match="config="):
        fpgallm.save(net.state_dict(), str(tmp_path / "x.bin"))
    with pytest.raises(ValueError, match="format"):
        fpgallm.save(net, str(tmp_path / "x.onnx"), format="onnx")
    bad = dict(net.state_dict())
    bad["layers.0.attention.wq.weight"] = bad["layers.0.attention.wq.weight"][:, :-1]
    with pytest.raises(fpgallm.InputError, match="layers.0.wq"):
        fpgallm.save(bad, str(tmp_path / "y.bin"), config=config)
    assert not (tmp_path / "y.bin").exists()


def read_safetensors(path) -> dict:
    """A safetensors file read by hand from its documented layout: u64 header length, JSON
    header {name: {dtype, shape, data_offsets}}, data."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32"
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype="<f4").reshape(info["shape"])
    return out


def test_hf_names_are_the_safetensors_files(trained, tmp_path):
    net, _, _ = trained
    fpgallm.save(net, str(tmp_path / "st"), format="safetensors")
    stored = read_safetensors(tmp_path / "st" / "model.safetensors")
    hf = net.state_dict(hf_names=True)
    assert set(hf) == set(stored)
    assert "model.layers.0.self_attn.q_proj.weight" in hf and "model.layers.4.mlp.down_proj.weight" in hf
    for name, array in stored.items():
        assert np.array_equal(hf[name].numpy(), array), name
    # And back: a fresh model loading the HF-named dict holds the trained weights.
    fresh = ft.from_pretrained(MODEL, accelerator=None)
    fresh.load_state_dict(hf)
    for (name, a), b in zip(net.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name


def rope_interleaved(x, pos, theta=10000.0):
    """RoPE on pairs (2i, 2i+1) of each head, as llama2.c and the engine apply it; x [T, H, hd]."""
    hd = x.shape[-1]
    freq = theta ** (-np.arange(0, hd, 2) / hd)
    ang = pos[:, None] * freq[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return np.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), axis=-1).reshape(x.shape)


def rope_rotate_half(x, pos, theta=10000.0):
    """Hugging Face's LlamaRotaryEmbedding + apply_rotary_pos_emb: pairs (i, i + hd/2)."""
    hd = x.shape[-1]
    inv_freq = theta ** (-np.arange(0, hd, 2) / hd)
    emb = np.concatenate([pos[:, None] * inv_freq[None, :]] * 2, axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    rotated = np.concatenate((-x[..., hd // 2:], x[..., :hd // 2]), axis=-1)
    return x * cos + rotated * sin


def test_hf_q_k_rows_give_the_same_attention_scores_under_hf_rope(trained):
    """The permutation is the right one: Hugging Face's rotate-half RoPE on the HF-ordered
    q_proj/k_proj gives the same q.k scores as interleaved RoPE on fpgallm's rows."""
    net, _, _ = trained
    c = net.config
    hf = net.state_dict(hf_names=True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, c["dim"]))
    pos = np.arange(9, dtype=np.float64)
    heads, hd = c["n_heads"], c["head_dim"]

    def scores(wq, wk, rope):
        q = rope((x @ wq.T).reshape(9, heads, hd), pos)
        k = rope((x @ wk.T).reshape(9, c["n_kv_heads"], hd), pos)
        k = np.repeat(k, heads // c["n_kv_heads"], axis=1)  # grouped-query attention
        return np.einsum("thd,shd->hts", q, k)

    ours = scores(net.layers[1].attention.wq.weight.detach().double().numpy(),
                  net.layers[1].attention.wk.weight.detach().double().numpy(), rope_interleaved)
    theirs = scores(hf["model.layers.1.self_attn.q_proj.weight"].double().numpy(),
                    hf["model.layers.1.self_attn.k_proj.weight"].double().numpy(), rope_rotate_half)
    assert np.allclose(ours, theirs, rtol=1e-9, atol=1e-9)
    # Without the permutation they differ: the check can fail.
    plain = scores(net.layers[1].attention.wq.weight.detach().double().numpy(),
                   net.layers[1].attention.wk.weight.detach().double().numpy(), rope_rotate_half)
    assert not np.allclose(ours, plain, atol=1e-3)


def test_tokenizer_on_its_own(tmp_path):
    m = fpgallm.load(MODEL)
    text = "Once upon a time, a little cat sat."
    alone = fpgallm.Tokenizer(TOKENIZER)
    assert alone.vocab_size == 512
    assert alone.encode(text) == fpgallm.Tokenizer(m, TOKENIZER).encode(text)
    fpgallm.save(m, str(tmp_path / "m.gguf"), tokenizer=alone)
    fpgallm.save(m, str(tmp_path / "st"), tokenizer=alone)
    for path in (tmp_path / "m.gguf", tmp_path / "st"):
        t = fpgallm.Tokenizer(str(path))
        assert t.encode(text) == alone.encode(text)
        # The special tokens' text is the format's own (GGUF "<s>", llama2.c "\n<s>\n").
        assert [t.piece(i) for i in range(3, 512)] == [alone.piece(i) for i in range(3, 512)]
    (tmp_path / "junk.bin").write_bytes(b"\x05\x00\x00\x00\x00\x00")
    with pytest.raises(fpgallm.InputError) as e:
        fpgallm.Tokenizer(str(tmp_path / "junk.bin"))
    assert "junk.bin" in str(e.value) and "\n" not in str(e.value)
    fpgallm.save(m, str(tmp_path / "bare.gguf"))
    with pytest.raises(fpgallm.InputError, match="no tokenizer"):
        fpgallm.Tokenizer(str(tmp_path / "bare.gguf"))


def test_shape_errors_are_one_clear_line():
    net = ft.from_pretrained(MODEL, accelerator=None)
    cases = [(torch.tensor([1, 2, 3]), ValueError, r"\[batch, seq\], got \(3,\)"),
             (torch.ones(1, 3), TypeError, "integer token ids"),
             (torch.tensor([[1, 600]]), ValueError, "0..511"),
             (torch.ones(1, 600, dtype=torch.long), ValueError, "context of 512"),
             ([1, 2, 3], TypeError, "torch.Tensor")]
    for tokens, error, message in cases:
        with pytest.raises(error, match=message) as e:
            net(tokens)
        assert "\n" not in str(e.value)


def test_public_classes_have_docstrings():
    for module in (fpgallm, ft):
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and not name.startswith("_") and obj.__module__.startswith("fpgallm"):
                assert obj.__doc__ and obj.__doc__.strip(), f"{module.__name__}.{name} has no docstring"
    assert inspect.getdoc(fpgallm.save) and inspect.getdoc(ft.Llama.save_pretrained)
