"""sinter.onnx: export(model, args, f) writes a module as an ONNX file that ONNX Runtime runs: a
C++ layer, a reference model, or a module written in Python whose tree is made of the layers the
exporter maps (a sinter.nn.Sequential of them, at any depth: Note [onnx export] and Note [python
modules in C++]). A Python module with a forward of its own is an error naming it."""

from . import _C


def export(model, args, f, *, dynamic_batch=True, dynamic_sequence=False, input_name="input",
           output_name="output"):
    """As torch.onnx.export(model, args, f) for one input tensor (or a 1-tuple of one); returns
    the graph's node, initializer and byte counts."""
    if isinstance(args, tuple):
        if len(args) != 1:
            raise ValueError(f"sinter.onnx.export takes one input tensor, got {len(args)}")
        args = args[0]
    if not isinstance(model, _C.nn.CModule):
        model = _C._as_cpp_module(model)
    return _C.onnx.export(model, args, f, dynamic_batch=dynamic_batch,
                          dynamic_sequence=dynamic_sequence, input_name=input_name,
                          output_name=output_name)
