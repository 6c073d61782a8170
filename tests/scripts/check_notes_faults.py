#!/usr/bin/env python3
"""scripts/check_notes.py can fail (CTest `NotesCheckerCatchesPlantedFaults`): it passes a small
clean tree in a temporary folder, and on copies of it with one planted fault each (a second
definition, a stale `in PATH`, a citation of a name defined nowhere, ...) it exits non-zero with
that fault's line and no other.

  check_notes_faults.py CHECKER   (the path of scripts/check_notes.py)

The trees spell the word through NOTE, so that this file cites no Note in the real tree."""
import os
import subprocess
import sys
import tempfile


NOTE = "Note"


def note(name):
    return f"{NOTE} [{name}]"


# A tree that follows the rule: a definition of each kind of file, citations wrapped over lines,
# with and without a root-relative `in PATH`, and a build folder, which is never read.
CLEAN = {
    "src/kern/ctx.h": f"""// The kernel context.
// {note("kernel ctx")}
// Every kernel takes a context first.
struct Ctx {{}};
""",
    "src/ops/add.cpp": f"""// The add op.
// The context of {note("kernel ctx")} in src/kern/ctx.h, and the rows of
// {note("row")}. The stream of
// {NOTE} [kernel
// ctx] in
// src/kern/ctx.h.
int add();
""",
    "tests/fuzz/README.md": f"""# Fuzzing

## {note("row")}
Rows are read once.
""",
    "CMakeLists.txt": f"""# The build.
# {note("build flags")}
# One set of flags for every target; see {note("row")} in tests/fuzz/README.md.
""",
    "scripts/run.py": f'''"""Runs it ({note("build flags")} in CMakeLists.txt)."""
''',
    "build/generated.h": f"""// {note("kernel ctx")}
// A copy a build made.
""",
}

# Each fault: the files it replaces or adds, and the one line the checker must print.
FAULTS = {
    "duplicate definition": (
        {"src/ops/mul.cpp": f"// The mul op.\n// {note('kernel ctx')}\n// Again.\n"},
        f"{note('kernel ctx')} defined 2 times: src/kern/ctx.h:2, src/ops/mul.cpp:2"),
    "stale path": (
        {"src/ops/mul.cpp": f"// The mul op, as\n// {note('kernel ctx')} in src/ops/ctx.h says.\n"},
        f"stale path: src/ops/mul.cpp:2 says {note('kernel ctx')} in src/ops/ctx.h, "
        "defined in src/kern/ctx.h"),
    "path not from the root": (
        {"src/ops/mul.cpp": f"// The mul op ({note('kernel ctx')} in kern/ctx.h).\n"},
        f"stale path: src/ops/mul.cpp:1 says {note('kernel ctx')} in kern/ctx.h, "
        "defined in src/kern/ctx.h"),
    "stale path wrapped over lines": (
        {"scripts/run.sh": f"# Runs it ({NOTE} [build\n# flags] in\n# scripts/build.cmake).\n"},
        f"stale path: scripts/run.sh:1 says {note('build flags')} in scripts/build.cmake, "
        "defined in CMakeLists.txt"),
    "undefined citation": (
        {"src/ops/mul.cpp": f"// The mul op.\n\n// Per {note('ghost')}, nothing.\n"},
        f"{note('ghost')} defined 0 times, cited at src/ops/mul.cpp:3"),
    "definition with its text on its line": (
        {"src/ops/mul.cpp": f"// The mul op.\n// {note('kernel ctx')}: it takes a context.\n"},
        f"src/ops/mul.cpp:2: `{note('kernel ctx')}:` opening a comment reads as a definition: "
        "define it alone on its line, or cite it (\"Per Note [...], ...\")"),
    "definition without text": (
        {"src/kern/ctx.h": f"// The kernel context.\n// {note('kernel ctx')}\nstruct Ctx {{}};\n"},
        f"src/kern/ctx.h:2: {note('kernel ctx')} has no text on the line after it"),
}


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def run_checker(checker, files):
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        r = subprocess.run([sys.executable, checker, root], capture_output=True, text=True)
        return r.returncode, r.stdout.splitlines()


def main():
    checker = sys.argv[1]
    failures = []
    code, out = run_checker(checker, CLEAN)
    print(f"clean tree: exit {code}, {len(out)} problem lines")
    if code != 0 or out:
        failures.append(f"the clean tree failed (exit {code}): {out}")
    for fault, (files, expected) in FAULTS.items():
        code, out = run_checker(checker, {**CLEAN, **files})
        print(f"{fault}: exit {code}: {out}")
        if code == 0 or out != [expected]:
            failures.append(f"{fault}: exit {code}, printed {out}; expected a non-zero exit and "
                            f"exactly [{expected!r}]")
    for line in failures:
        print("FAIL", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
