"""Weight names of a Llama state_dict, and writing one with the C++ writers.

Three naming schemes meet here:

* the engine's (``fpgallm.Model.weights()``): ``token_embedding``, ``final_norm``,
  ``classifier``, ``layers.N.{attn_norm,ffn_norm,wq,wk,wv,wo,w1,w2,w3}``;
* Meta's / llama2.c's, which ``fpgallm.torch.Llama.state_dict()`` uses:
  ``tok_embeddings.weight``, ``layers.N.attention.wq.weight``,
  ``layers.N.feed_forward.w1.weight``, ``layers.N.attention_norm.weight``, ``norm.weight``,
  ``output.weight``;
* Hugging Face's (``LlamaForCausalLM``): ``model.embed_tokens.weight``,
  ``model.layers.N.self_attn.q_proj.weight``, ``model.layers.N.mlp.gate_proj.weight``,
  ``model.layers.N.input_layernorm.weight``, ``model.norm.weight``, ``lm_head.weight``.
  Hugging Face applies RoPE by rotating halves (pairs (i, i + head_dim/2)) where the others
  rotate interleaved pairs (2i, 2i + 1), so its q_proj and k_proj rows are permuted within
  each head; the conversion is the C++ safetensors code's own (``_core.interleaved_to_hf``).

Everything here takes numpy arrays or anything with ``.detach().cpu().numpy()`` (torch
tensors) and needs no torch; numpy is imported when a state_dict is converted, so that
``import fpgallm`` needs neither.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from fpgallm import _core

# Meta name of a block tensor -> the engine's.
_META_BLOCK = {
    "attention_norm.weight": "attn_norm", "ffn_norm.weight": "ffn_norm",
    "attention.wq.weight": "wq", "attention.wk.weight": "wk", "attention.wv.weight": "wv",
    "attention.wo.weight": "wo", "feed_forward.w1.weight": "w1", "feed_forward.w2.weight": "w2",
    "feed_forward.w3.weight": "w3",
}
_META_TOP = {"tok_embeddings.weight": "token_embedding", "norm.weight": "final_norm", "output.weight": "classifier"}
# Hugging Face name of a block tensor -> the engine's.
_HF_BLOCK = {
    "input_layernorm.weight": "attn_norm", "post_attention_layernorm.weight": "ffn_norm",
    "self_attn.q_proj.weight": "wq", "self_attn.k_proj.weight": "wk", "self_attn.v_proj.weight": "wv",
    "self_attn.o_proj.weight": "wo", "mlp.gate_proj.weight": "w1", "mlp.down_proj.weight": "w2",
    "mlp.up_proj.weight": "w3",
}
_HF_TOP = {"model.embed_tokens.weight": "token_embedding", "model.norm.weight": "final_norm",
           "lm_head.weight": "classifier"}
_BLOCK = re.compile(r"^(model\.)?layers\.(\d+)\.(.+)$")


def as_numpy(t):
    """A float32 numpy copy of a numpy array or a torch tensor (detached, on the CPU)."""
    import numpy as np
    if t is None or isinstance(t, (str, bytes)):
        raise TypeError(f"expected an array or a tensor of numbers, got {type(t).__name__}")
    if hasattr(t, "detach"):
        if callable(getattr(t, "is_complex", None)) and t.is_complex():
            raise TypeError(f"expected real numbers, got a tensor of dtype {t.dtype}")
        t = t.detach().cpu().float().numpy()
    if np.iscomplexobj(t):
        raise TypeError("expected real numbers, got complex values")
    return np.array(t, dtype=np.float32, copy=True)


def _check_mapping(name: str, d):
    if not isinstance(d, Mapping):
        raise TypeError(f"{name}: expected a dict, got {type(d).__name__}")
    bad = next((k for k in d if not isinstance(k, str)), None)
    if bad is not None:
        raise TypeError(f"{name}: names are strings, got {bad!r}")


def is_hf(state_dict) -> bool:
    """True when the state_dict uses Hugging Face names."""
    _check_mapping("state_dict", state_dict)
    return any(k.startswith("model.") or k == "lm_head.weight" for k in state_dict)


def _heads(config: dict, which: str) -> int:
    key = "n_heads" if which == "wq" else "n_kv_heads"
    if key not in config and which == "wk" and "n_heads" in config:
        key = "n_heads"  # n_kv_heads defaults to n_heads, as in the C++ config
    if key not in config:
        raise ValueError(f"config: missing '{key}' (the q/k rows of Hugging Face names are permuted per head)")
    return config[key]


def to_engine(state_dict, config: dict) -> dict:
    """{engine name: float32 array} of a Meta- or Hugging-Face-named state_dict. The
    classifier is dropped when the config shares it with the token embedding and the two
    are equal (a tied Parameter); q/k rows of HF names are put back into interleaved order."""
    import numpy as np
    _check_mapping("config", config)
    hf = is_hf(state_dict)
    top, block = (_HF_TOP, _HF_BLOCK) if hf else (_META_TOP, _META_BLOCK)
    out = {}
    for name, tensor in state_dict.items():
        match = _BLOCK.match(name)
        if name in top:
            key = top[name]
        elif match and bool(match.group(1)) == hf and match.group(3) in block:
            key = f"layers.{int(match.group(2))}.{block[match.group(3)]}"
        else:
            raise ValueError(f"state_dict: unexpected tensor '{name}' for a {'Hugging Face' if hf else 'Meta'}-named "
                             f"Llama")
        try:
            array = as_numpy(tensor)
            if hf and key.endswith((".wq", ".wk")):
                array = _core.hf_to_interleaved(array, _heads(config, key[-2:]))
        except TypeError as e:
            raise TypeError(f"state_dict: '{name}': {e}") from None
        except ValueError as e:
            if str(e).startswith("config:"):
                raise
            raise ValueError(f"state_dict: '{name}': {e}") from None
        out[key] = array
    if "classifier" in out and config.get("shared_classifier", False) \
            and np.array_equal(out["classifier"], out.get("token_embedding")):
        del out["classifier"]
    return out


def _engine_block_name(key: str, block: dict):
    """(layer, which) of an engine name layers.N.which."""
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != "layers" or not parts[1].isdigit() or parts[2] not in block:
        raise ValueError(f"weights: unexpected name '{key}' (token_embedding, final_norm, classifier, "
                         f"layers.N.{{{','.join(block)}}})")
    return parts[1], parts[2]


def engine_to_hf(weights: dict, config: dict) -> dict:
    """{Hugging Face name: float32 array} of engine-named weights, q/k rows in HF order: the
    names and rows the safetensors writer stores (no lm_head when it is the embedding)."""
    top = {v: k for k, v in _HF_TOP.items()}
    block = {v: k for k, v in _HF_BLOCK.items()}
    _check_mapping("weights", weights)
    _check_mapping("config", config)
    out = {}
    for key, array in weights.items():
        if key in top:
            out[top[key]] = array
            continue
        layer, which = _engine_block_name(key, block)
        if which in ("wq", "wk"):
            array = _core.interleaved_to_hf(array, _heads(config, which))
        out[f"model.layers.{layer}.{block[which]}"] = array
    return out


def engine_to_meta(weights: dict) -> dict:
    """{Meta name: array} of engine-named weights (the names fpgallm.torch.Llama uses)."""
    top = {v: k for k, v in _META_TOP.items()}
    block = {v: k for k, v in _META_BLOCK.items()}
    _check_mapping("weights", weights)
    out = {}
    for key, array in weights.items():
        if key in top:
            out[top[key]] = array
        else:
            layer, which = _engine_block_name(key, block)
            out[f"layers.{layer}.{block[which]}"] = array
    return out


_FORMATS = ("bin", "gguf", "safetensors")


def save(model, path: str, format: str | None = None, type: str = "f32", tokenizer=None, config: dict | None = None) -> int:
    """Writes a model with the C++ writers of ``fpgallm convert``; returns the bytes written.

    model: a ``fpgallm.torch.Llama`` (trained or not), a state_dict of one (Meta or Hugging
    Face names, torch tensors or numpy arrays; give ``config``, e.g. ``Model.config``), or a
    loaded ``fpgallm.Model``.
    format: "bin" (llama2.c), "gguf" or "safetensors" (a folder with config.json and
    model.safetensors); None tells it from the path (*.bin, *.gguf, a name without extension).
    type: matrix storage, "f32" everywhere; "f16", "bf16", "q8_0", "q4_0" where the format
    holds them (see ``fpgallm convert --help``).
    tokenizer: a ``fpgallm.Tokenizer`` or its path; stored in a GGUF's metadata or as
    tokenizer.bin in a safetensors folder (a llama2.c .bin keeps its tokenizer apart).
    """
    if format is not None and format not in _FORMATS:
        raise ValueError(f"format: {format!r} is not one of {', '.join(_FORMATS)}")
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path: expected a file or folder name (str or os.PathLike), got {path.__class__.__name__}")
    path = os.fsdecode(path)
    if not isinstance(type, str):
        raise TypeError(f"type: expected a storage type name (f32, f16, bf16, q8_0, q4_0), got {type.__class__.__name__}")
    if isinstance(tokenizer, (str, bytes, os.PathLike)):
        tokenizer = _core.Tokenizer(tokenizer)
    elif tokenizer is not None and not isinstance(tokenizer, _core.Tokenizer):
        raise TypeError(f"tokenizer: expected a fpgallm.Tokenizer (llama2.c vocabulary), its path or None, got "
                        f"{tokenizer.__class__.__name__}")
    if isinstance(model, _core.Model):
        cpp = model
    else:
        if hasattr(model, "state_dict") and hasattr(model, "config") and config is None:
            config, model = model.config, model.state_dict()
        if config is None and not isinstance(model, Mapping):
            raise TypeError(f"model: expected a fpgallm.torch.Llama, a state_dict or a fpgallm.Model, got "
                            f"{model.__class__.__name__}")
        if config is None:
            raise ValueError("save: a state_dict needs config= (the model's shape: dim, hidden_dim, n_layers, "
                             "n_heads, n_kv_heads, vocab_size, seq_len, ...)")
        _check_mapping("model", model)
        _check_mapping("config", config)
        weights = to_engine(model, config)
        cpp = _core.model_from_weights({k: v for k, v in config.items()}, weights)
    return _core.save_model(cpp, path, format or "", type, tokenizer)
