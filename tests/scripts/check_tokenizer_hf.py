#!/usr/bin/env python3
"""Sinter's BPE tokenizer against the `tokenizers` package.

Runs bpe_reference_dump, which trains a tokenizer on a corpus and writes tokenizer.json and the
ids Sinter gave a set of texts (cases.json); loads the tokenizer.json with
tokenizers.Tokenizer.from_file, encodes every text again and checks the ids are the same, and that
decoding them gives the text back. Exit 77 (skipped) without the package (pip install tokenizers).

  check_tokenizer_hf.py BPE_REFERENCE_DUMP CORPUS VOCAB_SIZE WORK_DIR
"""
import json
import os
import subprocess
import sys

try:
    import tokenizers
except ImportError as e:
    print(f"skipped: {e} (pip install tokenizers)")
    sys.exit(77)


def main():
    dump, corpus, vocab, work = sys.argv[1:5]
    if not os.path.exists(corpus):
        print(f"skipped: no corpus at {corpus}")
        return 77
    os.makedirs(work, exist_ok=True)
    subprocess.run([dump, corpus, vocab, work], check=True)
    tok = tokenizers.Tokenizer.from_file(os.path.join(work, "tokenizer.json"))
    with open(os.path.join(work, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    if tok.get_vocab_size(with_added_tokens=True) != int(vocab):
        print(f"FAIL: tokenizers reads {tok.get_vocab_size(with_added_tokens=True)} tokens, not {vocab}")
        return 1
    bad = 0
    for i, case in enumerate(cases):
        ids = tok.encode(case["text"]).ids
        if ids != case["ids"]:
            bad += 1
            if bad <= 5:
                first = next((k for k, (a, b) in enumerate(zip(ids, case["ids"])) if a != b),
                             min(len(ids), len(case["ids"])))
                print(f"case {i} {case['text'][:60]!r}: tokenizers {ids[first:first + 8]} vs "
                      f"Sinter {case['ids'][first:first + 8]} from token {first}")
        text = tok.decode(case["ids"], skip_special_tokens=False)
        if text != case["text"]:
            bad += 1
            print(f"case {i}: tokenizers decodes Sinter's ids to {text[:60]!r}")
    tokens = sum(len(c["ids"]) for c in cases)
    print(f"tokenizers {tokenizers.__version__}: {len(cases)} texts, {tokens} tokens, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
