"""The encoder's graphs side by side: ms per batch of 16 texts of 92 tokens on one thread.

    .venv/bin/python tests/bench_graph.py [--rounds 6]

The bundled MiniLM as shipped (float: its int8 weights are dequantized at load), its int8 graph
as `models/query_graph.py` made it before the rewrites, and the graph as it is now (NaN guards
dropped, GELUs fused), each opened with and without onnxruntime's SkipLayerNormalization fusion;
the graphs are made in a temporary folder. Each variant runs 3 batches per round, rounds
alternating between variants, and the best round counts. Not a test: run by hand.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models import query_graph  # noqa: E402
from models.embed import bundled_paths  # noqa: E402


def session(path: Path, disabled: list[str]):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    model = bundled_paths()[0]
    with tempfile.TemporaryDirectory() as tmp:
        plain, now = Path(tmp) / "int8.onnx", Path(tmp) / "int8-rewritten.onnx"
        keep = query_graph.simplify
        query_graph.simplify = lambda path: (0, 0)
        try:
            query_graph._make(model, plain)
        finally:
            query_graph.simplify = keep
        now.write_bytes(plain.read_bytes())
        print("rewrites (NaN guards, GELUs):", query_graph.simplify(now))
        variants = {f"{name}{' without SkipLayerNorm fusion' if off else ''}": session(path, query_graph.DISABLED if off else [])
                    for name, path in (("float", model), ("int8", plain), ("int8 rewritten", now)) for off in (False, True)}
        ids = np.random.default_rng(0).integers(1000, 20000, (16, 92)).astype(np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        best = dict.fromkeys(variants, float("inf"))
        for _ in range(args.rounds):
            for name, s in variants.items():
                s.run(None, feed)
                t0 = time.perf_counter()
                for _ in range(3):
                    s.run(None, feed)
                best[name] = min(best[name], (time.perf_counter() - t0) / 3 * 1000)
        for name, ms in best.items():
            print(f"{name:50} {ms:7.1f} ms per batch of 16  ({16000 / ms:5.0f} units/s on one thread)")


if __name__ == "__main__":
    main()
