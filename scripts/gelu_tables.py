#!/usr/bin/env python3
"""Writes src/cpu/vec_gelu_tables.h, the coefficient tables of the AVX-512 exact gelu rows (Note
[gelu tables] in src/cpu/vec_elementwise.cpp), and prints each table's measured error.

  gelu_tables.py [OUT]     (default: src/cpu/vec_gelu_tables.h under the repository's root)

Each table cuts [lo, hi) into 32 intervals of width w = (hi - lo) / 32 and holds, for each, the
polynomial in s = v - c (v the table's variable, c the interval's centre; degree 6, and 7 in the
tails, whose functions fall faster) that interpolates the function at the Chebyshev nodes of the
interval, its coefficients rounded to f32:
- kPhi: Phi(-b), Phi the normal distribution's CDF, for b = |x| in [0, 6): the row's gelu is x
  times it for negative x, x (1 - it) for positive x; kPhiTail: Phi(x) on [-10, -6);
- kGeluGrad: gelu'(-b) = Phi(-b) - b phi(b) for b in [0, 6), taken as it is for negative x and as
  1 - it for positive x (gelu'(x) = 1 - gelu'(-x)); kGeluGradTail: gelu'(x) on [-10, -6).
The rows take x = -6 in the tails' last interval (|x| = 6 falls outside the first tables).
Phi comes from math.erfc in f64 (relative error near 1e-16, far below f32's). The error printed is
the largest over 2000 points an interval of the f32 evaluation as the rows run it (Horner's rule in
fused multiply-adds, each rounded to f32), against the f64 formulas: gelu in f32 ulp of its value,
the derivative absolutely and, left of x = -1.5 (its tail), in ulp of its value; a mirrored table
on both sides of 0. A sample: the rows' errors over every f32, a little larger, are in the Note.
Needs numpy."""
import math
import os
import sys

import numpy as np

INTERVALS = 32
SAMPLES = 2000  # points an interval at which the errors printed are measured
F32 = np.float32


def phi_cdf(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gelu_grad(x):
    return phi_cdf(x) + x * math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def fit(fun, lo, width, degree):
    """Per interval, the coefficients (s^0 first) of the interpolant at its Chebyshev nodes."""
    half = width / 2
    k = np.arange(degree + 1)
    t = np.cos(np.pi * (2 * k + 1) / (2 * (degree + 1)))  # nodes on [-1, 1]
    rows = []
    for i in range(INTERVALS):
        c = lo + width * (i + 0.5)
        vals = np.array([fun(c + half * tk) for tk in t])
        in_t = np.polynomial.chebyshev.cheb2poly(np.polynomial.chebyshev.chebfit(t, vals, degree))
        rows.append([F32(in_t[j] / half**j) for j in range(degree + 1)])
    return rows


def fma32(a, b, c):
    # a b is exact in f64 for f32 a and b; the sum's f64 rounding is far below f32's.
    return F32(np.float64(a) * np.float64(b) + np.float64(c))


def horner(coef, s):
    p = coef[-1]
    for j in range(len(coef) - 2, -1, -1):
        p = fma32(p, s, coef[j])
    return p


def measure(rows, lo, width, kind, mirrored):
    """The largest errors of the rows' results from the table, by kind: a mirrored table holds
    f(-b) for b = |x| and gives f(x) = p for negative x, 1 - p for positive x."""
    worst = {}

    def note(key, err):
        worst[key] = max(worst.get(key, 0.0), err)

    def ulps(got, want):
        return abs(got - want) / float(np.spacing(F32(abs(want))))

    for i in range(INTERVALS):
        c = F32(lo + width * (i + 0.5))
        for b in np.linspace(lo + width * i, lo + width * (i + 1), SAMPLES, endpoint=False):
            b = F32(b)
            p = horner(rows[i], F32(np.float64(b) - np.float64(c)))
            xs = [(-b, p), (b, F32(1.0 - np.float64(p)))] if mirrored else [(b, p)]
            for x, v in xs:
                side = "" if not mirrored else " (x < 0)" if x < 0 else " (x > 0)"
                if kind == "gelu":
                    want = float(x) * phi_cdf(float(x))
                    if want != 0.0:
                        note("ulp" + side, ulps(float(F32(np.float64(x) * np.float64(v))), want))
                else:
                    want = gelu_grad(float(x))
                    note("abs" + side, abs(float(v) - want))
                    if x < -1.5:
                        note("ulp below -1.5", ulps(float(v), want))
    return worst


def table_text(name, rows):
    out = [f"alignas(64) constexpr float {name}[{len(rows[0])}][{INTERVALS}] = {{"]
    for j in range(len(rows[0])):
        vals = [f"{float(r[j]):.8e}f" for r in rows]  # 9 digits: the f32 exactly
        out.append("    {")
        for k in range(0, INTERVALS, 4):
            out.append("        " + ", ".join(vals[k:k + 4]) + ",")
        out.append("    },")
    out.append("};")
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "src/cpu/vec_gelu_tables.h")
    # (name, function of the table's variable, lo, hi, degree, kind, mirrored)
    tables = [("kPhi", lambda b: phi_cdf(-b), 0.0, 6.0, 6, "gelu", True),
              ("kPhiTail", phi_cdf, -10.0, -6.0, 7, "gelu", False),
              ("kGeluGrad", lambda b: gelu_grad(-b), 0.0, 6.0, 6, "grad", True),
              ("kGeluGradTail", gelu_grad, -10.0, -6.0, 7, "grad", False)]
    lines = [
        "// The coefficient tables of the AVX-512 exact gelu rows (Note [gelu tables] in",
        "// src/cpu/vec_elementwise.cpp), written by scripts/gelu_tables.py: regenerate, do not",
        "// edit. name[j][i]: the coefficient of s^j on interval i, s = the table's variable",
        "// (x, or |x| for kPhi and kGeluGrad) - the interval's centre.",
        "#pragma once", "", "namespace sinter::cpu::vec::gelu_tables {", ""]
    for name, fun, lo, hi, degree, kind, mirrored in tables:
        width = (hi - lo) / INTERVALS
        rows = fit(fun, lo, width, degree)
        err = measure(rows, lo, width, kind, mirrored)
        print(f"{name} on [{lo}, {hi}): " + ", ".join(f"{k} {v:.3g}" for k, v in err.items()))
        lines.append(f"// On [{lo!r}, {hi!r}), intervals of {width!r}, degree {degree}.")
        lines.append(f"constexpr float {name}Lo = {lo!r}f, {name}Width = {width!r}f;")
        lines += table_text(name, rows)
        lines.append("")
    lines.append("}  // namespace sinter::cpu::vec::gelu_tables")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
