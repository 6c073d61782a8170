#!/usr/bin/env python3
"""Checks the named Notes of the tree at ROOT (CTest `NotesAreDefinedOnce`): every name defined
exactly once, and every `in PATH` of a citation naming the file that defines it.

  check_notes.py [--counts] [ROOT]
ROOT is the repository's root (default: the current folder). The files read are those of
`git ls-files` there, or, where ROOT is not a git checkout, every file under it but build folders.

The rule (CONTRIBUTING.md, "How the code reads"):
- A definition is a comment line that holds only the Note and its name, `// Note [<name>]` in C++
  and CUDA, `# Note [<name>]` in Python, shell and CMake, a heading `## Note [<name>]` (any level)
  in Markdown, with its text on the lines after it. Each name has exactly one, in the whole tree.
- Every other mention of `Note [<name>]` is a citation, wrapped over lines or not. A citation that
  says where the Note is, `Note [<name>] in PATH`, gives PATH from the repository's root
  (`src/kern/ctx.h`, never `kern/ctx.h` or `ctx.h`), and PATH is the file that defines it.
- A comment that opens with `Note [<name>]:` reads as a definition with its text on the same line;
  it is refused, so that the one definition is the only line that looks like one.
A name is a letter, then letters, digits, spaces and hyphens; anything else in the brackets (this
help's `<name>`, a string built in code) is not a Note.

Prints one line per problem and exits 1 when there is any; exits 0 silently otherwise."""
import argparse
import bisect
import os
import re
import subprocess
import sys

# The files read, by kind: C++ and CUDA sources, files with `#` comments, Markdown.
SUFFIXES = {"c": (".cpp", ".h", ".hpp", ".c", ".cu", ".cuh", ".inc"),
            "hash": (".py", ".sh", ".cmake"), "md": (".md",)}
# Per kind, what opens a definition line (and the comment holding its text after it).
MARKER = {"c": r"//", "hash": r"#", "md": r"#{1,6}"}
TEXT_AFTER = {"c": r"^\s*//\s*\S", "hash": r"^\s*#\s*\S", "md": r"^\s*\S"}
SKIPPED_DIRS = re.compile(r"^(build.*|\.git|__pycache__|\.cache|_deps)$")

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9 -]*$")
# A mention in the flattened text (comment markers removed, lines joined by one space). The name
# may hold the `" "` of C++ string literals joined over lines, removed before it is checked.
MENTION = re.compile(r"Note\s+\[([^\]\[]+)\]")
PATH_AFTER = re.compile(r"\s+in\s+`?([\w./+-]+)")
PATH_LIKE = re.compile(r"/|\.(h|hpp|cpp|c|cu|cuh|inc|py|sh|cmake|md|txt)$")
# Leading comment markers and trailing block-comment ends, removed before lines are joined.
LEADING = re.compile(r"^\s*(///?|/\*+|\*+(?!/)|#+)?\s*")
TRAILING = re.compile(r"\s*\*/\s*$")


def kind(path):
    if os.path.basename(path) == "CMakeLists.txt":
        return "hash"
    return next((k for k, suffixes in SUFFIXES.items() if path.endswith(suffixes)), None)


def tracked_files(root):
    if os.path.exists(os.path.join(root, ".git")):
        try:
            out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                                 check=True).stdout.decode()
            return [f for f in out.split("\0") if f]
        except (OSError, subprocess.CalledProcessError):
            pass
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not SKIPPED_DIRS.match(d))
        for name in sorted(filenames):
            files.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return files


def normalize(name):
    return " ".join(re.sub(r'"\s*"', " ", name).split())


def scan(root, path, k, definitions, citations, problems):
    try:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError):
        return
    define = re.compile(r"^\s*" + MARKER[k] + r"\s+Note \[([^\]\[]+)\]\s*$")
    text_after = re.compile(TEXT_AFTER[k])
    # In Markdown, a paragraph that opens so; elsewhere a comment line.
    opens_with_colon = re.compile(r"^\s*" + ("" if k == "md" else MARKER[k]) +
                                  r"\s*Note \[([^\]\[]+)\]:")
    defined_on = set()
    for i, line in enumerate(lines):
        m = define.match(line)
        if m and NAME.match(normalize(m.group(1))):
            name = normalize(m.group(1))
            definitions.setdefault(name, []).append((path, i + 1))
            defined_on.add(i)
            if i + 1 == len(lines) or not text_after.match(lines[i + 1]):
                problems.append(f"{path}:{i + 1}: Note [{name}] has no text on the line after it")
        m = opens_with_colon.match(line)
        if m and NAME.match(normalize(m.group(1))):
            problems.append(f"{path}:{i + 1}: `Note [{normalize(m.group(1))}]:` opening a comment "
                            f"reads as a definition: define it alone on its line, or cite it "
                            f"(\"Per Note [...], ...\")")
    # Joined text, so that a name or an `in PATH` wrapped over lines is read whole.
    starts, parts, at = [], [], 0
    for line in lines:
        text = TRAILING.sub("", LEADING.sub("", line, count=1))
        starts.append(at)
        parts.append(text)
        at += len(text) + 1
    flat = " ".join(parts)
    for m in MENTION.finditer(flat):
        name = normalize(m.group(1))
        if not NAME.match(name):
            continue
        line = bisect.bisect_right(starts, m.start()) - 1
        if line in defined_on:
            continue
        where = None
        p = PATH_AFTER.match(flat, m.end())
        if p:
            candidate = p.group(1).rstrip(".")
            if PATH_LIKE.search(candidate):
                where = candidate
        citations.setdefault(name, []).append((path, line + 1, where))


def check(root):
    definitions, citations, problems = {}, {}, []
    for path in tracked_files(root):
        if any(SKIPPED_DIRS.match(part) for part in path.split("/")[:-1]):
            continue
        k = kind(path)
        if k:
            scan(root, path, k, definitions, citations, problems)
    for name in sorted(set(definitions) | set(citations)):
        defs = definitions.get(name, [])
        cites = citations.get(name, [])
        if not defs:
            at = ", ".join(f"{p}:{n}" for p, n, _ in cites)
            problems.append(f"Note [{name}] defined 0 times, cited at {at}")
        elif len(defs) > 1:
            at = ", ".join(f"{p}:{n}" for p, n in defs)
            problems.append(f"Note [{name}] defined {len(defs)} times: {at}")
        else:
            home = defs[0][0]
            for p, n, where in cites:
                if where is not None and where != home:
                    problems.append(f"stale path: {p}:{n} says Note [{name}] in {where}, "
                                    f"defined in {home}")
    return problems, definitions, citations


def main():
    parser = argparse.ArgumentParser(description="Checks the tree's named Notes.")
    parser.add_argument("root", nargs="?", default=".", help="the repository's root")
    parser.add_argument("--counts", action="store_true",
                        help="also print the numbers of names, definitions and citations")
    args = parser.parse_args()
    problems, definitions, citations = check(args.root)
    for line in problems:
        print(line)
    if args.counts:
        print(f"{len(set(definitions) | set(citations))} names, "
              f"{sum(map(len, definitions.values()))} definitions, "
              f"{sum(map(len, citations.values()))} citations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
