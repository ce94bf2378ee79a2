"""fpgallm.quantize / load_quant / QuantModel against the command line: the file QuantModel.save
writes is byte for byte the one `fpgallm quantize` writes, its measurements are the
command's, and run / eval with quant= give `fpgallm run --quant` / `eval --quant`; the int8
codes are checked against an independent numpy statement of docs/quantization.md 2.1."""
import json
import subprocess

import numpy as np
import pytest

import fpgallm
from conftest import MODEL, SAMPLE_TEXT, TOKENIZER, fpgallm_binary


@pytest.fixture(scope="module")
def calib_file(tmp_path_factory):
    """Four stories (two calibrate, two held out) keep the evaluations short."""
    path = tmp_path_factory.mktemp("calib") / "calib.txt"
    lines = open(SAMPLE_TEXT, encoding="utf-8").read().splitlines()[:4]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def w8a8(model, tokenizer, calib_file):
    return fpgallm.quantize(model, tokenizer, calib_file, scheme="w8a8")


@pytest.fixture(scope="module")
def model():
    return fpgallm.load(MODEL)


@pytest.fixture(scope="module")
def tokenizer(model):
    return fpgallm.Tokenizer(model, TOKENIZER)


def cli_json(*args) -> dict:
    out = subprocess.run([fpgallm_binary(), *args, "--json"], check=True, capture_output=True, text=True, timeout=240)
    return json.loads(out.stdout)


@pytest.mark.parametrize("scheme", ["w8a8", "w4a16"])
def test_save_writes_the_bytes_of_fpgallm_quantize(tmp_path, model, tokenizer, calib_file, w8a8, scheme):
    cli_out = tmp_path / "cli.gguf"
    cli = cli_json("quantize", MODEL, "--calib", calib_file, "-z", TOKENIZER, "--scheme", scheme, "-o", str(cli_out))
    q = w8a8 if scheme == "w8a8" else fpgallm.quantize(model, tokenizer, calib_file, scheme=scheme)
    py_out = tmp_path / "py.gguf"
    q.save(str(py_out))
    assert py_out.read_bytes() == cli_out.read_bytes()
    assert q.scheme == scheme and q.plan == cli["plan"]
    assert q.linear_weight_bytes == cli["linear_weight_bytes"]
    for key in ("perplexity", "fp32_perplexity", "rel_increase"):
        assert q.report[key] == pytest.approx(cli[key], rel=1e-12), key
    assert q.report["held_out"]["tokens"] == cli["held_out"]["tokens"]


def test_run_and_eval_with_the_quantized_model(tmp_path, model, tokenizer, calib_file, w8a8):
    q = w8a8
    path = tmp_path / "w8a8.gguf"
    q.save(str(path))
    run = cli_json("run", MODEL, "-z", TOKENIZER, "-t", "0", "-n", "120", "--quant", str(path))
    assert fpgallm.generate(model, tokenizer, "", steps=120, temperature=0, quant=q)["tokens"] == run["tokens"]
    loaded = fpgallm.load_quant(str(path), model)
    assert loaded.report is None and loaded.plan == q.plan and loaded.calibration_file == calib_file
    ev = cli_json("eval", MODEL, "-z", TOKENIZER, "--text", calib_file, "--quant", str(path))
    text = open(calib_file, encoding="utf-8").read()
    got = fpgallm.perplexity(model, tokenizer, text, quant=loaded)
    assert got["part"] == "held-out" and ev["part"] == "held-out"
    assert got["perplexity"] == pytest.approx(ev["perplexity"], rel=1e-12)
    assert got["tokens"] == ev["tokens"]
    # The held-out perplexity quantize() measured is the one eval reports.
    assert q.report["perplexity"] == pytest.approx(ev["perplexity"], rel=1e-12)


def test_int8_codes_and_scales_are_docs_quantization_2_1(model, w8a8):
    """W8A8 weights: scale = the smallest fp16 value >= max|w| / 127 per output row (held in
    fp32; fp16 so that ggml's Q8_0 holds it), codes = round half to even of w / scale, computed
    here in numpy from the checkpoint's fp32 weights."""
    q = w8a8
    w = model.weights()["layers.2.w1"]
    layer = q.linear("layers.2.w1")
    assert layer["format"] == "int8" and layer["act"] == "int8-dynamic"
    exact = (np.abs(w).max(axis=1) / np.float32(127)).astype(np.float32)
    half = exact.astype(np.float16)  # round to nearest, then one fp16 step up where that fell below
    below = half.astype(np.float32) < exact
    half[below] = np.nextafter(half[below], np.float16(np.inf))
    scale = half.astype(np.float32)
    codes = np.clip(np.rint(w * (np.float32(1) / scale)[:, None]), -127, 127).astype(np.int8)
    assert np.array_equal(layer["scale"], scale)
    assert np.array_equal(layer["q"], codes)
    assert np.array_equal(layer["dequantized"], codes.astype(np.float32) * scale[:, None])
    # The model the quantized engine reads holds these dequantized weights.
    assert np.array_equal(q.model.weights()["layers.2.w1"], layer["dequantized"])
    assert np.array_equal(q.linear("blk.2.w1")["q"], codes)
    assert q.linear("cls")["q"].shape == (model.config["vocab_size"], model.config["dim"])


def test_bad_input(tmp_path, model, tokenizer, calib_file, w8a8):
    with pytest.raises(ValueError, match="scheme"):
        fpgallm.quantize(model, tokenizer, calib_file, scheme="w3a3")
    with pytest.raises(ValueError, match="missing.txt"):
        fpgallm.quantize(model, tokenizer, str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="layers.9.wq"):
        w8a8.linear("layers.9.wq")
    short = tmp_path / "short.gguf"
    short.write_bytes(b"GGUF")
    with pytest.raises(ValueError, match="short.gguf"):
        fpgallm.load_quant(str(short))
    good = tmp_path / "good.gguf"
    w8a8.save(str(good))
    with pytest.raises(ValueError, match="shape"):
        fpgallm.load_quant(str(good), fpgallm.load("stories15m"))  # a preset of another shape
