"""Bad arguments through the Python API: ValueError or TypeError naming the argument, with
the command line's words, never a crash (issue 34)."""
import json
import math
import os
import pathlib
import types

import numpy as np
import pytest

import fpgallm
import fpgallm.weights
from conftest import MODEL, SAMPLE_TEXT, TOKENIZER


@pytest.fixture(scope="module")
def model_and_tokenizer():
    m = fpgallm.load(MODEL)
    return m, fpgallm.Tokenizer(m, TOKENIZER)


@pytest.mark.parametrize("kwargs, names", [
    ({"topp": math.nan}, "topp"),
    ({"topp": -0.5}, "topp"),
    ({"topp": 1.5}, "topp"),
    ({"topp": math.inf}, "topp"),
    ({"temperature": math.nan}, "temperature"),
    ({"temperature": -1.0}, "temperature"),
    ({"temperature": 1e9}, "temperature"),
    ({"temperature": math.inf}, "temperature"),
    ({"steps": -5}, "steps"),
])
def test_generate_refuses_bad_sampling(model_and_tokenizer, kwargs, names):
    m, tok = model_and_tokenizer
    with pytest.raises(ValueError, match=names):
        fpgallm.generate(m, tok, "Once", **kwargs)


def test_generate_same_words_as_the_command_line(model_and_tokenizer):
    m, tok = model_and_tokenizer
    with pytest.raises(ValueError, match="is not between 0 and 1"):
        fpgallm.generate(m, tok, "Once", topp=2.0)


@pytest.mark.parametrize("topp", [0.0001, 1e-30, 0.5, 0.999999])
def test_generate_tiny_topp_samples(model_and_tokenizer, topp):
    m, tok = model_and_tokenizer
    g = fpgallm.generate(m, tok, "Once", steps=12, topp=topp, seed=7)
    assert len(g["tokens"]) == 13  # the 12 positions' inputs and the last sampled token
    assert all(0 <= t < 512 for t in g["tokens"])


@pytest.mark.parametrize("threads", [100000, 2**31 - 1, -1, 1025])
def test_kernels_refuse_impossible_thread_counts(threads):
    a = np.ones((64, 1024), dtype=np.float32)
    b = np.ones((64, 1024), dtype=np.float32)
    with pytest.raises(ValueError, match="threads"):
        fpgallm.linear_int8(a, b, threads)


@pytest.mark.parametrize("threads", [2**31, 2**64, "4", 1.5])
def test_kernels_refuse_thread_counts_of_the_wrong_type(threads):
    a = np.ones((64, 1024), dtype=np.float32)
    b = np.ones((64, 1024), dtype=np.float32)
    with pytest.raises(TypeError):
        fpgallm.linear_int8(a, b, threads)


@pytest.mark.parametrize("seed", [-1, 2**64, "x"])
def test_generate_refuses_a_seed_of_the_wrong_kind(model_and_tokenizer, seed):
    m, tok = model_and_tokenizer
    with pytest.raises(TypeError):
        fpgallm.generate(m, tok, "Once", seed=seed)


# ---- every public entry point against an attacker's values (issue 34, second pass) --------
# Each row: the call (of an env holding a model, tokenizers, a quantized model and paths),
# the exception type, and a pattern the message must match (the argument's name, or the
# file's). Before this table, rows marked "was:" crashed or raised something else.
HAS_PLANNING = hasattr(fpgallm, "predict") and hasattr(fpgallm, "simulate")
SMALL = {"dim": 8, "hidden_dim": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 2, "vocab_size": 600, "seq_len": 32}


def small_weights(config):
    rng = np.random.default_rng(0)
    d, h, v = config["dim"], config["hidden_dim"], config["vocab_size"]
    w = {"token_embedding": rng.standard_normal((v, d)).astype(np.float32), "final_norm": np.ones(d, np.float32)}
    for name, shape in [("attn_norm", (d,)), ("ffn_norm", (d,)), ("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)),
                        ("wo", (d, d)), ("w1", (h, d)), ("w2", (d, h)), ("w3", (h, d))]:
        w[f"layers.0.{name}"] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
    return w


@pytest.fixture(scope="module")
def env(tmp_path_factory, model_and_tokenizer):
    from hf_formats import QWEN2_PATTERN, bytes_to_unicode, tokenizer_json

    m, tok = model_and_tokenizer
    tmp = tmp_path_factory.mktemp("bad_arguments")
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    folder = tmp / "folder"
    folder.mkdir()
    bpe_json = tmp / "tokenizer.json"
    be = bytes_to_unicode()
    bpe_json.write_text(json.dumps(tokenizer_json([be[b] for b in range(256)], [], QWEN2_PATTERN)), encoding="utf-8")
    design = fpgallm.default_design()
    design["device"] = "u280"
    e = types.SimpleNamespace(
        m=m, tok=tok, tmp=tmp, fifo=str(fifo), folder=str(folder), missing=str(tmp / "missing.bin"),
        q=fpgallm.quantize(m, tok, SAMPLE_TEXT, "w8a8"), t=fpgallm.Transformer(m),
        bpe=fpgallm._core.BpeTokenizer.from_hf_json(str(bpe_json)), design=design, config=dict(m.config),
        weights={k: np.array(v) for k, v in m.weights().items()},
        big_vocab=fpgallm._core.model_from_weights(SMALL, small_weights(SMALL)),
        small_vocab=fpgallm._core.model_from_weights(dict(SMALL, vocab_size=256),
                                                     small_weights(dict(SMALL, vocab_size=256))),
        a=np.ones((4, 8), np.float32), b=np.ones((3, 8), np.float32), q8=np.ones((4, 8), np.int8),
        x4=np.ones((1, 2, 2, 4), np.float32), p2=np.array([0, 1]))
    return e


def with_nan(weights, name):
    out = dict(weights)
    out[name] = np.full_like(weights[name], np.nan)
    return out


P = pytest.param
CORE_CASES = [
    # fpgallm.load(path)
    P(lambda e: fpgallm.load(None), TypeError, "path", id="load-None"),
    P(lambda e: fpgallm.load(5), TypeError, "path", id="load-int"),
    P(lambda e: fpgallm.load(MODEL + "\0junk"), ValueError, "path.*NUL", id="load-NUL"),  # was: loaded MODEL
    P(lambda e: fpgallm.load(e.missing), ValueError, "missing.bin", id="load-missing"),
    P(lambda e: fpgallm.load(e.fifo), ValueError, "FIFO", id="load-fifo"),
    P(lambda e: fpgallm.load(e.folder), ValueError, "config.json", id="load-folder"),
    P(lambda e: fpgallm.load(b"/nonexistent\xff"), ValueError, "nonexistent", id="load-bytes-not-utf8"),
    P(lambda e: fpgallm.load(type("BadPath", (), {"__fspath__": lambda self: 5})()), TypeError, "path",
      id="load-fspath-int"),
    P(lambda e: fpgallm.load(""), ValueError, "no such file", id="load-empty-name"),
    # fpgallm.Tokenizer(path) / Tokenizer(model, path); BpeTokenizer.from_hf_json(path)
    P(lambda e: fpgallm.Tokenizer(None), TypeError, "path", id="tokenizer-None"),
    P(lambda e: fpgallm.Tokenizer(7), TypeError, "path", id="tokenizer-int"),
    P(lambda e: fpgallm.Tokenizer(TOKENIZER + "\0x"), ValueError, "path.*NUL", id="tokenizer-NUL"),  # was: loaded
    P(lambda e: fpgallm.Tokenizer(e.fifo), ValueError, "FIFO", id="tokenizer-fifo"),
    P(lambda e: fpgallm.Tokenizer(e.folder), ValueError, "folder", id="tokenizer-folder"),
    P(lambda e: fpgallm.Tokenizer(e.m, None), TypeError, "path", id="tokenizer-model-None"),
    P(lambda e: fpgallm.Tokenizer(e.m, TOKENIZER + "\0x"), ValueError, "path.*NUL", id="tokenizer-model-NUL"),
    P(lambda e: fpgallm.Tokenizer(e.big_vocab, TOKENIZER), ValueError, "vocabulary has 600", id="tokenizer-vocab"),
    P(lambda e: fpgallm.Tokenizer(e.big_vocab), ValueError, "path", id="tokenizer-array-model-no-path"),
    P(lambda e: fpgallm._core.BpeTokenizer.from_hf_json(None), TypeError, "path", id="bpe-json-None"),
    P(lambda e: fpgallm._core.BpeTokenizer.from_hf_json(e.fifo), ValueError, "FIFO", id="bpe-json-fifo"),
    P(lambda e: fpgallm._core.BpeTokenizer.from_hf_json(e.missing + "\0"), ValueError, "NUL", id="bpe-json-NUL"),
    # token ids (was: IndexError "vector::_M_range_check")
    P(lambda e: e.tok.decode(1, -1), ValueError, "token", id="decode-negative"),
    P(lambda e: e.tok.decode(1, 512), ValueError, "token", id="decode-past-vocab"),
    P(lambda e: e.tok.decode(-1, 5), ValueError, "prev", id="decode-prev-negative"),
    P(lambda e: e.tok.decode(1, 2**31), TypeError, "token", id="decode-2^31"),
    P(lambda e: e.tok.decode(1, None), TypeError, "token", id="decode-None"),
    P(lambda e: e.tok.piece(-1), ValueError, "id", id="piece-negative"),
    P(lambda e: e.tok.piece(512), ValueError, "id", id="piece-past-vocab"),
    P(lambda e: e.tok.decode_all([1, -1]), ValueError, "tokens", id="decode_all-negative"),
    P(lambda e: e.tok.decode_all(np.array([1, 2000])), ValueError, "tokens", id="decode_all-past-vocab"),
    P(lambda e: e.tok.decode_all([1, 2**31]), TypeError, "tokens", id="decode_all-2^31"),
    P(lambda e: e.tok.encode(None), TypeError, "text", id="encode-None"),
    P(lambda e: e.bpe.decode([-1]), ValueError, "ids", id="bpe-decode-negative"),
    P(lambda e: e.bpe.decode([10**6]), ValueError, "ids", id="bpe-decode-past-vocab"),
    P(lambda e: e.bpe.decode(None), TypeError, "ids", id="bpe-decode-None"),
    P(lambda e: fpgallm._core.bpe_tokenizer(None), TypeError, "model", id="bpe_tokenizer-None"),  # was: SIGSEGV
    # Transformer
    P(lambda e: fpgallm.Transformer(None), TypeError, "model", id="transformer-None"),
    P(lambda e: fpgallm.Transformer(e.m, quant="w8a8"), TypeError, "quant", id="transformer-quant-str"),  # was: RuntimeError
    P(lambda e: fpgallm.Transformer(e.m, quant=5), TypeError, "quant", id="transformer-quant-int"),
    P(lambda e: e.t.forward(-1, 0), ValueError, "token", id="forward-token-negative"),  # was: IndexError
    P(lambda e: e.t.forward(512, 0), ValueError, "token", id="forward-token-past-vocab"),
    P(lambda e: e.t.forward(0, -1), ValueError, "pos", id="forward-pos-negative"),
    P(lambda e: e.t.forward(0, 512), ValueError, "pos", id="forward-pos-past-context"),
    P(lambda e: e.t.forward(0, 10**9), ValueError, "pos", id="forward-pos-huge"),
    P(lambda e: e.t.forward(2**31, 0), TypeError, "token", id="forward-token-2^31"),
    P(lambda e: e.t.forward(None, 0), TypeError, "token", id="forward-token-None"),
    P(lambda e: e.t.forward(1.5, 0), TypeError, "token", id="forward-token-float"),
    P(lambda e: e.t.logits([-1]), ValueError, "tokens", id="logits-negative"),
    P(lambda e: e.t.logits([512]), ValueError, "tokens", id="logits-past-vocab"),
    P(lambda e: e.t.logits([1] * 600), ValueError, "tokens.*context", id="logits-past-context"),
    P(lambda e: e.t.logits("abc"), TypeError, "tokens", id="logits-str"),
    # generate / perplexity
    P(lambda e: fpgallm.generate(e.m, e.tok, "Once " * 800, steps=0), ValueError, "prompt", id="generate-long-prompt"),
    P(lambda e: fpgallm.generate(e.m, e.tok, None), TypeError, "prompt", id="generate-prompt-None"),
    P(lambda e: fpgallm.generate(e.m, e.tok, "x", steps=2**31), TypeError, "steps", id="generate-steps-2^31"),
    P(lambda e: fpgallm.generate(e.m, e.tok, "x", steps=None), TypeError, "steps", id="generate-steps-None"),
    P(lambda e: fpgallm.generate(e.m, e.tok, "x", quant="w8a8"), TypeError, "quant", id="generate-quant-str"),
    P(lambda e: fpgallm.generate(e.m, e.bpe, "x"), TypeError, "tokenizer", id="generate-bpe-tokenizer"),
    P(lambda e: fpgallm.generate(e.big_vocab, e.tok, "Once", steps=20), ValueError, "tokenizer",
      id="generate-vocab-larger"),  # was: IndexError at a sampled id >= 512
    P(lambda e: fpgallm.generate(e.small_vocab, e.tok, "Once upon a time", steps=20), ValueError, "tokenizer",
      id="generate-vocab-smaller"),  # was: IndexError "token id out of range"
    P(lambda e: fpgallm.generate(fpgallm._core.model_from_weights(e.config, with_nan(e.weights, "final_norm")),
                                 e.tok, "x"), ValueError, "weights.*NaN", id="generate-nan-model"),  # was: garbage
    P(lambda e: fpgallm.perplexity(e.m, e.tok, ""), ValueError, "text", id="perplexity-empty"),  # was: perplexity 0
    P(lambda e: fpgallm.perplexity(e.m, e.tok, " \n\t\n"), ValueError, "text", id="perplexity-blank"),
    P(lambda e: fpgallm.perplexity(e.m, e.tok, "a\0b"), ValueError, "text.*NUL", id="perplexity-NUL"),
    P(lambda e: fpgallm.perplexity(e.m, e.tok, b"\xff\xfe story"), ValueError, "text.*UTF-8",
      id="perplexity-not-utf8"),
    P(lambda e: fpgallm.perplexity(e.m, e.tok, None), TypeError, "text", id="perplexity-None"),
    P(lambda e: fpgallm.perplexity(e.m, e.tok, "Once", quant="x"), TypeError, "quant", id="perplexity-quant-str"),
    P(lambda e: fpgallm.perplexity(e.big_vocab, e.tok, "Once upon a time"), ValueError, "tokenizer",
      id="perplexity-vocab"),  # was: a number for the wrong vocabulary
    # quantize / load_quant / QuantModel
    P(lambda e: fpgallm.quantize(e.m, e.tok, None), TypeError, "calib", id="quantize-calib-None"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT + "\0x"), ValueError, "calib.*NUL", id="quantize-calib-NUL"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, e.fifo), ValueError, "FIFO", id="quantize-calib-fifo"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, e.folder), ValueError, "directory", id="quantize-calib-folder"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT, "bogus"), ValueError, "scheme", id="quantize-scheme"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT, "fp32"), ValueError, "scheme", id="quantize-fp32"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT, None), TypeError, "scheme", id="quantize-scheme-None"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT, "w4a16", group=0), ValueError, "group", id="quantize-group-0"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT, "w4a16", group=2**31), TypeError, "group",
      id="quantize-group-2^31"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT, "w8a8-smooth", alpha=math.nan), ValueError, "alpha",
      id="quantize-alpha-nan"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT, "mixed", budget=math.inf), ValueError, "budget",
      id="quantize-budget-inf"),
    P(lambda e: fpgallm.quantize(e.m, e.tok, SAMPLE_TEXT, "mixed", sensitivity_tokens=-1), TypeError,
      "sensitivity_tokens", id="quantize-sensitivity-negative"),
    P(lambda e: fpgallm.quantize(e.big_vocab, e.tok, SAMPLE_TEXT), ValueError, "tokenizer", id="quantize-vocab"),
    P(lambda e: fpgallm.quantize(e.small_vocab, e.tok, SAMPLE_TEXT), ValueError, "tokenizer",
      id="quantize-vocab-smaller"),  # was: IndexError
    P(lambda e: fpgallm.load_quant(None), TypeError, "path", id="load_quant-None"),
    P(lambda e: fpgallm.load_quant(MODEL + "\0x"), ValueError, "path.*NUL", id="load_quant-NUL"),
    P(lambda e: fpgallm.load_quant(e.fifo), ValueError, "FIFO", id="load_quant-fifo"),
    P(lambda e: fpgallm.load_quant(MODEL), ValueError, "GGUF", id="load_quant-not-gguf"),
    P(lambda e: fpgallm.load_quant(e.missing, model="x"), TypeError, "model", id="load_quant-model-str"),  # was: RuntimeError
    P(lambda e: e.q.save(None), TypeError, "path", id="quantmodel-save-None"),
    P(lambda e: e.q.save(str(e.tmp / "a\0b.gguf")), ValueError, "path.*NUL", id="quantmodel-save-NUL"),  # was: wrote "a"
    P(lambda e: e.q.save(e.folder), ValueError, "folder", id="quantmodel-save-folder"),
    P(lambda e: e.q.save(e.fifo), ValueError, "not a regular file", id="quantmodel-save-fifo"),
    P(lambda e: e.q.linear("layers.99.wq"), ValueError, "linear", id="quantmodel-linear-layer"),
    P(lambda e: e.q.linear(None), TypeError, "name", id="quantmodel-linear-None"),
    # model_from_weights / model_config / save_model / save / interleaved_to_hf
    P(lambda e: fpgallm._core.model_from_weights({}, {}), ValueError, "config.*dim", id="mfw-config-empty"),
    P(lambda e: fpgallm._core.model_from_weights(None, e.weights), TypeError, "config", id="mfw-config-None"),
    P(lambda e: fpgallm._core.model_from_weights(dict(e.config, dim="x"), e.weights), ValueError, "config.*dim",
      id="mfw-dim-str"),
    P(lambda e: fpgallm._core.model_from_weights(dict(e.config, dim=2**70), e.weights), ValueError, "config.*dim",
      id="mfw-dim-2^70"),  # was: wrapped around to a negative dim
    P(lambda e: fpgallm._core.model_from_weights(dict(e.config, dim=math.nan), e.weights), ValueError, "config.*dim",
      id="mfw-dim-nan"),
    P(lambda e: fpgallm._core.model_from_weights(dict(e.config, dim=64.0), e.weights), ValueError, "config.*dim",
      id="mfw-dim-float"),
    P(lambda e: fpgallm._core.model_from_weights(dict(e.config, norm_eps=math.nan), e.weights), ValueError,
      "config.*norm_eps", id="mfw-norm-eps-nan"),
    P(lambda e: fpgallm._core.model_from_weights(
        {"dim": 4096, "hidden_dim": 14336, "n_layers": 32, "n_heads": 32, "vocab_size": 128256, "seq_len": 8192},
        e.weights), ValueError, "weights", id="mfw-huge-config-small-arrays"),  # was: allocated 7B fp32 first
    P(lambda e: fpgallm._core.model_from_weights(e.config, with_nan(e.weights, "layers.1.wq")), ValueError,
      "weights.*NaN", id="mfw-nan-weights"),  # was: accepted
    P(lambda e: fpgallm._core.model_from_weights(e.config, dict(e.weights, token_embedding=e.weights[
        "token_embedding"].astype(np.complex64))), ValueError, "token_embedding", id="mfw-complex"),  # was: real part
    P(lambda e: fpgallm._core.model_from_weights(e.config, dict(e.weights, token_embedding=None)), ValueError,
      "token_embedding", id="mfw-None-array"),
    P(lambda e: fpgallm._core.model_from_weights(e.config, dict(e.weights, token_embedding="x")), ValueError,
      "token_embedding", id="mfw-str-array"),
    P(lambda e: fpgallm._core.model_config({"dim": 8}), ValueError, "config.*hidden_dim", id="model_config-missing"),
    P(lambda e: fpgallm._core.model_config(dict(e.config, dim=True)), ValueError, "config.*dim", id="model_config-bool"),
    P(lambda e: fpgallm._core.save_model(e.m, None), TypeError, "path", id="save_model-path-None"),
    P(lambda e: fpgallm._core.save_model(e.m, str(e.tmp / "a\0b.bin"), "bin"), ValueError, "path.*NUL",
      id="save_model-path-NUL"),
    P(lambda e: fpgallm._core.save_model(e.m, str(e.tmp / "x.bin"), "bogus"), ValueError, "format",
      id="save_model-format"),
    P(lambda e: fpgallm.save(e.m, None), TypeError, "path", id="save-path-None"),  # was: wrote a file named None
    P(lambda e: fpgallm.save(e.m, 5), TypeError, "path", id="save-path-int"),  # was: wrote a file named 5
    P(lambda e: fpgallm.save(e.m, str(e.tmp / "y.bin"), type=None), TypeError, "type", id="save-type-None"),
    P(lambda e: fpgallm.save(e.m, str(e.tmp / "y.gguf"), tokenizer=5), TypeError, "tokenizer", id="save-tokenizer-int"),
    P(lambda e: fpgallm.save(e.m, str(e.tmp / "y.gguf"), tokenizer=e.bpe), TypeError, "tokenizer",
      id="save-tokenizer-bpe"),
    P(lambda e: fpgallm.save(e.m, str(e.tmp / "y.gguf"), tokenizer=e.fifo), ValueError, "FIFO",
      id="save-tokenizer-fifo"),
    P(lambda e: fpgallm.save(None, str(e.tmp / "y.bin")), TypeError, "model", id="save-model-None"),
    P(lambda e: fpgallm.save("x", str(e.tmp / "y.bin"), config=e.config), TypeError, "model",
      id="save-model-str"),  # was: AttributeError
    P(lambda e: fpgallm.save({}, str(e.tmp / "y.bin"), config=5), TypeError, "config", id="save-config-int"),  # was: AttributeError
    P(lambda e: fpgallm.save({5: np.ones(3)}, str(e.tmp / "y.bin"), config=e.config), TypeError, "names",
      id="save-state-dict-int-name"),  # was: AttributeError
    P(lambda e: fpgallm.save({"model.layers.0.self_attn.q_proj.weight": np.ones((64, 64))}, str(e.tmp / "y.bin"),
                             config={}), ValueError, "config.*n_heads", id="save-hf-config-empty"),  # was: KeyError
    P(lambda e: fpgallm.save({"tok_embeddings.weight": "x"}, str(e.tmp / "y.bin"), config=e.config), TypeError,
      "tok_embeddings.weight", id="save-state-dict-str-tensor"),
    P(lambda e: fpgallm.weights.engine_to_hf({"layers.0.bogus": np.ones(3)}, e.config), ValueError, "weights",
      id="engine_to_hf-name"),  # was: KeyError
    P(lambda e: fpgallm.weights.engine_to_meta({"bogus": np.ones(3)}), ValueError, "weights", id="engine_to_meta-name"),
    P(lambda e: fpgallm.weights.engine_to_meta(None), TypeError, "weights", id="engine_to_meta-None"),  # was: AttributeError
    P(lambda e: fpgallm.weights.to_engine(None, e.config), TypeError, "state_dict", id="to_engine-None"),
    P(lambda e: fpgallm.weights.as_numpy(None), TypeError, "None", id="as_numpy-None"),  # was: array(nan)
    P(lambda e: fpgallm._core.interleaved_to_hf(np.ones((8, 4), np.float32), 0), ValueError, "n_heads",
      id="interleaved_to_hf-0-heads"),
    P(lambda e: fpgallm._core.interleaved_to_hf(np.zeros((2**32 + 4, 0), np.float32), 2), ValueError, "w",
      id="interleaved_to_hf-2^32-rows"),  # was: returned shape (4, 0)
    P(lambda e: fpgallm._core.hf_to_interleaved(np.ones(8, np.float32), 2), ValueError, "w", id="hf_to_interleaved-1d"),
    # designs
    P(lambda e: fpgallm.load_design(None), TypeError, "path", id="load_design-None"),
    P(lambda e: fpgallm.load_design(e.missing + "\0"), ValueError, "path.*NUL", id="load_design-NUL"),
    P(lambda e: fpgallm.load_design(e.fifo), ValueError, "FIFO", id="load_design-fifo"),
    P(lambda e: fpgallm.load_design(MODEL), ValueError, "JSON", id="load_design-not-json"),
    P(lambda e: fpgallm.design_problems({"context": 2**63}), ValueError, "context", id="design-2^63"),  # was: RuntimeError
    P(lambda e: fpgallm.design_problems({"context": 2**64}), ValueError, "context", id="design-2^64"),  # was: RuntimeError
    P(lambda e: fpgallm.design_problems({"context": 10**30}), ValueError, "context", id="design-10^30"),
    P(lambda e: fpgallm.design_problems({"context": "x"}), ValueError, "context", id="design-str"),
    P(lambda e: fpgallm.design_problems({"clock_mhz": math.nan}), ValueError, "clock_mhz", id="design-nan"),
    P(lambda e: fpgallm.design_problems({"context": np.bool_(True)}), ValueError, "context", id="design-numpy-bool"),
    P(lambda e: fpgallm.design_problems({"context": np.float32(5.5)}), ValueError, "context", id="design-numpy-float"),
    P(lambda e: fpgallm.design_problems({"x": object()}), TypeError, "design.x", id="design-object"),
    P(lambda e: fpgallm.design_problems({1: 2}), TypeError, "design", id="design-int-key"),
    P(lambda e: fpgallm.design_problems(None), TypeError, "design", id="design-None"),
    # the int8 matrix unit
    P(lambda e: fpgallm.quantize_rows(np.full((2, 3), np.nan, np.float32)), ValueError, "x.*NaN",
      id="quantize_rows-nan"),  # was: NaN quantized to 0
    P(lambda e: fpgallm.quantize_rows(np.array([[1.0, np.inf]], np.float32)), ValueError, "x.*infinite",
      id="quantize_rows-inf"),
    P(lambda e: fpgallm.quantize_rows(np.array([[1 + 2j]])), TypeError, "x", id="quantize_rows-complex"),  # was: real part
    P(lambda e: fpgallm.quantize_rows(np.array([["a"]])), TypeError, "x", id="quantize_rows-strings"),
    P(lambda e: fpgallm.quantize_rows(None), TypeError, "x", id="quantize_rows-None"),
    P(lambda e: fpgallm.quantize_rows(np.ones(4, np.float32)), ValueError, "x", id="quantize_rows-1d"),
    P(lambda e: fpgallm.quantize_rows(np.zeros((2**32 + 1, 0), np.float32)), ValueError, "x",
      id="quantize_rows-2^32-rows"),  # was: returned 1 row
    P(lambda e: fpgallm.matmul_int8(np.ones((4, 8)), e.q8), TypeError, "a", id="matmul_int8-float"),  # was: truncated
    P(lambda e: fpgallm.matmul_int8(np.full((4, 8), 300), e.q8), ValueError, "a.*int8", id="matmul_int8-300"),  # was: wrapped
    P(lambda e: fpgallm.matmul_int8(np.full((4, 8), 2**64 - 1, np.uint64), e.q8), ValueError, "a.*int8",
      id="matmul_int8-uint64-max"),
    P(lambda e: fpgallm.matmul_int8(e.q8, None), TypeError, "b", id="matmul_int8-None"),
    P(lambda e: fpgallm.matmul_int8(e.q8, np.ones((4, 7), np.int8)), ValueError, "columns", id="matmul_int8-columns"),
    P(lambda e: fpgallm.matmul_int8(np.zeros((2**31 + 1, 0), np.int8), np.zeros((2, 0), np.int8)), ValueError, "a",
      id="matmul_int8-2^31-rows"),
    P(lambda e: fpgallm.matmul_int8(e.q8, e.q8, -1), ValueError, "threads", id="matmul_int8-threads"),
    P(lambda e: fpgallm.matmul_int8_dequant(e.q8, np.ones((2, 2), np.float32), e.q8, np.ones(4, np.float32)),
      ValueError, "sa", id="dequant-sa-2d"),  # was: accepted
    P(lambda e: fpgallm.matmul_int8_dequant(e.q8, np.ones(3, np.float32), e.q8, np.ones(4, np.float32)), ValueError,
      "sa", id="dequant-sa-length"),
    P(lambda e: fpgallm.matmul_int8_dequant(e.q8, np.ones(4, np.float32), e.q8, np.ones(4, np.complex64)), TypeError,
      "sb", id="dequant-sb-complex"),
    P(lambda e: fpgallm.linear_int8(np.full((4, 8), np.nan, np.float32), e.b), ValueError, "a.*NaN",
      id="linear_int8-nan"),  # was: output 0
    P(lambda e: fpgallm.linear_int8(e.a, np.full((3, 8), np.inf, np.float32)), ValueError, "b.*infinite",
      id="linear_int8-inf"),  # was: output NaN
    P(lambda e: fpgallm.linear_int8(e.a.astype(np.complex64), e.b), TypeError, "a", id="linear_int8-complex"),
    P(lambda e: fpgallm.linear_int8(None, e.b), TypeError, "a", id="linear_int8-None"),
    P(lambda e: fpgallm.linear_int8_reference(e.a, np.full((3, 8), np.nan, np.float32)), ValueError, "b",
      id="linear_int8_reference-nan"),
    P(lambda e: fpgallm.linear_fp32(e.a.astype(np.complex64), e.b), TypeError, "a", id="linear_fp32-complex"),
    P(lambda e: fpgallm.linear_fp32(np.zeros((2**31 + 1, 0), np.float32), np.zeros((1, 0), np.float32)), ValueError,
      "a", id="linear_fp32-2^31-rows"),
    # the engine's vector operations
    P(lambda e: fpgallm._core.rmsnorm(e.a, np.ones(8, np.float32), math.nan), ValueError, "eps", id="rmsnorm-eps-nan"),
    P(lambda e: fpgallm._core.rmsnorm(e.a, np.ones(8, np.float32), -1.0), ValueError, "eps", id="rmsnorm-eps-negative"),
    P(lambda e: fpgallm._core.rmsnorm(None, np.ones(8, np.float32), 1e-5), TypeError, "x", id="rmsnorm-None"),
    P(lambda e: fpgallm._core.rmsnorm(e.a, np.ones(7, np.float32), 1e-5), ValueError, "weight", id="rmsnorm-shape"),
    P(lambda e: fpgallm._core.rope(e.x4, e.p2, math.nan), ValueError, "theta", id="rope-theta-nan"),
    P(lambda e: fpgallm._core.rope(e.x4, e.p2, 0.0), ValueError, "theta", id="rope-theta-0"),
    P(lambda e: fpgallm._core.rope(e.x4, np.array([0.5, 1.5]), 1e4), TypeError, "positions",
      id="rope-positions-float"),  # was: truncated
    P(lambda e: fpgallm._core.rope(e.x4, np.array([0, 2**40]), 1e4), ValueError, "positions",
      id="rope-positions-2^40"),  # was: wrapped
    P(lambda e: fpgallm._core.rope(e.x4, np.array([-1, 0]), 1e4), ValueError, "positions", id="rope-positions-negative"),
    P(lambda e: fpgallm._core.rope(e.x4, np.zeros(3, np.int64), 1e4), ValueError, "position", id="rope-positions-count"),
    P(lambda e: fpgallm._core.attention(e.x4, e.x4, e.x4, np.array([0.0, 1.0])), TypeError, "positions",
      id="attention-positions-float"),
    P(lambda e: fpgallm._core.attention(e.x4, e.x4, e.x4, np.array([0, 2])), ValueError, "position",
      id="attention-positions-past-keys"),
    P(lambda e: fpgallm._core.attention(None, e.x4, e.x4, e.p2), TypeError, "q", id="attention-None"),
    P(lambda e: fpgallm._core.swiglu(np.ones(3, np.complex64), np.ones(3, np.float32)), TypeError, "gate",
      id="swiglu-complex"),
    P(lambda e: fpgallm._core.swiglu(np.ones(3, np.float32), np.ones(4, np.float32)), ValueError, "gate",
      id="swiglu-shapes"),
]

PLANNING_CASES = [
    P(lambda e: fpgallm.predict(None, e.design), TypeError, "model", id="predict-model-None"),  # was: RuntimeError
    P(lambda e: fpgallm.predict(5, e.design), TypeError, "model", id="predict-model-int"),
    P(lambda e: fpgallm.predict(MODEL + "\0x", e.design), ValueError, "model.*NUL", id="predict-model-NUL"),
    P(lambda e: fpgallm.predict(e.m, None), TypeError, "design", id="predict-design-None"),
    P(lambda e: fpgallm.predict(e.m, {"context": 2**64}), ValueError, "context", id="predict-design-2^64"),  # was: RuntimeError
    P(lambda e: fpgallm.predict(e.m, e.fifo), ValueError, "FIFO", id="predict-design-fifo"),
    P(lambda e: fpgallm.predict(e.m, e.design, batch=0), ValueError, "batch", id="predict-batch-0"),
    P(lambda e: fpgallm.predict(e.m, e.design, batch=4097), ValueError, "batch", id="predict-batch-4097"),
    P(lambda e: fpgallm.predict(e.m, e.design, batch=2**31), TypeError, "batch", id="predict-batch-2^31"),
    P(lambda e: fpgallm.predict(e.m, e.design, prompt=-5), ValueError, "prompt", id="predict-prompt-negative"),
    P(lambda e: fpgallm.predict(e.m, e.design, context=0), ValueError, "context", id="predict-context-0"),
    P(lambda e: fpgallm.predict(e.m, e.design, scheme="bogus"), ValueError, "scheme", id="predict-scheme"),
    P(lambda e: fpgallm.predict(e.m, e.design, device="bogus"), ValueError, "device", id="predict-device"),
    P(lambda e: fpgallm.simulate(None, e.design), TypeError, "model", id="simulate-model-None"),  # was: RuntimeError
    P(lambda e: fpgallm.simulate(e.m, e.design, stage="bogus"), ValueError, "stage", id="simulate-stage"),
    P(lambda e: fpgallm.simulate(e.m, e.design, prompt=0), ValueError, "prompt", id="simulate-prompt-0"),
    P(lambda e: fpgallm.simulate(e.m, e.design, stage="prefill", prompt=-1), ValueError, "prompt",
      id="simulate-prompt-negative"),
    P(lambda e: fpgallm.simulate(e.m, e.design, context=-1), ValueError, "context", id="simulate-context-negative"),  # was: taken as 0
    P(lambda e: fpgallm.simulate(e.m, e.design, context=10**6), ValueError, "context", id="simulate-context-huge"),
    P(lambda e: fpgallm.simulate(e.m, {"context": "x"}), ValueError, "context", id="simulate-design-str"),
]


@pytest.mark.parametrize("call, error, words", CORE_CASES)
def test_core_refuses_bad_arguments(env, call, error, words):
    with pytest.raises(error, match=words) as info:
        call(env)
    assert "internal error" not in str(info.value)


@pytest.mark.skipif(not HAS_PLANNING, reason="built without perf/sim")
@pytest.mark.parametrize("call, error, words", PLANNING_CASES)
def test_planning_refuses_bad_arguments(env, call, error, words):
    with pytest.raises(error, match=words):
        call(env)


def test_good_arguments_still_work(env, tmp_path):
    """What the checks must not refuse: path-like paths, bytes paths, numpy integers, integer
    arrays of int8 codes, products without columns (the empty sum)."""
    assert fpgallm.load(pathlib.Path(MODEL)).config["dim"] == 64
    assert fpgallm.Tokenizer(pathlib.Path(TOKENIZER)).vocab_size == 512
    assert fpgallm.Tokenizer(env.m, os.fsencode(TOKENIZER)).vocab_size == 512
    assert fpgallm.design_problems({"context": np.int64(64)}) == []
    assert np.array_equal(fpgallm.matmul_int8(np.full((2, 3), -128, np.int64), np.ones((1, 3), np.int8)),
                          [[-384], [-384]])
    assert not fpgallm.linear_int8(np.ones((4, 0), np.float32), np.ones((3, 0), np.float32)).any()  # was: garbage
    assert fpgallm.linear_int8(np.ones((4, 0), np.float32), np.ones((3, 0), np.float32)).shape == (4, 3)
    env.q.save(tmp_path / "q.gguf")
    assert fpgallm.load_quant(tmp_path / "q.gguf", model=env.m).scheme == "w8a8"
    assert fpgallm.save(env.m, tmp_path / "m.bin") > 0
    assert fpgallm._core.model_config(env.config) == env.config
    assert fpgallm.generate(env.m, env.tok, "Once", steps=8, temperature=0)["prompt_tokens"] == 2


# ---- fpgallm.torch ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ft():
    return pytest.importorskip("fpgallm.torch")


TINY = {"dim": 8, "hidden_dim": 16, "n_layers": 1, "n_heads": 2, "vocab_size": 32, "seq_len": 16}


def torch_cases():
    import torch

    t = torch.ones
    ids = torch.tensor([[1, 2]])
    return [
        P(lambda ft, net: ft.accelerate(None), TypeError, "module", id="accelerate-None"),  # was: AttributeError
        P(lambda ft, net: ft.accelerate("x"), TypeError, "module", id="accelerate-str"),
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4), threads=-1), ValueError, "threads",
          id="accelerate-threads-negative"),  # was: accepted, failed at the first forward
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4), threads=2**31), ValueError, "threads",
          id="accelerate-threads-2^31"),
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4), threads="4"), TypeError, "threads",
          id="accelerate-threads-str"),
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4), threads=None), TypeError, "threads",
          id="accelerate-threads-None"),
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4), quant=None), ValueError, "quant", id="accelerate-quant"),
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4), design={"context": 2**64}), ValueError, "context",
          id="accelerate-design-2^64"),  # was: RuntimeError
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4))(None), TypeError, "x", id="accelerated-input-None"),
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4))(t(2, 7)), ValueError, "x", id="accelerated-input-width"),
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4))(t(2, 8, dtype=torch.complex64)), TypeError, "x",
          id="accelerated-input-complex"),  # was: imaginary part dropped
        P(lambda ft, net: ft.accelerate(torch.nn.Linear(8, 4))(torch.full((2, 8), float("nan"))), ValueError, "NaN",
          id="accelerated-input-nan"),  # was: NaN quantized to 0
        P(lambda ft, net: ft.matmul_nt(None, t(3, 8)), TypeError, "a", id="matmul_nt-None"),  # was: AttributeError
        P(lambda ft, net: ft.matmul_nt(np.ones((2, 8)), t(3, 8)), TypeError, "a", id="matmul_nt-numpy"),
        P(lambda ft, net: ft.matmul_nt(t(2, 8), t(8)), ValueError, "b", id="matmul_nt-1d"),  # was: AxisError
        P(lambda ft, net: ft.matmul_nt(t(2, 8), t(3, 7)), ValueError, "columns", id="matmul_nt-columns"),
        P(lambda ft, net: ft.matmul_nt(t(2, 8), t(3, 8), threads=-1), ValueError, "threads", id="matmul_nt-threads"),
        P(lambda ft, net: ft.matmul_nt(t(2, 8), t(3, 8), b_codes=5), TypeError, "b_codes", id="matmul_nt-b_codes"),
        P(lambda ft, net: ft.linear(t(2, 8), t(3, 8), bias=t(5)), ValueError, "bias", id="linear-bias"),  # was: RuntimeError
        P(lambda ft, net: ft.linear(t(()), t(3, 8)), ValueError, "x", id="linear-0d"),  # was: IndexError
        P(lambda ft, net: ft.linear(t(2, 8), None), TypeError, "weight", id="linear-weight-None"),
        P(lambda ft, net: ft.rmsnorm(None, t(8), 1e-5), TypeError, "x", id="rmsnorm-None"),  # was: AttributeError
        P(lambda ft, net: ft.rmsnorm(t(2, 8), t(8), math.nan), ValueError, "eps", id="rmsnorm-eps-nan"),
        P(lambda ft, net: ft.rope(t(1, 2, 2, 4), [0, 1], 1e4), TypeError, "positions", id="rope-list"),  # was: AttributeError
        P(lambda ft, net: ft.rope(t(1, 2, 2, 4, dtype=torch.float64), torch.zeros(3, dtype=torch.int64), 1e4),
          ValueError, "position", id="rope-float64-count"),  # was: RuntimeError (torch path)
        P(lambda ft, net: ft.rope(t(1, 2, 2, 4), torch.tensor([0.0, 1.0]), 1e4), TypeError, "positions",
          id="rope-float-positions"),
        P(lambda ft, net: ft.attention(t(1, 2, 2, 4), t(1, 2, 2, 4), t(1, 2, 2, 4), None), TypeError, "positions",
          id="attention-None"),
        P(lambda ft, net: ft.attention(t(1, 2, 2, 4).double(), t(1, 2, 3, 4).double(), t(1, 2, 3, 4).double(),
                                       torch.tensor([0, 1])), ValueError, "kv_heads",
          id="attention-float64-heads"),  # was: RuntimeError
        P(lambda ft, net: ft.swiglu(t(3).double(), t(4).double()), ValueError, "gate", id="swiglu-float64"),  # was: RuntimeError
        P(lambda ft, net: ft.swiglu(None, t(4)), TypeError, "gate", id="swiglu-None"),
        P(lambda ft, net: ft.weight_codes_int8(None), TypeError, "b", id="weight_codes-None"),
        P(lambda ft, net: ft.weight_codes_int8(np.ones(8)), ValueError, "b", id="weight_codes-1d"),  # was: AxisError
        P(lambda ft, net: ft.weight_codes_int8(np.full((2, 8), np.nan)), ValueError, "b", id="weight_codes-nan"),
        P(lambda ft, net: ft.product_error_bound(np.ones(8), np.ones((2, 8))), ValueError, "a and b",
          id="product_error_bound-1d"),
        P(lambda ft, net: ft.Llama(None), TypeError, "config", id="llama-None"),
        P(lambda ft, net: ft.Llama({}), ValueError, "config", id="llama-empty"),  # was: KeyError
        P(lambda ft, net: ft.Llama(dict(TINY, dim=-1)), ValueError, "config", id="llama-dim-negative"),  # was: RuntimeError
        P(lambda ft, net: ft.Llama(dict(TINY, n_layers=-1)), ValueError, "config", id="llama-layers-negative"),  # was: accepted
        P(lambda ft, net: ft.Llama(dict(TINY, n_heads=3)), ValueError, "config", id="llama-heads"),
        P(lambda ft, net: ft.Llama(dict(TINY, norm_eps=math.nan)), ValueError, "config", id="llama-eps-nan"),
        P(lambda ft, net: ft.Llama(dict(TINY, dim=2**40)), ValueError, "config", id="llama-dim-2^40"),  # was: RuntimeError
        P(lambda ft, net: ft.Llama(dict(TINY, dim=1.5)), ValueError, "config", id="llama-dim-float"),
        P(lambda ft, net: ft.Llama(dict(TINY, arch="gpt2")), ValueError, "config", id="llama-arch"),
        P(lambda ft, net: net(torch.zeros((1, 0), dtype=torch.int64)), ValueError, "tokens", id="forward-empty"),  # was: RuntimeError
        P(lambda ft, net: net(ids.to(torch.complex64)), TypeError, "tokens", id="forward-complex"),
        P(lambda ft, net: net(ids, start_pos=None), TypeError, "start_pos", id="forward-start-None"),
        P(lambda ft, net: net(ids, start_pos=1.5), TypeError, "start_pos", id="forward-start-float"),
        P(lambda ft, net: net(ids, start_pos=-1), ValueError, "positions", id="forward-start-negative"),
        P(lambda ft, net: net(ids, cache=[]), ValueError, "cache", id="forward-cache"),  # was: IndexError
        P(lambda ft, net: net(torch.tensor([[1, 32]])), ValueError, "tokens", id="forward-past-vocab"),
        P(lambda ft, net: net.generate([], 5), ValueError, "prompt_tokens", id="generate-empty"),  # was: IndexError
        P(lambda ft, net: net.generate(["x"], 5), TypeError, "prompt_tokens", id="generate-str-id"),
        P(lambda ft, net: net.generate("abc", 5), TypeError, "prompt_tokens", id="generate-str"),
        P(lambda ft, net: net.generate([1, 99], 5), ValueError, "prompt_tokens", id="generate-past-vocab"),
        P(lambda ft, net: net.generate([1] * 20, 0), ValueError, "prompt_tokens", id="generate-long-prompt"),  # was: cut
        P(lambda ft, net: net.generate([1], -5), ValueError, "steps", id="generate-steps-negative"),  # was: accepted
        P(lambda ft, net: net.generate([1], None), TypeError, "steps", id="generate-steps-None"),
        P(lambda ft, net: net.save_pretrained(None), TypeError, "path", id="save_pretrained-None"),  # was: wrote "None"
        P(lambda ft, net: net.load_state_dict(None), TypeError, "state_dict", id="load_state_dict-None"),
        P(lambda ft, net: ft.llama_from_model(None), TypeError, "fpgallm.Model", id="llama_from_model-None"),
        P(lambda ft, net: ft.from_pretrained(None), TypeError, "path", id="from_pretrained-None"),
        P(lambda ft, net: ft.from_pretrained(MODEL + "\0x"), ValueError, "path.*NUL", id="from_pretrained-NUL"),
        P(lambda ft, net: ft.from_pretrained(MODEL, threads=-1), ValueError, "threads", id="from_pretrained-threads"),
        P(lambda ft, net: ft.from_pretrained(MODEL, quant=None), TypeError, "quant", id="from_pretrained-quant-None"),
        P(lambda ft, net: ft.from_pretrained(MODEL, accelerator=5), ValueError, "accelerator",
          id="from_pretrained-accelerator"),
    ]


try:
    TORCH_CASES = torch_cases()
except ImportError:
    TORCH_CASES = [P(None, None, None, marks=pytest.mark.skip(reason="no torch"), id="no-torch")]


@pytest.mark.parametrize("call, error, words", TORCH_CASES)
def test_torch_refuses_bad_arguments(ft, call, error, words):
    net = ft.Llama(TINY)
    with pytest.raises(error, match=words):
        call(ft, net)
