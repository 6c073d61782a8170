#!/usr/bin/env python3
"""Sinter's Llama against the PyTorch Llama of benchmarks/pytorch_reference.py.

Runs llama_reference_dump, which writes a small Llama's weights (f64), an input, and Sinter's
logits, loss and parameter gradients to one safetensors file; loads the weights into the PyTorch
model with strict=True, recomputes the logits, the loss and the gradients in f64, and compares them
(1e-9 relative). The file is read here directly (8-byte header length, JSON header, raw
little-endian data), so only torch is needed. Exit 77 (skipped) without torch.

  check_llama_torch.py LLAMA_REFERENCE_DUMP WORK_DIR
"""
import json
import os
import struct
import subprocess
import sys

try:
    import torch
except ImportError as e:
    print(f"skipped: {e} (a Python with torch: pip install torch)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))
import pytorch_reference  # noqa: E402

DTYPES = {"F64": torch.float64, "F32": torch.float32, "I64": torch.int64}


def read_safetensors(path):
    """{name: tensor} and the metadata of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[h["dtype"]])
        out[name] = t.reshape(h["shape"]) if h["shape"] else t.reshape(())
    return out, meta


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    dump, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "llama.safetensors")
    subprocess.run([dump, path], check=True)
    tensors, meta = read_safetensors(path)
    llama = pytorch_reference.build_models(torch)["llama-mini"](
        vocab=int(meta["vocab"]), layers=int(meta["layers"]), heads=int(meta["heads"]),
        kv_heads=int(meta["kv_heads"]), width=int(meta["width"]), hidden=int(meta["hidden"]),
        base=float(meta["base"]), eps=float(meta["eps"])).double()
    weights = {k: v for k, v in tensors.items()
               if not k.startswith("grad.") and k not in ("input_ids", "targets", "logits", "loss")}
    llama.load_state_dict(weights, strict=True)
    vocab = int(meta["vocab"])
    logits = llama(tensors["input_ids"])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab),
                                             tensors["targets"].reshape(-1))
    loss.backward()
    bad = []

    def compare(name, got, want):
        err = (got - want).abs().max().item()
        scale = want.abs().max().item()
        ok = err <= 1e-9 * max(scale, 1e-30) + 1e-14
        print(f"{name}: max |difference| {err:.3g} (max |value| {scale:.3g}){'' if ok else '  FAIL'}")
        if not ok:
            bad.append(name)

    compare("logits", tensors["logits"], logits.detach())
    compare("loss", tensors["loss"], loss.detach())
    for name, p in llama.named_parameters():
        compare("grad." + name, tensors["grad." + name], p.grad)
    if bad:
        print(f"{len(bad)} mismatches: {', '.join(bad)}")
        return 1
    print(f"Sinter's Llama equals PyTorch's: logits, loss and {len(weights)} gradients")
    return 0


if __name__ == "__main__":
    sys.exit(main())
