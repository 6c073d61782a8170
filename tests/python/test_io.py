"""Files and logs from Python: safetensors files that the safetensors package reads (and the other
way round), TensorBoard event files, autocast's policy, the CUDA queries without a GPU."""

import pytest

import sinter


def test_safetensors_round_trip_and_with_the_safetensors_package(tmp_path, torch):
    st = pytest.importorskip("safetensors.torch")
    model = sinter.models.mlp()
    path = str(tmp_path / "mlp.safetensors")
    sinter.safetensors.save_file(model.state_dict(), path, metadata={"note": "x"})
    back = sinter.safetensors.load_file(path)
    assert sorted(back) == sorted(model.state_dict())
    for k, v in model.state_dict().items():
        assert back[k].tolist() == v.tolist()
    theirs = st.load_file(path)
    for k, v in back.items():
        assert torch.equal(theirs[k], torch.from_dlpack(v))
    st.save_file({"w": torch.arange(6.0).reshape(2, 3)}, str(tmp_path / "t.safetensors"))
    assert sinter.safetensors.load_file(str(tmp_path / "t.safetensors"))["w"].tolist() == [
        [0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(RuntimeError, match="missing.safetensors"):
        sinter.safetensors.load_file(str(tmp_path / "missing.safetensors"))


def test_summary_writer_writes_event_files(tmp_path):
    with sinter.utils.tensorboard.SummaryWriter(str(tmp_path / "run")) as w:
        for step in range(3):
            w.add_scalar("loss", 1.0 / (step + 1), step)
        w.add_histogram("weights", sinter.randn(100), 0)
        w.add_text("note", "hello", 0)
    files = list((tmp_path / "run").glob("events.out.tfevents.*"))
    assert files and files[0].stat().st_size > 0
    # Read back by TensorBoard's own reader.
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = ea.EventAccumulator(str(tmp_path / "run"))
    acc.Reload()
    scalars = acc.Scalars("loss")
    assert [e.step for e in scalars] == [0, 1, 2]
    assert [e.value for e in scalars] == pytest.approx([1.0, 0.5, 1.0 / 3], rel=1e-6)
    assert "weights" in acc.Tags()["histograms"]


def test_autocast_follows_the_policy():
    x, w = sinter.randn(2, 3), sinter.randn(3, 4)
    with sinter.autocast("cpu", dtype=sinter.bfloat16):
        y = x @ w
        assert y.dtype == sinter.bfloat16
        assert y.float().sum(dim=1).dtype == sinter.float32
    assert (x @ w).dtype == sinter.float32
    with pytest.raises(RuntimeError, match="device_type must be 'cpu' or 'cuda'"):
        sinter.autocast("tpu")


def test_cuda_queries():
    n = sinter.cuda.device_count()
    assert sinter.cuda.is_available() == (n > 0)


def test_onnx_export_runs_in_onnx_runtime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    np = pytest.importorskip("numpy")
    model = sinter.models.cnn()
    model.eval()
    x = sinter.randn(3, 1, 28, 28)
    path = str(tmp_path / "cnn.onnx")
    summary = sinter.onnx.export(model, x, path)
    assert summary["nodes"] > 0 and summary["bytes"] > 0
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"input": x.numpy()})
    with sinter.no_grad():
        want = model(x).numpy()
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5)


def test_save_and_load_a_checkpoint(tmp_path):
    model = sinter.nn.Linear(3, 2)
    opt = sinter.optim.Adam(model.parameters(), lr=0.1)
    sinter.nn.functional.mse_loss(model(sinter.ones(4, 3)), sinter.zeros(4, 2)).backward()
    opt.step()
    tensors = {name: sinter.arange(6).reshape(2, 3).to(dtype) for name, dtype in (
        ("f32", sinter.float32), ("f64", sinter.float64), ("f16", sinter.float16),
        ("bf16", sinter.bfloat16), ("i64", sinter.int64), ("i32", sinter.int32),
        ("u8", sinter.uint8), ("bool", sinter.bool))}
    checkpoint = {"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3,
                  "tensors": tensors, "param": sinter.nn.Parameter(sinter.ones(2)),
                  "view": sinter.arange(10.0)[::3]}
    path = tmp_path / "ckpt.pt"
    sinter.save(checkpoint, path)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary file left
    back = sinter.load(str(path), map_location="cpu")
    assert back["epoch"] == 3 and back["view"].tolist() == [0.0, 3.0, 6.0, 9.0]
    for name, t in tensors.items():
        assert back["tensors"][name].dtype == t.dtype and back["tensors"][name].tolist() == \
            t.tolist(), name
    assert isinstance(back["param"], sinter.nn.Parameter) and back["param"].requires_grad
    restored = sinter.nn.Linear(3, 2)
    restored.load_state_dict(back["model"])
    again = sinter.optim.Adam(restored.parameters(), lr=0.1)
    again.load_state_dict(back["opt"])
    assert restored.weight.tolist() == model.weight.tolist()
