"""PyTorch on the accelerator: swap it in with one call, keep the training loop as it is.

``accelerate(module)`` replaces every ``torch.nn.Linear`` (and the projections of every
``torch.nn.MultiheadAttention``) with a module whose forward and backward products run on
the accelerator's int8 matrix unit (fpgallm._core, released GIL) through a custom
``torch.autograd.Function``. The replacement keeps the original ``weight`` and ``bias``
Parameter objects, so an optimizer built before ``accelerate`` still updates them.

Numerics (quant="w8a8"; docs/quantization.md sections 1, 3.1 and 4):

* forward  ``Y = X W^T``: X quantized per token (row), W per output channel (row),
  ``Y = (float(acc) * s_w) * s_x``, bit for bit the W8A8 contract with dynamic
  per-token activations. The bias is added in fp32 afterwards (the vector unit).
* backward ``dX = dY W``: dY quantized per token, W per *input* channel (the contraction
  now runs over the output channels); ``dW = dY^T X``: both quantized per channel along
  the token dimension. Every product is int8 x int8 -> int32 -> fp32 on the matrix unit.
* the quantizers are straight-through: their gradient is the identity. Scales are amax/127
  of the very data quantized, so nothing is ever clipped and the straight-through
  estimator needs no clipping mask.
* error bound of one product, per element (fp32 rounding of the final multiplies aside):
  ``|y - a.b| <= (s_b/2) sum|a| + (s_a/2) sum|b| + K s_a s_b / 4`` where s_a, s_b are the
  two rows' scales and K the contraction length (see ``product_error_bound``).

quant="fp32" runs the same products in fp32 with the reference engine's dot-product order
(for checking a model against ``fpgallm run`` without quantization).

``from_pretrained`` builds a torch ``Llama`` whose norms, RoPE, attention and SwiGLU run
forward through the C++ engine's own functions (``EngineOp``: engine::rmsnorm, rope,
attention_head, swiglu on CPU fp32 tensors; torch's formulas elsewhere) with the analytical
gradient in torch, so with quant="w8a8" or "fp32" its logits are the bits of ``fpgallm run
--quant`` (W8A8 file) or ``fpgallm run``, and its greedy tokens the same.

``design`` (a design.json path, a dict, or None for the default design) is validated by
arch::Design and kept on every accelerated module (``module.design``). The matrix unit's
results do not depend on its shape (integer sums are exact), so the design changes no
number here.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from fpgallm import _core
from fpgallm import weights as _weights

QUANT_SCHEMES = ("w8a8", "fp32")
MAX_THREADS = 1024  # as the C++ matrix unit (src/python/matrix_unit.cpp)


# ---- argument checks: a TypeError or ValueError naming the argument, never an
# AttributeError, IndexError or a RuntimeError from deep inside torch (issue 34) -------------

def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _check_tensor(name: str, t, dims=None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.is_complex():
        raise TypeError(f"{name}: complex tensors are not supported (dtype {t.dtype})")
    if dims is not None and t.dim() not in (dims if isinstance(dims, tuple) else (dims,)):
        raise ValueError(f"{name}: expected a {dims}-D tensor, got shape {tuple(t.shape)}")
    return t


def _check_threads(threads) -> int:
    """threads as the C++ matrix unit takes it, in its words."""
    if not _is_int(threads):
        raise TypeError(f"threads: expected an integer (0 = every core), got {type(threads).__name__}")
    if threads < 0 or threads > MAX_THREADS:
        raise ValueError(f"threads={threads} must be 0 (every core) or 1..{MAX_THREADS}")
    return int(threads)


def _check_quant(quant) -> str:
    if not isinstance(quant, str) or quant not in QUANT_SCHEMES:
        raise ValueError(f"quant: {quant!r} is not one of {', '.join(QUANT_SCHEMES)}")
    return quant


def _check_real_number(name: str, v, positive: bool = True) -> float:
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        raise TypeError(f"{name}: expected a number, got {type(v).__name__}")
    if not math.isfinite(v) or (positive and v <= 0):
        raise ValueError(f"{name} {v} must be finite and positive")
    return float(v)


# ---- the matrix unit as an autograd function ------------------------------------------------

def _as_f32_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy()


def weight_codes_int8(b: np.ndarray):
    """Per-row int8 codes and scales of a weight matrix under the W8A8 weight contract of
    docs/quantization.md (quant::int8_weight_scale): the scale is the smallest fp16 value
    >= amax / 127 (so ggml's Q8_0 holds it exactly), codes round(w * (1 / scale)) to nearest
    even, saturated to +-127."""
    if b is None:
        raise TypeError("b: expected a 2-D array of weights [out, in], got None")
    b = np.asarray(b, dtype=np.float32)
    if b.ndim != 2:
        raise ValueError(f"b: expected a 2-D array of weights [out, in], got shape {b.shape}")
    if b.size and not np.isfinite(b).all():
        raise ValueError("b: holds NaN or infinite values; int8 quantization needs finite values")
    s = np.minimum(np.abs(b).max(axis=1) / np.float32(127), np.float32(65504)).astype(np.float32)
    h = s.astype(np.float16)
    up = h.astype(np.float32) < s
    h[up] = np.nextafter(h[up], np.float16(np.inf))
    scale = h.astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(scale > 0, np.float32(1) / scale, np.float32(0)).astype(np.float32)
    codes = np.clip(np.rint(b * inv[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(codes), np.ascontiguousarray(scale)


def _product_nt(a: torch.Tensor, b: torch.Tensor, quant: str, threads: int, b_codes=None) -> torch.Tensor:
    """a @ b.T on the matrix unit: a [M, K] (activation side), b [N, K] (weight side).
    b_codes: (int8 codes [N, K], fp32 scales [N]) of b stored in a quantized model file,
    used instead of quantizing b."""
    a_np = _as_f32_numpy(a)
    if quant == "w8a8":
        # The weight side follows the weight contract (fp16-exact scales), as a file of
        # `fpgallm quantize` stores it; the activation side is quantized per row, per call.
        qb, sb = b_codes if b_codes is not None else weight_codes_int8(_as_f32_numpy(b))
        qa, sa = _core.quantize_rows(a_np)
        y = _core.matmul_int8_dequant(qa, sa, qb, sb, threads)
    else:
        y = _core.linear_fp32(a_np, _as_f32_numpy(b))
    return torch.from_numpy(y).to(device=a.device, dtype=a.dtype)


class MatrixUnitMatmul(torch.autograd.Function):
    """y = a @ b.T with a [M, K], b [N, K]; forward and both gradients on the matrix unit."""

    @staticmethod
    def forward(ctx, a, b, quant, threads, b_codes=None):
        ctx.save_for_backward(a, b)
        ctx.quant, ctx.threads = quant, threads
        return _product_nt(a, b, quant, threads, b_codes)

    @staticmethod
    def backward(ctx, grad_y):
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:  # dA = dY B: contraction over N
            grad_a = _product_nt(grad_y, b.t(), ctx.quant, ctx.threads)
        if ctx.needs_input_grad[1]:  # dB = dY^T A: contraction over M (tokens)
            grad_b = _product_nt(grad_y.t(), a.t(), ctx.quant, ctx.threads)
        return grad_a, grad_b, None, None, None


def matmul_nt(a: torch.Tensor, b: torch.Tensor, quant: str = "w8a8", threads: int = 0, b_codes=None) -> torch.Tensor:
    """a @ b.T on the accelerator's matrix unit, differentiable in both operands (with
    b_codes, the forward uses those stored int8 codes of b; the backward uses b)."""
    _check_quant(quant)
    _check_tensor("a", a, 2)
    _check_tensor("b", b, 2)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must have the same number of columns ({a.shape[1]} and {b.shape[1]})")
    threads = _check_threads(threads)
    if b_codes is not None:
        if not isinstance(b_codes, Sequence) or len(b_codes) != 2:
            raise TypeError("b_codes: expected (int8 codes [N, K], fp32 scales [N]) or None")
        codes, scales = np.asarray(b_codes[0]), np.asarray(b_codes[1])
        if codes.shape != tuple(b.shape) or scales.shape != (b.shape[0],):
            raise ValueError(f"b_codes: codes of shape {tuple(b.shape)} and {b.shape[0]} scales needed, got "
                             f"{codes.shape} and {scales.shape}")
    return MatrixUnitMatmul.apply(a, b, quant, threads, b_codes)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           quant: str = "w8a8", threads: int = 0, weight_codes=None) -> torch.Tensor:
    """F.linear on the matrix unit: x [..., in], weight [out, in]; the bias is added in fp32."""
    _check_tensor("x", x)
    _check_tensor("weight", weight, 2)
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x: expected [..., {weight.shape[1]}] (weight is [out, in] = {tuple(weight.shape)}), "
                         f"got shape {tuple(x.shape)}")
    if bias is not None:
        _check_tensor("bias", bias)
        if tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"bias: expected shape ({weight.shape[0]},), got {tuple(bias.shape)}")
    lead = x.shape[:-1]
    y = matmul_nt(x.reshape(-1, x.shape[-1]), weight, quant, threads, weight_codes)
    y = y.reshape(*lead, weight.shape[0])
    return y + bias if bias is not None else y


def product_error_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-element bound of |linear_int8(a, b) - a @ b.T| (exact arithmetic) from the
    quantization steps alone: (s_b/2) sum|a| + (s_a/2) sum|b| + K s_a s_b / 4."""
    if a is None or b is None:
        raise TypeError("product_error_bound: a and b are 2-D arrays, not None")
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must be 2-D with the same number of columns, got shapes {a.shape} and {b.shape}")
    s_a = np.abs(a).max(axis=1) / 127.0
    s_b = np.abs(b).max(axis=1) / 127.0
    k = a.shape[1]
    return (np.outer(np.abs(a).sum(axis=1), s_b) / 2 + np.outer(s_a, np.abs(b).sum(axis=1)) / 2
            + k * np.outer(s_a, s_b) / 4)


# ---- accelerated modules -----------------------------------------------------------------------

class AcceleratedLinear(nn.Module):
    """torch.nn.Linear whose products run on the matrix unit; shares the original Parameters."""

    def __init__(self, original: nn.Linear, quant: str, design: dict, threads: int = 0):
        super().__init__()
        self.in_features, self.out_features = original.in_features, original.out_features
        self.weight = original.weight
        self.bias = original.bias
        self.quant, self.design, self.threads = quant, design, threads
        self._stored_codes, self._stored_version = None, None

    def use_stored_codes(self, codes: np.ndarray, scales: np.ndarray):
        """The int8 codes [out, in] and scales [out] of a quantized model file (weight being
        their dequantized values): the forward multiplies by these exact codes until the
        weight Parameter is next modified (an optimizer step), then quantizes it again."""
        self._stored_codes = (np.ascontiguousarray(codes, dtype=np.int8), np.ascontiguousarray(scales, dtype=np.float32))
        self._stored_version = self.weight._version

    def forward(self, x):
        codes = self._stored_codes if self._stored_version == self.weight._version else None
        return linear(x, self.weight, self.bias, self.quant, self.threads, codes)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, quant={self.quant}")


class AcceleratedMultiheadAttention(nn.Module):
    """torch.nn.MultiheadAttention (packed q/k/v weights) with its four projections on the
    matrix unit; scores, masks, softmax and the value product stay in fp32 (on the
    accelerator they are the vector unit's attention kernel, not the int8 matrix unit)."""

    # torch's TransformerEncoderLayer checks this flag (among others) before taking its
    # fused "fast path", which would read the raw weights and bypass this module.
    _qkv_same_embed_dim = False

    def __init__(self, original: nn.MultiheadAttention, quant: str, design: dict, threads: int = 0):
        super().__init__()
        self.embed_dim, self.num_heads = original.embed_dim, original.num_heads
        self.head_dim = original.head_dim
        self.batch_first = original.batch_first
        self.dropout = original.dropout
        self.in_proj_weight = original.in_proj_weight
        self.in_proj_bias = original.in_proj_bias
        self.out_proj = AcceleratedLinear(original.out_proj, quant, design, threads)
        self.quant, self.design, self.threads = quant, design, threads

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True):
        batched = query.dim() == 3
        if not batched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        tgt_len, bsz, embed = query.shape
        src_len = key.shape[0]
        heads, hd = self.num_heads, self.head_dim
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)
        q = linear(query, w_q, b_q, self.quant, self.threads)
        k = linear(key, w_k, b_k, self.quant, self.threads)
        v = linear(value, w_v, b_v, self.quant, self.threads)
        q = q.reshape(tgt_len, bsz * heads, hd).transpose(0, 1)
        k = k.reshape(src_len, bsz * heads, hd).transpose(0, 1)
        v = v.reshape(src_len, bsz * heads, hd).transpose(0, 1)
        scores = torch.bmm(q / math.sqrt(hd), k.transpose(1, 2))  # [B*H, L, S]
        if attn_mask is not None:
            mask = attn_mask if attn_mask.dim() == 3 else attn_mask.unsqueeze(0)
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(mask, float("-inf"))
            else:
                scores = scores + mask
        if key_padding_mask is not None:
            pad = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, heads, -1, -1).reshape(bsz * heads, 1, src_len)
            if pad.dtype == torch.bool:
                scores = scores.masked_fill(pad, float("-inf"))
            else:
                scores = scores + pad
        probs = torch.softmax(scores, dim=-1)
        if self.dropout > 0.0 and self.training:
            probs = F.dropout(probs, p=self.dropout)
        out = torch.bmm(probs, v).transpose(0, 1).reshape(tgt_len, bsz, embed)
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        weights = None
        if need_weights:
            weights = probs.view(bsz, heads, tgt_len, src_len)
            if average_attn_weights:
                weights = weights.mean(dim=1)
            if not batched:
                weights = weights.squeeze(0)
        return out, weights


def _resolve_design(design) -> dict:
    if design is None:
        return _core.default_design()
    if isinstance(design, (str, bytes, os.PathLike)):
        return _core.load_design(design)
    if isinstance(design, dict):
        problems = _core.design_problems(design)
        if problems:
            raise ValueError("design: " + problems[0])
        return design
    raise TypeError("design: a design.json path, a dict, or None")


def _replacement(child: nn.Module, quant: str, design: dict, threads: int) -> Optional[nn.Module]:
    if isinstance(child, nn.Linear):
        return AcceleratedLinear(child, quant, design, threads)
    if isinstance(child, nn.MultiheadAttention):
        if not child._qkv_same_embed_dim or child.bias_k is not None or child.add_zero_attn:
            raise ValueError("accelerate: nn.MultiheadAttention is supported with packed q/k/v weights "
                             "(kdim == vdim == embed_dim), without add_bias_kv or add_zero_attn")
        return AcceleratedMultiheadAttention(child, quant, design, threads)
    return None


def accelerate(module: nn.Module, design=None, quant: str = "w8a8", threads: int = 0) -> nn.Module:
    """Puts `module`'s Linear layers (and MultiheadAttention projections) on the accelerator,
    in place, and returns it (a bare nn.Linear or nn.MultiheadAttention is returned wrapped).
    quant: "w8a8" (int8 weights per channel, int8 activations per token) or "fp32".
    threads: CPU threads of the C simulation of the matrix unit (0 = OpenMP's default)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    _check_quant(quant)
    threads = _check_threads(threads)
    resolved = _resolve_design(design)
    top = _replacement(module, quant, resolved, threads)
    if top is not None:
        return top
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            new = _replacement(child, quant, resolved, threads)
            if new is not None:
                setattr(parent, name, new)
    return module


# ---- the engine's vector work as autograd functions ---------------------------------------------

class EngineOp(torch.autograd.Function):
    """forward: one of the C++ engine's own functions (engine::rmsnorm, rope, attention_head,
    swiglu through fpgallm._core), so its results are the engine's bits; backward: the
    analytical gradient of the same formula written in torch (autograd of `torch_fn`,
    recomputed from the saved inputs)."""

    @staticmethod
    def forward(ctx, engine_fn, torch_fn, *inputs):
        ctx.torch_fn = torch_fn
        ctx.save_for_backward(*inputs)
        return torch.from_numpy(engine_fn(*(_as_f32_numpy(t) for t in inputs)))

    @staticmethod
    def backward(ctx, grad_out):
        needs = ctx.needs_input_grad[2:]
        inputs = [t.detach().requires_grad_(need) for t, need in zip(ctx.saved_tensors, needs)]
        wanted = [t for t, need in zip(inputs, needs) if need]
        grads = iter(())
        if wanted:
            with torch.enable_grad():
                grads = iter(torch.autograd.grad(ctx.torch_fn(*inputs), wanted, grad_out))
        return (None, None, *(next(grads) if need else None for need in needs))


def _on_engine(*tensors) -> bool:
    """The engine's functions run fp32 on the CPU; other tensors take the torch formulas."""
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


def _engine_or_torch(engine_fn, torch_fn, *inputs):
    if _on_engine(*inputs):
        return EngineOp.apply(engine_fn, torch_fn, *inputs)
    return torch_fn(*inputs)


def _rmsnorm_torch(x, weight, eps):
    inv = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * (x * inv)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * (x / sqrt(mean(x^2) + eps)) over the last dimension, engine::rmsnorm's bits."""
    _check_tensor("x", x)
    _check_tensor("weight", weight, 1)
    _check_real_number("rmsnorm: eps", eps)
    if x.dim() < 1 or x.shape[-1] != weight.shape[0]:
        raise ValueError(f"rmsnorm: x [..., n] and weight [n], got {tuple(x.shape)} and {tuple(weight.shape)}")
    return _engine_or_torch(lambda xn, wn: _core.rmsnorm(xn, wn, eps),
                            lambda xt, wt: _rmsnorm_torch(xt, wt, eps), x, weight)


def _check_positions(positions, tokens: int, op: str):
    """positions: an integer tensor with one position per token, each in 0..2^31-1."""
    _check_tensor("positions", positions, 1)
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"positions: expected integer positions, got dtype {positions.dtype}")
    if positions.shape[0] != tokens:
        raise ValueError(f"{op}: one position per token ({tokens}), got {positions.shape[0]}")
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) > 2**31 - 1):
        raise ValueError(f"positions: {int(positions.min())}..{int(positions.max())} outside 0..{2**31 - 1}")


def _rope_torch(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    hd = x.shape[-1]
    freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32, device=x.device) / hd))
    angle = positions.to(device=x.device, dtype=torch.float32)[:, None] * freq[None, :]  # [T, hd/2]
    cos, sin = torch.cos(angle)[None, :, None, :], torch.sin(angle)[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding on interleaved (even, odd) pairs of each head: x [B, T, H, hd], token t
    at positions[t]; engine::rope's bits."""
    _check_tensor("x", x, 4)
    _check_positions(positions, x.shape[1], "rope")
    if x.shape[-1] % 2:
        raise ValueError("rope: head_dim must be even")
    _check_real_number("rope: theta", theta)
    pos = positions.cpu().numpy().astype(np.int64)
    return _engine_or_torch(lambda xn: _core.rope(xn, pos, theta), lambda xt: _rope_torch(xt, positions, theta), x)


def _attention_torch(q, k, v, positions):
    rep = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(rep, dim=2).transpose(1, 2)  # [B, H, S, hd]
    v = v.repeat_interleave(rep, dim=2).transpose(1, 2)
    scores = torch.matmul(q.transpose(1, 2), k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # [B, H, T, S]
    key_pos = torch.arange(k.shape[2], device=q.device)
    scores = scores.masked_fill(key_pos[None, :] > positions.to(q.device)[:, None], float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2)  # [B, T, H, hd]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Causal grouped-query attention: q [B, T, H, hd] (token t at positions[t]), k and v
    [B, S, KVH, hd] holding positions 0..S-1; token t attends to keys 0..positions[t].
    Returns [B, T, H, hd]; engine::attention_head's bits (its dot, softmax and sum order)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t, 4)
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(f"attention: keys do not match q ({tuple(k.shape)} and {tuple(q.shape)})")
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"attention: values do not match keys ({tuple(v.shape)} and {tuple(k.shape)})")
    if k.shape[2] == 0 or q.shape[2] % k.shape[2]:
        raise ValueError("attention: heads must be a multiple of kv_heads")
    _check_positions(positions, q.shape[1], "attention")
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= k.shape[1]):
        raise ValueError(f"attention: positions {int(positions.min())}..{int(positions.max())} need keys beyond the "
                         f"{k.shape[1]} given")
    pos = positions.cpu().numpy().astype(np.int64)
    return _engine_or_torch(lambda qn, kn, vn: _core.attention(qn, kn, vn, pos),
                            lambda qt, kt, vt: _attention_torch(qt, kt, vt, positions), q, k, v)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up in engine::swiglu's order: (g * (1 / (1 + exp(-g)))) * up."""
    _check_tensor("gate", gate)
    _check_tensor("up", up)
    if tuple(gate.shape) != tuple(up.shape):
        raise ValueError(f"swiglu: gate and up must have one shape, got {tuple(gate.shape)} and {tuple(up.shape)}")
    return _engine_or_torch(_core.swiglu, lambda g, u: F.silu(g) * u, gate, up)


# ---- Llama in torch, weights from the C++ loaders ------------------------------------------------

class RMSNorm(nn.Module):
    """weight * x / sqrt(mean(x^2) + eps) over the last dimension (engine::rmsnorm's bits on
    CPU fp32 tensors); weight [dim] starts at ones."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rmsnorm(x, self.weight, self.eps)


class LlamaAttention(nn.Module):
    """Grouped-query causal self-attention with interleaved-pair RoPE: wq [n_heads*head_dim,
    dim], wk and wv [n_kv_heads*head_dim, dim], wo [dim, n_heads*head_dim] (no biases).
    forward(x [B, T, dim], positions [T], cache=None) -> [B, T, dim]; a cache dict keeps the
    keys and values of earlier calls (one decode step at a time)."""

    def __init__(self, c: dict):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.rope_theta = c["rope_theta"]
        dim, q_dim, kv_dim = c["dim"], c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"]
        self.wq = nn.Linear(dim, q_dim, bias=False)
        self.wk = nn.Linear(dim, kv_dim, bias=False)
        self.wv = nn.Linear(dim, kv_dim, bias=False)
        self.wo = nn.Linear(q_dim, dim, bias=False)

    def forward(self, x, positions, cache=None):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim)
        k = self.wk(x).view(b, t, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim)
        q, k = rope(q, positions, self.rope_theta), rope(k, positions, self.rope_theta)
        if cache is not None:
            if "k" in cache:
                k, v = torch.cat((cache["k"], k), dim=1), torch.cat((cache["v"], v), dim=1)
            cache["k"], cache["v"] = k, v
        out = attention(q, k, v, positions)
        return self.wo(out.reshape(b, t, -1))


class LlamaFeedForward(nn.Module):
    """SwiGLU feed-forward: w2(silu(w1 x) * w3 x); w1 (gate) and w3 (up) [hidden_dim, dim],
    w2 (down) [dim, hidden_dim]."""

    def __init__(self, c: dict):
        super().__init__()
        self.w1 = nn.Linear(c["dim"], c["hidden_dim"], bias=False)
        self.w2 = nn.Linear(c["hidden_dim"], c["dim"], bias=False)
        self.w3 = nn.Linear(c["dim"], c["hidden_dim"], bias=False)

    def forward(self, x):
        return self.w2(swiglu(self.w1(x), self.w3(x)))


class LlamaBlock(nn.Module):
    """One pre-norm transformer block: x + attention(attention_norm(x)), then
    x + feed_forward(ffn_norm(x))."""

    def __init__(self, c: dict):
        super().__init__()
        self.attention_norm = RMSNorm(c["dim"], c["norm_eps"])
        self.attention = LlamaAttention(c)
        self.ffn_norm = RMSNorm(c["dim"], c["norm_eps"])
        self.feed_forward = LlamaFeedForward(c)

    def forward(self, x, positions, cache=None):
        x = x + self.attention(self.attention_norm(x), positions, cache)
        return x + self.feed_forward(self.ffn_norm(x))


_INTEGER_TOKEN_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _checked_config(config) -> dict:
    """config as a dict, validated by the C++ model::Config (fpgallm._core.model_config: the
    checks of a loaded checkpoint), its missing fields (head_dim, rope_theta, norm_eps,
    shared_classifier, arch) filled in; a model too large for this machine's memory is
    refused before torch tries to allocate it."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config: expected a dict of the model's shape (fpgallm.Model.config), got "
                        f"{type(config).__name__}")
    resolved = _core.model_config(dict(config))
    if resolved["arch"] != "llama":
        raise ValueError(f"config: a Llama is a llama-architecture model, not {resolved['arch']}")
    c = {**resolved, **config}  # the caller's values (checked) where given
    for key in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len", "head_dim"):
        c[key] = int(resolved[key])
    c["rope_theta"], c["norm_eps"] = float(c["rope_theta"]), float(c["norm_eps"])
    c["shared_classifier"] = bool(c["shared_classifier"])
    q_dim, kv_dim = c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"]
    params = (c["vocab_size"] * c["dim"] * (1 if c["shared_classifier"] else 2) + c["dim"]
              + c["n_layers"] * (2 * c["dim"] + c["dim"] * (2 * q_dim + 2 * kv_dim) + 3 * c["dim"] * c["hidden_dim"]))
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    if memory and 4 * params > memory:
        raise ValueError(f"config: {params} parameters need {4 * params / 2**30:.1f} GiB in fp32, more than this "
                         f"machine's {memory / 2**30:.1f} GiB of memory")
    return c


class Llama(nn.Module):
    """A Llama-architecture language model (llama2.c layout: interleaved RoPE, SwiGLU,
    RMSNorm, grouped-query attention) computing the engine's bits on CPU fp32 (see EngineOp).

    config: the fields of ``fpgallm.Model.config`` (dim, hidden_dim, n_layers, n_heads,
    n_kv_heads, vocab_size, seq_len, rope_theta, norm_eps, shared_classifier).
    forward(tokens [B, T] int64, start_pos=0, cache=None) -> logits [B, T, vocab].
    state_dict() uses Meta's / llama2.c's names; ``state_dict(hf_names=True)`` Hugging Face's
    (q/k rows in its rotate-half order), and load_state_dict takes either.
    ``save_pretrained(path, format=None, type="f32", tokenizer=None)`` writes a .bin, .gguf or
    safetensors folder that ``fpgallm run`` reads (``fpgallm.save``)."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = _checked_config(config)
        c = self.config
        self.tok_embeddings = nn.Embedding(c["vocab_size"], c["dim"])
        self.layers = nn.ModuleList(LlamaBlock(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["dim"], c["norm_eps"])
        self.output = nn.Linear(c["dim"], c["vocab_size"], bias=False)
        if c["shared_classifier"]:
            self.output.weight = self.tok_embeddings.weight

    def forward(self, tokens: torch.Tensor, start_pos: int = 0, cache: Optional[list] = None):
        self._check_tokens(tokens, start_pos)
        if cache is not None and (not isinstance(cache, list) or len(cache) != len(self.layers)):
            raise ValueError(f"cache: expected None or new_cache() (a list of {len(self.layers)} dicts), got "
                             f"{type(cache).__name__}")
        if tokens.dtype not in (torch.int64, torch.int32):
            tokens = tokens.long()
        start_pos = int(start_pos)
        t = tokens.shape[1]
        positions = torch.arange(start_pos, start_pos + t)
        x = self.tok_embeddings(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, positions, cache[i] if cache is not None else None)
        return self.output(self.norm(x))

    def _check_tokens(self, tokens, start_pos: int):
        c = self.config
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"tokens: expected a torch.Tensor of token ids [batch, seq], got {type(tokens).__name__}")
        if tokens.dim() != 2:
            hint = " (a single sequence: tokens.unsqueeze(0))" if tokens.dim() == 1 else ""
            raise ValueError(f"tokens: expected shape [batch, seq], got {tuple(tokens.shape)}{hint}")
        if tokens.dtype not in _INTEGER_TOKEN_DTYPES:
            raise TypeError(f"tokens: expected integer token ids, got dtype {tokens.dtype}")
        if tokens.numel() == 0:
            raise ValueError(f"tokens: no token ids (shape {tuple(tokens.shape)})")
        if not _is_int(start_pos):
            raise TypeError(f"start_pos: expected an integer position, got {type(start_pos).__name__}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= c["vocab_size"]):
            raise ValueError(f"tokens: ids must be in 0..{c['vocab_size'] - 1}, got {int(tokens.min())}.."
                             f"{int(tokens.max())}")
        if start_pos < 0 or start_pos + tokens.shape[1] > c["seq_len"]:
            raise ValueError(f"tokens: positions {start_pos}..{start_pos + tokens.shape[1] - 1} exceed the model's "
                             f"context of {c['seq_len']}")

    def state_dict(self, *args, hf_names: bool = False, **kwargs):
        """torch's state_dict (Meta / llama2.c names); with hf_names=True the tensors under
        Hugging Face LlamaForCausalLM names, q_proj/k_proj rows in its rotate-half order and
        no lm_head when tied: what ``save_pretrained(format="safetensors")`` writes."""
        sd = super().state_dict(*args, **kwargs)
        if not hf_names:
            return sd
        hf = _weights.engine_to_hf(_weights.to_engine(sd, self.config), self.config)
        return type(sd)((k, torch.from_numpy(v)) for k, v in hf.items())

    def load_state_dict(self, state_dict, strict: bool = True, **kwargs):
        """torch's load_state_dict; a Hugging Face-named state_dict (model.layers.N...) is
        converted first (q/k rows back to interleaved order, a missing lm_head tied)."""
        if _weights.is_hf(state_dict):
            engine = _weights.to_engine(state_dict, self.config)
            if "classifier" not in engine:
                engine["classifier"] = engine["token_embedding"]
            state_dict = {k: torch.from_numpy(v) for k, v in _weights.engine_to_meta(engine).items()}
        return super().load_state_dict(state_dict, strict=strict, **kwargs)

    def save_pretrained(self, path: str, format: Optional[str] = None, type: str = "f32", tokenizer=None) -> int:
        """Writes the model (``fpgallm.save``): format "bin", "gguf" or "safetensors", or None to
        tell it from the path; returns the bytes written."""
        return _weights.save(self, path, format=format, type=type, tokenizer=tokenizer)

    def new_cache(self) -> list:
        return [{} for _ in self.layers]

    @torch.no_grad()
    def generate(self, prompt_tokens: list, steps: int) -> list:
        """Greedy decoding as `fpgallm run -t 0 -n steps`: runs positions 0..steps-1 (prompt
        included, prompt_tokens starting with BOS) and stops early at BOS; returns the prompt
        followed by the generated tokens."""
        if not _is_int(steps):
            raise TypeError(f"steps: expected an integer (0 = the model's context), got {type(steps).__name__}")
        if steps < 0:
            raise ValueError(f"steps: {steps} is negative")
        if isinstance(prompt_tokens, (torch.Tensor, np.ndarray)):
            prompt_tokens = prompt_tokens.reshape(-1).tolist()
        if isinstance(prompt_tokens, (str, bytes)) or not isinstance(prompt_tokens, Sequence):
            raise TypeError(f"prompt_tokens: expected a list of token ids, got {type(prompt_tokens).__name__}")
        if not prompt_tokens:
            raise ValueError("prompt_tokens: empty (a prompt starts with BOS, token 1)")
        bad = next((t for t in prompt_tokens if not _is_int(t)), None)
        if bad is not None:
            raise TypeError(f"prompt_tokens: expected integer token ids, got {bad!r}")
        vocab = self.config["vocab_size"]
        if min(prompt_tokens) < 0 or max(prompt_tokens) >= vocab:
            raise ValueError(f"prompt_tokens: ids must be in 0..{vocab - 1}, got {min(prompt_tokens)}..{max(prompt_tokens)}")
        steps = min(steps, self.config["seq_len"]) if steps > 0 else self.config["seq_len"]
        if len(prompt_tokens) > steps:
            # The words of fpgallm.generate (engine::generate).
            raise ValueError(f"prompt_tokens: the prompt is {len(prompt_tokens)} tokens (with BOS); at most {steps} fit: "
                             f"the number of steps, at most the model's context of {self.config['seq_len']}")
        prompt_tokens = [int(t) for t in prompt_tokens]
        tokens = list(prompt_tokens)
        cache = self.new_cache()
        token = tokens[0]
        for pos in range(steps):
            logits = self.forward(torch.tensor([[token]]), pos, cache)[0, -1]
            if pos + 1 < len(prompt_tokens):
                nxt = prompt_tokens[pos + 1]
            else:
                nxt = int(torch.argmax(logits))
                tokens.append(nxt)
            if nxt == _core.BOS:
                break
            token = nxt
        return tokens


def _linear_name(name: str) -> tuple:
    layer, which = name.split(".")[1], name.split(".")[2]
    return int(layer), which


def llama_from_model(m: "_core.Model") -> Llama:
    """A torch Llama holding a copy of a loaded checkpoint's weights."""
    if not isinstance(m, _core.Model):
        raise TypeError(f"m: expected a fpgallm.Model (fpgallm.load), got {type(m).__name__}")
    c = m.config
    if c["arch"] != "llama":
        raise ValueError(f"{m.path}: from_pretrained builds llama-architecture models only, not {c['arch']}")
    net = Llama(c)
    w = m.weights()
    block_attr = {"wq": "attention.wq", "wk": "attention.wk", "wv": "attention.wv", "wo": "attention.wo",
                  "w1": "feed_forward.w1", "w2": "feed_forward.w2", "w3": "feed_forward.w3",
                  "attn_norm": "attention_norm", "ffn_norm": "ffn_norm"}
    state = {"tok_embeddings.weight": w["token_embedding"], "norm.weight": w["final_norm"]}
    if "classifier" in w:
        state["output.weight"] = w["classifier"]
    for name, array in w.items():
        if name.startswith("layers."):
            layer, which = _linear_name(name)
            state[f"layers.{layer}.{block_attr[which]}.weight"] = array
    with torch.no_grad():
        params = dict(net.named_parameters())
        for key, array in state.items():
            params[key].copy_(torch.from_numpy(np.array(array)))
    return net


def _check_w8a8_plan(qm: "_core.QuantModel"):
    plan = qm.plan
    other = [l["name"] for l in plan["layers"] if l["weight"] != "int8" or l["act"] != "int8-dynamic"]
    if other or plan.get("kv_cache", "f32") != "f32":
        what = f"layers {', '.join(other[:3])}{' ...' if len(other) > 3 else ''} are not int8 x int8-dynamic" if other \
            else f"its KV cache is {plan['kv_cache']}"
        raise ValueError(f"quant: from_pretrained runs W8A8 plans (w8a8, w8a8-smooth: int8 weights, dynamic int8 "
                         f"activations, fp32 KV cache); this {plan['scheme']} plan does not: {what}")


def _block_linears(net: Llama):
    for i, layer in enumerate(net.layers):
        for which in ("wq", "wk", "wv", "wo"):
            yield f"layers.{i}.{which}", getattr(layer.attention, which)
        for which in ("w1", "w2", "w3"):
            yield f"layers.{i}.{which}", getattr(layer.feed_forward, which)
    yield "cls", net.output


def from_pretrained(path: str, accelerator: Optional[str] = "fpga", quant="w8a8", design=None,
                    threads: int = 0) -> Llama:
    """Loads a llama2.c .bin, a .gguf or a safetensors folder (the C++ loaders) as a torch
    Llama; with accelerator="fpga" (default) it is returned already accelerated with
    `quant` and `design`; accelerator=None gives the plain torch module.

    quant: "w8a8" or "fp32" (the checkpoint's weights, quantized on the fly), or a quantized
    model of `path` with a W8A8 plan: a fpgallm.QuantModel (fpgallm.quantize) or the path of
    its .gguf (`fpgallm quantize -o`). Then the torch model holds its dequantized weights
    (folded norms when smoothed) and multiplies by its stored int8 codes, as `fpgallm run
    --quant` does."""
    threads = _check_threads(threads)
    if accelerator not in (None, "cpu", "fpga"):
        raise ValueError(f"accelerator: {accelerator!r} is not 'fpga' or None")
    if not isinstance(quant, (str, _core.QuantModel)):
        raise TypeError(f"quant: expected one of {', '.join(QUANT_SCHEMES)}, a quantized .gguf or a QuantModel, got "
                        f"{type(quant).__name__}")
    qm = quant if isinstance(quant, _core.QuantModel) else None
    if isinstance(quant, str) and quant not in QUANT_SCHEMES:
        if not quant.endswith(".gguf"):
            raise ValueError(f"quant: {quant!r} is not one of {', '.join(QUANT_SCHEMES)} or a quantized .gguf")
        qm = _core.load_quant(quant, _core.load(path))
    if qm is not None:
        _check_w8a8_plan(qm)
        net = llama_from_model(qm.model)
    else:
        net = llama_from_model(_core.load(path))
    if accelerator is None or accelerator == "cpu":
        return net
    if accelerator != "fpga":
        raise ValueError(f"accelerator: {accelerator!r} is not 'fpga' or None")
    if qm is None:
        return accelerate(net, design=design, quant=quant, threads=threads)
    accelerate(net, design=design, quant="w8a8", threads=threads)
    for name, module in _block_linears(net):
        stored = qm.linear(name)
        module.use_stored_codes(stored["q"], stored["scale"])
    return net
