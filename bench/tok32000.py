#!/usr/bin/env python3
"""A 32000-piece llama2.c tokenizer for the benchmarks' synthesized 32000-token presets:
tok512's pieces, then pieces that no text merges into.
Usage: bench/tok32000.py models/tok512.bin OUT.bin"""
import struct
import sys

src = open(sys.argv[1], 'rb').read()
maxlen, = struct.unpack_from('<i', src, 0)
off, pieces = 4, []
for _ in range(512):
    score, n = struct.unpack_from('<fi', src, off)
    off += 8
    pieces.append((score, src[off:off + n]))
    off += n
pieces += [(-1e9, ('[t%d]' % i).encode()) for i in range(512, 32000)]
out = bytearray(struct.pack('<i', max(maxlen, 8)))
for score, p in pieces:
    out += struct.pack('<fi', score, len(p)) + p
open(sys.argv[2], 'wb').write(bytes(out))
