"""MiniLM embedding throughput, the code before issue 15 and now, side by side on the same units.

    .venv/bin/python tests/bench_embed.py --db /tmp/week.sqlite --units 2048 [--rounds 2]

Takes `--units` segments with English lines from the memory (in store order, as `chorus index`
embeds them, from `--offset`) and embeds them, alternating round by round between the reference
(texts sorted by characters within chunks of 256 rows, batches of 32: `VectorIndex.refresh` and
`Embedder.embed` before) and the current `Embedder.embed` over chunks of `memory.vectors.BATCH`
rows, so both see the same load. Prints units/s of each round, the load average, and how far the
two sets of vectors are apart. Not a test: run by hand.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import sqlean

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.tokenize import english_view  # noqa: E402
from memory.vectors import BATCH  # noqa: E402
from models.embed import Embedder  # noqa: E402


def reference(e: Embedder, texts: list[str]) -> np.ndarray:
    """The embedding loop as it was: 256-row chunks, sorted by characters, 32 a batch, tokenized per batch."""
    out = np.zeros((len(texts), e.dim), np.float32)
    for c in range(0, len(texts), 256):
        chunk = list(range(c, min(c + 256, len(texts))))
        order = sorted(chunk, key=lambda i: len(texts[i]))
        for s in range(0, len(order), 32):
            idx = order[s:s + 32]
            out[idx] = e._run(e.tokenizer.encode_batch([texts[i] or " " for i in idx]))
    return out


def current(e: Embedder, texts: list[str]) -> np.ndarray:
    return np.concatenate([e.embed(texts[c:c + BATCH]) for c in range(0, len(texts), BATCH)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--units", type=int, default=2048)
    ap.add_argument("--offset", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    c = sqlean.connect(args.db)
    texts = []
    for (t,) in c.execute("SELECT text FROM segments ORDER BY rev, id LIMIT -1 OFFSET ?", (args.offset,)):
        v = english_view(t)
        if v:
            texts.append(v)
        if len(texts) == args.units:
            break
    e = Embedder()
    tokens = sum(len(x.ids) for x in e.tokenizer.encode_batch(texts))
    print(f"{len(texts)} units, {tokens / len(texts):.1f} tokens each; load before {os.getloadavg()}")
    vecs = {}
    for r in range(args.rounds):
        for name, fn in (("reference", reference), ("current", current)):
            t0 = time.perf_counter()
            vecs[name] = fn(e, texts)
            dt = time.perf_counter() - t0
            print(f"round {r + 1} {name:10} {len(texts) / dt:7.1f} units/s  ({dt:.1f} s, load {os.getloadavg()[0]:.2f})")
    cos = (vecs["reference"] * vecs["current"]).sum(1)
    print(f"cosine of the two sets: min {cos.min():.6f}")


if __name__ == "__main__":
    main()
