"""fpgallm from Python: checkpoints, the fp32 engine, quantization, designs, prediction,
simulation and the accelerator's int8 matrix unit, with numpy arrays in and out (the C++
core is fpgallm._core).

    import fpgallm
    m = fpgallm.load("models/stories260K.bin")
    tok = fpgallm.Tokenizer("models/tok512.bin")          # or Tokenizer(m, path): checked against m
    fpgallm.generate(m, tok, "Once upon a time", steps=64, temperature=0)["text"]
    q = fpgallm.quantize(m, tok, "models/tinystories-valid-sample.txt", scheme="w8a8")
    q.save("w8a8.gguf"); fpgallm.generate(m, tok, "Once", steps=64, temperature=0, quant=q)
    fpgallm.save(m, "model.gguf", type="f16", tokenizer=tok)  # .bin, .gguf or a safetensors folder

``fpgallm.save`` also takes a trained ``fpgallm.torch.Llama`` or its state_dict (Meta or
Hugging Face names; ``fpgallm.weights``).

PyTorch integration: ``fpgallm.torch`` (accelerate, from_pretrained); host pipeline that
keeps the accelerator busy: ``fpgallm.pipeline``. Neither is imported here, so
``import fpgallm`` needs neither torch nor numpy.
"""

from fpgallm import _core
from fpgallm._core import (  # noqa: F401
    BOS,
    EOS,
    INT8_MAX,
    InputError,
    Model,
    QuantModel,
    Transformer,
    default_design,
    design_problems,
    generate,
    linear_fp32,
    linear_int8,
    linear_int8_reference,
    load,
    load_design,
    load_quant,
    matmul_int8,
    matmul_int8_dequant,
    matrix_unit_source,
    perplexity,
    quantize,
    quantize_rows,
)

__all__ = [
    "BOS", "EOS", "INT8_MAX", "InputError", "Model", "QuantModel", "Tokenizer", "Transformer",
    "default_design", "design_problems", "generate", "linear_fp32", "linear_int8", "linear_int8_reference", "load",
    "load_design", "load_quant", "matmul_int8", "matmul_int8_dequant", "matrix_unit_source", "perplexity",
    "quantize", "quantize_rows",
]

import os as _os  # noqa: E402


def _hf_tokenizer_json(args, kwargs):
    """The tokenizer.json a Tokenizer(path) call names: the file itself, or the one in a
    folder that holds no llama2.c tokenizer.bin; None otherwise."""
    if len(args) + len(kwargs) != 1:
        return None
    path = args[0] if args else kwargs.get("path")
    if not isinstance(path, (str, _os.PathLike)):
        return None
    path = _os.fspath(path)
    if _os.path.isdir(path):
        inside = _os.path.join(path, "tokenizer.json")
        if _os.path.isfile(inside) and not _os.path.exists(_os.path.join(path, "tokenizer.bin")):
            return inside
        return None
    return path if path.endswith(".json") else None


class Tokenizer(_core.Tokenizer):
    __doc__ = _core.Tokenizer.__doc__ + (
        " A Hugging Face tokenizer.json, or a folder that holds one (and no tokenizer.bin), gives "
        "the byte-level BPE vocabulary it describes (a fpgallm._core.BpeTokenizer).")

    def __new__(cls, *args, **kwargs):
        hf = _hf_tokenizer_json(args, kwargs)
        if hf is not None:
            return _core.BpeTokenizer.from_hf_json(hf)
        return super().__new__(cls)


from fpgallm.weights import save  # noqa: E402

__all__.append("save")

# Planning and simulation, present when the build has those modules (perf, hw, sim).
for _name in ("devices", "predict", "simulate"):
    if hasattr(_core, _name):
        globals()[_name] = getattr(_core, _name)
        __all__.append(_name)
del _name
