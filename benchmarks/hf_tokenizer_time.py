#!/usr/bin/env python3
"""Times the `tokenizers` package encoding a text with a tokenizer.json, for bench_tokenizer.

Prints one line of JSON: {"ms": median ms of one encode of the whole text, "tokens": its token
count, "version": the package's}; exit 77 without the package.

  hf_tokenizer_time.py TOKENIZER_JSON TEXT_FILE REPS
"""
import json
import statistics
import sys
import time

try:
    import tokenizers
except ImportError as e:
    print(f"skipped: {e} (pip install tokenizers)", file=sys.stderr)
    sys.exit(77)


def main():
    path, text_path, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tok = tokenizers.Tokenizer.from_file(path)
    with open(text_path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    ids = tok.encode(text).ids  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        tok.encode(text)
        times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({"ms": statistics.median(times), "tokens": len(ids),
                      "version": tokenizers.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
