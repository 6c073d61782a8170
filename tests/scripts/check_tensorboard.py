#!/usr/bin/env python3
"""SummaryWriter's event files read by the tensorboard package.

Runs summary_dump, which logs every kind of summary, and reads the folder back with TensorBoard's
event accumulator: scalar values and steps (NaN and inf as written), add_scalars' runs, the
histogram (bucket counts summing to the element count, each bucket holding exactly the values
between its limits in TensorBoard's default layout), the images (decoded, pixel for pixel against
the formula summary_dump uses), the text and the HParams session. Exit 77 (skipped) without the
package (pip install tensorboard).

  check_tensorboard.py SUMMARY_DUMP WORK_DIR
"""
import io
import math
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.plugins.hparams import plugin_data_pb2
    from tensorboard.util import tensor_util
except ImportError as e:
    print(f"skipped: {e} (pip install tensorboard numpy)")
    sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def load(folder):
    acc = ea.EventAccumulator(folder, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.IMAGES: 0,
                                                     ea.TENSORS: 0})
    acc.Reload()
    return acc


def default_limits():
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return [-x for x in reversed(pos)] + [0.0] + pos


def pixels_chw():
    return np.array([[[((7 * c + 3 * y + x) % 11) for x in range(5)] for y in range(6)]
                     for c in range(3)], dtype=np.float32) / np.float32(10)


def decode(image_event):
    from PIL import Image  # tensorboard's dependency
    return np.asarray(Image.open(io.BytesIO(image_event.encoded_image_string)))


def main():
    dump, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([dump, work], check=True)
    log = os.path.join(work, "log")
    acc = load(log)
    tags = acc.Tags()

    loss = acc.Scalars("train/loss")
    check([e.step for e in loss] == list(range(10)), f"loss steps {[e.step for e in loss]}")
    check(all(abs(e.value - 1.0 / (e.step + 1)) < 1e-7 for e in loss), "loss values")
    special = [e.value for e in acc.Scalars("special")]
    check(len(special) == 3 and math.isnan(special[0]) and special[1] == math.inf
          and special[2] == -math.inf, f"NaN and inf scalars: {special}")
    for key, factor in (("a", 1), ("b", 2)):
        run = load(os.path.join(log, "lr_" + key)).Scalars("lr")
        check([(e.step, e.value) for e in run] == [(s, float(factor * s)) for s in range(3)],
              f"add_scalars run lr_{key}: {[(e.step, e.value) for e in run]}")

    h = acc.Histograms("weights")[0]
    hv = h.histogram_value
    values = np.loadtxt(os.path.join(work, "histogram.txt")).astype(np.float32).astype(np.float64)
    counts, limits = list(hv.bucket), list(hv.bucket_limit)
    check(h.step == 5, f"histogram step {h.step}")
    check(sum(counts) == values.size == hv.num == 1000, f"bucket counts sum to {sum(counts)}")
    check(hv.min == values.min() and hv.max == values.max(), "histogram min and max")
    check(abs(hv.sum - values.sum()) < 1e-9 * values.size, "histogram sum")
    check(abs(hv.sum_squares - (values ** 2).sum()) < 1e-9 * (values ** 2).sum(), "sum_squares")
    default = set(default_limits())
    check(all(lim in default for lim in limits), "limits outside TensorBoard's default layout")
    for i, (lim, n) in enumerate(zip(limits, counts)):
        left = limits[i - 1] if i else -math.inf
        inside = int(((values >= left) & (values < lim)).sum())
        check(inside == n, f"bucket {i} [{left}, {lim}) holds {inside} values, written {n}")
    check(all(a or b for a, b in zip(counts, counts[1:])), "a run of empty buckets not merged")
    check(counts[0] and counts[-1], "empty buckets at the ends")

    want = np.clip(pixels_chw() * np.float32(255), 0, 255).astype(np.uint8).transpose(1, 2, 0)
    chw = acc.Images("image/chw")[0]
    check((chw.width, chw.height, chw.step) == (5, 6, 1), f"image size {chw.width}x{chw.height}")
    check(np.array_equal(decode(chw), want), "image/chw pixels")
    u8 = acc.Images("image/hwc_u8")[0]
    want_u8 = (np.array([[[((7 * c + 3 * y + x) % 11) * 20 for c in range(3)] for x in range(5)]
                         for y in range(6)])).astype(np.uint8)
    check(np.array_equal(decode(u8), want_u8), "image/hwc_u8 pixels")
    grid = acc.Images("image/grid")[0]
    check((grid.width, grid.height) == (2 * 6 + 1, 2 * 7 + 1), f"grid {grid.width}x{grid.height}")
    g = decode(grid)
    check(np.array_equal(g[1:7, 1:6], want) and np.array_equal(g[8:14, 1:6], want)
          and not g[8:14, 7:12].any(), "grid tiles")

    text = acc.Tensors("sample/text_summary")[0]
    check(tensor_util.make_ndarray(text.tensor_proto).tolist() == [b"**once** upon a time"],
          "text")
    check(acc.SummaryMetadata("sample/text_summary").plugin_data.plugin_name == "text",
          "text plugin")

    session = load(os.path.join(log, "session"))
    content = session.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_start_info"]).session_start_info
    check(start.hparams["lr"].number_value == 0.001 and
          start.hparams["optimizer"].string_value == "adamw" and
          start.hparams["amp"].bool_value, f"hparams {start.hparams}")
    exp = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    check(sorted(i.name for i in exp.hparam_infos) == ["amp", "lr", "optimizer"], "hparam infos")
    check([m.name.tag for m in exp.metric_infos] == ["hparam/accuracy"], "metric infos")
    end = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_end_info"]).session_end_info
    check(end.status == 1, "session end status")
    metric = session.Scalars("hparam/accuracy")
    check(len(metric) == 1 and metric[0].value == np.float32(0.875), "hparam metric")

    print(f"tags: {tags['scalars']}, {tags['histograms']}, {tags['images']}, {tags['tensors']}")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
