"""sinter.nn's dictionary and list containers, as torch.nn's: ModuleDict registers modules under
its keys, ParameterList under "0", "1", ..., ParameterDict under its keys, so that state_dict
names are torch's."""

from collections import OrderedDict
from collections.abc import Iterable, Mapping
import operator

from .. import _C
from . import CModule, Module, Parameter


def _check_name(owner, name, kind, store):
    """torch's checks on a module's or parameter's name (Module.add_module, register_parameter)."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if hasattr(owner, name) and name not in store:
        raise KeyError(f"attribute '{name}' already exists")
    if "." in name:
        raise KeyError(f"{kind} name can't contain \".\", got: {name}")
    if name == "":
        raise KeyError(f"{kind} name can't be empty string \"\"")


def _pairs(container, items, ordered):
    """The (key, value) pairs of update's argument, as torch's update takes them: the items of
    an instance of one of the ordered types (subclasses included) in their order, any other
    mapping's sorted by key, else an iterable of (key, value) pairs."""
    name = type(container).__name__
    if not isinstance(items, Iterable):
        raise TypeError(f"{name}.update should be called with an iterable of key/value pairs, "
                        f"but got {type(items).__name__}")
    if isinstance(items, ordered):
        return list(items.items())
    if isinstance(items, Mapping):
        return sorted(items.items())
    pairs = []
    for j, pair in enumerate(items):
        if not isinstance(pair, Iterable):
            raise TypeError(f"{name} update sequence element #{j} should be Iterable; is "
                            f"{type(pair).__name__}")
        if len(pair) != 2:
            raise ValueError(f"{name} update sequence element #{j} has length {len(pair)}; 2 is "
                             "required")
        pairs.append((pair[0], pair[1]))
    return pairs


def _as_parameter(value):
    """What a parameter container stores for value: a tensor as a Parameter (requiring grad),
    a Parameter or any other object as it is."""
    if isinstance(value, _C.Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _describe(value):
    """One entry of a parameter container's printout, as torch prints it."""
    if not isinstance(value, _C.Tensor):
        return f"Object of type: {type(value).__name__}"
    size = "x".join(str(s) for s in value.shape)
    device = f" ({value.device})" if value.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"{kind} containing: [{value.dtype} of size {size}{device}]"


class ModuleDict(Module):
    """Modules by name, in insertion order, registered under their keys (a mapping's order
    kept)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        if module is not None and not isinstance(module, (Module, CModule)):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name(self, key, "module", self._modules)
        self.register_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Adds a mapping's (a ModuleDict's) items, or (key, module) pairs, in their order."""
        for key, module in _pairs(self, modules, (OrderedDict, ModuleDict, Mapping)):
            self[key] = module


class ParameterList(Module):
    """A list of parameters registered as "0", "1", ...; a tensor put in becomes a Parameter
    (requiring grad), any other object is kept as it is."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _index(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return str(idx + len(self) if idx < 0 else idx)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(self[i] for i in range(*idx.indices(len(self))))
        return getattr(self, self._index(idx))

    def __setitem__(self, idx, value):
        setattr(self, self._index(idx), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        # A tensor is iterable, but is never unpacked here.
        if not isinstance(values, Iterable) or isinstance(values, _C.Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(f"  ({i}): {_describe(p)}" for i, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Parameters by name, registered under their keys; a tensor put in becomes a Parameter, any
    other object is kept as it is. A plain dict's items are added in sorted key order, an
    OrderedDict's or a ParameterDict's in their own (torch's).

    The printout names each tensor's dtype ("Parameter containing: [sinter.float32 of size 3]"),
    as torch's ParameterList does; torch's ParameterDict names the legacy tensor type there
    (torch.FloatTensor), which sinter does not have."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _attr(key):
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is not a "
                            f"string (type is '{type(key).__name__}')")
        return key

    def __getitem__(self, key):
        return getattr(self, self._attr(key))

    def __setitem__(self, key, value):
        attr = self._attr(key)
        value = _as_parameter(value)
        if isinstance(value, Parameter):
            # An entry of this dict may become a parameter whatever it held (torch's setattr
            # drops the plain attribute first); any other attribute of that name may not.
            _check_name(self, attr, "parameter", self._keys)
        self._keys[key] = None
        setattr(self, attr, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        key = next(reversed(self._keys)) if self._keys else None
        if key is None:
            raise KeyError("popitem(): dictionary is empty")
        return key, self.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        """Adds an OrderedDict's or ParameterDict's items in order, any other mapping's sorted by
        key, or (key, value) pairs in order."""
        for key, value in _pairs(self, parameters, (OrderedDict, ParameterDict)):
            self[key] = value

    def extra_repr(self):
        return "\n".join(f"  ({k}): {_describe(p)}" for k, p in self.items())

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self
