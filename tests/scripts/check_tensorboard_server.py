#!/usr/bin/env python3
"""The examples' --tensorboard, served by TensorBoard itself.

fashion_mnist: trains the mlp for two short epochs with --tensorboard and --log-every 5; lm (with
--lm): a tiny GPT for 20 steps with --log-every 2. Starts the TensorBoard server on the log folder
(its Python loader, on a free local port) and reads back through its HTTP API: the scalar tags,
every train/loss point (one per --log-every steps, against the event files read by the event
accumulator), the evaluation figures, the histogram tags, the images (fashion_mnist), the text
(predictions, or the generated sample) and the HParams run's metric. fashion_mnist also runs with
--profile and --profile-schedule 1,1,2: its trace of two steps, backward nodes among its ops, is in
TensorBoard's profile folder. Exit 77 (skipped) without the tensorboard package.

  check_tensorboard_server.py FASHION_MNIST DATA WORK_DIR
  check_tensorboard_server.py --lm LM WORK_DIR
"""
import glob
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

try:
    import tensorboard  # noqa: F401
    from tensorboard.backend.event_processing import event_accumulator as ea
except ImportError as e:
    print(f"skipped: {e} (pip install tensorboard)")
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, **query):
    url = f"http://127.0.0.1:{port}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def main():
    lm = sys.argv[1] == "--lm"
    args = sys.argv[2:] if lm else sys.argv[1:]
    exe, work = args[0], args[-1]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    log = os.path.join(work, "tb")
    if lm:
        every, last, evals = 2, 20, [10, 20]
        command = [exe, "--device", "cpu", "--layers", "1", "--heads", "2", "--width", "32",
                   "--context", "32", "--batch-size", "8", "--steps", str(last), "--warmup", "2",
                   "--eval-interval", "10", "--eval-batches", "2"]
        tags = ("train/loss", "train/lr", "train/tokens_per_second", "eval/val_loss_per_byte")
        eval_tag, metric_tag = "eval/val_loss_per_byte", "hparam/val_loss_per_byte"
        histogram_tag, text_tag, image_tag = "weights/wte.weight", "sample/text_summary", None
    else:
        steps_per_epoch, epochs, every = 30, 2, 5
        last, evals = steps_per_epoch * epochs, [steps_per_epoch, 2 * steps_per_epoch]
        command = [exe, "--model", "mlp", "--device", "cpu", "--data", args[1], "--epochs",
                   str(epochs), "--limit-train", str(steps_per_epoch * 100), "--batch-size", "100",
                   "--limit-test", "500", "--profile", os.path.join(work, "trace.json"),
                   "--profile-schedule", "1,1,2"]
        tags = ("train/loss", "train/accuracy", "train/lr", "train/samples_per_second",
                "epoch/train_loss", "epoch/test_accuracy", "epoch/seconds")
        eval_tag, metric_tag = "epoch/test_accuracy", "hparam/test_accuracy"
        histogram_tag, text_tag, image_tag = "weights/1.weight", "test/predictions/text_summary", \
            "test/images"
    subprocess.run(command + ["--out", os.path.join(work, "out"), "--tensorboard", log,
                              "--log-every", str(every)], check=True, stdout=subprocess.DEVNULL)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    if not lm:
        # --profile with --tensorboard: the window's trace also in TensorBoard's profile folder.
        traces = glob.glob(os.path.join(log, "plugins", "profile", "*", "*.trace.json.gz"))
        check(len(traces) == 1, f"profile traces {traces}")
        if traces:
            with gzip.open(traces[0], "rt") as f:
                events = json.load(f)["traceEvents"]
            steps = [e for e in events if e["name"] == "train step"]
            check(len(steps) == 2, f"{len(steps)} train steps in the profile window, not 2")
            check(any(e["cat"] == "backward" and e["name"] == "linear backward" for e in events),
                  "no linear backward in the trace")
    acc = ea.EventAccumulator(log, size_guidance={ea.SCALARS: 0})
    acc.Reload()
    want_loss = [(e.step, e.value) for e in acc.Scalars("train/loss")]

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", log,
                               "--host", "127.0.0.1", "--port", str(port), "--load_fast=false",
                               "--reload_interval", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    try:
        served = {}
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                served = get(port, "/data/plugin/scalars/tags")
                if "." in served and "hparams" in served:
                    break
            except OSError:
                pass
            if server.poll() is not None:
                sys.exit(f"tensorboard exited {server.returncode}:\n{server.stdout.read()}")
            time.sleep(0.5)
        check("." in served, f"the server lists no run: {served}")
        run_tags = set(served.get(".", {}))
        for tag in tags:
            check(tag in run_tags, f"scalar tag {tag} missing: {sorted(run_tags)}")
        points = get(port, "/data/plugin/scalars/scalars", run=".", tag="train/loss")
        got_loss = [(p[1], p[2]) for p in points]
        check(got_loss == want_loss, f"train/loss over HTTP {got_loss[:3]}... vs files "
                                     f"{want_loss[:3]}...")
        check([s for s, _ in got_loss] == list(range(every, last + 1, every)),
              f"train/loss steps {[s for s, _ in got_loss]}")
        check(all(v > 0 for _, v in got_loss), "a loss that is not positive")
        figures = get(port, "/data/plugin/scalars/scalars", run=".", tag=eval_tag)
        check([p[1] for p in figures] == evals and all(0 < p[2] < 10 for p in figures),
              f"{eval_tag} {figures}")
        metric = get(port, "/data/plugin/scalars/scalars", run="hparams", tag=metric_tag)
        check(len(metric) == 1 and abs(metric[0][2] - figures[-1][2]) < 1e-6,
              f"{metric_tag} {metric} vs the last evaluation's {figures[-1:]}")
        histograms = get(port, "/data/plugin/histograms/tags").get(".", {})
        grad_tag = histogram_tag.replace("weights/", "grads/")
        check(histogram_tag in histograms and grad_tag in histograms,
              f"histogram tags {sorted(histograms)}")
        if image_tag:
            images = get(port, "/data/plugin/images/tags").get(".", {})
            check(image_tag in images, f"image tags {sorted(images)}")
        texts = get(port, "/data/plugin/text/tags")
        check(text_tag in texts.get(".", []), f"text tags {texts}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"{len(want_loss)} loss points over HTTP; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
