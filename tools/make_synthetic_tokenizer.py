#!/usr/bin/env python3
"""make_synthetic_tokenizer.py — a Qwen3.6-sized tokenizer.json for measuring
load time (`lilac bench tokenizer`), since the real Qwen3.6 file is not
available offline.  Standard library only.

    python3 tools/make_synthetic_tokenizer.py [SRC_DIR] [OUT_DIR] [N_BPE]

SRC_DIR  default tests/fixtures/tokenizer/qwen3 (151,643 BPE tokens)
OUT_DIR  default /tmp/lilac-synth248k (never commit the result: ~17 MB)
N_BPE    default 248044, the Qwen3.5/3.6 BPE vocabulary size

The extra tokens are concatenations of two existing tokens, each with the
merge that makes it, so the file is a valid BPE (every merge names known
tokens and makes a known token) of the real size, in the same layout (list
form merges, indent 2).  The Qwen3.5 pre-tokenizer regex (with \\p{M}) replaces
Qwen3's, and the 33 Qwen3.5 added tokens follow the vocabulary; the encodings
it gives are not Qwen3.6's, only the file's size and shape are.
"""
import json
import os
import sys

QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures", "tokenizer", "qwen3")
    out = sys.argv[2] if len(sys.argv) > 2 else "/tmp/lilac-synth248k"
    target = int(sys.argv[3]) if len(sys.argv) > 3 else 248044
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    merges = tok["model"]["merges"]
    by_id = sorted(vocab, key=vocab.get)
    nid = len(by_id)
    # Pair common tokens in a fixed, deterministic order until the target size.
    left = by_id[256:4000]
    right = by_id[256:20000]
    i = 0
    while nid < target:
        a = left[i % len(left)]
        b = right[(i * 7919) % len(right)]
        i += 1
        c = a + b
        if c in vocab:
            continue
        vocab[c] = nid
        merges.append([a, b])
        nid += 1
    special = json.load(open(os.path.join(root, "tests", "fixtures", "tiny", "tokenizer.json"),
                             encoding="utf-8"))["added_tokens"]
    added = []
    for k, t in enumerate(special):
        t = dict(t)
        t["id"] = target + k
        added.append(t)
    tok["added_tokens"] = added
    tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN35_REGEX
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=2)
    print(f"{path}: {nid} BPE tokens, {len(merges)} merges, {len(added)} added, "
          f"{os.path.getsize(path) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
