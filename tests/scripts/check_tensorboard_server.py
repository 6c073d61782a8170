#!/usr/bin/env python3
"""The examples' --tensorboard, served by TensorBoard itself: two runs into one folder stay apart.

fashion_mnist: trains the mlp for two short epochs with --tensorboard and --log-every 5, twice into
the same folder with another --lr and --seed; lm (with --lm): a tiny GPT for 20 steps with
--log-every 2, twice the same way. Each run must get a folder of its own in the log folder, named
<Mon><DD>_<HH>-<MM>-<SS>_<host>_<model> (Note [run folders] in src/summary/summary_writer.cpp), with
its HParams session inside it, and the second run must say where it went. Then the TensorBoard
server on the log folder (its Python loader, on a free local port) is read through its HTTP API:
exactly the two runs and their HParams sessions; for each run the scalar tags, every
train/step_loss point (one per --log-every steps from step 0, against the run's event files read by
the event accumulator, the two runs' curves different), the evaluation figures, the histogram tags,
the images (fashion_mnist), the text (predictions, or the generated sample); and the HParams
plugin's session groups: one per run, each with that run's --lr and its last evaluation as its
metric. The first fashion_mnist run also has --profile and --profile-schedule 1,1,2: its trace of
two steps, backward nodes among its ops, threads named (Note [trace thread names] in
src/profiler/profiler.cpp), is where TensorBoard's profile plugin looks, in the run's folder. Exit
77 (skipped) without the tensorboard package.

  check_tensorboard_server.py FASHION_MNIST DATA WORK_DIR
  check_tensorboard_server.py --lm LM WORK_DIR
"""
import glob
import gzip
import json
import os
import re
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
    from tensorboard.backend.event_processing import plugin_asset_util
except ImportError as e:
    print(f"skipped: {e} (pip install tensorboard)")
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, body=None, **query):
    url = f"http://127.0.0.1:{port}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read())


def main():
    lm = sys.argv[1] == "--lm"
    args = sys.argv[2:] if lm else sys.argv[1:]
    exe, work = args[0], args[-1]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    log = os.path.join(work, "tb")
    if lm:
        model, every, last, evals = "gpt", 2, 20, [10, 20]
        command = [exe, "--device", "cpu", "--layers", "1", "--heads", "2", "--width", "32",
                   "--context", "32", "--batch-size", "8", "--steps", str(last), "--warmup", "2",
                   "--eval-interval", "10", "--eval-batches", "2"]
        runs = [["--lr", "0.003"], ["--lr", "0.001", "--seed", "1"]]
        tags = ("train/step_loss", "train/lr", "train/tokens_per_second",
                "eval/val_loss_per_byte")
        eval_tag, metric_tag = "eval/val_loss_per_byte", "hparam/val_loss_per_byte"
        histogram_tag, text_tag, image_tag = "weights/wte.weight", "sample/text_summary", None
    else:
        model, steps_per_epoch, epochs, every = "mlp", 30, 2, 5
        last, evals = steps_per_epoch * epochs, [steps_per_epoch, 2 * steps_per_epoch]
        command = [exe, "--model", model, "--device", "cpu", "--data", args[1], "--epochs",
                   str(epochs), "--limit-train", str(steps_per_epoch * 100), "--batch-size", "100",
                   "--limit-test", "500"]
        runs = [["--lr", "0.01", "--profile", os.path.join(work, "trace.json"),
                 "--profile-schedule", "1,1,2"],
                ["--lr", "0.05", "--seed", "1"]]
        tags = ("train/step_loss", "train/step_accuracy", "train/lr", "train/samples_per_second",
                "epoch/train_loss", "epoch/test_accuracy", "epoch/seconds")
        eval_tag, metric_tag = "epoch/test_accuracy", "hparam/test_accuracy"
        histogram_tag, text_tag, image_tag = "weights/1.weight", "test/predictions/text_summary", \
            "test/images"
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    # Two runs, one after the other, into the same --tensorboard folder: each prints its folder.
    names = []
    for k, extra in enumerate(runs):
        out = subprocess.run(command + extra + ["--out", os.path.join(work, f"out{k}"),
                                                "--tensorboard", log, "--log-every", str(every)],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        went = re.findall(r"^tensorboard: (.+) \(tensorboard --logdir (.+)\)$", out, re.M)
        check(len(went) == 1 and os.path.dirname(went[0][0]) == log and went[0][1] == log,
              f"run {k}: where its events went: {went}")
        names.append(os.path.basename(went[0][0]) if went else f"run{k}")
        told = f"tensorboard: {log} holds earlier runs; this run goes to {log}/{names[-1]}"
        check((told in out) == (k > 0), f"run {k}: {'no' if k else 'a'} line '{told}':\n{out}")
    host = socket.gethostname()
    pattern = r"[A-Z][a-z]{2}\d\d_\d\d-\d\d-\d\d_" + re.escape(host) + "_" + model + r"(_\d+)?"
    for name in names:
        check(re.fullmatch(pattern, name), f"run folder {name} is not <Mon><DD>_<time>_{host}_"
                                           f"{model}")
    check(names[0] != names[1] and sorted(os.listdir(log)) == sorted(names),
          f"the log folder holds {sorted(os.listdir(log))}, not the two runs {names}")
    if failures:
        return 1  # the rest reads the two run folders

    if not lm:
        # --profile with --tensorboard: the window's trace in the first run's profile folder, as
        # the profile plugin lists it (<run>/plugins/profile/<session>/<host>.trace.json.gz).
        run_dir = os.path.join(log, names[0])
        sessions = plugin_asset_util.ListAssets(run_dir, "profile")
        check(len(sessions) == 1, f"profile sessions of {names[0]}: {sessions}")
        traces = glob.glob(os.path.join(plugin_asset_util.PluginDirectory(run_dir, "profile"),
                                        "*", host + ".trace.json.gz"))
        check(len(traces) == 1, f"profile traces {traces}")
        check(not os.path.exists(os.path.join(log, "plugins")), "a profile outside the runs")
        if traces:
            with gzip.open(traces[0], "rt") as f:
                events = json.load(f)["traceEvents"]
            steps = [e for e in events if e["name"] == "train step"]
            check(len(steps) == 2, f"{len(steps)} train steps in the profile window, not 2")
            check(any(e.get("cat") == "backward" and e["name"] == "linear backward"
                      for e in events), "no linear backward in the trace")
            thread_names = {e["tid"]: e["args"]["name"] for e in events
                            if e["ph"] == "M" and e["name"] == "thread_name"}
            process = [e["args"]["name"] for e in events if e["name"] == "process_name"]
            check(process == ["sinter"], f"process_name {process}")
            check(all(thread_names.get(e["tid"]) == "main thread" for e in steps),
                  f"the steps' thread is not named the main thread: {thread_names}")
    want_loss = []
    for name in names:
        acc = ea.EventAccumulator(os.path.join(log, name), size_guidance={ea.SCALARS: 0})
        acc.Reload()
        want_loss.append([(e.step, e.value) for e in acc.Scalars("train/step_loss")])
    check(want_loss[0] != want_loss[1], "the two runs logged the same losses")

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", log,
                               "--host", "127.0.0.1", "--port", str(port), "--load_fast=false",
                               "--reload_interval", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    want_runs = sorted(names + [n + "/hparams" for n in names])
    try:
        served = {}
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                served = get(port, "/data/plugin/scalars/tags")
                if sorted(served) == want_runs:
                    break
            except OSError:
                pass
            if server.poll() is not None:
                sys.exit(f"tensorboard exited {server.returncode}:\n{server.stdout.read()}")
            time.sleep(0.5)
        check(sorted(served) == want_runs, f"the server's runs {sorted(served)}, not {want_runs}")
        last_eval = []
        for name, want in zip(names, want_loss):
            run_tags = set(served.get(name, {}))
            for tag in tags:
                check(tag in run_tags, f"{name}: scalar tag {tag} missing: {sorted(run_tags)}")
            points = get(port, "/data/plugin/scalars/scalars", run=name, tag="train/step_loss")
            got_loss = [(p[1], p[2]) for p in points]
            check(got_loss == want, f"{name}: train/step_loss over HTTP {got_loss[:3]}... vs "
                                    f"files {want[:3]}...")
            # From step 0 (the initial model's loss), each step once: no other run's points.
            check([s for s, _ in got_loss] == list(range(0, last, every)),
                  f"{name}: train/step_loss steps {[s for s, _ in got_loss]}")
            check(all(v > 0 for _, v in got_loss), f"{name}: a loss that is not positive")
            figures = get(port, "/data/plugin/scalars/scalars", run=name, tag=eval_tag)
            check([p[1] for p in figures] == evals and all(0 < p[2] < 10 for p in figures),
                  f"{name}: {eval_tag} {figures}")
            last_eval.append(figures[-1][2] if figures else None)
            metric = get(port, "/data/plugin/scalars/scalars", run=name + "/hparams",
                         tag=metric_tag)
            check(len(metric) == 1 and last_eval[-1] is not None
                  and abs(metric[0][2] - last_eval[-1]) < 1e-6,
                  f"{name}: {metric_tag} {metric} vs the last evaluation's {figures[-1:]}")
            histograms = get(port, "/data/plugin/histograms/tags").get(name, {})
            grad_tag = histogram_tag.replace("weights/", "grads/")
            check(histogram_tag in histograms and grad_tag in histograms,
                  f"{name}: histogram tags {sorted(histograms)}")
            if image_tag:
                images = get(port, "/data/plugin/images/tags").get(name, {})
                check(image_tag in images, f"{name}: image tags {sorted(images)}")
            texts = get(port, "/data/plugin/text/tags")
            check(text_tag in texts.get(name, []), f"{name}: text tags {texts}")

        # The HParams table: one session per run, each with its own --lr and final metric.
        groups = get(port, "/data/plugin/hparams/session_groups", body={
            "experimentName": "", "startIndex": 0, "sliceSize": 100,
            "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                                "STATUS_RUNNING"],
            "colParams": [{"hparam": "lr", "includeInResult": True},
                          {"metric": {"tag": metric_tag}, "includeInResult": True}]})
        sessions = {s["name"]: (g["hparams"].get("lr"),
                                [m["value"] for m in s["metricValues"]
                                 if m["name"]["tag"] == metric_tag])
                    for g in groups.get("sessionGroups", []) for s in g["sessions"]}
        want_sessions = {n + "/hparams": (float(run[1]), [v]) for n, run, v in
                         zip(names, runs, last_eval)}
        check(set(sessions) == set(want_sessions),
              f"HParams sessions {sorted(sessions)}, not {sorted(want_sessions)}")
        for session, (lr, metrics) in want_sessions.items():
            got = sessions.get(session)
            check(got is not None and abs(got[0] - lr) < 1e-12 and len(got[1]) == 1
                  and metrics[0] is not None and abs(got[1][0] - metrics[0]) < 1e-6,
                  f"HParams session {session}: lr and {metric_tag} {got}, not {lr} and "
                  f"{metrics}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"{sum(len(w) for w in want_loss)} loss points of 2 runs over HTTP; "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
