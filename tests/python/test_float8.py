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


def sinter_dtype(fmt):
    return getattr(sinter, FORMATS[fmt])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_tensor_casts_as_torch(torch, fmt):
    """Tensors of the float8 dtypes: .to() from float32, bfloat16 and float64 and back, equal to
    torch's casts, on every boundary probe and fresh random floats."""
    values = sorted({v for v in sinter._C._float8_decode(list(range(256)), fmt)
                     if math.isfinite(v)})
    probes = []
    for a, b in zip(values, values[1:]):
        mid = (a + b) / 2
        probes += [mid, next_float(mid, a), next_float(mid, b)]
    probes += [t * 1.7 ** k for t in (1.0, -1.0) for k in range(-40, 30)]
    probes += [math.inf, -math.inf, 1e30, -0.0]
    for src in ("float32", "bfloat16", "float64"):
        ours = sinter.tensor(probes, dtype=sinter.float32).to(getattr(sinter, src))
        theirs = torch.tensor(probes, dtype=torch.float32).to(getattr(torch, src))
        ours8, theirs8 = ours.to(sinter_dtype(fmt)), theirs.to(dtype(torch, fmt))
        assert ours8.dtype == sinter_dtype(fmt)
        assert torch.from_dlpack(ours8).view(torch.uint8).tolist() == \
            theirs8.view(torch.uint8).tolist(), src
        assert ours8.to(sinter.float32).tolist() == theirs8.float().tolist()
    codes = torch.arange(256, dtype=torch.uint8).view(dtype(torch, fmt))
    ours = sinter.from_dlpack(codes)
    assert ours.dtype == sinter_dtype(fmt)
    back = ours.to(sinter.float32).tolist()
    want = codes.float().tolist()
    assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(back, want))
    assert sinter_dtype(fmt).is_floating_point and sinter_dtype(fmt).itemsize == 1
    assert repr(sinter_dtype(fmt)) == "sinter." + FORMATS[fmt]


def test_arithmetic_is_an_error(torch):
    a = sinter.ones(3).to(sinter.float8_e4m3fn)
    with pytest.raises(RuntimeError, match="no arithmetic on f8e4m3"):
        a + a
    with pytest.raises(RuntimeError, match="promote"):
        a.to(sinter.float8_e4m3fn) + sinter.ones(3)
    with pytest.raises(RuntimeError, match="NumPy has no f8e4m3"):
        a.numpy()


def test_safetensors_files_round_trip_with_the_package(torch, tmp_path):
    st = pytest.importorskip("safetensors.torch")
    codes = torch.arange(256, dtype=torch.uint8)
    tensors = {"e4m3": codes.view(torch.float8_e4m3fn).reshape(16, 16).clone(),
               "e5m2": codes.view(torch.float8_e5m2).clone()}
    theirs = str(tmp_path / "torch.safetensors")
    st.save_file(tensors, theirs)
    loaded = sinter.safetensors.load_file(theirs)
    for name, t in tensors.items():
        assert loaded[name].dtype == getattr(sinter, str(t.dtype).split(".")[1])
        assert list(loaded[name].shape) == list(t.shape)
        assert torch.from_dlpack(loaded[name]).view(torch.uint8).tolist() == \
            t.view(torch.uint8).tolist()
    ours = str(tmp_path / "sinter.safetensors")
    sinter.safetensors.save_file(loaded, ours)
    again = st.load_file(ours)
    for name, t in tensors.items():
        assert again[name].dtype == t.dtype
        assert torch.equal(again[name].view(torch.uint8), t.view(torch.uint8))
