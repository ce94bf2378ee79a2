"""fpgallm._core: bindings of the loaders, the engine, designs and the int8 matrix unit,
checked against independent numpy statements and double-precision references."""
import math

import numpy as np
import pytest

import fpgallm
from conftest import MODEL, SAMPLE_TEXT, TOKENIZER


def contract_quantize(x: np.ndarray):
    """docs/quantization.md section 1 and 3.1 in numpy float32: s = amax / 127,
    q = sat(rne(v * (1 / s)), 127), q = 0 when s = 0."""
    x = x.astype(np.float32)
    amax = np.abs(x).max(axis=1)
    s = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(s == 0, np.float32(0), np.float32(1) / s).astype(np.float32)
    q = np.clip(np.rint((x * inv[:, None]).astype(np.float32)), -127, 127).astype(np.int8)
    return q, s


def contract_linear(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Section 4: y = (float(acc) * s_b) * s_a with exact integer acc."""
    qa, sa = contract_quantize(a)
    qb, sb = contract_quantize(b)
    acc = qa.astype(np.int64) @ qb.astype(np.int64).T
    return (acc.astype(np.float32) * sb[None, :]).astype(np.float32) * sa[:, None]


def test_quantize_rows_hand_cases():
    # amax 127 gives s = 1 exactly, so the codes are rne of the values: ties go to even.
    x = np.array([[127.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49]], dtype=np.float32)
    q, s = fpgallm.quantize_rows(x)
    assert s.tolist() == [1.0]
    assert q.tolist() == [[127, 0, 2, 2, 0, -2, -2, 3]]
    q, s = fpgallm.quantize_rows(np.zeros((2, 5), dtype=np.float32))
    assert s.tolist() == [0.0, 0.0] and not q.any()
    q, _ = fpgallm.quantize_rows(np.array([[-3.0, 3.0, 1.0]], dtype=np.float32))
    assert q.tolist() == [[-127, 127, 42]]  # 1 * (1 / (3/127)) = 42.33 -> 42; never -128


@pytest.mark.parametrize("shape", [(1, 7), (5, 64), (33, 172), (8, 1000)])
def test_quantize_rows_matches_contract_bit_for_bit(shape):
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    x = (rng.standard_normal(shape) * rng.uniform(0.01, 10, size=(shape[0], 1))).astype(np.float32)
    q, s = fpgallm.quantize_rows(x)
    q_ref, s_ref = contract_quantize(x)
    assert np.array_equal(s, s_ref)
    assert np.array_equal(q, q_ref)
    assert q.min() >= -127


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 5, 7), (16, 48, 64), (70, 33, 300)])
def test_integer_product_is_exact(m, n, k):
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(-127, 128, size=(m, k), dtype=np.int8)
    b = rng.integers(-127, 128, size=(n, k), dtype=np.int8)
    acc = fpgallm.matmul_int8(a, b)
    assert acc.dtype == np.int32
    assert np.array_equal(acc, a.astype(np.int64) @ b.astype(np.int64).T)
    extreme = np.full((2, k), 127, dtype=np.int8)
    assert (fpgallm.matmul_int8(extreme, -extreme) == -127 * 127 * k).all()


@pytest.mark.parametrize("m,n,k", [(1, 16, 64), (9, 40, 64), (64, 172, 64), (128, 256, 512)])
def test_linear_int8_matches_contract_and_bound(m, n, k):
    from fpgallm.torch import product_error_bound

    rng = np.random.default_rng(7 * m + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    y = fpgallm.linear_int8(a, b)
    assert np.array_equal(y, contract_linear(a, b))  # bit for bit
    qa, sa = fpgallm.quantize_rows(a)
    qb, sb = fpgallm.quantize_rows(b)
    assert np.array_equal(fpgallm.matmul_int8_dequant(qa, sa, qb, sb), y)
    assert np.array_equal(fpgallm.linear_int8_reference(a, b), y)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    bound = product_error_bound(a, b)
    # the bound covers the quantization; fp32 rounding of the result adds a few ulps
    assert (np.abs(y - exact) <= bound * 1.0001 + np.abs(exact) * 1e-6).all()
    assert np.abs(y - exact).max() > 0  # it did quantize


def test_kernel_path_over_token_blocks_and_threads():
    """Many tokens (several 64-token invocations of the matrix unit, in parallel), zero
    rows, a contraction longer than one 256-column tile: still the contract, bit for bit."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((200, 700)).astype(np.float32)
    a[5] = 0
    b = rng.standard_normal((300, 700)).astype(np.float32)
    ref = contract_linear(a, b)
    for threads in (1, 2, 0):
        assert np.array_equal(fpgallm.linear_int8(a, b, threads), ref)
    assert not ref[5].any()
    assert fpgallm.matrix_unit_source


def test_linear_fp32_matches_double():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((10, 300)).astype(np.float32)
    b = rng.standard_normal((20, 300)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.allclose(fpgallm.linear_fp32(a, b), exact, rtol=0, atol=1e-4)


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError):
        fpgallm.linear_int8(np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError):
        fpgallm.quantize_rows(np.zeros(3, np.float32))


def test_load_model_config_and_weights():
    m = fpgallm.load(MODEL)
    c = m.config
    assert (c["dim"], c["n_layers"], c["n_heads"], c["n_kv_heads"], c["vocab_size"]) == (64, 5, 8, 4, 512)
    assert m.format == "llama2c"
    w = m.weights()
    assert w["layers.0.wq"].shape == (64, 64)
    assert w["layers.4.w2"].shape == (64, 172)
    assert w["token_embedding"].shape == (512, 64)
    assert not w["layers.0.wq"].flags.writeable
    # the llama2.c file: 7 int32 header, then the embedding table as float32
    raw = np.fromfile(MODEL, dtype=np.float32, count=7 + 512 * 64)[7:].reshape(512, 64)
    assert np.array_equal(raw, w["token_embedding"])


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(fpgallm.InputError, match="missing.bin"):
        fpgallm.load(str(tmp_path / "missing.bin"))
    bad = tmp_path / "short.bin"
    bad.write_bytes(b"\x01\x02\x03")
    with pytest.raises(ValueError, match="short.bin"):
        fpgallm.load(str(bad))


def test_generate_greedy_story():
    m = fpgallm.load(MODEL)
    tok = fpgallm.Tokenizer(m, TOKENIZER)
    g = fpgallm.generate(m, tok, "", steps=40, temperature=0.0)
    # the bundled model's known greedy story (README, llama2.c's run.c gives the same)
    assert g["text"].startswith("Once upon a time, there was a little girl named Lily.")
    assert g["tokens"][0] == fpgallm.BOS


def test_forward_logits_and_perplexity_against_numpy():
    m = fpgallm.load(MODEL)
    tok = fpgallm.Tokenizer(m, TOKENIZER)
    story = open(SAMPLE_TEXT, encoding="utf-8").read().splitlines()[0]
    tokens = tok.encode(story, True, False)
    assert len(tokens) <= m.config["seq_len"]
    logits = fpgallm.Transformer(m).logits(tokens).astype(np.float64)
    t = fpgallm.Transformer(m)
    assert np.array_equal(t.forward(tokens[0], 0), logits[0].astype(np.float32))
    logz = logits.max(axis=1) + np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1))
    nll = logz[:-1] - logits[np.arange(len(tokens) - 1), tokens[1:]]
    text = tok.decode_all(tokens)
    p = fpgallm.perplexity(m, tok, story)
    assert p["sequences"] == 1
    assert p["tokens"] == len(tokens) - 1
    assert math.isclose(p["perplexity"], math.exp(nll.mean()), rel_tol=1e-5)
    assert text and math.exp(nll.mean()) < 20


def test_designs():
    d = fpgallm.default_design()
    assert fpgallm.design_problems(d) == []
    d["matrix_unit"]["rows"] = 0
    problems = fpgallm.design_problems(d)
    assert problems and "matrix_unit.rows" in problems[0]
