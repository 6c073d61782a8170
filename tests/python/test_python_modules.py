"""Modules and functions written in Python where the C++ library takes its own: the mirror of a
Python module as a C++ module (Note [python modules in C++]), ONNX export of a Python Sequential,
activation checkpointing of a Python function, DDP's wrapper in one process."""

import pytest

import sinter
from sinter import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.gain = nn.Parameter(sinter.ones(3) * 2)
        self.register_buffer("shift", sinter.full((3,), 0.5))

    def forward(self, x):
        return self.fc(x) * self.gain + self.shift


def test_python_module_as_cpp_module_shares_its_tensors():
    net = Net()
    cpp = sinter._C._as_cpp_module(net)
    assert [n for n, _ in cpp.named_parameters()] == [n for n, _ in net.named_parameters()]
    assert [n for n, _ in cpp.named_buffers()] == ["shift"]
    x = sinter.randn(2, 4)
    assert cpp(x).tolist() == net(x).tolist()
    with sinter.no_grad():
        net.gain.mul_(3)  # the mirror holds the same tensors
    assert cpp(x).tolist() == net(x).tolist()
    assert dict(cpp.named_parameters())["gain"].tolist() == [6.0, 6.0, 6.0]


def test_onnx_export_of_a_python_sequential(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Sequential(nn.Linear(8, 2), nn.Tanh()))
    x = sinter.randn(3, 4)
    path = str(tmp_path / "seq.onnx")
    summary = sinter.onnx.export(model, (x,), path)
    assert summary["nodes"] >= 4 and summary["initializers"] >= 4
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"input": x.numpy()})
    assert got.flatten().tolist() == pytest.approx(model(x).flatten().tolist(), abs=1e-5)
    with pytest.raises(RuntimeError, match="Net.*no ONNX mapping"):
        sinter.onnx.export(Net(), x, str(tmp_path / "net.onnx"))


def test_checkpoint_of_a_python_function_gives_the_plain_gradients():
    lin = nn.Linear(4, 4)
    drop = nn.Dropout(0.5)

    def block(a, scale):
        return drop(lin(a).tanh()) * scale, a.sum()

    x = sinter.randn(3, 4, requires_grad=True)
    state_seed = 7
    sinter.manual_seed(state_seed)
    out, total = block(x, 2.0)
    (out.sum() + total).backward()
    plain = (x.grad.clone(), lin.weight.grad.clone())
    x.grad = None
    lin.zero_grad()
    sinter.manual_seed(state_seed)
    out2, total2 = sinter.utils.checkpoint.checkpoint(block, x, 2.0, use_reentrant=False)
    assert out2.tolist() == out.tolist()
    (out2.sum() + total2).backward()
    assert x.grad.tolist() == plain[0].tolist()  # the same dropout mask in the recomputation
    assert lin.weight.grad.tolist() == plain[1].tolist()
    with pytest.raises(ValueError, match="no tensor argument"):
        sinter.utils.checkpoint.checkpoint(lambda: sinter.ones(1))


def test_distributed_needs_a_process_group():
    assert not sinter.distributed.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        sinter.distributed.get_rank()
    with pytest.raises(RuntimeError, match="init_process_group"):
        nn.parallel.DistributedDataParallel(Net())
