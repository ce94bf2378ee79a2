"""fpgallm.torch.accelerate: outputs and gradients of accelerated torch modules against the
unmodified modules, within the bounds documented in fpgallm/torch.py and README.md:

* one linear layer: every element of the output and of the three gradients within the
  analytical bound of the int8 product (product_error_bound), against float64;
* whole models (a Llama-style decoder, a BERT-style encoder block): normalized mean squared
  error NMSE = mse(accelerated, reference) / mse(reference, 0) of the output <= 1e-2 and of
  every gradient <= 3e-2 (measured: about 1e-3 / 4e-3 for the decoder, 1e-5 / 1e-4 for the
  encoder block);
* with quant="fp32" the replaced modules compute what torch computes (NMSE <= 1e-10), so
  the differences above are the quantization and nothing else.
"""
import copy

import numpy as np
import pytest
import torch
import torch.nn as nn

import fpgallm
import fpgallm.torch as ft

OUTPUT_NMSE = 1e-2
GRAD_NMSE = 3e-2


def nmse(a: torch.Tensor, ref: torch.Tensor) -> float:
    a, ref = a.double(), ref.double()
    return float(((a - ref) ** 2).mean() / (ref ** 2).mean())


def small_llama_config(**over):
    c = dict(dim=64, hidden_dim=172, n_layers=2, n_heads=8, n_kv_heads=4, head_dim=8, vocab_size=128,
             seq_len=64, rope_theta=10000.0, norm_eps=1e-5, shared_classifier=False, arch="llama")
    c.update(over)
    return c


def random_llama(seed: int, **over) -> ft.Llama:
    torch.manual_seed(seed)
    net = ft.Llama(small_llama_config(**over))
    for p in net.parameters():
        if p.dim() == 2:
            nn.init.normal_(p, std=0.1)
    return net


def bert_block(seed: int) -> nn.TransformerEncoderLayer:
    torch.manual_seed(seed)
    return nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu", batch_first=True)


def test_linear_forward_and_gradients_within_the_product_bound():
    torch.manual_seed(0)
    ref = nn.Linear(96, 40)
    acc = ft.accelerate(copy.deepcopy(ref))
    assert isinstance(acc, ft.AcceleratedLinear)
    x = torch.randn(12, 96, requires_grad=True)
    grad_y = torch.randn(12, 40)
    y = acc(x)
    y.backward(grad_y)
    x64, w64, b64, g64 = (t.detach().double().numpy() for t in (x, ref.weight, ref.bias, grad_y))
    xn, wn, gn = x.detach().numpy(), ref.weight.detach().numpy(), grad_y.numpy()

    def within(got, exact, bound):
        err = np.abs(got.detach().double().numpy() - exact)
        assert (err <= bound * 1.0001 + np.abs(exact) * 1e-6).all(), f"max excess {(err - bound).max()}"
        assert err.max() > 0  # quantized, not fp32

    within(y, x64 @ w64.T + b64, ft.product_error_bound(xn, wn))
    within(x.grad, g64 @ w64, ft.product_error_bound(gn, wn.T))
    within(acc.weight.grad, g64.T @ x64, ft.product_error_bound(gn.T, xn.T))
    assert np.allclose(acc.bias.grad.numpy(), g64.sum(axis=0), atol=1e-5)


def test_accelerate_keeps_parameters_and_replaces_every_linear():
    net = random_llama(1)
    params = {id(p) for p in net.parameters()}
    out = ft.accelerate(net)
    assert out is net
    assert {id(p) for p in net.parameters()} == params
    assert not any(type(m) is nn.Linear for m in net.modules())
    assert sum(isinstance(m, ft.AcceleratedLinear) for m in net.modules()) == 2 * 7 + 1


@pytest.mark.parametrize("seed", [0, 1])
def test_llama_decoder_outputs_and_gradients(seed):
    ref = random_llama(seed)
    acc = ft.accelerate(copy.deepcopy(ref))
    tokens = torch.randint(0, 128, (2, 24), generator=torch.Generator().manual_seed(seed))
    out_ref, out_acc = ref(tokens), acc(tokens)
    assert 0 < nmse(out_acc, out_ref) <= OUTPUT_NMSE
    out_ref.square().mean().backward()
    out_acc.square().mean().backward()
    for (name, p_acc), (_, p_ref) in zip(acc.named_parameters(), ref.named_parameters()):
        assert nmse(p_acc.grad, p_ref.grad) <= GRAD_NMSE, name


@pytest.mark.parametrize("train_mode", [True, False])
def test_bert_encoder_block_outputs_and_gradients(train_mode):
    ref = bert_block(2)
    acc = ft.accelerate(copy.deepcopy(ref))
    assert isinstance(acc.self_attn, ft.AcceleratedMultiheadAttention)
    ref.train(train_mode)
    acc.train(train_mode)
    x = torch.randn(3, 10, 64)
    mask = torch.zeros(3, 10, dtype=torch.bool)
    mask[0, 7:] = True
    if not train_mode:  # inference: torch would take its fused fast path for `ref`
        with torch.no_grad():
            y_ref = ref(x, src_key_padding_mask=mask)
            y_acc = acc(x, src_key_padding_mask=mask)
        valid = ~mask
        assert 0 < nmse(y_acc[valid], y_ref[valid]) <= OUTPUT_NMSE
        return
    x_ref, x_acc = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_ref = ref(x_ref, src_key_padding_mask=mask)
    y_acc = acc(x_acc, src_key_padding_mask=mask)
    assert 0 < nmse(y_acc, y_ref) <= OUTPUT_NMSE
    weight = torch.linspace(-1, 1, 64)
    (y_ref * weight).sum().backward()
    (y_acc * weight).sum().backward()
    assert nmse(x_acc.grad, x_ref.grad) <= GRAD_NMSE
    for (name, p_acc), (_, p_ref) in zip(acc.named_parameters(), ref.named_parameters()):
        assert nmse(p_acc.grad, p_ref.grad) <= GRAD_NMSE, name


def test_fp32_mode_reproduces_torch():
    ref = bert_block(3)
    acc = ft.accelerate(copy.deepcopy(ref), quant="fp32")
    x = torch.randn(2, 9, 64)
    attn_mask = torch.triu(torch.ones(9, 9, dtype=torch.bool), diagonal=1)
    x_ref, x_acc = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_ref, y_acc = ref(x_ref, src_mask=attn_mask), acc(x_acc, src_mask=attn_mask)
    assert nmse(y_acc, y_ref) <= 1e-10
    weight = torch.linspace(-1, 1, 64)  # (a plain sum after LayerNorm has a zero gradient)
    (y_ref * weight).sum().backward()
    (y_acc * weight).sum().backward()
    assert nmse(x_acc.grad, x_ref.grad) <= 1e-10
    for (name, p_acc), (_, p_ref) in zip(acc.named_parameters(), ref.named_parameters()):
        assert nmse(p_acc.grad, p_ref.grad) <= 1e-10, name
    llama = random_llama(4)
    llama_fp32 = ft.accelerate(copy.deepcopy(llama), quant="fp32")
    tokens = torch.randint(0, 128, (1, 16))
    assert nmse(llama_fp32(tokens), llama(tokens)) <= 1e-10


def test_multihead_attention_module_with_weights():
    torch.manual_seed(5)
    ref = nn.MultiheadAttention(32, 4)
    acc = ft.accelerate(copy.deepcopy(ref), quant="fp32")
    q, k = torch.randn(6, 2, 32), torch.randn(8, 2, 32)
    out_ref, w_ref = ref(q, k, k)
    out_acc, w_acc = acc(q, k, k)
    assert nmse(out_acc, out_ref) <= 1e-10 and nmse(w_acc, w_ref) <= 1e-10


def test_training_loop_lowers_the_loss():
    """An unchanged training loop (optimizer built before accelerate) on next-token
    prediction of a fixed pattern: the accelerated model learns it."""
    torch.manual_seed(0)
    net = ft.Llama(small_llama_config(dim=32, hidden_dim=64, n_layers=1, n_heads=4, n_kv_heads=4, head_dim=8,
                                      vocab_size=16, seq_len=32))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    ft.accelerate(net)
    pattern = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3] * 2])
    inputs, targets = pattern[:, :-1], pattern[:, 1:]
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        logits = net(inputs)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 16), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    assert losses[-1] < 0.3 * losses[0], losses


def test_design_argument():
    net = ft.accelerate(nn.Sequential(nn.Linear(8, 8)), design=None)
    assert net[0].design["matrix_unit"]["rows"] == fpgallm.default_design()["matrix_unit"]["rows"]
    bad = fpgallm.default_design()
    bad["matrix_unit"]["rows"] = 0
    with pytest.raises(ValueError, match="matrix_unit.rows"):
        ft.accelerate(nn.Linear(8, 8), design=bad)
    with pytest.raises(ValueError, match="nope.json"):
        ft.accelerate(nn.Linear(8, 8), design="nope.json")
    with pytest.raises(ValueError, match="quant"):
        ft.accelerate(nn.Linear(8, 8), quant="w3a3")
