#!/usr/bin/env python3
"""Sinter's example checkpoints read by the real `safetensors` package, under PyTorch's names.

Trains fashion_mnist's mlp, cnn and resnet20 for a moment with --save and --export-weights, then
reads both files with safetensors.numpy. The weights file must hold exactly the state_dict keys and shapes of
the torch.nn equivalent of each model (written out below), and the checkpoint the same tensors under
"model.". Where torch is installed, the equivalent models also load the files with strict=True.
Exit 77 (skipped) without numpy or safetensors.

  check_torch_names.py FASHION_MNIST_EXE DATA_DIR WORK_DIR
  check_torch_names.py --lm LM_EXE WORK_DIR
      the same for lm's GPT (tied head) and its Llama on BPE tokens (untied, 2 K/V heads), against
      the Gpt and Llama of benchmarks/pytorch_reference.py (Hugging Face's names for the Llama)
"""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"skipped: {e} (pip install numpy safetensors)")
    sys.exit(77)

# The torch.nn equivalents, as state_dict keys and shapes:
#   mlp: nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024),
#                      nn.ReLU(), nn.Linear(1024, 10))
#   cnn: nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
#                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
#                      nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
EXPECTED = {
    "mlp": {"1.weight": (1024, 784), "1.bias": (1024,), "3.weight": (1024, 1024),
            "3.bias": (1024,), "5.weight": (10, 1024), "5.bias": (10,)},
    "cnn": {"0.weight": (32, 1, 3, 3), "0.bias": (32,), "3.weight": (64, 32, 3, 3),
            "3.bias": (64,), "7.weight": (128, 3136), "7.bias": (128,), "9.weight": (10, 128),
            "9.bias": (10,)},
}


def bn_keys(prefix, c):
    return {f"{prefix}.weight": (c,), f"{prefix}.bias": (c,), f"{prefix}.running_mean": (c,),
            f"{prefix}.running_var": (c,), f"{prefix}.num_batches_tracked": ()}


def resnet20_keys(in_channels):
    """resnet20 as benchmarks/pytorch_reference.py builds it: nn.Sequential(conv, BN, ReLU, nine
    BasicBlocks (conv1, bn1, conv2, bn2, shortcut = nn.Sequential(conv 1x1, BN) or nn.Identity()),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))."""
    keys = {"0.weight": (16, in_channels, 3, 3), **bn_keys("1", 16)}
    index, cin = 3, 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            p = str(index)
            keys[f"{p}.conv1.weight"] = (cout, cin, 3, 3)
            keys.update(bn_keys(f"{p}.bn1", cout))
            keys[f"{p}.conv2.weight"] = (cout, cout, 3, 3)
            keys.update(bn_keys(f"{p}.bn2", cout))
            if (i == 0 and stride != 1) or cin != cout:
                keys[f"{p}.shortcut.0.weight"] = (cout, cin, 1, 1)
                keys.update(bn_keys(f"{p}.shortcut.1", cout))
            cin, index = cout, index + 1
    keys.update({"14.weight": (10, 64), "14.bias": (10,)})
    return keys


EXPECTED["resnet20"] = resnet20_keys(1)  # fashion_mnist's: grey images padded to 32x32


def torch_model(torch, name):
    nn = torch.nn
    if name == "resnet20":
        return reference_models(torch)["resnet20"](in_channels=1)
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                             nn.ReLU(), nn.Linear(1024, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def gpt_keys(layers, width, vocab, context):
    """The tied GPT: Gpt(..., tied=True) of benchmarks/pytorch_reference.py."""
    keys = {"wte.weight": (vocab, width), "wpe.weight": (context, width),
            "ln_f.weight": (width,), "ln_f.bias": (width,)}
    for i in range(layers):
        p = f"blocks.{i}"
        for ln in ("ln1", "ln2"):
            keys.update({f"{p}.{ln}.weight": (width,), f"{p}.{ln}.bias": (width,)})
        for layer, (out, inp) in {"attn.qkv": (3 * width, width), "attn.out_proj": (width, width),
                                  "fc": (4 * width, width), "proj": (width, 4 * width)}.items():
            keys.update({f"{p}.{layer}.weight": (out, inp), f"{p}.{layer}.bias": (out,)})
    return keys


def reference_models(torch):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from pytorch_reference import build_models
    return build_models(torch)


def llama_keys(layers, width, kv_width, hidden, vocab):
    """The untied Llama of benchmarks/pytorch_reference.py, under Hugging Face's names."""
    keys = {"model.embed_tokens.weight": (vocab, width), "model.norm.weight": (width,),
            "lm_head.weight": (vocab, width)}
    for i in range(layers):
        p = f"model.layers.{i}"
        keys.update({f"{p}.input_layernorm.weight": (width,),
                     f"{p}.post_attention_layernorm.weight": (width,),
                     f"{p}.self_attn.q_proj.weight": (width, width),
                     f"{p}.self_attn.k_proj.weight": (kv_width, width),
                     f"{p}.self_attn.v_proj.weight": (kv_width, width),
                     f"{p}.self_attn.o_proj.weight": (width, width),
                     f"{p}.mlp.gate_proj.weight": (hidden, width),
                     f"{p}.mlp.up_proj.weight": (hidden, width),
                     f"{p}.mlp.down_proj.weight": (width, hidden)})
    return keys


def check_lm(exe, work, torch):
    tiny = ["--device", "cpu", "--layers", "2", "--heads", "2", "--width", "16", "--context", "16",
            "--batch-size", "4", "--steps", "2", "--warmup", "1", "--eval-interval", "2",
            "--eval-batches", "1"]
    failures = []
    # The byte-level GPT (tied head).
    weights = f"{work}/gpt-weights.safetensors"
    subprocess.run([exe, *tiny, "--out", f"{work}/gpt", "--export-weights", weights], check=True,
                   stdout=subprocess.DEVNULL)
    got = load_file(weights)
    shapes = {k: tuple(v.shape) for k, v in got.items()}
    expected = gpt_keys(2, 16, 256, 16)
    if shapes != expected:
        failures.append(f"gpt: {weights} holds {shapes}, torch.nn's keys are {expected}")
    elif torch is not None:
        m = reference_models(torch)["gpt-mini"](vocab=256, context=16, layers=2, heads=2,
                                                width=16, tied=True)
        m.load_state_dict({k: torch.from_numpy(v) for k, v in got.items()}, strict=True)
    print(f"gpt: {len(got)} tensors under torch.nn's names")
    # The Llama on 300 BPE tokens: 2 heads on 1 K/V head of 8, MLP ceil(8 * 16 / 3) -> 64.
    weights = f"{work}/llama-weights.safetensors"
    subprocess.run([exe, *tiny, "--model", "llama", "--kv-heads", "1", "--tokenizer", "bpe",
                    "--vocab", "300", "--out", f"{work}/llama", "--export-weights", weights],
                   check=True, stdout=subprocess.DEVNULL)
    got = load_file(weights)
    shapes = {k: tuple(v.shape) for k, v in got.items()}
    expected = llama_keys(2, 16, 8, 64, 300)
    if shapes != expected:
        failures.append(f"llama: {weights} holds {shapes}, Hugging Face's keys are {expected}")
    elif torch is not None:
        m = reference_models(torch)["llama-mini"](vocab=300, layers=2, heads=2, kv_heads=1,
                                                  width=16, hidden=64)
        m.load_state_dict({k: torch.from_numpy(v) for k, v in got.items()}, strict=True)
    print(f"llama: {len(got)} tensors under Hugging Face's names")
    return failures


def main():
    if sys.argv[1] == "--lm":
        exe, work = sys.argv[2:4]
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        try:
            import torch
        except ImportError:
            torch = None
        failures = check_lm(exe, work, torch)
        if failures:
            print("\n".join(failures))
            sys.exit(1)
        return
    exe, data, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        import torch
    except ImportError:
        torch = None
        print("torch is not installed: checking names and shapes without loading into torch.nn")
    failures = []
    for name, expected in EXPECTED.items():
        ckpt, weights = f"{work}/{name}-ckpt.safetensors", f"{work}/{name}-weights.safetensors"
        subprocess.run([exe, "--model", name, "--epochs", "1", "--limit-train", "256",
                        "--limit-test", "200", "--device", "cpu", "--data", data,
                        "--out", f"{work}/{name}", "--save", ckpt, "--export-weights", weights],
                       check=True, stdout=subprocess.DEVNULL)
        got = load_file(weights)
        shapes = {k: tuple(v.shape) for k, v in got.items()}
        if shapes != expected:
            failures.append(f"{name}: {weights} holds {shapes}, torch.nn's keys are {expected}")
        full = load_file(ckpt)
        model_part = {k[len("model."):]: v for k, v in full.items() if k.startswith("model.")}
        if set(model_part) != set(got) or any(
                not np.array_equal(model_part[k], got[k]) for k in got):
            failures.append(f"{name}: the checkpoint's model.* tensors differ from {weights}")
        if torch is not None:
            m = torch_model(torch, name)
            m.load_state_dict({k: torch.from_numpy(v) for k, v in got.items()}, strict=True)
        print(f"{name}: {len(got)} tensors under torch.nn's names; checkpoint prefix 'model.'")
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
