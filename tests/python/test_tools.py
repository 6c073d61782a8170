"""sinter.profiler and sinter.quantization from Python: the ops of a training step recorded with
their shapes, forward and backward; schedules and named ranges; a Chrome trace that parses; an
int8 model close to the float one, exported as an ONNX QDQ model."""

import json

import pytest

import sinter
import sinter.nn.functional as F
from sinter import nn


def _step(model, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss


def test_profile_records_the_step_and_writes_a_trace(tmp_path):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x, y = sinter.randn(5, 8), sinter.randint(0, 4, (5,))
    with sinter.profiler.profile() as prof:
        with sinter.profiler.record_function("my step"):
            _step(model, x, y)
    names = [e.name for e in prof.events()]
    assert "my step" in names and "linear" in names
    assert any(e.backward for e in prof.events())
    linear = next(e for e in prof.events() if e.name == "linear")
    assert linear.shapes.startswith("[5, 8]") and linear.end_ns >= linear.start_ns
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    assert "linear" in table and "my step" in table
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any(e.get("name") == "linear" for e in events)


def test_schedule_hands_each_cycle_to_on_trace_ready(tmp_path):
    model = nn.Linear(4, 2)
    x, y = sinter.randn(3, 4), sinter.randint(0, 2, (3,))
    cycles = []
    handler = sinter.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")

    def ready(recorded):
        cycles.append(len([e for e in recorded.events() if e.name == "linear"]))
        handler(recorded)

    schedule = sinter.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    with sinter.profiler.profile(schedule=schedule, on_trace_ready=ready) as prof:
        for _ in range(9):
            _step(model, x, y)
            prof.step()
    assert cycles == [2, 2]  # two cycles, each with its two active steps' linears
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.1.pt.trace.json",
                                                           "w.2.pt.trace.json"]


def test_record_function_as_a_decorator_and_results_only_after_the_block():
    @sinter.profiler.record_function("helper")
    def helper(t):
        return t * 2

    prof = sinter.profiler.profile()
    with prof:
        helper(sinter.ones(2))
        with pytest.raises(RuntimeError, match="after the with-block"):
            prof.events()
    assert [e.name for e in prof.events() if e.name == "helper"] == ["helper"]


def test_quantized_model_is_close_and_exports(tmp_path):
    sinter.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    batches = [sinter.randn(8, 16) for _ in range(4)]
    q = sinter.quantization.quantize(model, batches, calibrator="minmax")
    x = batches[0]
    with sinter.no_grad():
        want, got = model(x), q(x)
    err = (got - want).abs().max().item()
    assert err < 0.05 * want.abs().max().item()
    assert sinter.quantization.model_bytes(q) < sum(p.numel() * 4 for p in model.parameters())
    assert "QuantizedLinear" in repr([m._type_name() for _, m in q.named_children()])
    ort = pytest.importorskip("onnxruntime")
    path = str(tmp_path / "q.onnx")
    sinter.onnx.export(q, x, path)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"input": x.numpy()})
    assert out.flatten().tolist() == pytest.approx(got.flatten().tolist(), abs=1e-4)
    with pytest.raises(RuntimeError, match="minmax"):
        sinter.quantization.convert(sinter.quantization.prepare(model), calibrator="bogus")


def test_cuda_queries_and_graphs_without_a_device():
    if sinter.cuda.is_available():
        pytest.skip("a CUDA device is present (test_cuda_graph_replays runs)")
    assert sinter.cuda.device_count() == 0 and not sinter.cuda.is_current_stream_capturing()
    assert isinstance(sinter.cuda.memory_summary(), str)
    with pytest.raises(RuntimeError):
        sinter.cuda.CUDAGraph().capture(lambda: None)


@pytest.mark.cuda
@pytest.mark.skipif(not sinter.cuda.is_available(), reason="no CUDA device")
def test_cuda_graph_replays():
    x = sinter.zeros(4, device="cuda")
    g = sinter.cuda.CUDAGraph()
    g.capture(lambda: x.add_(1.0))
    assert x.cpu().tolist() == [0.0] * 4  # recorded, not run
    for _ in range(3):
        g.replay()
    assert x.cpu().tolist() == [3.0] * 4
    calls = []
    step = sinter.cuda.GraphedStep(lambda: (calls.append(1), x.mul_(2.0)), warmup=2)
    for _ in range(4):
        step()
    assert step.graphed() and len(calls) == 3  # two eager runs and the capture
    assert x.cpu().tolist() == [48.0] * 4
    assert "name" in sinter.cuda.get_device_properties(0)


def test_record_function_decorator_makes_a_range_per_call():
    @sinter.profiler.record_function("outer")
    def outer(t):
        return inner(t) + inner(t)

    @sinter.profiler.record_function("inner")
    def inner(t):
        return t * 2

    @sinter.profiler.record_function("rec")
    def rec(n, t):
        return t if n == 0 else rec(n - 1, t + 1)

    with sinter.profiler.profile() as prof:
        outer(sinter.ones(1))
        outer(sinter.ones(1))
        rec(2, sinter.ones(1))
    depths = sorted((e.name, e.depth) for e in prof.events() if e.name in ("outer", "inner"))
    assert depths == [("inner", 1)] * 4 + [("outer", 0)] * 2
    # A range directly inside one of its own name counts once (the C++ profiler's rule for an op
    # that calls itself again); its ops stay inside it.
    assert [e.depth for e in prof.events() if e.name == "rec"] == [0]
    assert [e.depth for e in prof.events() if e.name == "add"] == [1] * 4  # 2 in outer, 2 in rec
