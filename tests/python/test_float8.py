"""The 8-bit float conversions (Note [float8]) against PyTorch's float8_e4m3fn and float8_e5m2:
all 256 codes of each, every midpoint between neighbouring values and the floats either side of
it, overflow (E4M3 saturates, as PyTorch's casts do), NaN and infinities."""

import math
import struct

import pytest

import sinter

FORMATS = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def dtype(torch, fmt):
    if not hasattr(torch, FORMATS[fmt]):
        pytest.skip(f"this PyTorch has no torch.{FORMATS[fmt]}")
    return getattr(torch, FORMATS[fmt])


def torch_codes(torch, fmt, values):
    t = torch.tensor(values, dtype=torch.float32).to(dtype(torch, fmt))
    return t.view(torch.uint8).tolist()


def torch_values(torch, fmt, codes):
    return torch.tensor(codes, dtype=torch.uint8).view(dtype(torch, fmt)).float().tolist()


def next_float(x, toward):
    """The float32 next to x in the direction of `toward`."""
    bits = struct.unpack("<i", struct.pack("<f", x))[0]
    if x == 0:
        return math.copysign(struct.unpack("<f", struct.pack("<i", 1))[0], toward)
    step = 1 if (toward > x) == (x > 0) else -1
    return struct.unpack("<f", struct.pack("<i", bits + step))[0]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_every_code_decodes_as_torch(torch, fmt):
    codes = list(range(256))
    ours, theirs = sinter._C._float8_decode(codes, fmt), torch_values(torch, fmt, codes)
    for code, a, b in zip(codes, ours, theirs):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                     math.copysign(1, b)), code


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_rounding_boundaries_and_overflow_as_torch(torch, fmt):
    values = [v for v in sinter._C._float8_decode(list(range(256)), fmt) if math.isfinite(v)]
    values = sorted(set(values))
    probes = []
    for a, b in zip(values, values[1:]):
        mid = (a + b) / 2
        probes += [mid, next_float(mid, a), next_float(mid, b)]
    big = max(values)
    subnormal = struct.unpack("<f", struct.pack("<i", 1))[0]  # float32's smallest
    probes += [big * 1.03, big * 1.05, big * 1.2, 1e30, -1e30, math.inf, -math.inf, math.nan,
               -math.nan, 0.0, -0.0, 1e-30, -1e-30, subnormal, -subnormal, 1e-40, -1e-40]
    ours = sinter._C._float8_encode(probes, fmt)
    theirs = torch_codes(torch, fmt, probes)
    mismatches = [(p, o, t) for p, o, t in zip(probes, ours, theirs) if o != t]
    assert not mismatches, mismatches[:10]
    # The saturating form is torch's cast of the value clamped to the largest (NaN left as is).
    clamped = [p if math.isnan(p) else max(-big, min(big, p)) for p in probes]
    ours = sinter._C._float8_encode(probes, fmt, saturate=True)
    theirs = torch_codes(torch, fmt, clamped)
    mismatches = [(p, o, t) for p, o, t in zip(probes, ours, theirs) if o != t]
    assert not mismatches, mismatches[:10]
