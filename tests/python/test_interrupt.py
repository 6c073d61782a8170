"""Ctrl-C (SIGINT) stops a training loop written in Python with KeyboardInterrupt, as with
PyTorch: every call returns to the interpreter, which then runs the handler."""

import os
import signal
import subprocess
import sys
import time

LOOP = """
import sinter, sys
model = sinter.models.mlp()
opt = sinter.optim.SGD(model.parameters(), lr=0.01)
x, y = sinter.randn(64, 1, 28, 28), sinter.randint(0, 10, (64,))
print("training", flush=True)
try:
    while True:
        opt.zero_grad()
        sinter.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""


def test_sigint_stops_a_training_loop():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-c", LOOP], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "training"
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3 and "interrupted" in out
