#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (seeds/<target>/): small valid files of each format
and a few near misses, so that fuzzing starts past the first checks. Run from anywhere; the output is
committed, and running it again gives the same bytes."""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    folder = os.path.join(HERE, "seeds", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, raw bytes), laid out in order."""
    header, offset, payload = {}, 0, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        payload += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + payload


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


# --- safetensors ---
put("safetensors", "mixed", safetensors([
    ("a", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6)),
    ("b", "BF16", [2], struct.pack("<2H", 0x3F80, 0xC000)),
    ("c", "I64", [], struct.pack("<q", 7)),
    ("d", "U8", [0, 4], b""),
    ("e", "F64", [1], struct.pack("<d", 0.5)),
], {"step": "3"}))
put("safetensors", "empty", safetensors([]))
put("safetensors", "truncated", safetensors([("a", "F32", [4], f32(1, 2, 3, 4))])[:-5])

# --- load_into: the fuzz target's model, Sequential(Conv2d(1, 2, 3), BatchNorm2d(2), Flatten,
# Linear(8, 3)); the last byte of an input picks strict (even) or not (odd). ---
model = [
    ("0.weight", "F32", [2, 1, 3, 3], f32(*[0.1 * i for i in range(18)])),
    ("0.bias", "F32", [2], f32(0.5, -0.5)),
    ("1.weight", "F32", [2], f32(1, 1)),
    ("1.bias", "F32", [2], f32(0, 0)),
    ("1.running_mean", "F32", [2], f32(0, 0)),
    ("1.running_var", "F32", [2], f32(1, 1)),
    ("1.num_batches_tracked", "I64", [], struct.pack("<q", 0)),
    ("3.weight", "F32", [3, 8], f32(*[0.01 * i for i in range(24)])),
    ("3.bias", "F32", [3], f32(1, 2, 3)),
]
put("load_into", "model", safetensors(model))
put("load_into", "model-partial", safetensors(model[:3]) + b"\x01")
put("load_into", "wrong-shape", safetensors([("0.bias", "F32", [3], f32(1, 2, 3))]))

# --- idx: magic 0 0 0x08 ndim, big-endian dims, bytes ---
def idx(dims, payload):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload

put("idx", "labels", idx([6], bytes([0, 1, 2, 9, 3, 4])))
put("idx", "images", idx([2, 3, 3], bytes(range(18))))
put("idx", "images.gz", gzip.compress(idx([2, 2, 2], bytes(range(8))), mtime=0))
put("idx", "scalar", idx([], b""))

# --- cifar: records of a label and 3 x 32 x 32 bytes ---
record = lambda label, v: bytes([label]) + bytes([v]) * 3072
put("cifar", "two", record(3, 7) + record(9, 200))
put("cifar", "one-short", record(1, 1)[:-1])

# --- text: two option bytes (context, chunk size), then the text ---
put("text", "fortune", bytes([7, 20]) + b"A fool and his money are soon parted.\n%\nLook before you leap.\n")
put("text", "tiny", bytes([0, 0]) + b"ab")
put("text", "binary", bytes([15, 63]) + bytes(range(256)))


# --- shard: llm.c token shards ---
def shard(magic, version, n, tokens):
    return struct.pack("<256i", magic, version, n, *([0] * 253)) + struct.pack("<%dH" % len(tokens), *tokens)


put("shard", "valid", shard(20240520, 1, 12, [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]))
put("shard", "empty", shard(20240520, 1, 0, []))
put("shard", "truncated", shard(20240520, 1, 9, [7, 7, 7]))
put("shard", "version2", shard(20240520, 2, 2, [1, 2, 0, 0]))

# --- tokenizer: tokenizer.json of a byte-level BPE (as BpeTokenizer::save writes it) ---
SPLIT = (r" ?[^\x00-\x40\x5B-\x60\x7B-\x7F]+| ?[0-9]+| ?[\x00-\x08\x0E-\x1F\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7F]+"
         r"|[\x09-\x0D\x20]+(?![^\x09-\x0D\x20])|[\x09-\x0D\x20]+")


def byte_chars():
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def tokenizer(merges, specials):
    chars = byte_chars()
    vocab = {chars[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    return json.dumps({
        "version": "1.0",
        "added_tokens": [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, s in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT}, "behavior": "Isolated", "invert": False}, byte_level]},
        "decoder": byte_level,
        "model": {"type": "BPE", "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }, ensure_ascii=False).encode()


put("tokenizer", "merges", tokenizer([("t", "h"), ("th", "e"), ("\u0120", "the")], ["<|endoftext|>"]))
put("tokenizer", "bytes", tokenizer([], []))
