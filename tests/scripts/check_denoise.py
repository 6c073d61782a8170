#!/usr/bin/env python3
"""The denoise example trains: a falling test loss and its sample grids in TensorBoard.

Runs examples/denoise.cpp for a short while on the CPU (a narrower U-Net, a subset of the
training pictures) and requires the test loss at noise level 0.5 to fall below half its start
and below the noisy pictures' own error (0.25); then reads the run's event file with TensorBoard's
own reader: the test losses as scalars and one sample grid (clean, noisy and denoised rows of 8
pictures, 3 x 30 + 8 pixels high) per evaluation. Exit 77 (skipped) without the tensorboard
package.

  check_denoise.py DENOISE_EXE DATA_DIR WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"skipped: {e} (pip install tensorboard)")
    sys.exit(77)


def main():
    exe, data, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cmd = [exe, "--device", "cpu", "--data", data, "--logdir", work, "--steps", "60",
           "--log-every", "30", "--width", "16", "--batch-size", "32", "--limit-train", "4000"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(out.stdout + out.stderr)
    if out.returncode != 0:
        sys.exit(f"denoise exited {out.returncode}")
    done = re.search(r"done: test loss ([0-9.]+), from ([0-9.]+)", out.stdout)
    if not done:
        sys.exit("no final line")
    final, start = float(done.group(1)), float(done.group(2))
    if not (final < 0.5 * start and final < 0.25):
        sys.exit(f"the test loss did not fall enough: {start} -> {final}")
    runs = [d for d in os.listdir(work) if os.path.isdir(os.path.join(work, d))]
    if len(runs) != 1 or "denoise" not in runs[0]:
        sys.exit(f"expected one run folder, got {runs}")
    acc = EventAccumulator(os.path.join(work, runs[0]), size_guidance={"images": 0})
    acc.Reload()
    tags = acc.Tags()
    steps = [e.step for e in acc.Scalars("loss/test")]
    if steps != [0, 30, 60]:
        sys.exit(f"loss/test at steps {steps}")
    images = acc.Images("samples")
    if [i.step for i in images] != [0, 30, 60]:
        sys.exit(f"sample grids at steps {[i.step for i in images]} (tags {tags})")
    # make_grid of 24 pictures, 8 a row, 2 pixels of padding: 3 rows of 30, plus 2.
    if (images[-1].height, images[-1].width) != (92, 242):
        sys.exit(f"a sample grid of {images[-1].height} x {images[-1].width}")
    print(f"test loss {start:.4f} -> {final:.4f}; {len(images)} sample grids")


if __name__ == "__main__":
    main()
