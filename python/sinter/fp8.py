"""sinter.fp8: FP8 training of Linear layers (Note [fp8 training] in src/fp8/linear.cpp), with
Transformer Engine's names: prepare() marks a model's Linear layers (all but the first and last),
and under fp8.autocast(enabled, fp8_recipe) their three GEMMs run in FP8: the forward e4m3 x
e4m3, the gradients with the output gradient in e5m2, scaled per tensor from the current amax
(Recipe("current")), from a history of amaxes (Recipe("delayed")), or per 1 x 128 tile and
128 x 128 block (Recipe("block")). The CPU emulates the FP8 GEMMs exactly; a Hopper GPU runs them on
its tensor cores, under every recipe."""

from . import _C
from ._C.fp8 import Recipe, is_enabled  # noqa: F401  (re-exported)
from ._guards import GuardContext


def _cpp(model):
    return model if isinstance(model, _C.nn.CModule) else _C._as_cpp_module(model)


def prepare(model, recipe=None):
    """Marks the Linear layers of `model` (a C++ module, or a Python module made of C++ layers)
    but its first and last for FP8; returns their names. Call it before making the optimizer and
    before loading a state dict that holds the delayed recipe's buffers."""
    return _C.fp8.prepare(_cpp(model), recipe if recipe is not None else Recipe())


class autocast(GuardContext):
    """Transformer Engine's fp8_autocast: `with sinter.fp8.autocast(fp8_recipe=...)`; also a
    decorator. The backward of what ran inside keeps its recipe."""

    def __init__(self, enabled=True, fp8_recipe=None):
        self._recipe = fp8_recipe if fp8_recipe is not None else Recipe()
        self._enabled = enabled
        self._guard = _C.fp8._Guard(self._recipe, enabled)

    def _fresh(self):
        return autocast(self._enabled, self._recipe)
