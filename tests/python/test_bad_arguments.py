"""Bad arguments through the Python API: ValueError or TypeError naming the argument, with
the command line's words, never a crash (issue 34)."""
import math

import numpy as np
import pytest

import fpgallm
from conftest import MODEL, TOKENIZER


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
