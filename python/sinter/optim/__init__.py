"""sinter.optim: the optimizers, with torch.optim's names and keyword arguments. They update the
parameters' tensors in place, for modules written in C++ or in Python alike. param_groups reads
and writes each group's hyperparameters as torch's dicts do (betas as a pair), and
sinter.optim.lr_scheduler holds the schedules."""

import collections.abc

from .. import _C
from . import lr_scheduler  # noqa: F401

Optimizer = _C.optim.Optimizer


class _ParamGroup(collections.abc.MutableMapping):
    """One parameter group of an optimizer, as the dict torch keeps: "params", the
    hyperparameters by name ("lr", "weight_decay", ...; Adam's beta1 and beta2 as "betas"). A
    write changes the optimizer's value (checked as the constructor checks it)."""

    def __init__(self, optimizer, index):
        self._opt, self._index = optimizer, index

    def _names(self):
        prefix = f"param_groups.{self._index}."
        names = [k[len(prefix):] for k in self._opt.state_dict() if k.startswith(prefix)]
        names = [n for n in names if n != "num_params"]
        if "beta1" in names and "beta2" in names:
            names = [n for n in names if n not in ("beta1", "beta2")] + ["betas"]
        return ["params"] + sorted(names)

    def _value(self, name):
        # One value read, no listing (the names come from a state dict, which copies the state).
        try:
            return self._opt._get(self._index, name)
        except RuntimeError:
            raise KeyError(name) from None

    def __getitem__(self, name):
        if name == "params":
            return list(self._opt._group_params(self._index))
        if name == "betas":
            return (self._value("beta1"), self._value("beta2"))
        return self._value(name)

    def __setitem__(self, name, value):
        if name == "params":
            raise TypeError("a parameter group's params cannot be replaced; make a new optimizer")
        if name == "betas":
            self._value("beta1")
            self._opt._set(self._index, "beta1", float(value[0]))
            self._opt._set(self._index, "beta2", float(value[1]))
            return
        self._value(name)
        self._opt._set(self._index, name, float(value))

    def __delitem__(self, name):
        raise TypeError("a parameter group's entries cannot be deleted")

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())

    def __repr__(self):
        return repr({k: (f"[{len(v)} tensors]" if k == "params" else v) for k, v in self.items()})


Optimizer.param_groups = property(
    lambda self: [_ParamGroup(self, g) for g in range(self._num_groups())],
    doc="The parameter groups, as torch's list of dicts (see _ParamGroup).")


def _optimizer(base):
    class Wrapped(base):
        __doc__ = f"torch.optim.{base.__name__}'s options (lr may also be the second argument)."

        def __init__(self, params, lr=None, **kwargs):
            if lr is not None:
                kwargs["lr"] = lr
            super().__init__(list(params), **kwargs)

    Wrapped.__name__ = Wrapped.__qualname__ = base.__name__
    return Wrapped


SGD = _optimizer(_C.optim.SGD)
Adam = _optimizer(_C.optim.Adam)
AdamW = _optimizer(_C.optim.AdamW)
RMSprop = _optimizer(_C.optim.RMSprop)
Adagrad = _optimizer(_C.optim.Adagrad)


def _muon_options(options, where):
    """torch.optim.Muon's keyword arguments as Sinter's Muon options: ns_coefficients (a, b, c) as
    ns_a, ns_b and ns_c; adjust_lr_fn (None, "original" or "match_rms_adamw") as
    match_rms_adamw; use_addmm=False, the only form there is, dropped."""
    options = dict(options)
    if "ns_coefficients" in options:
        coefficients = tuple(options.pop("ns_coefficients"))
        if len(coefficients) != 3:
            raise ValueError(f"{where}: ns_coefficients must be a tuple of exactly 3 values")
        options["ns_a"], options["ns_b"], options["ns_c"] = (float(c) for c in coefficients)
    if "adjust_lr_fn" in options:
        fn = options.pop("adjust_lr_fn")
        if fn not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"{where}: adjust_lr_fn {fn!r} is not supported "
                             "(None, 'original' or 'match_rms_adamw')")
        options["match_rms_adamw"] = fn == "match_rms_adamw"
    if options.pop("use_addmm", False):
        raise ValueError(f"{where}: use_addmm=True is not supported (Sinter computes the "
                         "iteration as use_addmm=False does)")
    if "ns_steps" in options:
        options["ns_steps"] = float(options["ns_steps"])
    return options


class Muon(_C.optim.Muon):
    """torch.optim.Muon's options (ns_coefficients, adjust_lr_fn and the rest; lr may also be the
    second argument), and Sinter's: ns_bf16 (the Newton-Schulz iteration in bf16, as PyTorch's;
    False: in the parameters' dtype), and parameter groups with adamw=True (with betas and
    adamw_eps) that step as AdamW, for the parameters Muon does not take (embeddings, norms,
    biases, the output head)."""

    def __init__(self, params, lr=None, **kwargs):
        if lr is not None:
            kwargs["lr"] = lr
        params = list(params)
        if params and isinstance(params[0], dict):
            params = [_muon_options(g, "Muon") for g in params]
        super().__init__(params, **_muon_options(kwargs, "Muon"))


Muon.__name__ = Muon.__qualname__ = "Muon"

