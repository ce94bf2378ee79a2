"""Independent writers of the checkpoint formats fpgallm reads, written from the format
descriptions (not from fpgallm's code): safetensors (github.com/huggingface/safetensors,
"Format"), GGUF v3 (github.com/ggml-org/ggml docs/gguf.md), and GPT-2's byte-level BPE
(github.com/openai/gpt-2 src/encoder.py: bytes_to_unicode, get_pairs, Encoder.bpe/encode)
with a BPE trainer (Sennrich et al. 2016, Algorithm 1) over GPT-2-style pre-tokens."""
import collections
import json
import struct

import numpy as np
import regex

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


# ---- safetensors ---------------------------------------------------------------------
def write_safetensors(path, tensors):
    """tensors: {name: float32 ndarray}; header JSON padded with spaces to 8 bytes."""
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


# ---- GGUF ----------------------------------------------------------------------------
GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9


def _gguf_string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _gguf_value(vtype, v):
    if vtype == GGUF_U32:
        return struct.pack("<I", v)
    if vtype == GGUF_I32:
        return struct.pack("<i", v)
    if vtype == GGUF_F32:
        return struct.pack("<f", v)
    if vtype == GGUF_BOOL:
        return struct.pack("<B", 1 if v else 0)
    if vtype == GGUF_STRING:
        return _gguf_string(v)
    raise ValueError(vtype)


def write_gguf(path, metadata, tensors, alignment=32):
    """metadata: [(key, type, value)] with type GGUF_* or (GGUF_ARRAY, element type);
    tensors: [(name, float32 ndarray)] stored as F32 (ggml type 0), dims reversed."""
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += _gguf_string(key)
        if isinstance(vtype, tuple):
            out += struct.pack("<II", GGUF_ARRAY, vtype[1]) + struct.pack("<Q", len(value))
            for v in value:
                out += _gguf_value(vtype[1], v)
        else:
            out += struct.pack("<I", vtype) + _gguf_value(vtype, value)
    offset, datas = 0, []
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype=np.float32)
        out += _gguf_string(name) + struct.pack("<I", a.ndim)
        for d in reversed(a.shape):
            out += struct.pack("<Q", d)
        out += struct.pack("<IQ", 0, offset)
        datas.append((offset, a.tobytes()))
        offset += (a.nbytes + alignment - 1) // alignment * alignment
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    data = bytearray(offset)
    for off, b in datas:
        data[off:off + len(b)] = b
    with open(path, "wb") as f:
        f.write(out + data)


# ---- GPT-2 byte-level BPE ------------------------------------------------------------
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def get_pairs(word):
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char
    return pairs


class Gpt2Encoder:
    """encoder.py's Encoder.bpe and Encoder.encode; text that is not valid UTF-8 is split
    so that each invalid byte is a piece of its own (the rule fpgallm documents)."""

    def __init__(self, encoder, bpe_merges, pattern, ignore_merges=False):
        self.encoder = encoder
        self.ignore_merges = ignore_merges  # tokenizers' BPE option (Llama 3): a whole-token word is kept
        self.byte_encoder = bytes_to_unicode()
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.pat = regex.compile(pattern)
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def _encode_pieces(self, pieces):
        ids = []
        for piece in pieces:
            token = "".join(self.byte_encoder[b] for b in piece)
            if self.ignore_merges and token in self.encoder:
                ids.append(self.encoder[token])
                continue
            ids.extend(self.encoder[t] for t in self.bpe(token).split(" "))
        return ids

    def encode(self, data: bytes):
        text = data.decode("utf-8", errors="surrogateescape")
        pieces = []
        for run in regex.split(r"([\udc80-\udcff])", text):
            if not run:
                continue
            if "\udc80" <= run <= "\udcff" and len(run) == 1:
                pieces.append(run.encode("utf-8", errors="surrogateescape"))
            else:
                pieces.extend(t.encode("utf-8") for t in regex.findall(self.pat, run))
        return self._encode_pieces(pieces)


def train_bpe(text, pattern, n_merges):
    """Byte-level BPE training: start from the 256 byte symbols, repeatedly merge the most
    frequent adjacent pair over the pre-tokens (ties: the lexicographically smallest)."""
    be = bytes_to_unicode()
    words = collections.Counter(tuple(be[b] for b in t.encode("utf-8")) for t in regex.findall(pattern, text))
    vocab = [be[b] for b in range(256)]
    merges = []
    for _ in range(n_merges):
        counts = collections.Counter()
        for w, f in words.items():
            for a, b in zip(w, w[1:]):
                counts[(a, b)] += f
        if not counts:
            break
        best_count = max(counts.values())
        pair = min(p for p, c in counts.items() if c == best_count)
        merges.append(pair)
        vocab.append(pair[0] + pair[1])
        merged = {}
        for w, f in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + f
        words = merged
    return vocab, merges


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tokenizer_json(vocab, merges, pattern, specials=SPECIALS, bos=None, ignore_merges=False):
    """A Hugging Face tokenizer.json (tokenizers' serialization) for the trained vocabulary;
    specials get the ids after it."""
    added = [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(specials)]
    post = None
    if bos is not None:
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [], "special_tokens": {}}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": {t: i for i, t in enumerate(vocab)}, "merges": [f"{a} {b}" for a, b in merges]},
    }


def gguf_tokenizer_metadata(vocab, merges, pre, specials=SPECIALS, eos=None):
    tokens = list(vocab) + list(specials)
    types = [1] * len(vocab) + [3] * len(specials)
    md = [("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
          ("tokenizer.ggml.pre", GGUF_STRING, pre),
          ("tokenizer.ggml.tokens", (GGUF_ARRAY, GGUF_STRING), tokens),
          ("tokenizer.ggml.token_type", (GGUF_ARRAY, GGUF_I32), types),
          ("tokenizer.ggml.merges", (GGUF_ARRAY, GGUF_STRING), [f"{a} {b}" for a, b in merges])]
    if eos is not None:
        md.append(("tokenizer.ggml.eos_token_id", GGUF_U32, eos))
    return md
