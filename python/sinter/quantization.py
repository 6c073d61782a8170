"""sinter.quantization: post-training int8 quantization (Note [int8 quantization] in
include/sinter/quantize.h), in torch.ao.quantization's eager steps: prepare() gives a fused copy
whose Linear and Conv2d layers record their inputs, running calibration batches through it
records the ranges, convert() makes it int8 (per-channel weights; MinMax, Percentile or Entropy
calibration). The int8 model runs on the CPU (VNNI/AMX where the CPU has them) or a GPU, and
sinter.onnx.export writes it as a QDQ model that ONNX Runtime runs."""

from . import _C
from ._grad_mode import no_grad


def _cpp(model):
    return model if isinstance(model, _C.nn.CModule) else _C._as_cpp_module(model)


def prepare(model):
    """The fused, recording copy of `model` (a C++ module, or a Python module made of C++
    layers in Sequentials), in eval mode; `model` is left as it was."""
    return _C.quantization.prepare(_cpp(model))


def convert(model, calibrator="percentile", percentile=99.99):
    """Sets the scales of a prepared model from what its layers recorded; returns it."""
    return _C.quantization.convert(model, calibrator, percentile)


def quantize(model, calibration_batches, calibrator="percentile", percentile=99.99):
    """prepare, the batches (an iterable of inputs) through the copy without a graph, convert."""
    prepared = prepare(model)
    with no_grad():
        for x in calibration_batches:
            prepared(x)
    return convert(prepared, calibrator, percentile)


model_bytes = _C.quantization.model_bytes
int8_isa = _C.quantization.int8_isa
