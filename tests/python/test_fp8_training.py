"""sinter.fp8 (Note [fp8 training]): prepare() and fp8.autocast with Transformer Engine's names,
and an FP8 Linear's output equal, bit for bit, to the same formulas written with PyTorch's float8
casts (the current recipe: per-tensor scales from the amaxes, codes summed in float64, the scales'
product applied in float32)."""

import pytest

import sinter


def chain():
    return sinter.nn.Sequential(sinter.nn.Linear(16, 32), sinter.nn.Linear(32, 48),
                                sinter.nn.Linear(48, 16))


def test_prepare_takes_the_inner_layers_and_autocast_switches_them():
    sinter.manual_seed(0)
    m = chain()
    assert sinter.fp8.prepare(m, sinter.fp8.Recipe("delayed", amax_history_len=4)) == ["1"]
    assert "1.fp8_amax_history" in m.state_dict()
    assert list(m.state_dict()["1.fp8_amax_history"].shape) == [3, 4]
    x = sinter.randn(8, 16, requires_grad=True)
    plain = m(x)
    recipe = sinter.fp8.Recipe("delayed", amax_history_len=4)
    assert (recipe.scaling, recipe.amax_history_len, recipe.block) == ("delayed", 4, 128)
    with sinter.fp8.autocast(fp8_recipe=recipe):
        assert sinter.fp8.is_enabled()
        y = m(x)
    assert not sinter.fp8.is_enabled()
    assert 0 < float((y - plain).abs().max()) < 0.1
    y.sum().backward()  # outside the scope: the backward keeps the recipe
    assert int(m.state_dict()["1.fp8_steps"].item()) == 1
    assert x.grad is not None


def test_bad_recipes_are_errors():
    with pytest.raises(RuntimeError, match="unknown FP8 recipe"):
        sinter.fp8.Recipe("tensorwise")
    with pytest.raises(RuntimeError, match="amax_history_len"):
        sinter.fp8.Recipe("delayed", amax_history_len=0)


def test_current_recipe_equals_the_formulas_with_torch_float8(torch):
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this PyTorch has no float8_e4m3fn")
    sinter.manual_seed(3)
    m = chain()
    sinter.fp8.prepare(m, sinter.fp8.Recipe("current"))
    x = sinter.randn(8, 16) * 3.0
    with sinter.no_grad():
        h = m[0](x)
        with sinter.fp8.autocast(fp8_recipe=sinter.fp8.Recipe("current")):
            ours = m[1](h)
    t = lambda s: torch.from_dlpack(s.detach()).clone()  # noqa: E731
    th, tw, tb = t(h), t(m[1].weight), t(m[1].bias)

    def quantize(v):
        amax = v.abs().max()
        scale = torch.tensor(448.0, dtype=torch.float32) / amax
        codes = (v * scale).clamp(-448, 448).to(torch.float8_e4m3fn)
        return codes.to(torch.float64), torch.tensor(1.0, dtype=torch.float32) / scale

    qx, inv_x = quantize(th)
    qw, inv_w = quantize(tw)
    partial = (qx @ qw.T).to(torch.float32)
    want = partial * (inv_x * inv_w) + tb
    assert torch.equal(t(ours), want)


def test_one_context_entered_inside_itself_restores_the_state():
    ctx = sinter.fp8.autocast(fp8_recipe=sinter.fp8.Recipe("block"))
    with ctx:
        with ctx:
            assert sinter.fp8.is_enabled()
        assert sinter.fp8.is_enabled()
    assert not sinter.fp8.is_enabled()
    amp = sinter.amp.autocast("cpu", sinter.bfloat16)
    with amp:
        with amp:
            pass
        assert sinter.ones(2, 2).matmul(sinter.ones(2, 2)).dtype == sinter.bfloat16
    assert sinter.ones(2, 2).matmul(sinter.ones(2, 2)).dtype == sinter.float32
