"""fpgallm's byte-level BPE against GPT-2's published encoder (transcribed in hf_formats),
on a vocabulary trained here by an independent BPE trainer, read back from tokenizer.json
and from GGUF metadata."""
import json
import pathlib

import pytest

from conftest import SAMPLE_TEXT
from fpgallm import _core
from hf_formats import (LLAMA3_PATTERN, QWEN2_PATTERN, SPECIALS, Gpt2Encoder, gguf_tokenizer_metadata,
                        tokenizer_json, train_bpe, write_gguf)

import numpy as np

MIXED = ("北京欢迎你！今天天气很好。東京は晴れです。 서울 🙂👍🏽 family: 👨‍👩‍👧 café naïve\t\ttabs\r\n"
         "  lead\u00a0nbsp\u3000ideographic  \n\n\nnewlines   3.14159 12345678 x²  ¾ I'm you'LL they'RE\v\f end ")
CORPUS_EXTRA = "北京欢迎你！今天天气很好。東京は晴れです。🙂👍🏽 café naïve " * 8


def sample_text():
    return pathlib.Path(SAMPLE_TEXT).read_text(encoding="utf-8")


@pytest.fixture(scope="module", params=["qwen2", "llama3"])
def trained(request, tmp_path_factory):
    pattern = QWEN2_PATTERN if request.param == "qwen2" else LLAMA3_PATTERN
    vocab, merges = train_bpe(sample_text() + CORPUS_EXTRA, pattern, 400)
    d = tmp_path_factory.mktemp(request.param)
    # Llama 3's tokenizer.json sets ignore_merges (llama.cpp applies it for pre "llama-bpe").
    llama3 = request.param == "llama3"
    (d / "tokenizer.json").write_text(json.dumps(tokenizer_json(vocab, merges, pattern, ignore_merges=llama3)),
                                      encoding="utf-8")
    pre = "llama-bpe" if llama3 else "qwen2"
    # A one-layer model carries the vocabulary in GGUF (fpgallm reads tokenizers from checkpoints).
    dim, n_vocab = 8, len(vocab) + len(SPECIALS)
    arch = "qwen2"
    md = [("general.architecture", 8, arch), (f"{arch}.context_length", 4, 16), (f"{arch}.embedding_length", 4, dim),
          (f"{arch}.block_count", 4, 1), (f"{arch}.feed_forward_length", 4, 8), (f"{arch}.attention.head_count", 4, 2),
          (f"{arch}.attention.head_count_kv", 4, 2)] + gguf_tokenizer_metadata(vocab, merges, pre)
    z = lambda *s: np.zeros(s, np.float32)
    tensors = [("token_embd.weight", z(n_vocab, dim)), ("blk.0.attn_norm.weight", z(dim)), ("blk.0.ffn_norm.weight", z(dim))]
    for n, s in [("attn_q", (dim, dim)), ("attn_k", (dim, dim)), ("attn_v", (dim, dim)), ("attn_output", (dim, dim)),
                 ("ffn_gate", (8, dim)), ("ffn_down", (dim, 8)), ("ffn_up", (8, dim))]:
        tensors.append((f"blk.0.{n}.weight", z(*s)))
    for n, k in [("attn_q", dim), ("attn_k", dim), ("attn_v", dim)]:
        tensors.append((f"blk.0.{n}.bias", z(k)))
    tensors.append(("output_norm.weight", z(dim)))
    write_gguf(d / "vocab.gguf", md, tensors)
    encoder = {t: i for i, t in enumerate(vocab)}
    reference = Gpt2Encoder(encoder, merges, pattern, ignore_merges=llama3)
    from_json = _core.BpeTokenizer.from_hf_json(str(d / "tokenizer.json"))
    from_gguf = _core.bpe_tokenizer(_core.load(str(d / "vocab.gguf")))
    t = Trained((reference, from_json, from_gguf, vocab, merges))
    t.json_path = d / "tokenizer.json"
    return t


class Trained(tuple):
    """(reference, from_json, from_gguf, vocab, merges), and json_path: the tokenizer.json."""


def check(trained, data: bytes):
    reference, from_json, from_gguf, _, _ = trained
    expected = reference.encode(data)
    assert from_json.encode(data, parse_special=False) == expected
    assert from_gguf.encode(data, parse_special=False) == expected
    assert from_json.decode(expected) == data


def test_sample_text(trained):
    data = sample_text().encode("utf-8")
    check(trained, data)
    _, _, _, vocab, merges = trained
    assert len(merges) == 400  # the merges really shorten the text
    assert len(trained[0].encode(data)) < len(data) / 2


def test_cjk_emoji_mixed_whitespace(trained):
    check(trained, MIXED.encode("utf-8"))


def test_every_single_byte(trained):
    for b in range(256):
        check(trained, bytes([b]))


def test_invalid_utf8_bytes_are_pieces_alone(trained):
    check(trained, b"ab\xe2\x82 cd\xff\xfe e\xf0\x9f\x99 caf\xc3\xa9\xc3")


def test_special_tokens_and_chat_template(trained):
    reference, from_json, _, vocab, _ = trained
    ids = from_json.encode(b"hi<|im_end|>there<|endoftext|>")
    im_end, eot = len(vocab) + SPECIALS.index("<|im_end|>"), len(vocab) + SPECIALS.index("<|endoftext|>")
    assert ids == reference.encode(b"hi") + [im_end] + reference.encode(b"there") + [eot]
    prompt = from_json.chat_prompt("Tell me a story.")
    assert prompt == "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"
    assert from_json.decode(from_json.encode(prompt.encode())) == prompt.encode()


NFD_CASES = ["cafe\u0301 nai\u0308ve", "\u1100\u1161\u11a8 \u1112\u1161\u11ab", "Vie\u0323\u0302t", "\u212b \u2126 A\u030a",
             "e\u0301\u0301 \u0073\u0323\u0307", "plain ascii"]


def test_nfc_normalizer_puts_text_in_nfc_as_unicodedata_does(trained, tmp_path):
    """A tokenizer.json naming the NFC normalizer (Qwen's) encodes the NFC form of its input:
    Python's unicodedata is the reference for NFC, the transcribed GPT-2 encoder for the ids."""
    import unicodedata
    reference, from_json, _, vocab, merges = trained
    tj = json.loads(trained.json_path.read_text(encoding="utf-8"))
    tj["normalizer"] = {"type": "NFC"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
    nfc_tok = _core.BpeTokenizer.from_hf_json(str(tmp_path / "tokenizer.json"))
    for text in NFD_CASES:
        nfd = unicodedata.normalize("NFD", text)
        nfc = unicodedata.normalize("NFC", text)
        expected = reference.encode(nfc.encode("utf-8"))
        assert nfc_tok.encode(nfd.encode("utf-8"), parse_special=False) == expected, text
        assert nfc_tok.encode(text.encode("utf-8"), parse_special=False) == expected, text
        # Without the normalizer the text is taken as given.
        assert from_json.encode(nfd.encode("utf-8"), parse_special=False) == reference.encode(nfd.encode("utf-8"))
    assert nfc_tok.encode("\u212b".encode("utf-8"), parse_special=False) != from_json.encode("\u212b".encode("utf-8"),
                                                                                            parse_special=False)
    # Special tokens are found before normalization; the text around them is normalized.
    im_end = len(vocab) + SPECIALS.index("<|im_end|>")
    nfd = unicodedata.normalize("NFD", "café")
    assert nfc_tok.encode(f"{nfd}<|im_end|>{nfd}".encode("utf-8")) == \
        reference.encode("café".encode("utf-8")) + [im_end] + reference.encode("café".encode("utf-8"))
    # Bytes that are not UTF-8 are encoded as given (no replacement character).
    raw = b"e\xcc\x81\xff"
    assert nfc_tok.encode(raw, parse_special=False) == reference.encode(raw)


def test_special_tokens_as_text_when_asked(trained):
    reference, from_json, _, vocab, _ = trained
    text = b"a<|im_start|>b"
    im_start = len(vocab) + SPECIALS.index("<|im_start|>")
    assert from_json.encode(text) == reference.encode(b"a") + [im_start] + reference.encode(b"b")
    assert from_json.encode(text, parse_special=False) == reference.encode(text)
    assert im_start not in from_json.encode(text, parse_special=False)


def test_python_tokenizer_reads_a_tokenizer_json_or_its_folder(trained):
    import fpgallm
    reference = trained[0]
    data = "Once upon a time, café".encode("utf-8")
    for path in (trained.json_path, str(trained.json_path), trained.json_path.parent):
        tok = fpgallm.Tokenizer(path)
        assert isinstance(tok, _core.BpeTokenizer)
        assert tok.encode(data, parse_special=False) == reference.encode(data)
    # llama2.c's tokenizer.bin still gives the SentencePiece-style tokenizer.
    from conftest import TOKENIZER
    sp = fpgallm.Tokenizer(TOKENIZER)
    assert isinstance(sp, _core.Tokenizer) and sp.vocab_size == 512
    with pytest.raises(fpgallm.InputError):
        fpgallm.Tokenizer(str(trained.json_path.parent / "missing.json"))
