#!/usr/bin/env python3
"""Recurrent layers' state dicts both ways between Sinter and PyTorch.

Sinter -> PyTorch: rnn_dump writes an LSTM (two layers, bidirectional, proj_size, batch_first) and
a GRU (two layers, bidirectional) with their state dicts, an input and Sinter's output, h_n and
c_n; torch.nn.LSTM and torch.nn.GRU of the same settings load each state dict strictly (the same
names and shapes) and give the same results (within 1e-5). PyTorch -> Sinter: torch's freshly
initialized layers' state dicts and an input, loaded strictly by rnn_dump, give torch's results.
Exit 77 (skipped) without torch or safetensors.

  check_rnn_torch.py RNN_DUMP_EXE WORK_DIR
"""
import os
import shutil
import subprocess
import sys

try:
    import torch
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print(f"skipped: {e} (pip install torch safetensors)")
    sys.exit(77)


def layers():
    return {
        "lstm": torch.nn.LSTM(5, 7, num_layers=2, batch_first=True, bidirectional=True,
                              proj_size=3),
        "gru": torch.nn.GRU(4, 6, num_layers=2, bidirectional=True),
    }


def results(m, x):
    with torch.no_grad():
        out, state = m(x)
    r = {"output": out}
    if isinstance(state, tuple):
        r["h"], r["c"] = state
    else:
        r["h"] = state
    return r


def compare(name, got, want):
    for k in want:
        err = (got[k] - want[k]).abs().max().item()
        print(f"{name} {k}: max difference {err:.3g}")
        if err > 1e-5:
            sys.exit(f"{name} {k} differs by {err}")


def main():
    exe, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([exe, "write", work], check=True)
    for name, m in layers().items():
        saved = load_file(os.path.join(work, name + ".safetensors"))
        state = {k: v for k, v in saved.items() if k != "input" and not k.startswith("result.")}
        m.load_state_dict(state, strict=True)
        sinter = {k[len("result."):]: v for k, v in saved.items() if k.startswith("result.")}
        compare("Sinter -> torch " + name, results(m, saved["input"]), sinter)
    torch.manual_seed(3)
    mods = layers()
    inputs = {"lstm": torch.randn(3, 4, 5), "gru": torch.randn(4, 3, 4)}
    for name, m in mods.items():
        blob = {k: v.contiguous() for k, v in m.state_dict().items()}
        blob["input"] = inputs[name]
        save_file(blob, os.path.join(work, "torch_" + name + ".safetensors"))
    subprocess.run([exe, "read", work], check=True)
    for name, m in mods.items():
        got = load_file(os.path.join(work, "sinter_from_torch_" + name + ".safetensors"))
        compare("torch -> Sinter " + name, got, results(m, inputs[name]))


if __name__ == "__main__":
    main()
