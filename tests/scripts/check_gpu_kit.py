#!/usr/bin/env python3
"""Checks the GPU check kit's parts that run without a GPU (CTest `GpuCheckKit`, label `scripts`):
the relocatable test list of scripts/lib/bundle_tests.py, run by ctest from a moved folder; the
bundle's runner (scripts/lib/bundle_run.sh) and its choice of libraries; its entry point
(scripts/lib/bundle_unpack.sh) unpacking the archive and the data set's archive beside it; the summaries of junit_summary.py and bench_digest.py; scripts/gpu_check.sh refusing to start without a
GPU (that part is skipped where a GPU is present)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.path.join(REPO, "scripts", "lib")
failures = []


def check(name, ok, detail=""):
    print("%-55s %s" % (name, "ok" if ok else "FAILED " + detail))
    if not ok:
        failures.append(name)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def bundle_tests(tmp):
    # A build folder with two executables and a listing naming them by absolute path.
    build = os.path.join(tmp, "old", "build")
    source = os.path.join(tmp, "old", "src")
    os.makedirs(build)
    os.makedirs(source)
    for folder, name, text in [(build, "hello.sh", 'echo "hello from $(pwd) $1 $GREETING"'),
                               (build, "skipper.sh", "echo '[  SKIPPED ] no device'")]:
        with open(os.path.join(folder, name), "w") as f:
            f.write("#!/bin/sh\n" + text + "\n")
        os.chmod(os.path.join(folder, name), 0o755)
    with open(os.path.join(source, "data.txt"), "w") as f:
        f.write("x")
    listing = {"kind": "ctestInfo", "tests": [
        {"name": "Suite.Hello", "command": [os.path.join(build, "hello.sh"),
                                            os.path.join(source, "data.txt")],
         "properties": [{"name": "LABELS", "value": ["gpu"]},
                        {"name": "ENVIRONMENT", "value": ["GREETING=hi", "OTHER=1"]},
                        {"name": "PASS_REGULAR_EXPRESSION", "value": ["hello from .*/new/build .*/new/source/data.txt hi"]},
                        {"name": "WORKING_DIRECTORY", "value": build},
                        {"name": "TIMEOUT", "value": 60}]},
        {"name": "Suite.Skip", "command": [os.path.join(build, "skipper.sh")],
         "properties": [{"name": "SKIP_REGULAR_EXPRESSION", "value": ["\\[  SKIPPED \\]"]}]},
        # A ';' inside an argument stays inside it (a shell command line split there would
        # never print "two").
        {"name": "Suite.Semicolon", "command": ["sh", "-c", "echo one; echo two"],
         "properties": [{"name": "PASS_REGULAR_EXPRESSION", "value": ["two"]}]},
        {"name": "Package", "command": ["/usr/bin/mpiexec", "-n", "2", "x"],
         "properties": [{"name": "LABELS", "value": ["package"]}]},
        {"name": "Dist", "command": ["/usr/bin/mpiexec", "-n", "1", "true"], "properties": []},
    ]}
    out = os.path.join(build, "CTestTestfile.cmake")
    r = run([sys.executable, os.path.join(LIB, "bundle_tests.py"), "--build", build, "--source",
             source, "--data", "/usr/share/datasets/fashion-mnist", "--exclude-label", "package",
             "--mpiexec", "/usr/bin/mpiexec", "--out", out], input=json.dumps(listing))
    check("bundle_tests.py runs", r.returncode == 0, r.stderr)
    text = open(out).read() if os.path.exists(out) else ""
    check("bundle_tests.py leaves no absolute build path", build not in text and source not in text,
          text)
    check("bundle_tests.py drops excluded labels", "Package" not in text, text)
    check("bundle_tests.py calls mpiexec by name", '"mpiexec" "-n" "1"' in text, text)
    if not shutil.which("ctest"):
        print("ctest not found: the relocated run is skipped")
        return
    # Moved elsewhere, the suite runs from its new place.
    shutil.move(os.path.join(tmp, "old"), os.path.join(tmp, "new"))
    os.rename(os.path.join(tmp, "new", "src"), os.path.join(tmp, "new", "source"))
    r = run(["ctest", "--test-dir", os.path.join(tmp, "new", "build"), "-R", "Suite",
             "--output-on-failure"])
    check("relocated suite passes", r.returncode == 0, r.stdout + r.stderr)
    check("relocated suite reports the skip", "Suite.Skip (Skipped)" in r.stdout, r.stdout)


def bundle_runner(tmp):
    # A bundle's layout: the runner, a library the machine has and one it lacks, an executable.
    root = os.path.join(tmp, "sinter-gpu")
    os.makedirs(os.path.join(root, "lib"))
    os.makedirs(os.path.join(root, "build", "tests"))
    shutil.copy(os.path.join(LIB, "bundle_run.sh"), os.path.join(root, "run"))
    for name in ("libc.so.6", "libsinter-test-absent.so.7"):
        open(os.path.join(root, "lib", name), "w").close()
    exe = os.path.join(root, "build", "tests", "probe")
    with open(exe, "w") as f:
        f.write('#!/bin/sh\necho "probe $1 LD=$LD_LIBRARY_PATH SRC=$SINTER_SOURCE_DIR"\n')
    os.chmod(exe, 0o755)
    runner = ["bash", os.path.join(root, "run")]
    r = run(runner + ["--root"])
    check("bundle runner names its folder", r.stdout.strip() == os.path.realpath(root), r.stdout)
    r = run(runner + ["probe", "x"])
    check("bundle runner finds an executable by name", r.stdout.startswith("probe x "), r.stderr)
    missing = os.path.join(os.path.realpath(root), "lib-missing")
    check("bundle runner puts the missing libraries first on the path",
          ("LD=%s:%s/build" % (missing, os.path.realpath(root))) in r.stdout, r.stdout)
    check("bundle runner sets the source folder",
          "SRC=%s/source" % os.path.realpath(root) in r.stdout, r.stdout)
    linked = sorted(os.listdir(missing)) if os.path.isdir(missing) else []
    if shutil.which("ldconfig") or os.path.exists("/sbin/ldconfig"):  # as the runner looks
        check("bundle runner links only what the machine lacks",
              linked == ["libsinter-test-absent.so.7"], str(linked))


def bundle_unpack(tmp):
    # DIR (the entry point, BUNDLE.txt, an archive whose runner echoes) and DIR.data beside it.
    stage = os.path.join(tmp, "stage")
    os.makedirs(os.path.join(stage, "sinter-gpu"))
    os.makedirs(os.path.join(stage, "data", "fashion-mnist"))
    with open(os.path.join(stage, "sinter-gpu", "run"), "w") as f:
        f.write('#!/bin/sh\necho "runner $1"\n')
    os.chmod(os.path.join(stage, "sinter-gpu", "run"), 0o755)
    with open(os.path.join(stage, "data", "fashion-mnist", "train-labels-idx1-ubyte"), "w") as f:
        f.write("labels")
    bundle = os.path.join(tmp, "bundle")
    os.makedirs(bundle)
    os.makedirs(bundle + ".data")
    for archive, what in ((os.path.join(bundle, "sinter-gpu.tar.xz"), "sinter-gpu"),
                          (os.path.join(bundle + ".data", "fashion-mnist.tar.xz"), "data")):
        r = run(["tar", "-C", stage, "-cJf", archive, what])
        check("tar packs the bundle's %s" % what, r.returncode == 0, r.stderr)
    with open(os.path.join(bundle, "BUNDLE.txt"), "w") as f:
        f.write("archive sha256: 0123456789abcdef0123\n")
    shutil.copy(os.path.join(LIB, "bundle_unpack.sh"), os.path.join(bundle, "run"))
    root = os.path.join(tmp, "unpacked")
    env = dict(os.environ, SINTER_BUNDLE_ROOT=root)
    r = run(["bash", os.path.join(bundle, "run"), "x"], env=env)
    check("bundle entry point hands the command to the runner", r.stdout == "runner x\n",
          r.stdout + r.stderr)
    labels = os.path.join(root, "data", "fashion-mnist", "train-labels-idx1-ubyte")
    check("bundle entry point unpacks the data set beside the build", os.path.exists(labels))
    # Without DIR.data the code still runs (the train stage then reports the data missing).
    shutil.rmtree(root)
    shutil.rmtree(bundle + ".data")
    r = run(["bash", os.path.join(bundle, "run"), "y"], env=env)
    check("bundle entry point runs without the data set",
          r.stdout == "runner y\n" and not os.path.exists(os.path.join(root, "data")),
          r.stdout + r.stderr)


def junit_summary(tmp):
    path = os.path.join(tmp, "j.xml")
    with open(path, "w") as f:
        f.write("""<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="x" tests="3" failures="1" skipped="1">
 <testcase name="A.Ok" status="run"><system-out>fine</system-out></testcase>
 <testcase name="A.Skip" status="run"><skipped message="skipped"/></testcase>
 <testcase name="A.Bad" status="fail"><failure message="Failed"/>
  <system-out>noise
/src/t.cpp:12: Failure
Expected equality of these values:
  a
    Which is: 1</system-out></testcase>
</testsuite>""")
    r = run([sys.executable, os.path.join(LIB, "junit_summary.py"), "gpu tests", path])
    check("junit_summary.py counts", r.stdout.startswith(
        "gpu tests: 1 passed, 1 failed, 1 skipped (3 tests)"), r.stdout)
    check("junit_summary.py shows the failure", "FAILED A.Bad" in r.stdout and
          "t.cpp:12: Failure" in r.stdout and "noise" not in r.stdout, r.stdout)
    r = run([sys.executable, os.path.join(LIB, "junit_summary.py"), "x", path + ".missing"])
    check("junit_summary.py without a file", r.returncode == 1 and "no result file" in r.stdout,
          r.stdout)


def bench_digest(tmp):
    path = os.path.join(tmp, "gemm.json")
    rows = [{"name": "gemm/bf16/auto/square/nt_m4096_k4096_n4096", "metric": "TFLOP/s",
             "sinter": 600.0, "reference": "cuBLAS", "reference_value": 750.0, "ratio": 0.8,
             "status": "ok"},
            {"name": "gemm/bf16/auto/mlp/nt_m256_k784_n256", "metric": "TFLOP/s", "sinter": 10.0,
             "reference": "cuBLAS", "reference_value": 5.0, "ratio": 2.0, "status": "ok"},
            {"name": "gemm/tf32/wgmma/mlp/tn", "metric": "", "sinter": None, "reference": "",
             "reference_value": None, "ratio": None, "status": "skipped: layout"},
            {"name": "gemm/f32/simt/x", "metric": "", "sinter": None, "reference": "",
             "reference_value": None, "ratio": None, "status": "FAILED: max error 3"}]
    with open(path, "w") as f:
        json.dump({"program": "bench_gemm", "rows": rows}, f)
    tables = os.path.join(tmp, "tables.md")
    r = run([sys.executable, os.path.join(LIB, "bench_digest.py"), "--headline", "/square/",
             "--tables", tables, path])
    out = r.stdout
    check("bench_digest.py counts", "bench_gemm: 2 ok, 1 skipped, 1 FAILED" in out, out)
    check("bench_digest.py geomean and lowest",
          "geomean 1.265, lowest 0.800 (gemm/bf16/auto/square/" in out, out)
    check("bench_digest.py lists failures and headlines",
          "max error 3" in out and "m4096" in out and "m256" not in out, out)
    check("bench_digest.py writes every row to the tables",
          os.path.exists(tables) and open(tables).read().count("\n| gemm/") == 4)


def gpu_check_without_gpu(tmp):
    smi = run(["sh", "-c", "nvidia-smi -L 2>/dev/null | grep '^GPU '"])
    if smi.returncode == 0:
        print("a GPU is present: the no-GPU check of gpu_check.sh is skipped")
        return
    r = run(["bash", os.path.join(REPO, "scripts", "gpu_check.sh"), "--bundle",
             os.path.join(tmp, "nowhere"), "--stage", "tests", os.path.join(tmp, "out")],
            timeout=60)
    check("gpu_check.sh without a GPU exits 3", r.returncode == 3, "exit %d" % r.returncode)
    check("gpu_check.sh without a GPU says so", "no NVIDIA GPU" in r.stderr, r.stderr)
    check("gpu_check.sh without a GPU writes nothing", not os.path.exists(os.path.join(tmp, "out")))
    r = run(["bash", os.path.join(REPO, "scripts", "gpu_check.sh"), "--stage", "nonsense", "o"])
    check("gpu_check.sh rejects an unknown stage", r.returncode == 2, "exit %d" % r.returncode)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for part in (bundle_tests, bundle_runner, bundle_unpack, junit_summary, bench_digest,
                     gpu_check_without_gpu):
            sub = os.path.join(tmp, part.__name__)
            os.makedirs(sub)
            part(sub)
    print("%d check(s) failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
