#!/usr/bin/env python3
"""Sinter's GGUF export read back by the `gguf` package, and run in llama.cpp when it is there.

Runs gguf_reference_dump, which exports two small Llamas (one on a BPE tokenizer in f32, f16,
bf16 and q8_0; one tied, on bytes, in q8_0) with their weights, a prompt, Sinter's logits and
greedy tokens. For every file, with gguf.GGUFReader: every metadata key, its type and value (and
no other key); every tensor's name, ggml type, dims (reversed), offset alignment and bytes, which
must be the gguf package's own encoding of Sinter's weight (gguf.quants.quantize), with q and k
permuted as convert_hf_to_gguf.py permutes them; and the values, dequantized and un-permuted,
against the weights. The vocabulary against the tokenizer.json and GPT-2's byte-to-unicode table.
With llama-cpp-python (llama_cpp), the files are also loaded and run: the prompt's ids, the
logits (f32 and q8_0) and the greedy tokens (f32) against Sinter's. Exit 77 (skipped) without
gguf or safetensors.

  check_gguf.py GGUF_REFERENCE_DUMP CORPUS WORK_DIR
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFValueType as V
    from safetensors.numpy import load_file
    from safetensors import safe_open
except ImportError as e:
    print(f"skipped: {e} (pip install gguf safetensors numpy)")
    sys.exit(77)

# file type name -> (general.file_type, the matrices' ggml type)
FILE_TYPES = {"f32": (0, Q.F32), "f16": (1, Q.F16), "bf16": (32, Q.BF16), "q8_0": (7, Q.Q8_0)}

# Sinter's (Hugging Face's) decoder-layer names -> llama.cpp's
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def gpt2_byte_to_unicode():
    """GPT-2's table (openai/gpt-2 encoder.py), written out here independently of Sinter's."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: rope on halves -> rope on neighbours."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_names(weights):
    """{gguf name: (sinter name, heads of its rope permutation or 0)}"""
    meta = weights["__meta__"]
    n_head, n_kv = int(meta["n_head"]), int(meta["n_kv_head"])
    out = {"token_embd.weight": ("model.embed_tokens.weight", 0),
           "output_norm.weight": ("model.norm.weight", 0)}
    if "lm_head.weight" in weights["__names__"]:
        out["output.weight"] = ("lm_head.weight", 0)
    layer = 0
    while f"model.layers.{layer}.input_layernorm.weight" in weights["__names__"]:
        for src, dst in LAYER_NAMES.items():
            heads = n_head if "q_proj" in src else n_kv if "k_proj" in src else 0
            out[f"blk.{layer}.{dst}"] = (f"model.layers.{layer}.{src}", heads)
        layer += 1
    return out, layer


def load_reference(work, name):
    path = os.path.join(work, name + ".safetensors")
    tensors = load_file(path)
    with safe_open(path, framework="numpy") as f:
        tensors["__meta__"] = f.metadata()
    tensors["__names__"] = [k for k in tensors if "." in k and not k.startswith("__")]
    with open(os.path.join(work, name + "-tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    return tensors, tokenizer


def expected_vocab(tokenizer, n_vocab):
    tokens = [None] * n_vocab
    types = [1] * n_vocab
    for text, i in tokenizer["model"]["vocab"].items():
        tokens[i] = text
    for added in tokenizer["added_tokens"]:
        tokens[added["id"]] = added["content"]
        types[added["id"]] = 3
    for i in range(n_vocab):
        if tokens[i] is None:
            tokens[i], types[i] = f"[PAD{i}]", 5
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    return tokens, types, merges


def expected_metadata(weights, tokenizer, name, file_type):
    meta = weights["__meta__"]
    embd = weights["model.embed_tokens.weight"]
    n_vocab, n_embd = embd.shape
    _, n_layer = gguf_names(weights)
    n_head = int(meta["n_head"])
    tokens, types, merges = expected_vocab(tokenizer, n_vocab)
    kv = {
        "general.architecture": (V.STRING, "llama"),
        "general.type": (V.STRING, "model"),
        "general.name": (V.STRING, name),
        "general.file_type": (V.UINT32, FILE_TYPES[file_type][0]),
        "general.quantization_version": (V.UINT32, 2),
        "general.alignment": (V.UINT32, 32),
        "llama.context_length": (V.UINT32, int(meta["context"])),
        "llama.embedding_length": (V.UINT32, n_embd),
        "llama.block_count": (V.UINT32, n_layer),
        "llama.feed_forward_length": (V.UINT32, weights["model.layers.0.mlp.gate_proj.weight"].shape[0]),
        "llama.attention.head_count": (V.UINT32, n_head),
        "llama.attention.head_count_kv": (V.UINT32, int(meta["n_kv_head"])),
        "llama.rope.freq_base": (V.FLOAT32, np.float32(float(meta["rope_base"]))),
        "llama.attention.layer_norm_rms_epsilon": (V.FLOAT32, np.float32(float(meta["norm_eps"]))),
        "llama.rope.dimension_count": (V.UINT32, n_embd // n_head),
        "llama.vocab_size": (V.UINT32, n_vocab),
        "tokenizer.ggml.model": (V.STRING, "gpt2"),
        "tokenizer.ggml.pre": (V.STRING, "gpt-2"),
        "tokenizer.ggml.tokens": (V.STRING, tokens),
        "tokenizer.ggml.token_type": (V.INT32, types),
        "tokenizer.ggml.merges": (V.STRING, merges),
        "tokenizer.ggml.add_bos_token": (V.BOOL, False),
    }
    end = [a["id"] for a in tokenizer["added_tokens"] if a["content"] == "<|endoftext|>"]
    if end:
        kv["tokenizer.ggml.bos_token_id"] = (V.UINT32, end[0])
        kv["tokenizer.ggml.eos_token_id"] = (V.UINT32, end[0])
    return kv


def check_metadata(reader, path, expected):
    keys = {k for k in reader.fields if not k.startswith("GGUF.")}
    check(keys == set(expected), f"{path}: keys {sorted(keys ^ set(expected))} differ")
    for key, (vtype, value) in expected.items():
        if key not in reader.fields:
            continue
        field = reader.fields[key]
        if isinstance(value, list):
            # parts: key length, key, ARRAY, the element type (read even when the array is empty)
            check(field.types[0] == V.ARRAY and int(field.parts[3][0]) == vtype,
                  f"{path}: {key} is not an array of {vtype.name}")
        else:
            check(field.types == [vtype], f"{path}: {key} has types {field.types}, not {vtype.name}")
        got = field.contents()
        if vtype == V.FLOAT32:
            got = np.float32(got)
        check(got == value, f"{path}: {key} is {str(got)[:200]}, not {str(value)[:200]}")


def check_vocabulary(reader, path):
    """The byte tokens against GPT-2's table, written out independently of the tokenizer.json."""
    table = gpt2_byte_to_unicode()
    got = reader.fields["tokenizer.ggml.tokens"].contents()
    for b in range(256):
        check(got[b] == table[b], f"{path}: token {b} is {got[b]!r}, not GPT-2's {table[b]!r}")


def check_tensors(reader, path, weights, file_type):
    names, _ = gguf_names(weights)
    got = {t.name: t for t in reader.tensors}
    check(set(got) == set(names), f"{path}: tensors {sorted(set(got) ^ set(names))} differ")
    check(reader.data_offset % 32 == 0, f"{path}: the data starts at {reader.data_offset}")
    for gname, (sname, heads) in names.items():
        if gname not in got:
            continue
        t, ref = got[gname], weights[sname].astype(np.float32)
        want = FILE_TYPES[file_type][1] if ref.ndim == 2 else Q.F32
        if want == Q.Q8_0 and ref.shape[-1] % 32 != 0:
            want = Q.F16
        check(t.tensor_type == want, f"{path}: {gname} is {t.tensor_type.name}, not {want.name}")
        check(list(t.shape) == list(reversed(ref.shape)),
              f"{path}: {gname} has dims {list(t.shape)}, not {list(reversed(ref.shape))}")
        offset = int(t.field.parts[-1][0])
        check(offset % 32 == 0, f"{path}: {gname} at offset {offset}, not a multiple of 32")
        if heads:
            check(not np.array_equal(permute(ref, heads), ref), f"{gname}: a permutation that moves nothing")
        stored = permute(ref, heads) if heads else ref
        encoded = gguf.quants.quantize(stored, want)
        check(np.frombuffer(t.data.tobytes(), np.uint8).tobytes() == encoded.tobytes(),
              f"{path}: {gname}'s bytes are not the gguf package's {want.name} of the weight")
        values = gguf.quants.dequantize(t.data, want).reshape(ref.shape)
        if heads:
            values = unpermute(values, heads)
        tol = {Q.F32: 0, Q.F16: 1e-3, Q.BF16: 8e-3, Q.Q8_0: 0}[want]
        # q8_0: half a step of the largest scale; f16: half its smallest subnormal, 2^-25
        atol = {Q.F32: 0, Q.F16: 2.0**-25, Q.BF16: 0, Q.Q8_0: np.abs(ref).max() / 127 * 0.51}[want]
        err = np.abs(values - ref) - (atol + tol * np.abs(ref))
        check(err.max() <= 0, f"{path}: {gname} is {err.max():.3g} off the weight after decoding")


def run_llama_cpp(work, name, weights, file_type, rtol, greedy):
    import llama_cpp  # noqa: F401 (imported by the caller first)
    path = os.path.join(work, f"{name}-{file_type}.gguf")
    ids = [int(i) for i in weights["input_ids"][0]]
    llm = llama_cpp.Llama(model_path=path, n_ctx=64, logits_all=True, verbose=False, n_threads=2)
    prompt = weights["__meta__"]["prompt"]
    toks = llm.tokenize(prompt.encode(), add_bos=False, special=False)
    check(toks == ids, f"{path}: llama.cpp tokenizes the prompt to {toks}, Sinter to {ids}")
    llm.reset()
    llm.eval(ids)
    scores = np.array(llm.scores[:len(ids)])
    ref = weights["logits"]
    err = np.abs(scores - ref).max() / np.abs(ref).max()
    print(f"{path}: llama.cpp's logits within {err:.2e} of Sinter's (relative to the largest)")
    check(err <= rtol, f"{path}: llama.cpp's logits are {err:.3g} off Sinter's (> {rtol})")
    if greedy:
        out = []
        for _ in range(8):
            out.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
            llm.eval([out[-1]])
        want = [int(i) for i in weights["greedy"][0][-8:]]
        check(out == want, f"{path}: llama.cpp's greedy tokens {out}, Sinter's {want}")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dump, corpus, work = sys.argv[1:4]
    if not os.path.exists(corpus):
        print(f"skipped: no corpus at {corpus}")
        return 77
    os.makedirs(work, exist_ok=True)
    subprocess.run([dump, corpus, work], check=True)
    files = [("bpe", t) for t in FILE_TYPES] + [("tied", "q8_0")]
    for name, file_type in files:
        weights, tokenizer = load_reference(work, name)
        path = os.path.join(work, f"{name}-{file_type}.gguf")
        reader = gguf.GGUFReader(path)
        check_metadata(reader, path, expected_metadata(weights, tokenizer, name, file_type))
        check_vocabulary(reader, path)
        check_tensors(reader, path, weights, file_type)
        print(f"{path}: {len(reader.tensors)} tensors, {len(reader.fields)} fields checked")
    try:
        import llama_cpp  # noqa: F401
    except ImportError as e:
        print(f"llama.cpp part skipped: {e} (pip install llama-cpp-python)")
    else:
        # f32 weights are still read through llama.cpp's f16 K/V cache: 4e-4 measured.
        for name, file_type, rtol, greedy in [("bpe", "f32", 2e-3, True),
                                              ("bpe", "q8_0", 1e-1, False),
                                              ("tied", "q8_0", 1e-1, False)]:
            run_llama_cpp(work, name, load_reference(work, name)[0], file_type, rtol, greedy)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("every GGUF file reads back as Sinter's model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
