"""sinter.nn: modules written in Python (Module, as torch.nn.Module: attributes register
parameters, buffers and submodules), containers, and the C++ layers (Linear, Conv2d, ...) that work
inside them; sinter.nn.functional holds the ops."""

import copy
from collections import OrderedDict, namedtuple

from .. import _C
from .._grad_mode import no_grad
from .._C.nn import (  # noqa: F401  (re-exported)
    AdaptiveAvgPool2d,
    AvgPool2d,
    AvgPool3d,
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    CModule,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    Dropout,
    ELU,
    Embedding,
    Flatten,
    Fold,
    GELU,
    GRU,
    GroupNorm,
    Hardsigmoid,
    Hardswish,
    Identity,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LSTM,
    LayerNorm,
    Linear,
    LogSoftmax,
    MaxPool2d,
    MaxPool3d,
    Mish,
    MultiheadAttention,
    PReLU,
    PixelShuffle,
    PixelUnshuffle,
    RMSNorm,
    RNN,
    ReLU,
    SELU,
    Sigmoid,
    Softmax,
    Tanh,
    TransformerBlock,
    Unflatten,
    Unfold,
    Upsample,
)
from . import functional, init, utils  # noqa: F401

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Parameter(_C.Tensor):
    """A tensor that a Module registers as a parameter when assigned as an attribute."""

    def __init__(self, data=None, requires_grad=True):
        super().__init__((data if data is not None else _C.empty(0)).detach())
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


def _key(t):
    """Two handles on one tensor (a parameter tied between modules, seen from Python or from a
    C++ layer) give one key."""
    return t._impl_id()


class Module:
    """The base of modules written in Python, as torch.nn.Module."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # --- registration ---
    def _store(self, kind, what):
        store = self.__dict__.get(kind)
        if store is None:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")
        return store

    def _forget(self, name, keep=None):
        """Drops name from every store but keep (and from the plain attributes), so that the
        caller assigns keep[name] in place: a name registered again keeps its position, as in
        torch, which parameters() order and an optimizer's state follow."""
        for kind in ("_parameters", "_buffers", "_modules"):
            if kind != keep:
                self.__dict__.get(kind, {}).pop(name, None)
        if keep != "_buffers":
            self.__dict__.get("_non_persistent", set()).discard(name)
        self.__dict__.pop(name, None)

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            store = self._store("_parameters", "parameters")
            self._forget(name, keep="_parameters")
            store[name] = value
        elif isinstance(value, (Module, CModule)):
            store = self._store("_modules", "module")
            self._forget(name, keep="_modules")
            store[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(sinter.nn.Parameter or None expected)")
            params[name] = None
        elif name in self.__dict__.get("_modules", {}):
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(sinter.nn.Module or None expected)")
            self._modules[name] = None
        elif name in self.__dict__.get("_buffers", {}):
            if value is not None and not isinstance(value, _C.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(sinter.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for kind in ("_parameters", "_buffers", "_modules"):
            store = self.__dict__.get(kind)
            if store is not None and name in store:
                return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if not any(name in self.__dict__.get(k, {}) for k in
                   ("_parameters", "_buffers", "_modules")) and name not in self.__dict__:
            raise AttributeError(name)
        self._forget(name)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (sinter.nn.Parameter or None required)")
        store = self._store("_parameters", "parameters")
        self._forget(name, keep="_parameters")
        store[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        store = self._store("_buffers", "buffers")
        self._forget(name, keep="_buffers")
        store[name] = tensor
        if persistent:
            self.__dict__.get("_non_persistent", set()).discard(name)
        else:
            self.__dict__.setdefault("_non_persistent", set()).add(name)

    def register_module(self, name, module):
        store = self._store("_modules", "module")
        self._forget(name, keep="_modules")
        store[name] = module

    add_module = register_module

    # --- the computation ---
    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # --- recursive views ---
    def named_children(self):
        return ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        return (m for _, m in self.named_children())

    def named_modules(self, prefix=""):
        """Every module of the tree once (a shared one under its first path), C++ layers' own
        children included."""
        seen = set()
        for path, m in _walk(self, prefix):
            if id(m) not in seen:
                seen.add(id(m))
                yield path, m

    def modules(self):
        return (m for _, m in self.named_modules())

    def _named_tensors(self, kind, prefix):
        for name, t in getattr(self, kind).items():
            if t is not None:
                yield prefix + name, t
        for name, m in self.named_children():
            if isinstance(m, Module):
                yield from m._named_tensors(kind, prefix + name + ".")
            else:
                items = m.named_parameters() if kind == "_parameters" else m.named_buffers()
                for key, t in items:
                    yield prefix + name + "." + key, t

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        for name, p in self._named_tensors("_parameters", prefix + "." if prefix else ""):
            if not recurse and "." in name[len(prefix):].lstrip("."):
                continue
            if _key(p) not in seen:
                seen.add(_key(p))
                yield name, p

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix=""):
        return self._named_tensors("_buffers", prefix + "." if prefix else "")

    def buffers(self):
        return (b for _, b in self.named_buffers())

    # --- state ---
    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (PyTorch's keys), detached unless
        keep_vars, in torch's order: each module's parameters, then its buffers, then its
        children's."""
        out = OrderedDict() if destination is None else destination
        non_persistent = self.__dict__.get("_non_persistent", ())
        for name, t in list(self._parameters.items()) + [
                (n, b) for n, b in self._buffers.items() if n not in non_persistent]:
            if t is not None:
                out[prefix + name] = t if keep_vars else t.detach()
        for name, m in self.named_children():
            if isinstance(m, Module):
                m.state_dict(destination=out, prefix=prefix + name + ".", keep_vars=keep_vars)
            else:
                for key, t in _cmodule_state_dict(m, keep_vars=keep_vars).items():
                    out[prefix + name + "." + key] = t
        return out

    def _path(self, path):
        m = self
        for part in filter(None, path.split(".")):
            m = m._modules[part] if isinstance(m, Module) else m
        return m

    def load_state_dict(self, state_dict, strict=True):
        """Copies the values in place (the tensors keep their identity); a shape that differs is
        an error, and so, when strict, are missing and unexpected keys."""
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
        targets = dict(self._named_tensors("_parameters", ""))
        targets.update(self.named_buffers())
        with no_grad():
            for key, value in state_dict.items():
                if key not in targets:
                    continue
                t = targets[key]
                if tuple(t.shape) != tuple(value.shape):
                    raise RuntimeError(f"size mismatch for {key}: copying a param with shape "
                                       f"{tuple(value.shape)}, the shape in the current model is "
                                       f"{tuple(t.shape)}")
                if not isinstance(value, _C.Tensor):
                    value = _C.from_dlpack(value)
                t.copy_(value.to(t.device).to(t.dtype))
        return _IncompatibleKeys(missing, unexpected)

    # --- mode and conversion ---
    def train(self, mode=True):
        object.__setattr__(self, "training", mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                with no_grad():
                    p.grad.zero_()

    def to(self, *args, dtype=None, device=None):
        """Moves (device) or casts (floating dtype) the parameters and buffers. A Python module's
        own parameters become new Parameters, with their gradients; a parameter shared between
        modules stays shared; integer buffers keep their dtype. Make the optimizer after .to(), as
        with PyTorch's modules of old."""
        args = args + tuple(a for a in (device, dtype) if a is not None)
        self._to(args, {})
        return self

    def _to(self, args, memo):
        def convert(t):
            # A dtype casts floating tensors only (an integer buffer keeps its dtype).
            target = [a for a in args if not (isinstance(a, _C.dtype) and (
                not t.is_floating_point() or not a.is_floating_point))]
            return t.to(*target) if target else t

        for name, p in list(self._parameters.items()):
            if p is None:
                continue
            if _key(p) not in memo:
                q = Parameter(convert(p), p.requires_grad)
                if p.grad is not None:
                    q.grad = convert(p.grad)
                memo[_key(p)] = q
            self._parameters[name] = memo[_key(p)]
        for name, b in list(self._buffers.items()):
            if b is not None:
                self._buffers[name] = convert(b)
        for m in self.children():
            if isinstance(m, Module):
                m._to(args, memo)
            else:
                for a in args:
                    m.to(a)

    def apply(self, fn):
        """fn(module) for every module of the tree, children before their parent (C++ layers'
        children too), as torch's apply."""
        for m in self.children():
            if isinstance(m, Module):
                m.apply(fn)
            else:
                _apply_cpp(m, fn)
        fn(self)
        return self

    # --- printing, as PyTorch prints a module tree ---
    def extra_repr(self):
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra = extra.split("\n") if extra else []  # torch's: a line each, indented as children
        lines = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self.named_children()]
        if not lines and len(extra) <= 1:
            return f"{type(self).__name__}({''.join(extra)})"
        body = "\n  ".join(extra + lines)
        return f"{type(self).__name__}(\n  {body}\n)"


def _walk(m, prefix):
    yield prefix, m
    for name, child in m.named_children():
        if child is not None:
            yield from _walk(child, prefix + ("." if prefix else "") + name)


def _apply_cpp(m, fn):
    for _, child in m.named_children():
        _apply_cpp(child, fn)
    fn(m)


# A C++ layer called from Python runs its forward through Python, so that a Python subclass's
# forward (class MyLinear(nn.Linear)) is the one called.
CModule.__call__ = lambda self, *args, **kwargs: self.forward(*args, **kwargs)


def _cmodule_getattr(self, name):
    """A C++ layer's children, parameters and buffers by name, as torch's attributes
    (gpt.blocks, gpt.blocks[0].attn, bn.running_mean)."""
    if name.startswith("__"):
        raise AttributeError(name)
    for items in (self.named_children, lambda: self.named_parameters(),
                  lambda: self.named_buffers()):
        for key, value in items():
            if key == name:
                return value
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def _cmodule_getitem(self, i):
    """The i-th child of a C++ container (ModuleList, Sequential)."""
    children = [m for _, m in self.named_children()]
    return children[i]


def _cmodule_deepcopy(self, memo):
    """copy.deepcopy of a C++ layer or model: nn::clone, new tensors with the same values (a
    C++ module copied by value would share them)."""
    out = self._clone()
    if type(out) is not type(self):
        # nn::clone makes the C++ layer: a Python subclass's class and attributes cannot follow.
        raise TypeError(f"deepcopy: {type(self).__name__} is a Python subclass of the C++ layer "
                        f"{type(out).__name__}, which cannot be copied as itself; make a new "
                        "one and load_state_dict() the original's state into it")
    memo[id(self)] = out
    # What the layer keeps on its Python object (return_indices, inplace) goes along.
    for name, value in getattr(self, "__dict__", {}).items():
        setattr(out, name, copy.deepcopy(value, memo))
    return out


_leaf_repr = CModule.__repr__


def _cmodule_repr(self):
    """A C++ container (a Sequential, a GPT's blocks) prints its children, as torch's modules."""
    children = list(self.named_children())
    if not children:
        return _leaf_repr(self)
    lines = [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in children]
    return f"{self._type_name()}(\n  " + "\n  ".join(lines) + "\n)"


_plain_state_dict = CModule.state_dict


def _cmodule_state_dict(self, *, destination=None, prefix="", keep_vars=False):
    """A C++ layer's state_dict in torch's order (each module's parameters, its buffers, then
    its children's), not the sorted order of the C++ map; detached unless keep_vars."""
    values = _plain_state_dict(self)
    if keep_vars:
        tensors = dict(self.named_parameters())
        tensors.update(self.named_buffers())
        values = {k: tensors.get(k, v) for k, v in values.items()}
    out = OrderedDict() if destination is None else destination

    def walk(module, path):
        own = [k for k, _ in module.named_parameters() if "." not in k]
        own += [k for k, _ in module.named_buffers() if "." not in k]
        for key in own:
            if path + key in values:
                out[prefix + path + key] = values[path + key]
        for name, child in module.named_children():
            walk(child, path + name + ".")
    walk(self, "")
    return out


CModule.__repr__ = _cmodule_repr
CModule.state_dict = _cmodule_state_dict
CModule.__deepcopy__ = _cmodule_deepcopy
CModule.__getattr__ = _cmodule_getattr
CModule.__getitem__ = _cmodule_getitem
CModule.__iter__ = lambda self: iter([m for _, m in self.named_children()])


class Sequential(Module):
    """Modules run in order; named "0", "1", ... (or by an OrderedDict's keys)."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.register_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.register_module(str(i), m)

    def forward(self, x):
        for m in self.children():
            x = m(x)
        return x

    def __getitem__(self, i):
        items = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(*items[i])
        return items[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.register_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules, registered as "0", "1", ..."""

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def append(self, module):
        self.register_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        items = list(self._modules.values())
        return ModuleList(items[i]) if isinstance(i, slice) else items[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __repr__(self):
        """torch's printout: a run of children that print alike shows once, as
        "(0-5): 6 x Layer(...)"."""
        runs = []  # [first, last, text]
        for i, m in enumerate(self):
            text = repr(m)
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        name = type(self).__name__
        if not runs:
            return f"{name}()"
        lines = [f"({a}): {t}" if a == b else f"({a}-{b}): {b - a + 1} x {t}"
                 for a, b, t in runs]
        return f"{name}(\n  " + "\n  ".join(x.replace("\n", "\n  ") for x in lines) + "\n)"


class _Activation(Module):
    """A module applying one of sinter.nn.functional's activations with fixed arguments."""

    _fn = None
    _args = ()

    def __init__(self, *args, inplace=False, **kwargs):
        # inplace is taken for torch's callers: the activation makes a new tensor either way.
        super().__init__()
        del inplace
        values = list(args) + list(self._defaults[len(args):])
        for name, value in kwargs.items():
            if name not in self._args:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword "
                                f"argument '{name}'")
            values[self._args.index(name)] = value
        object.__setattr__(self, "_values", tuple(values))

    def forward(self, input):
        return type(self)._fn(input, *self._values)

    def extra_repr(self):
        return ", ".join(f"{n}={v}" for n, v in zip(self._args, self._values))


def _activation(name, fn, args=(), defaults=()):
    return type(name, (_Activation,), {"_fn": staticmethod(fn), "_args": args,
                                       "_defaults": defaults,
                                       "__doc__": f"As torch.nn.{name}."})


SiLU = _activation("SiLU", functional.silu)
LeakyReLU = _activation("LeakyReLU", functional.leaky_relu, ("negative_slope",), (0.01,))
Hardtanh = _activation("Hardtanh", functional.hardtanh, ("min_val", "max_val"), (-1.0, 1.0))
ReLU6 = _activation("ReLU6", functional.relu6)
Softplus = _activation("Softplus", functional.softplus, ("beta", "threshold"), (1.0, 20.0))


class _AdaptiveAvgPool(Module):
    _fn = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self)._fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPool):
    """As torch.nn.AdaptiveAvgPool1d."""

    _fn = staticmethod(functional.adaptive_avg_pool1d)


class AdaptiveAvgPool3d(_AdaptiveAvgPool):
    """As torch.nn.AdaptiveAvgPool3d."""

    _fn = staticmethod(functional.adaptive_avg_pool3d)


# Modules written in Python in files of their own (each needs Module above).
from . import parallel  # noqa: E402,F401
from .containers import ModuleDict, ParameterDict, ParameterList  # noqa: E402,F401
from .layers import (  # noqa: E402,F401
    AdaptiveMaxPool2d,
    AvgPool1d,
    CELU,
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    CosineSimilarity,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    GLU,
    Hardshrink,
    LogSigmoid,
    MaxPool1d,
    PairwiseDistance,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    Softmin,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .losses import (  # noqa: E402,F401
    BCELoss,
    BCEWithLogitsLoss,
    CTCLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .cells import *  # noqa: E402,F401,F403
from .layers_extra import *  # noqa: E402,F401,F403
from .transformer import *  # noqa: E402,F401,F403
