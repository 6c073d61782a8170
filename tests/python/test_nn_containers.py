"""torch.nn's containers in sinter.nn (ModuleDict, ParameterList, ParameterDict), against torch's:
the same state_dict keys and values, the same behaviour of indexing, insertion, replacement and
update, the same printout."""

from collections import OrderedDict

import pytest

import sinter
from torch_parity import assert_same as _assert_same, rand as _rand


def _holder(lib):
    """A module holding each container, with tensors drawn by torch and shared by both."""
    nn = lib.nn

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"b": nn.Linear(3, 2), "a": nn.Linear(3, 1)})
            self.heads["c"] = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
            self.scales = nn.ParameterList([lib.ones(3), nn.Parameter(lib.zeros(2))])
            self.scales.append(lib.full((3,), 2.0))
            # A plain dict's items come in sorted key order, an OrderedDict's in its own.
            self.extra = nn.ParameterDict({"z": lib.ones(1), "m": lib.ones(2)})
            self.extra.update(OrderedDict([("y", lib.zeros(3)), ("b", lib.ones(3))]))
            self.extra.update([("k", lib.ones(1))])

        def forward(self, x):
            out = self.heads["b"](x * self.scales[0] + self.extra["y"]) + self.scales[2][:2]
            return out.sum() + self.heads["c"](x).sum() * self.extra["b"].sum()

    return Holder()


def test_containers_give_torch_state_dict_keys_and_values(torch):
    torch.manual_seed(0)
    theirs, mine = _holder(torch).double(), _holder(sinter)
    mine.to(sinter.float64)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in mine.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(mine.extra.keys()) == list(theirs.extra.keys()) == ["m", "z", "y", "b", "k"]
    mine.load_state_dict({k: sinter.from_dlpack(v.detach().contiguous())
                          for k, v in theirs.state_dict().items()})
    x, tx = _rand(sinter, (4, 3), 3), _rand(torch, (4, 3), 3)
    got, want = mine(x), theirs(tx)
    _assert_same(got, want, "output")
    got.backward()
    want.backward()
    mine_params = dict(mine.named_parameters())
    for key, p in theirs.named_parameters():
        if p.grad is None:
            assert mine_params[key].grad is None, key
        else:
            _assert_same(mine_params[key].grad, p.grad, key)


def test_containers_behave_as_torch(torch):
    for lib in (torch, sinter):
        nn = lib.nn
        d = nn.ModuleDict([("x", nn.ReLU()), ("y", nn.Tanh())])
        d.update({"z": nn.Linear(2, 2)})
        assert list(d) == ["x", "y", "z"] and len(d) == 3 and "y" in d
        assert isinstance(d.pop("y"), nn.Tanh) and list(d.keys()) == ["x", "z"]
        del d["x"]
        assert [type(m).__name__ for m in d.values()] == ["Linear"]
        assert [k for k, _ in d.items()] == ["z"]
        d.clear()
        assert len(d) == 0 and list(d.state_dict()) == []

        plist = nn.ParameterList([lib.ones(2), 3.0])
        plist += [lib.zeros(1)]
        plist.extend([lib.ones(4)])
        assert len(plist) == 4 and plist[1] == 3.0
        assert isinstance(plist[0], nn.Parameter) and plist[0].requires_grad
        assert tuple(plist[-1].shape) == (4,) and tuple(plist[-2].shape) == (1,)
        assert [tuple(p.shape) for p in plist[::2]] == [(2,), (1,)]
        assert list(plist.state_dict()) == ["0", "2", "3"]
        plist[0] = lib.full((5,), 1.0)
        assert tuple(plist[0].shape) == (5,) and isinstance(plist[0], nn.Parameter)

        pdict = nn.ParameterDict({"b": lib.ones(1)})
        assert tuple(pdict.setdefault("a", lib.zeros(2)).shape) == (2,)
        assert pdict.get("q") is None and pdict.get("b") is pdict["b"]
        merged = pdict | nn.ParameterDict(OrderedDict([("c", lib.ones(3))]))
        assert list(merged) == ["b", "a", "c"] and list(pdict) == ["b", "a"]
        assert list(reversed(pdict)) == ["a", "b"]
        key, value = merged.popitem()
        assert key == "c" and tuple(value.shape) == (3,) and list(merged) == ["b", "a"]
        assert tuple(pdict.pop("b").shape) == (1,) and list(pdict.state_dict()) == ["a"]
        pdict["note"] = "kept as it is"
        assert pdict["note"] == "kept as it is" and list(pdict.state_dict()) == ["a"]
        assert list(pdict.fromkeys(["u", "v"])) == ["u", "v"]
        pdict.clear()
        assert len(pdict) == 0 and list(pdict.state_dict()) == []


def test_parameter_containers_follow_to_and_print_as_torch(torch):
    mine = sinter.nn.ParameterList([sinter.ones(2, 3), 7])
    theirs = torch.nn.ParameterList([torch.ones(2, 3), 7])
    assert repr(mine) == repr(theirs).replace("torch.", "sinter.")
    mine.to(sinter.float64)
    assert mine[0].dtype == sinter.float64 and isinstance(mine[0], sinter.nn.Parameter)
    # torch's ParameterDict (alone) names the legacy tensor type, which sinter does not have;
    # sinter's names the dtype, as both libraries' ParameterList do.
    assert repr(sinter.nn.ParameterDict({"w": sinter.ones(3), "n": 1})) == repr(
        torch.nn.ParameterDict({"w": torch.ones(3), "n": 1})).replace("torch.FloatTensor",
                                                                       "sinter.float32")
    assert repr(sinter.nn.ParameterList()) == repr(torch.nn.ParameterList())
    assert repr(sinter.nn.ModuleDict({"b": sinter.nn.ReLU(), "a": sinter.nn.Linear(2, 3)})) == \
        repr(torch.nn.ModuleDict({"b": torch.nn.ReLU(), "a": torch.nn.Linear(2, 3)}))


def _order(module):
    # state_dict's keys as a set: sinter lists every parameter before the buffers, torch
    # module by module.
    return ([n for n, _ in module.named_parameters()], [n for n, _ in module.named_buffers()],
            [n for n, _ in module.named_modules()], sorted(module.state_dict()))


def test_assigning_an_entry_again_keeps_its_position_as_torch(torch):
    """A name registered again keeps its place (parameters() order, which an optimizer's state
    follows), in the containers and in a plain module."""
    def build(lib):
        nn = lib.nn
        d = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.Linear(1, 1)})
        d["a"] = nn.Linear(2, 2)
        plist = nn.ParameterList([lib.ones(1), lib.ones(2)])
        plist[0] = lib.zeros(3)
        pdict = nn.ParameterDict(OrderedDict([("a", lib.ones(1)), ("b", lib.ones(2))]))
        pdict["a"] = lib.zeros(2)
        m = nn.Module()
        m.w = nn.Parameter(lib.ones(1))
        m.v = nn.Parameter(lib.ones(1))
        m.register_buffer("s", lib.ones(1))
        m.register_buffer("t", lib.ones(1), persistent=False)
        m.w = nn.Parameter(lib.zeros(2))
        m.register_buffer("s", lib.zeros(1))
        m.register_buffer("t", lib.zeros(1))  # persistent again
        m.register_parameter("v", nn.Parameter(lib.ones(3)))
        m.c = nn.Linear(1, 1)
        m.e = nn.Linear(1, 1)
        m.c = nn.Tanh()
        return d, plist, pdict, m

    for mine, theirs in zip(build(sinter), build(torch)):
        assert _order(mine) == _order(theirs)
    assert list(build(sinter)[0].keys()) == ["a", "b"]


def test_containers_take_mappings_and_subclasses_as_torch(torch):
    """update (and the constructors) take any ModuleDict, ParameterDict (subclasses too) or
    mapping: a ModuleDict keeps every mapping's order, a ParameterDict sorts a mapping that is
    not an OrderedDict or a ParameterDict."""
    from types import MappingProxyType

    def build(lib):
        nn = lib.nn

        class PD2(nn.ParameterDict):
            pass

        class MD2(nn.ModuleDict):
            pass

        pd = nn.ParameterDict(OrderedDict([("b", lib.ones(1)), ("a", lib.ones(2))]))
        md = nn.ModuleDict(OrderedDict([("y", nn.ReLU()), ("x", nn.Tanh())]))
        out = [PD2(pd), nn.ParameterDict(PD2(pd)), MD2(md), nn.ModuleDict(MD2(md)),
               nn.ModuleDict(MappingProxyType({"q": nn.ReLU(), "p": nn.ReLU()})),
               nn.ParameterDict(MappingProxyType({"q": lib.ones(1), "p": lib.ones(1)}))]
        pdict = nn.ParameterDict({"c": lib.ones(1)})
        pdict.update(PD2(pd))
        return out + [pdict]

    for mine, theirs in zip(build(sinter), build(torch)):
        assert list(mine.keys()) == list(theirs.keys()) and _order(mine) == _order(theirs)


def test_parameter_dict_entry_becomes_a_parameter_as_torch(torch):
    for lib in (torch, sinter):
        pdict = lib.nn.ParameterDict()
        pdict["x"] = "s"
        pdict["x"] = lib.ones(1)
        assert list(pdict.state_dict()) == ["x"] and isinstance(pdict["x"], lib.nn.Parameter)
        pdict["y"] = lib.ones(1)
        pdict["x"] = None
        assert list(pdict.keys()) == ["x", "y"] and list(pdict.state_dict()) == ["y"]
        with pytest.raises(KeyError, match="attribute 'keys' already exists"):
            pdict["keys"] = lib.ones(1)
