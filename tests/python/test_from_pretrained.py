"""fpgallm.torch.from_pretrained: a checkpoint loaded by the C++ loaders as a torch Llama
computes the engine's bits (norms, RoPE, attention and SwiGLU forward through the engine's
own functions) and gives the same 200 greedy tokens as `fpgallm run`, in fp32 and in W8A8
against `fpgallm run --quant`."""
import json
import subprocess

import numpy as np
import pytest
import torch

import fpgallm
import fpgallm.torch as ft
from conftest import MODEL, SAMPLE_TEXT, TOKENIZER, fpgallm_binary

STEPS = 200


def cli_greedy_tokens(*extra) -> list:
    out = subprocess.run([fpgallm_binary(), "run", MODEL, "-z", TOKENIZER, "-t", "0", "-n", str(STEPS), "--json",
                          *extra], check=True, capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)["tokens"]


@pytest.fixture(scope="module")
def fp32_cli_tokens():
    return cli_greedy_tokens()


def cli_quantize(folder, scheme: str) -> str:
    """`fpgallm quantize --scheme SCHEME` of the model, calibrated on four stories (W8A8 with
    dynamic activations takes nothing from the text but its name; few stories keep the
    command's evaluation short)."""
    calib = folder / "calib.txt"
    calib.write_text("\n".join(open(SAMPLE_TEXT, encoding="utf-8").read().splitlines()[:4]) + "\n", encoding="utf-8")
    qmodel = folder / f"{scheme}.gguf"
    subprocess.run([fpgallm_binary(), "quantize", MODEL, "--calib", str(calib), "-z", TOKENIZER, "--scheme", scheme,
                    "-o", str(qmodel)], check=True, capture_output=True, timeout=240)
    return str(qmodel)


@pytest.fixture(scope="module")
def w8a8_file(tmp_path_factory):
    return cli_quantize(tmp_path_factory.mktemp("w8a8"), "w8a8")


def test_weights_are_the_loaders(tmp_path):
    net = ft.from_pretrained(MODEL, accelerator=None)
    w = fpgallm.load(MODEL).weights()
    assert np.array_equal(net.layers[3].feed_forward.w2.weight.detach().numpy(), w["layers.3.w2"])
    assert np.array_equal(net.layers[0].attention.wk.weight.detach().numpy(), w["layers.0.wk"])
    assert net.output.weight is net.tok_embeddings.weight  # stories260K shares the classifier


def story_tokens(n: int = 160) -> list:
    m = fpgallm.load(MODEL)
    story = open(SAMPLE_TEXT, encoding="utf-8").read().splitlines()[1]
    return fpgallm.Tokenizer(m, TOKENIZER).encode(story, True, False)[:n]


def test_fp32_logits_are_the_engines_bits():
    """Teacher-forced over a whole story in one batched forward, every logit of the torch
    module (engine numerics, linears on the engine's dot product) equals the C++ engine's."""
    tokens = story_tokens()
    ref = fpgallm.Transformer(fpgallm.load(MODEL)).logits(tokens)
    net = ft.from_pretrained(MODEL, quant="fp32")
    with torch.no_grad():
        got = net(torch.tensor([tokens]))[0].numpy()
    assert np.array_equal(got, ref), float(np.abs(got - ref).max())


def test_w8a8_logits_are_the_engines_bits(w8a8_file):
    """The same with W8A8: from_pretrained(quant="w8a8") (weights quantized on the fly per
    output channel, the kernels' matrix unit) against the engine running the file of
    `fpgallm quantize --scheme w8a8` (calib::SimulatedTransformer, as `run --quant`)."""
    tokens = story_tokens()
    m = fpgallm.load(MODEL)
    ref = fpgallm.Transformer(m, quant=fpgallm.load_quant(w8a8_file, m)).logits(tokens)
    net = ft.from_pretrained(MODEL, quant="w8a8")
    with torch.no_grad():
        got = net(torch.tensor([tokens]))[0].numpy()
    assert np.array_equal(got, ref), float(np.abs(got - ref).max())


@pytest.mark.parametrize("accelerator,quant", [(None, "fp32"), ("fpga", "fp32")])
def test_greedy_tokens_match_fpgallm_run(fp32_cli_tokens, accelerator, quant):
    """accelerator=None keeps torch's own nn.Linear (another summation order than the
    engine's matvec), so there the match is of tokens, not of bits."""
    torch.set_num_threads(1)
    net = ft.from_pretrained(MODEL, accelerator=accelerator, quant=quant)
    assert len(fp32_cli_tokens) == STEPS + 1  # BOS and 200 tokens, no early stop
    assert net.generate([fpgallm.BOS], STEPS) == fp32_cli_tokens


def test_w8a8_greedy_tokens_match_fpgallm_run_quant(w8a8_file):
    """All 200 greedy tokens of from_pretrained(quant="w8a8") equal `fpgallm run --quant Q
    -t 0 -n 200` with Q from `fpgallm quantize --scheme w8a8`."""
    expected = cli_greedy_tokens("--quant", w8a8_file)
    assert len(expected) == STEPS + 1
    torch.set_num_threads(1)
    net = ft.from_pretrained(MODEL, quant="w8a8")
    generated = net.generate([fpgallm.BOS], STEPS)
    first_diff = next((i for i, (a, b) in enumerate(zip(generated, expected)) if a != b), None)
    assert generated == expected, f"first difference at token {first_diff}"


def test_from_pretrained_of_a_quantized_file(tmp_path):
    """quant= a .gguf of `fpgallm quantize --scheme w8a8-smooth` (smoothed weights, folded
    norms): the torch model's logits are the bits of the engine running that file, its 200
    greedy tokens those of `fpgallm run --quant`; a plan that is not W8A8 is refused."""
    qfile = cli_quantize(tmp_path, "w8a8-smooth")
    m = fpgallm.load(MODEL)
    q = fpgallm.load_quant(qfile, m)
    tokens = story_tokens()
    ref = fpgallm.Transformer(m, quant=q).logits(tokens)
    for quant in (qfile, q):
        net = ft.from_pretrained(MODEL, quant=quant)
        with torch.no_grad():
            got = net(torch.tensor([tokens]))[0].numpy()
        assert np.array_equal(got, ref), float(np.abs(got - ref).max())
    torch.set_num_threads(1)
    assert net.generate([fpgallm.BOS], STEPS) == cli_greedy_tokens("--quant", qfile)
    # After an optimizer step the layers quantize their updated weights.
    wq = net.layers[0].attention.wq
    before = wq(torch.ones(1, 64)).detach()
    with torch.no_grad():
        wq.weight.mul_(2.0)
    assert torch.allclose(wq(torch.ones(1, 64)), 2 * before, rtol=1e-2)
    with pytest.raises(ValueError, match="W8A8 plans"):
        ft.from_pretrained(MODEL, quant=cli_quantize(tmp_path, "w4a16"))


def test_engine_ops_backward_is_the_analytical_gradient():
    """Gradients through the engine's ops (fp32 C++ forward, torch backward) against the
    same model in float64 (pure torch formulas): NMSE <= 1e-8 for every parameter."""
    from test_accelerate import random_llama  # noqa: E402 (same folder)
    net = random_llama(7)
    net64 = random_llama(7).double()
    tokens = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(7))
    out, out64 = net(tokens), net64(tokens)
    weight = torch.linspace(-1, 1, out.shape[-1])
    (out * weight).square().mean().backward()
    (out64 * weight.double()).square().mean().backward()
    for (name, p), (_, p64) in zip(net.named_parameters(), net64.named_parameters()):
        err = float(((p.grad.double() - p64.grad) ** 2).mean() / (p64.grad ** 2).mean())
        assert err <= 1e-8, (name, err)


def test_w8a8_logits_close_to_the_fp32_engine():
    """The W8A8 model (int8 matrix unit) against the fp32 engine on a validation story:
    NMSE of the logits <= 1e-2 per position on average, and the same top token at >= 90%
    of the positions."""
    m = fpgallm.load(MODEL)
    tok = fpgallm.Tokenizer(m, TOKENIZER)
    story = open(SAMPLE_TEXT, encoding="utf-8").read().splitlines()[1]
    tokens = tok.encode(story, True, False)[:128]
    ref = fpgallm.Transformer(m).logits(tokens).astype(np.float64)
    net = ft.from_pretrained(MODEL, quant="w8a8")
    assert isinstance(net.layers[0].attention.wq, ft.AcceleratedLinear)
    with torch.no_grad():
        got = net(torch.tensor([tokens]))[0].double().numpy()
    nmse = ((got - ref) ** 2).mean() / (ref ** 2).mean()
    assert 0 < nmse <= 1e-2
    assert (got.argmax(axis=1) == ref.argmax(axis=1)).mean() >= 0.9


def test_kv_cache_decode_equals_full_sequence():
    net = ft.from_pretrained(MODEL, accelerator=None)
    tokens = [fpgallm.BOS, 403, 407, 261, 378, 269]
    with torch.no_grad():
        full = net(torch.tensor([tokens]))[0]
        cache = net.new_cache()
        steps = [net(torch.tensor([[t]]), pos, cache)[0, 0] for pos, t in enumerate(tokens)]
    assert torch.allclose(torch.stack(steps), full, atol=1e-5)


def test_unsupported_inputs():
    with pytest.raises(ValueError, match="missing.bin"):
        ft.from_pretrained("missing.bin")
    with pytest.raises(ValueError, match="accelerator"):
        ft.from_pretrained(MODEL, accelerator="gpu")
    with pytest.raises(ValueError, match="llama"):
        ft.from_pretrained("bert-base")  # a preset: config only, not llama
