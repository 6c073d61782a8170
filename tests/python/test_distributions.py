"""sinter.distributions against torch.distributions on f64 values and gradients: log_prob,
entropy, cdf, icdf, moments and kl_divergence; the shapes of samples, rsample's gradients, the
draws' moments (seeded, so fixed), printing and argument checks."""

import math

import pytest

import sinter
from torch_parity import assert_same, rand

D = sinter.distributions


def _params(lib, seed, positive=()):
    """Two (3, 4) f64 parameters that require grad: the first any real, the second positive."""
    a = rand(lib, (3, 4), seed).requires_grad_(True)
    b = (rand(lib, (3, 4), seed + 1).abs() + 0.2).detach().requires_grad_(True)
    return a, b


FAMILIES = {
    "Normal": (lambda L, a, b: L.distributions.Normal(a, b), lambda L: rand(L, (3, 4), 9)),
    "Laplace": (lambda L, a, b: L.distributions.Laplace(a, b), lambda L: rand(L, (3, 4), 9)),
    "Uniform": (lambda L, a, b: L.distributions.Uniform(a - 5, a + b + 5),
                lambda L: rand(L, (3, 4), 9)),
    "Exponential": (lambda L, a, b: L.distributions.Exponential(b),
                    lambda L: rand(L, (3, 4), 9).abs()),
    "Bernoulli_probs": (lambda L, a, b: L.distributions.Bernoulli(probs=(b / 3).clamp(max=0.9)),
                        lambda L: (rand(L, (3, 4), 9) > 0).to(L.float64)),
    "Bernoulli_logits": (lambda L, a, b: L.distributions.Bernoulli(logits=a),
                         lambda L: (rand(L, (3, 4), 9) > 0).to(L.float64)),
    "Categorical_probs": (lambda L, a, b: L.distributions.Categorical(probs=b),
                          lambda L: L.tensor([0, 3, 2])),
    "Categorical_logits": (lambda L, a, b: L.distributions.Categorical(logits=a),
                           lambda L: L.tensor([[1], [0]])),
    "Independent": (lambda L, a, b: L.distributions.Independent(L.distributions.Normal(a, b), 1),
                    lambda L: rand(L, (3, 4), 9)),
}


def _quantities(d, value, name):
    out = {"log_prob": d.log_prob(value), "entropy": d.entropy()}
    if not name.startswith(("Categorical", "Independent")):
        out.update(mean=d.mean, variance=d.variance, stddev=d.stddev)
    if name in ("Normal", "Laplace", "Uniform", "Exponential"):
        out["cdf"] = d.cdf(value)
        out["icdf"] = d.icdf(d.cdf(value).detach().clamp(min=0.05, max=0.95))
    return out


@pytest.mark.parametrize("name", FAMILIES)
def test_values_and_gradients_are_torchs(torch, name):
    make, value = FAMILIES[name]
    got = {}
    for lib in (sinter, torch):
        a, b = _params(lib, 3)
        d = make(lib, a, b)
        assert tuple(d.batch_shape) == tuple(make(torch, *_params(torch, 3)).batch_shape)
        for key, q in _quantities(d, value(lib), name).items():
            total = (q * rand(lib, tuple(q.shape), 7)).sum()
            grads = [g for g in (a, b)]
            if total.requires_grad:
                total.backward(retain_graph=True)  # the quantities share the parameters' graph
            got.setdefault(key, []).append((q.detach(), [g.grad for g in grads]))
            for g in grads:
                g.grad = None
    for key, ((q_s, g_s), (q_t, g_t)) in got.items():
        assert_same(q_s, q_t, f"{name} {key}")
        for gs, gt in zip(g_s, g_t):
            if gt is None:
                assert gs is None or not gs.abs().sum().item(), f"{name} {key} gradient"
            else:
                assert_same(gs, gt, f"{name} {key} gradient")


KL_PAIRS = ["Normal", "Laplace", "Exponential", "Bernoulli_logits", "Categorical_logits",
            "Independent"]


@pytest.mark.parametrize("name", KL_PAIRS)
def test_kl_divergence_is_torchs(torch, name):
    make, _ = FAMILIES[name]
    results = []
    for lib in (sinter, torch):
        a, b = _params(lib, 3)
        c, d = _params(lib, 5)
        kl = lib.distributions.kl_divergence(make(lib, a, b), make(lib, c, d))
        kl.sum().backward()
        results.append((kl, a.grad, b.grad))
    for got, want in zip(*results):
        if want is None:
            assert got is None or not got.abs().sum().item()
        else:
            assert_same(got, want, name)


def test_kl_of_uniforms_is_infinite_outside_as_torchs(torch):
    out = []
    for lib in (sinter, torch):
        U = lib.distributions.Uniform
        p = U(lib.tensor([0.0, 0.0]), lib.tensor([1.0, 2.0]))
        q = U(lib.tensor([0.0, -1.0]), lib.tensor([1.5, 1.0]))
        out.append(lib.distributions.kl_divergence(p, q).tolist())
    assert out[0] == pytest.approx(out[1], rel=1e-6) and out[0][1] == math.inf


def test_samples_have_the_shapes_and_moments(torch):
    sinter.manual_seed(0)
    loc = sinter.tensor([1.0, -2.0], dtype=sinter.float64, requires_grad=True)
    scale = sinter.tensor([0.5, 2.0], dtype=sinter.float64, requires_grad=True)
    normal = D.Normal(loc, scale)
    x = normal.rsample((4000,))
    assert tuple(x.shape) == (4000, 2) and normal.sample().shape == (2,)
    assert x.mean(0).sub(loc).abs().max().item() < 0.15  # 10 standard errors of 2/sqrt(4000)
    x.sum().backward()  # d(loc + eps scale)/dloc = 1 per draw
    assert loc.grad.tolist() == [4000.0, 4000.0]
    c = D.Categorical(probs=sinter.tensor([[0.2, 0.8], [1.0, 0.0]]))
    draws = c.sample((3000,))
    assert tuple(draws.shape) == (3000, 2) and draws.dtype == sinter.int64
    assert abs(draws[:, 0].float().mean().item() - 0.8) < 0.08 and draws[:, 1].sum().item() == 0
    b = D.Bernoulli(probs=sinter.tensor([0.0, 1.0, 0.3]))
    assert b.sample((5,)).shape == (5, 3) and b.sample((5,))[:, :2].tolist() == [[0, 1]] * 5
    for d in (D.Uniform(0.0, 2.0), D.Laplace(0.0, 1.0), D.Exponential(2.0)):
        assert tuple(d.rsample((7, 3)).shape) == (7, 3)
    ind = D.Independent(D.Normal(sinter.zeros(5, 3), 1.0), 1)
    assert (ind.batch_shape, ind.event_shape) == ((5,), (3,))
    assert tuple(ind.sample((2,)).shape) == (2, 5, 3) and tuple(ind.log_prob(
        sinter.zeros(5, 3)).shape) == (5,)


def test_printing_and_argument_checks_as_torch(torch):
    for lib in (sinter, torch):
        Dl = lib.distributions
        assert repr(Dl.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
        with pytest.raises(ValueError, match="Expected parameter scale"):
            Dl.Normal(0.0, -1.0)
        with pytest.raises(ValueError, match="Either `probs` or `logits`"):
            Dl.Bernoulli(probs=lib.tensor([0.5]), logits=lib.tensor([0.0]))
        with pytest.raises(ValueError, match="within the support"):
            Dl.Bernoulli(probs=lib.tensor([0.5])).log_prob(lib.tensor([0.5]))
        with pytest.raises(ValueError, match="within the support"):
            Dl.Categorical(logits=lib.zeros(3)).log_prob(lib.tensor(3))
        with pytest.raises(NotImplementedError):
            Dl.kl_divergence(Dl.Normal(0.0, 1.0), Dl.Bernoulli(probs=lib.tensor(0.5)))
    assert repr(D.Normal(sinter.zeros(2), 1.0)) == "Normal(loc: (2,), scale: (2,))"


def test_pickles_and_closed_uniform_support_as_torch(torch):
    import pickle
    for lib in (sinter, torch):
        Dl = lib.distributions
        for d in (Dl.Bernoulli(probs=lib.tensor([0.3])), Dl.Categorical(logits=lib.zeros(2, 3)),
                  Dl.Normal(lib.zeros(2), 1.0)):
            back = pickle.loads(pickle.dumps(d))
            assert repr(back) == repr(d)
        assert Dl.Uniform(0.0, 1.0).log_prob(lib.tensor(1.0)).item() == float("-inf")
