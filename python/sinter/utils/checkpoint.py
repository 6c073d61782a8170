"""sinter.utils.checkpoint: activation checkpointing of a Python function, as
torch.utils.checkpoint.checkpoint: the function runs without keeping its intermediates, and again
in backward (with the same random state, so dropout draws the same mask) to give its gradients
(Note [activation checkpointing] in include/sinter/autograd.h)."""

from .. import _C


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs) with its activations recomputed in backward. It returns a tensor
    or a tuple of tensors; at least one tensor argument must require grad. use_reentrant and
    preserve_rng_state are taken for torch's callers (the random state is always kept)."""
    del use_reentrant, preserve_rng_state
    positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
    if not positions:
        raise ValueError("checkpoint: no tensor argument (at least one must require grad)")
    single = []

    def run(tensors):
        full = list(args)
        for i, t in zip(positions, tensors):
            full[i] = t
        out = function(*full, **kwargs)
        if not single:
            single.append(isinstance(out, _C.Tensor))
        outs = [out] if isinstance(out, _C.Tensor) else list(out)
        for o in outs:
            if not isinstance(o, _C.Tensor):
                raise TypeError(f"checkpoint: the function returned a {type(o).__name__}; it must "
                                "return a tensor or a tuple of tensors")
        return outs

    outputs = _C._checkpoint(run, [args[i] for i in positions])
    return outputs[0] if single[0] else tuple(outputs)
