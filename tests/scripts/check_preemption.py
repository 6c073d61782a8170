#!/usr/bin/env python3
"""A trainer stopped by SIGTERM in the middle of a run, then resumed, ends where an uninterrupted
run does (Note [preemption] in examples/training.h).

Two --ddp ranks under mpirun train: lm a small GPT (dropout on, so the random stream must carry
over too), fashion_mnist the mlp (stopped inside an epoch, so the resumed run must skip the batches
done and keep the epoch's figures). Once the progress output shows the run well under way, every
rank gets SIGTERM, as Slurm signals every task of a job it is about to stop. The run must finish
the step it is in, write its checkpoint and exit with status 4; --resume then trains the rest. The
final checkpoint (weights, optimizer state, schedule, random state) must be byte-identical to the
one of the same run left alone. Without mpirun, one process is signalled instead.

  check_preemption.py EXE WORK_DIR [MPIEXEC] [--zero=N | --fsdp | --tp=N] [--ranks=N]
                      [--optimizer=NAME] [--fp8=RECIPE] [-- DATA_DIR]
  (EXE: lm or fashion_mnist)

With --zero=N (lm), the optimizer state is sharded over the ranks: each rank's shard file must
match too, and one process must resume from the shards (consolidating them). With --fsdp (lm) the
ranks train fully sharded (--fsdp instead of --ddp): each rank's file of the optimizer's
distributed checkpoint must match, and one process must resume from them; with --tp=N (lm) the
ranks train tensor parallel in groups of N (--ddp over the groups), checked alike. --ranks=N runs
N ranks (default 2). --optimizer=NAME (lm) trains with that optimizer (muon: its momentum, sharded
under --zero and --fsdp, must carry over too). --fp8=RECIPE (lm) trains the hidden Linear layers
in FP8 (the delayed recipe's amax histories, all-reduced over the ranks, must carry over too).
"""
import filecmp
import os
import re
import shutil
import signal
import subprocess
import sys
import time

# Per trainer: its arguments, the progress line after which the signal goes (a step or batch
# number at least `after`), and the line the stopped run must print.
LM = {"args": ["--device", "cpu", "--layers", "2", "--heads", "2", "--width", "32",
               "--context", "32", "--batch-size", "8", "--steps", "300", "--warmup", "5",
               "--eval-interval", "100", "--eval-batches", "1", "--dropout", "0.1", "--seed", "5"],
      "progress": r"^step (?:\[[^\]]*\] )?(\d+)/\d+", "after": 20,
      "stopped": r"stopped by signal (\d+) after step (\d+)"}
FASHION = {"args": ["--model", "mlp", "--device", "cpu", "--epochs", "2", "--limit-train",
                    "15000", "--limit-test", "1000", "--batch-size", "64", "--seed", "7"],
           "progress": r"^epoch \d+/\d+ (?:\[[^\]]*\] )?(\d+)/\d+", "after": 20,
           "stopped": r"stopped by signal (\d+) in epoch \d+ after batch (\d+)"}


def ranks_of(name, work):
    """The pids of the `name` processes whose command line names `work` (the ranks)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0].decode(errors="replace")) == name and \
                any(work.encode() in a for a in argv):
            pids.append(int(entry))
    return pids


def resume_in_one_process(exe, work, checkpoint):
    """One process resumes from a copy of `checkpoint` ("single.safetensors", whose sharded
    optimizer state the caller has put beside it); False, with the output, if it fails."""
    single = os.path.join(work, "single.safetensors")
    shutil.copy(checkpoint, single)
    done = subprocess.run([exe, "--resume", single, "--out", os.path.join(work, "single")],
                          stdout=subprocess.PIPE, text=True)
    if done.returncode != 0 or "resumed from" not in done.stdout:
        print(f"resuming the sharded checkpoint in one process failed ({done.returncode}):\n"
              f"{done.stdout}")
        return False
    return True


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    zero = [a for a in argv if a.startswith("--zero=")]
    fsdp = "--fsdp" in argv
    ranks = int(next((a.split("=")[1] for a in argv if a.startswith("--ranks=")), "2"))
    tp = next((a.split("=")[1] for a in argv if a.startswith("--tp=")), "")
    optimizer = next((a.split("=")[1] for a in argv if a.startswith("--optimizer=")), "")
    fp8 = next((a.split("=")[1] for a in argv if a.startswith("--fp8=")), "")
    argv = [a for a in argv
            if not a.startswith(("--zero=", "--ranks=", "--tp=", "--optimizer=", "--fp8="))
            and a != "--fsdp"]
    exe, work = argv[:2]
    mpiexec = argv[2] if len(argv) > 2 else ""
    name = os.path.basename(exe)
    conf = LM if name == "lm" else FASHION
    args = conf["args"] + (["--data", extra[0]] if extra else [])
    if optimizer:
        args += ["--optimizer", optimizer]
    if fp8:
        args += ["--fp8", fp8]
    if zero or fsdp or tp:
        if not (mpiexec and shutil.which(mpiexec)):
            print("no mpirun: --zero, --fsdp and --tp need ranks; skipped")
            return 77
    if tp:
        args += ["--tp", tp]
    if zero:
        args += ["--zero", zero[0].split("=")[1]]
    if name != "lm" and extra and not os.path.isdir(extra[0]):
        print(f"no Fashion-MNIST at {extra[0]}: skipped")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    launch = [exe]
    if mpiexec and shutil.which(mpiexec):
        launch = [mpiexec, "-n", str(ranks), exe, "--fsdp" if fsdp else "--ddp"]
    else:
        print("no mpirun: one process is signalled instead of two ranks")
    straight = os.path.join(work, "straight.safetensors")
    resumed = os.path.join(work, "resumed.safetensors")
    subprocess.run(launch + args + ["--save", straight, "--out", os.path.join(work, "straight")],
                   check=True, stdout=subprocess.DEVNULL)

    out_dir = os.path.join(work, "stopped")
    proc = subprocess.Popen(launch + args + ["--save", resumed, "--out", out_dir],
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    signalled = None
    lines = []
    deadline = time.time() + 240
    for line in proc.stdout:
        lines.append(line)
        # Under mpirun the ranks write to a terminal: progress bars redrawn after a carriage
        # return (a line of its own here) and erased with escape sequences.
        m = re.search(conf["progress"], re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", line).strip())
        if signalled is None and m and int(m.group(1)) >= conf["after"]:
            pids = ranks_of(name, work)
            if not pids:
                print("found no process to signal")
                proc.kill()
                return 1
            for pid in pids:
                os.kill(pid, signal.SIGTERM)
            signalled = line.strip()
            print(f"SIGTERM to {len(pids)} process(es) after the line: {signalled}")
        if time.time() > deadline:
            proc.kill()
            print("the signalled run did not end")
            return 1
    rc = proc.wait()
    text = "".join(lines)
    stop = re.search(conf["stopped"], text)
    if signalled is None or rc != 4 or not stop or int(stop.group(1)) != signal.SIGTERM:
        print(f"expected status 4 and 'stopped by signal {int(signal.SIGTERM)}' after the "
              f"signal (sent: {signalled is not None}), got status {rc}:\n{text}")
        return 1
    print(f"{stop.group(0)}, status 4; resuming")
    subprocess.run(launch + args + ["--resume", resumed, "--save", resumed, "--out", out_dir],
                   check=True, stdout=subprocess.DEVNULL)
    if not filecmp.cmp(straight, resumed, shallow=False):
        print("the resumed run's checkpoint differs from the uninterrupted run's")
        return 1
    if fsdp or tp:
        # The optimizer's state is a distributed checkpoint beside the checkpoint, a file per rank.
        for rank in range(ranks):
            a, b = (os.path.join(work, f"{stem}.optimizer", f"rank-{rank}-of-{ranks}.safetensors")
                    for stem in ("straight", "resumed"))
            if not filecmp.cmp(a, b, shallow=False):
                print(f"{b} differs from {a}")
                return 1
        # One process goes on from the ranks' pieces.
        shutil.copytree(os.path.join(work, "straight.optimizer"),
                        os.path.join(work, "single.optimizer"), dirs_exist_ok=True)
        if not resume_in_one_process(exe, work, straight):
            return 1
        print(f"one process resumed from the {ranks} ranks' pieces of the optimizer state")
    if zero:
        # The optimizer's state is in one shard per rank beside the checkpoint.
        for rank in range(2):
            a, b = (os.path.join(work, f"{stem}.optimizer.rank{rank}-of-2.safetensors")
                    for stem in ("straight", "resumed"))
            if not filecmp.cmp(a, b, shallow=False):
                print(f"{b} differs from {a}")
                return 1
        # One process goes on from the 2 ranks' shards (consolidated as it loads them).
        for rank in range(2):
            shutil.copy(os.path.join(work, f"straight.optimizer.rank{rank}-of-2.safetensors"),
                        os.path.join(work, f"single.optimizer.rank{rank}-of-2.safetensors"))
        if not resume_in_one_process(exe, work, straight):
            return 1
        print("one process resumed from the 2 ranks' optimizer shards")
    print("the resumed run ends byte for byte where the uninterrupted one does")
    return 0


if __name__ == "__main__":
    sys.exit(main())
