"""sinter.optim's schedules, param_groups, GradScaler and sinter.nn.utils' clipping against
torch's: the same learning rates step by step, the same scales, the same clipped gradients."""

import math

import pytest

import sinter


def _pair(torch, lr=0.5, momentum=0.9):
    mine = sinter.optim.SGD([sinter.nn.Parameter(sinter.ones(2))], lr=lr, momentum=momentum)
    theirs = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=lr, momentum=momentum)
    return mine, theirs


SCHEDULES = [
    ("StepLR", lambda m, o: m.StepLR(o, step_size=3, gamma=0.5)),
    ("CosineAnnealingLR", lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.01)),
    ("OneCycleLR", lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=12)),
    ("OneCycleLR linear", lambda m, o: m.OneCycleLR(o, max_lr=1.0, epochs=3, steps_per_epoch=4,
                                                    anneal_strategy="linear", three_phase=True)),
    ("LambdaLR", lambda m, o: m.LambdaLR(o, lambda t: 1.0 / (t + 1))),
    ("MultiplicativeLR", lambda m, o: m.MultiplicativeLR(o, lambda t: 0.9)),
    ("MultiStepLR", lambda m, o: m.MultiStepLR(o, milestones=[2, 5], gamma=0.3)),
    ("ExponentialLR", lambda m, o: m.ExponentialLR(o, gamma=0.8)),
    ("LinearLR", lambda m, o: m.LinearLR(o, start_factor=0.25, total_iters=4)),
]


@pytest.mark.parametrize("name,make", SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_schedule_matches_torch(torch, name, make):
    mine, theirs = _pair(torch)
    sm, st = make(sinter.optim.lr_scheduler, mine), make(torch.optim.lr_scheduler, theirs)
    got, want = [], []
    for _ in range(11):
        got.append(mine.param_groups[0]["lr"])
        want.append(theirs.param_groups[0]["lr"])
        mine.step()
        theirs.step()
        sm.step()
        st.step()
    assert got == pytest.approx(want, rel=1e-12)
    assert sm.get_last_lr() == pytest.approx(st.get_last_lr(), rel=1e-12)
    if name.startswith("OneCycle"):  # the momentum cycles too
        assert mine.param_groups[0]["momentum"] == pytest.approx(
            theirs.param_groups[0]["momentum"], rel=1e-12)


def test_reduce_on_plateau_matches_torch(torch):
    mine, theirs = _pair(torch)
    sm = sinter.optim.lr_scheduler.ReduceLROnPlateau(mine, factor=0.5, patience=1, cooldown=1)
    st = torch.optim.lr_scheduler.ReduceLROnPlateau(theirs, factor=0.5, patience=1, cooldown=1)
    for metric in [3.0, 2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]:
        sm.step(metric)
        st.step(metric)
        assert mine.param_groups[0]["lr"] == pytest.approx(theirs.param_groups[0]["lr"])


def test_param_groups_read_and_write(torch):
    p = sinter.nn.Parameter(sinter.ones(2))
    q = sinter.nn.Parameter(sinter.ones(3))
    opt = sinter.optim.Adam([{"params": [p]}, {"params": [q], "lr": 0.01}], lr=0.1,
                            betas=(0.8, 0.95))
    groups = opt.param_groups
    assert len(groups) == 2 and groups[1]["lr"] == pytest.approx(0.01)
    assert groups[0]["betas"] == pytest.approx((0.8, 0.95))
    assert groups[0]["params"][0] is not None and groups[0]["params"][0].shape == (2,)
    groups[1]["lr"] = 0.5
    groups[0]["betas"] = (0.5, 0.6)
    assert opt.group_lr(1) == 0.5 and opt.param_groups[0]["betas"] == pytest.approx((0.5, 0.6))
    with pytest.raises(KeyError):
        groups[0]["momentum"] = 0.9
    with pytest.raises(RuntimeError):
        groups[0]["lr"] = -1.0  # checked as the constructor checks it


def test_grad_scaler_matches_torch(torch):
    results = []
    for lib in (sinter, torch):
        w = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
        trace = []
        for bad in (False, False, True, False):
            opt.zero_grad()
            loss = (w * w).sum() * (float("inf") if bad else 1.0)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
            trace.append((scaler.get_scale(), w.detach().tolist()))
        results.append(trace)
    mine, theirs = results
    for (s1, w1), (s2, w2) in zip(mine, theirs):
        assert s1 == s2 and w1 == pytest.approx(w2, rel=1e-6)


def test_clip_grad_norm_and_value_match_torch(torch):
    grads = [[3.0, -4.0], [12.0]]
    out = []
    for lib in (sinter, torch):
        ps = [lib.nn.Parameter(lib.zeros(len(g))) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = lib.tensor(g)
        total = lib.nn.utils.clip_grad_norm_(ps, 6.5)
        lib.nn.utils.clip_grad_value_(ps[1:], 2.0)
        out.append((total.item(), [p.grad.tolist() for p in ps]))
    assert out[0][0] == pytest.approx(13.0) and out[0][0] == pytest.approx(out[1][0])
    for a, b in zip(out[0][1], out[1][1]):
        assert a == pytest.approx(b, rel=1e-6)
    p = sinter.nn.Parameter(sinter.zeros(1))
    p.grad = sinter.tensor([math.inf])
    with pytest.raises(RuntimeError, match="non-finite"):
        sinter.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert p.grad.tolist() == [math.inf]  # untouched by the refused call


def test_param_group_reads_copy_no_state_and_multiplicative_is_incremental(torch):
    mine, theirs = _pair(torch)
    calls = []
    sm = sinter.optim.lr_scheduler.MultiplicativeLR(mine, lambda t: calls.append(t) or 0.9)
    for _ in range(50):
        sm.step()
    assert calls == list(range(1, 51))  # one call per step, not a product over every epoch
    assert mine.param_groups[0]["lr"] == pytest.approx(0.5 * 0.9 ** 50)
    with pytest.raises(KeyError):
        mine.param_groups[0]["betas"]


def test_checkpoint_refuses_non_tensor_outputs():
    x = sinter.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="returned a NoneType"):
        sinter.utils.checkpoint.checkpoint(lambda a: (a * 2, None), x)
