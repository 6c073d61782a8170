"""The language models and the text corpus from Python: GPT and Llama's forward, KV cache and
generate, trained by sinter.optim; TextCorpus's windows and baselines."""

import os

import pytest

import sinter
import sinter.nn.functional as F


@pytest.mark.parametrize("make", [
    lambda: sinter.models.GPT(context_length=16, n_layer=2, n_head=2, n_embd=32),
    lambda: sinter.models.Llama(context_length=16, n_layer=2, n_head=4, n_kv_head=2, n_embd=32),
], ids=["gpt", "llama"])
def test_language_model_cache_generate_and_a_step(make):
    sinter.manual_seed(0)
    model = make()
    idx = sinter.randint(0, 256, (2, 10))
    full = model(idx)
    assert full.shape == (2, 10, 256)
    cache = sinter.models.KVCache(2, 16)
    with sinter.no_grad():
        first = model(idx[:, :6], cache)
        rest = model(idx[:, 6:], cache)
    assert cache.length == 10
    assert sinter.cat([first, rest], dim=1).allclose(full.detach(), atol=1e-4)
    sinter.manual_seed(5)
    a = model.generate(idx, 4, top_k=5)
    sinter.manual_seed(5)
    b = model.generate(idx, 4, top_k=5, use_cache=False)
    assert a.shape == (2, 14) and a.tolist() == b.tolist()
    opt = sinter.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), idx[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_text_corpus_windows_and_baselines(tmp_path):
    path = tmp_path / "text.txt"
    path.write_bytes(b"abcabcabd" * 4000)
    corpus = sinter.datasets.TextCorpus([str(path)], context=8, val_fraction=0.25, seed=1,
                                        train_windows=20, val_windows=5)
    assert corpus.num_bytes == 36000 and corpus.files == [str(path)]
    assert len(corpus.train) == 20 and len(corpus.val) == 5
    x, y = corpus.train[3]
    assert x.shape == (8,) and x[1:].tolist() == y[:-1].tolist()
    base = corpus.byte_baselines()
    assert 0 < base["bigram"] < base["unigram"]
    with pytest.raises(RuntimeError):
        sinter.datasets.TextCorpus([str(tmp_path / "missing.txt")])


@pytest.mark.skipif(not os.path.isdir(sinter.datasets.default_text_corpus()),
                    reason="Debian's fortunes are not installed")
def test_default_corpus_is_the_fortunes():
    corpus = sinter.datasets.TextCorpus(context=32, train_windows=4, val_windows=4)
    assert corpus.num_bytes > 1_000_000
