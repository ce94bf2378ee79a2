"""Qwen2 (and DeepSeek-R1-Distill-Qwen, the same architecture), Qwen3 and Llama 3 (RoPE
scaling) checkpoints,
synthesized here with random weights as a Hugging Face folder (config.json,
model.safetensors, tokenizer.json) and as GGUF (llama.cpp's tensor names; q/k rows kept in
Hugging Face order, as llama.cpp's converter does for these architectures). fpgallm's
logits must equal a float64 numpy forward pass written from the published model
descriptions (transformers' modeling_qwen2.py / modeling_qwen3.py / modeling_llama.py and
modeling_rope_utils.py: RMSNorm, rotate-half RoPE with Llama 3 scaling, grouped-query
attention, SwiGLU), and greedy tokens must agree between the formats. Llama's GGUF q/k rows
are permuted as convert_hf_to_gguf.py does, with its rope_freqs.weight."""
import json
import subprocess

import numpy as np
import pytest

from conftest import SAMPLE_TEXT, fpgallm_binary
from fpgallm import _core
from hf_formats import (LLAMA3_PATTERN, QWEN2_PATTERN, SPECIALS, GGUF_ARRAY, GGUF_F32, GGUF_STRING, GGUF_U32, gguf_tokenizer_metadata,
                        tokenizer_json, train_bpe, write_gguf, write_safetensors)

# Small shapes in the proportions of the real configs (GQA, Qwen3's head_dim != hidden/heads).
SHAPES = {
    "qwen2": dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    "qwen3": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=24, rope_theta=1000000.0, rms_norm_eps=1e-6,
                  tie_word_embeddings=False),
    # Llama 3.x with its RoPE scaling; the original context is shrunk so that the short test
    # sequence reaches every band (scaled, blended, kept) of the frequencies.
    "llama3": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                     original_max_position_embeddings=8)),
}


def llama3_inv_freq(inv_freq, rs):
    """transformers' _compute_llama3_parameters."""
    factor, low, high, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * np.pi / inv_freq
    inv_freq_llama = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(is_medium, smoothed, inv_freq_llama)


def llama3_rope_freqs(cfg, hd):
    """convert_hf_to_gguf.py's rope_freqs.weight for Llama 3: the divisor of each frequency."""
    rs = cfg["rope_scaling"]
    factor, low, high, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    freqs = 1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    out = []
    for freq in freqs:
        wavelen = 2 * np.pi / freq
        if wavelen < old / high:
            out.append(1)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def llama_cpp_permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: Hugging Face rotate-half rows to GGUF's pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def reference_logits(cfg, w, tokens):
    """float64 forward of the whole sequence with a causal mask."""
    d, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", d // nh)
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    T = len(tokens)
    W = {k: v.astype(np.float64) for k, v in w.items()}
    x = W["model.embed_tokens.weight"][tokens]
    inv_freq = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    if cfg.get("rope_scaling"):
        inv_freq = llama3_inv_freq(inv_freq, cfg["rope_scaling"])
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = h @ W[p + "self_attn.q_proj.weight"].T
        k = h @ W[p + "self_attn.k_proj.weight"].T
        v = h @ W[p + "self_attn.v_proj.weight"].T
        if p + "self_attn.q_proj.bias" in W:
            q, k, v = q + W[p + "self_attn.q_proj.bias"], k + W[p + "self_attn.k_proj.bias"], v + W[p + "self_attn.v_proj.bias"]
        q, k, v = q.reshape(T, nh, hd), k.reshape(T, nkv, hd), v.reshape(T, nkv, hd)
        if p + "self_attn.q_norm.weight" in W:
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = nh // nkv
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        att = scores / scores.sum(axis=-1, keepdims=True)
        o = np.einsum("hts,shd->thd", att, v).reshape(T, nh * hd)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g, u = h @ W[p + "mlp.gate_proj.weight"].T, h @ W[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return x @ head.T


def synthesize(name, tmp_path, vocab, merges, seed):
    cfg = dict(SHAPES[name])
    arch = "llama" if name == "llama3" else name
    n_vocab = len(vocab) + len(SPECIALS)
    cls = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}[arch]
    cfg.update(architectures=[cls], model_type=arch,
               vocab_size=n_vocab, max_position_embeddings=128, hidden_act="silu", torch_dtype="float32",
               eos_token_id=len(vocab) + SPECIALS.index("<|endoftext|>"))
    if arch == "qwen2":
        cfg.update(use_sliding_window=False, sliding_window=4096, rope_scaling=None)
    d, nh, nkv, f = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    hd = cfg.get("head_dim", d // nh)
    rng = np.random.default_rng(seed)
    mat = lambda r, c: (rng.standard_normal((r, c)) / np.sqrt(c)).astype(np.float32)
    vec = lambda n, s=0.1: (rng.standard_normal(n) * s).astype(np.float32)
    norm = lambda n: (1 + vec(n)).astype(np.float32)
    w = {"model.embed_tokens.weight": (rng.standard_normal((n_vocab, d))).astype(np.float32)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = norm(d)
        w[p + "self_attn.q_proj.weight"] = mat(nh * hd, d)
        w[p + "self_attn.k_proj.weight"] = mat(nkv * hd, d)
        w[p + "self_attn.v_proj.weight"] = mat(nkv * hd, d)
        if arch == "qwen2":
            w[p + "self_attn.q_proj.bias"] = vec(nh * hd, 0.5)
            w[p + "self_attn.k_proj.bias"] = vec(nkv * hd, 0.5)
            w[p + "self_attn.v_proj.bias"] = vec(nkv * hd, 0.5)
        if arch == "qwen3":
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "self_attn.o_proj.weight"] = mat(d, nh * hd)
        w[p + "post_attention_layernorm.weight"] = norm(d)
        w[p + "mlp.gate_proj.weight"] = mat(f, d)
        w[p + "mlp.up_proj.weight"] = mat(f, d)
        w[p + "mlp.down_proj.weight"] = mat(d, f)
    w["model.norm.weight"] = norm(d)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(n_vocab, d)

    folder = tmp_path / f"{name}-hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    write_safetensors(folder / "model.safetensors", w)
    llama = arch == "llama"  # Llama 3's tokenizer.json: its own split pattern, ignore_merges
    tj = tokenizer_json(vocab, merges, LLAMA3_PATTERN if llama else QWEN2_PATTERN, ignore_merges=llama)
    (folder / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")

    # GGUF as llama.cpp's convert_hf_to_gguf.py writes these architectures.
    k = arch + "."
    md = [("general.architecture", GGUF_STRING, arch), ("general.name", GGUF_STRING, f"synthetic-{arch}"),
          (k + "context_length", GGUF_U32, cfg["max_position_embeddings"]), (k + "embedding_length", GGUF_U32, d),
          (k + "block_count", GGUF_U32, cfg["num_hidden_layers"]), (k + "feed_forward_length", GGUF_U32, f),
          (k + "attention.head_count", GGUF_U32, nh), (k + "attention.head_count_kv", GGUF_U32, nkv),
          (k + "rope.freq_base", GGUF_F32, cfg["rope_theta"]),
          (k + "attention.layer_norm_rms_epsilon", GGUF_F32, cfg["rms_norm_eps"])]
    if arch == "qwen3":
        md += [(k + "attention.key_length", GGUF_U32, hd), (k + "attention.value_length", GGUF_U32, hd)]
    md += gguf_tokenizer_metadata(vocab, merges, "llama-bpe" if arch == "llama" else "qwen2", eos=cfg["eos_token_id"])
    names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
             "self_attn.v_proj.bias": "attn_v.bias", "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
             "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    tensors = []
    for tname, a in w.items():
        if tname.startswith("model.layers."):
            layer, rest = tname[len("model.layers."):].split(".", 1)
            if arch == "llama" and rest in ("self_attn.q_proj.weight", "self_attn.k_proj.weight"):
                a = llama_cpp_permute(a, nh if rest.startswith("self_attn.q") else nkv)
            tensors.append((f"blk.{layer}.{names[rest]}", a))
        else:
            tensors.append(({"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                              "lm_head.weight": "output.weight"}[tname], a))
    if cfg.get("rope_scaling"):
        tensors.append(("rope_freqs.weight", llama3_rope_freqs(cfg, hd)))
    gguf = tmp_path / f"{name}.gguf"
    write_gguf(gguf, md, tensors)
    return cfg, w, folder, gguf


@pytest.fixture(scope="module")
def trained_vocab():
    text = open(SAMPLE_TEXT, encoding="utf-8").read()
    return train_bpe(text, QWEN2_PATTERN, 200)


@pytest.mark.parametrize("name", ["qwen2", "qwen3", "llama3"])
def test_logits_match_reference_and_formats_agree(name, tmp_path, trained_vocab):
    vocab, merges = trained_vocab
    cfg, w, folder, gguf = synthesize(name, tmp_path, vocab, merges, seed=20 + len(name))
    arch = cfg["model_type"]
    rng = np.random.default_rng(7)
    tokens = [int(t) for t in rng.integers(0, cfg["vocab_size"], 12)]
    ref = reference_logits(cfg, w, tokens)
    for path in (folder, gguf):
        m = _core.load(str(path))
        assert m.config["arch"] == arch
        got = _core.Transformer(m).logits(tokens).astype(np.float64)
        rel = np.abs(got - ref).max() / np.abs(ref).max()
        assert rel < 1e-5, f"{path}: max |fpgallm - reference| / max |reference| = {rel:.3g}"
    if cfg.get("rope_scaling"):  # the scaling matters at these positions: without it the logits differ
        plain = reference_logits(dict(cfg, rope_scaling=None), w, tokens)
        assert np.abs(plain - ref).max() / np.abs(ref).max() > 1e-3

    def greedy(path):
        out = subprocess.run([fpgallm_binary(), "run", str(path), "-t", "0", "-n", "40", "-i", "Once upon a time",
                              "--json"], capture_output=True, check=True)
        j = json.loads(out.stdout.decode("utf-8"))  # strict: the JSON text must be UTF-8
        tok = _core.bpe_tokenizer(_core.load(str(path)))
        n_prompt = j["prompt_tokens"]
        generated = [t for t in j["tokens"][n_prompt:] if t < len(vocab)]  # specials end or are left out
        # Random weights split characters; the text is the bytes with U+FFFD per ill-formed subpart, as Python decodes.
        assert j["text"] == tok.decode(generated).decode("utf-8", errors="replace")
        return j["tokens"]

    from_folder, from_gguf = greedy(folder), greedy(gguf)
    assert from_folder == from_gguf
    tok = _core.bpe_tokenizer(_core.load(str(folder)))
    prompt = tok.encode(b"Once upon a time")
    assert len(from_folder) > len(prompt)
    assert from_folder[:len(prompt)] == prompt
    # The first generated token is the reference's argmax after the prompt.
    assert from_folder[len(prompt)] == int(np.argmax(reference_logits(cfg, w, prompt)[-1]))


def test_chat_template_runs(tmp_path, trained_vocab):
    vocab, merges = trained_vocab
    _, _, folder, _ = synthesize("qwen2", tmp_path, vocab, merges, seed=3)
    out = subprocess.run([fpgallm_binary(), "run", str(folder), "--chat", "-t", "0", "-n", "60", "-i", "Hi", "--json"],
                         capture_output=True, text=True, check=True)
    tokens = json.loads(out.stdout)["tokens"]
    tok = _core.bpe_tokenizer(_core.load(str(folder)))
    im_start, im_end = (len(vocab) + SPECIALS.index(s) for s in ("<|im_start|>", "<|im_end|>"))
    expected = [im_start] + tok.encode(b"user\nHi", parse_special=False) + [im_end] + tok.encode(b"\n", parse_special=False) + \
        [im_start] + tok.encode(b"assistant\n", parse_special=False)
    assert tokens[:len(expected)] == expected
    assert len(tokens) > len(expected)


def test_bad_config_is_one_line_exit_2(tmp_path, trained_vocab):
    vocab, merges = trained_vocab
    _, _, folder, _ = synthesize("qwen2", tmp_path, vocab, merges, seed=4)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["use_sliding_window"] = True
    (folder / "config.json").write_text(json.dumps(cfg))
    out = subprocess.run([fpgallm_binary(), "run", str(folder), "-i", "x"], capture_output=True, text=True)
    assert out.returncode == 2 and "sliding" in out.stderr and out.stderr.count("\n") == 1


def test_prompt_special_tokens_and_steps_below_the_prompt(tmp_path, trained_vocab):
    vocab, merges = trained_vocab
    _, _, folder, _ = synthesize("qwen2", tmp_path, vocab, merges, seed=5)
    im_end = len(vocab) + SPECIALS.index("<|im_end|>")
    tok = _core.bpe_tokenizer(_core.load(str(folder)))

    def prompt_ids(*extra):
        out = subprocess.run([fpgallm_binary(), "run", str(folder), "-t", "0", "-n", "40", "-i", "Hi<|im_end|>there",
                              "--json", *extra], capture_output=True, text=True, check=True)
        j = json.loads(out.stdout)
        return j["tokens"][:j["prompt_tokens"]]

    # As Hugging Face's tokenizers encode a text: the special token written in it is its id.
    assert prompt_ids() == tok.encode(b"Hi", parse_special=False) + [im_end] + tok.encode(b"there", parse_special=False)
    assert prompt_ids("--special-as-text") == tok.encode(b"Hi<|im_end|>there", parse_special=False)
    # -n below the prompt's length: one line naming the prompt and the limit, exit 2.
    out = subprocess.run([fpgallm_binary(), "run", str(folder), "-n", "2", "-i", "Once upon a time there was"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "at most 2 fit" in out.stderr and "internal error" not in out.stderr
    out = subprocess.run([fpgallm_binary(), "run", str(folder), "--chat", "--special-as-text", "-i", "x"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--special-as-text" in out.stderr


def read_safetensors_f32(path):
    """safetensors as its specification lays it out: u64 header length, JSON header, data."""
    import struct
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", name
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=np.float32).reshape(t["shape"])
    return out


@pytest.mark.parametrize("name", ["qwen2", "qwen3"])
def test_safetensors_folder_round_trips_whole(name, tmp_path, trained_vocab):
    """convert --to safetensors of a Hugging Face folder: every config.json key of the source,
    the same tensors bit for bit, its tokenizer files byte for byte, and a tokenizer that `run`
    uses without -z."""
    vocab, merges = trained_vocab
    cfg, w, folder, _ = synthesize(name, tmp_path, vocab, merges, seed=11 + len(name))
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 128, "eos_token": "<|endoftext|>"}))
    out_dir = tmp_path / "written"
    subprocess.run([fpgallm_binary(), "convert", str(folder), "--to", "safetensors", "-o", str(out_dir)],
                   capture_output=True, text=True, check=True)
    source_cfg, written_cfg = json.loads((folder / "config.json").read_text()), json.loads((out_dir / "config.json").read_text())
    assert written_cfg == source_cfg
    for f in ("tokenizer.json", "tokenizer_config.json"):
        assert (out_dir / f).read_bytes() == (folder / f).read_bytes(), f
    got = read_safetensors_f32(out_dir / "model.safetensors")
    assert sorted(got) == sorted(w)
    for tname, a in w.items():
        assert got[tname].shape == a.shape and got[tname].tobytes() == a.tobytes(), tname

    def greedy(path):
        out = subprocess.run([fpgallm_binary(), "run", str(path), "-t", "0", "-n", "24", "-i", "Once upon", "--json"],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)["tokens"]

    assert greedy(out_dir) == greedy(folder)


def test_safetensors_config_from_a_gguf_carries_its_ids_and_biases(tmp_path, trained_vocab):
    vocab, merges = trained_vocab
    cfg, _, _, gguf = synthesize("qwen2", tmp_path, vocab, merges, seed=9)
    out_dir = tmp_path / "from-gguf"
    subprocess.run([fpgallm_binary(), "convert", str(gguf), "--to", "safetensors", "-o", str(out_dir)],
                   capture_output=True, text=True, check=True)
    written = json.loads((out_dir / "config.json").read_text())
    assert "attention_bias" not in written  # as Qwen2's own config.json: its q/k/v biases are the architecture's
    assert written["eos_token_id"] == cfg["eos_token_id"]
    assert json.loads(subprocess.run([fpgallm_binary(), "info", str(out_dir), "--json"], capture_output=True, text=True,
                                     check=True).stdout)["qkv_bias"] is True
    for key in ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size"):
        assert written[key] == cfg[key], key
