"""sinter.autograd: backward over several roots, as torch.autograd.backward."""

from . import _C


def backward(tensors, grad_tensors=None, retain_graph=False):
    """Runs backward from each tensor, seeded with grad_tensors (None: 1 for a scalar)."""
    if isinstance(tensors, _C.Tensor):
        tensors = [tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, _C.Tensor):
        grad_tensors = [grad_tensors]
    _C._backward(list(tensors), list(grad_tensors), retain_graph)
