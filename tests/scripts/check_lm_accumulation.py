#!/usr/bin/env python3
"""lm's gradient accumulation and data parallelism against the single large batch.

Three runs of lm read the same 16 windows of 32 tokens per step: one micro-batch of 16; four
micro-batches of 4 accumulated with --batch-tokens 512; and, where mpirun is found, two --ddp
ranks of two micro-batches of 4 each (no_sync before the last), once with the optimizer
replicated, once sharded (--zero 2: the AdamW state and the gradients split over the ranks) and
once fully sharded (--fsdp: the parameters too, each layer gathered around its forward and
backward); two ranks of one tensor-parallel group (--tp 2: every layer split over them, both
reading the same four micro-batches); and four ranks as fsdp 2 x tp 2. Their metrics.csv must
agree to 1e-6 relative: the training loss of each of the three steps (the mean over the same
tokens; with --ddp, over the ranks) and the validation loss after each (the same 16 windows in
every run). Last, a GPT with dropout in one process and split over two ranks (--tp 2) must agree
alike: its masks are drawn as one process draws them.
The first step's loss comes before any update; the later ones and the validation losses follow
the updates, which agree when the accumulated gradients equal the large batch's.

  check_lm_accumulation.py LM_EXE WORK_DIR [MPIEXEC]
"""
import csv
import os
import shutil
import subprocess
import sys


def run(cmd, work, name, gpt=False):
    out = os.path.join(work, name)
    model = (["--model", "gpt", "--heads", "2"] if gpt else
             ["--model", "llama", "--tokenizer", "bpe", "--vocab", "512", "--heads", "4",
              "--kv-heads", "2"])
    args = ["--device", "cpu"] + model + [
        "--layers", "2", "--width", "32", "--context", "32", "--steps", "3", "--warmup", "1",
        "--eval-interval", "1", "--out", out]
    subprocess.run(cmd + args, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def main():
    exe, work = sys.argv[1:3]
    mpiexec = sys.argv[3] if len(sys.argv) > 3 else ""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # The same 16 validation windows in every run: eval batches x batch size.
    runs = {"one batch of 16": run([exe, "--batch-size", "16", "--eval-batches", "1"], work,
                                   "single"),
            "4 accumulated batches of 4": run([exe, "--batch-size", "4", "--batch-tokens", "512",
                                               "--eval-batches", "4"], work, "accumulated")}
    if mpiexec and shutil.which(mpiexec):
        runs["2 ranks x 2 accumulated batches of 4"] = run(
            [mpiexec, "-n", "2", exe, "--ddp", "--batch-size", "4", "--batch-tokens", "512",
             "--eval-batches", "4"], work, "ddp")
        runs["the same with ZeRO-2"] = run(
            [mpiexec, "-n", "2", exe, "--ddp", "--zero", "2", "--batch-size", "4",
             "--batch-tokens", "512", "--eval-batches", "4"], work, "zero")
        runs["the same fully sharded (--fsdp)"] = run(
            [mpiexec, "-n", "2", exe, "--fsdp", "--batch-size", "4", "--batch-tokens", "512",
             "--eval-batches", "4"], work, "fsdp")
        runs["4 accumulated batches of 4, each layer split over 2 ranks (--tp 2)"] = run(
            [mpiexec, "-n", "2", exe, "--tp", "2", "--batch-size", "4", "--batch-tokens", "512",
             "--eval-batches", "4"], work, "tp")
        runs["fsdp 2 x tp 2 on 4 ranks, 2 accumulated batches of 4 each"] = run(
            [mpiexec, "-n", "4", exe, "--fsdp", "--tp", "2", "--batch-size", "4",
             "--batch-tokens", "512", "--eval-batches", "4"], work, "fsdp_tp")
    else:
        print("no mpirun: the --ddp run is left out")
    bad = compare(runs)
    if mpiexec and shutil.which(mpiexec):
        # A GPT with dropout: split over 2 ranks it draws the masks one process's run draws
        # (Note [tensor parallel dropout]).
        gpt = ["--batch-size", "8", "--eval-batches", "2", "--dropout", "0.1"]
        bad += compare({"a GPT with dropout 0.1": run([exe] + gpt, work, "gpt", gpt=True),
                        "the same split over 2 ranks (--tp 2)": run(
                            [mpiexec, "-n", "2", exe, "--tp", "2"] + gpt, work, "gpt_tp",
                            gpt=True)})
    return 1 if bad else 0


def compare(runs):
    """The number of losses of `runs` (name -> metrics rows) off the first run's by over 1e-6."""
    base_name, base = next(iter(runs.items()))
    bad = 0
    for name, rows in runs.items():
        for row, ref in zip(rows, base):
            t = float(row["train_loss"]), float(ref["train_loss"])
            if not close(*t, 1e-6):
                bad += 1
                print(f"{name}: step {row['step']} training loss {t[0]!r}, {base_name}: {t[1]!r}")
            v = float(row["val_loss"]), float(ref["val_loss"])
            if not close(*v, 1e-6):
                bad += 1
                print(f"{name}: step {row['step']} validation loss {v[0]!r}, {base_name}: {v[1]!r}")
        print(f"{name}: training losses {', '.join(r['train_loss'] for r in rows)}; validation "
              f"losses {', '.join(r['val_loss'] for r in rows)}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
