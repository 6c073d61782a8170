"""sinter.onnx: export(model, args, f) writes a C++ module (a layer, a Sequential of layers, a
reference model) as an ONNX file that ONNX Runtime runs; modules written in Python come later."""

from ._C.onnx import export  # noqa: F401  (re-exported)
