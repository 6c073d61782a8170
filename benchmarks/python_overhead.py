"""The Python layer's cost: the time of small calls from Python, Sinter against PyTorch in one
process on the same CPU (a + b on 4-element tensors, linear on a 1x16 input, a view, a reduction,
an autograd step), and the mlp workload's training step (batch 256, SGD with momentum) from Python
against the same step from C++ (bench_train_step --device=cpu), the two timed in turns.

    PYTHONPATH=build/python python3 benchmarks/python_overhead.py [--repeat 7] \
        [--cpp-bench build/benchmarks/bench_train_step]
"""

import argparse
import platform
import re
import statistics
import subprocess
import time
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


def python_step_ms(sinter, steps=20):
    """ms per mlp training step from Python, as bench_train_step times it in C++: `steps` steps
    back to back on one fixed batch, then the last loss read."""
    F = sinter.nn.functional
    sinter.manual_seed(0)
    model = sinter.models.mlp()
    opt = sinter.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = sinter.randn(256, 1, 28, 28), sinter.randint(0, 10, (256,))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss.item()
    return (time.perf_counter() - start) / steps * 1e3


def cpp_step_ms(bench):
    out = subprocess.run([bench, "--device=cpu", "--benchmark_filter=mlp/fp32"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"ms_per_step=([0-9.]+)", out).group(1))


def compare_steps(sinter, bench, rounds):
    py, cpp = [], []
    for _ in range(rounds):  # in turns, so that the machine's drift reaches both alike
        cpp.append(cpp_step_ms(bench))
        py.append(statistics.median(python_step_ms(sinter) for _ in range(3)))
    p, c = statistics.median(py), statistics.median(cpp)
    print(f"mlp training step (batch 256): Python {p:.2f} ms, C++ {c:.2f} ms, "
          f"Python / C++ {p / c:.3f} (medians of {rounds} rounds in turns)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=20000)
    ap.add_argument("--cpp-bench", help="bench_train_step, to time the mlp step from C++ too")
    ap.add_argument("--rounds", type=int, default=5)
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
    if args.cpp_bench:
        compare_steps(sinter, args.cpp_bench, args.rounds)


if __name__ == "__main__":
    main()
