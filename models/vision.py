"""Optional vision models, by path, behind small synchronous classes.

- `ImageTextEmbedder`: an ONNX export of CLIP or SigLIP (the layout of the Hugging Face / Xenova
  exports: `vision_model.onnx`, `text_model.onnx`, `tokenizer.json`, optionally
  `preprocessor_config.json` and an `onnx/` sub-folder), run by onnxruntime. Images and texts
  land in one space (unit vectors), so a text finds frames by cosine distance.
- `FrameCaptioner`: a llama-cpp-python multimodal GGUF with its projector (mmproj).
No vision weights ship on PyPI; nothing here is loaded unless a path is configured.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
from pathlib import Path

import numpy as np

from models.errors import ModelError
from models.lifetime import close_at_exit, free_llama

logger = logging.getLogger(__name__)
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


def _find(folder: Path, name: str) -> Path | None:
    for p in (folder / name, folder / "onnx" / name):
        if p.is_file():
            return p
    return None


class ImageTextEmbedder:
    def __init__(self, folder: str | Path, *, threads: int | None = None, max_tokens: int = 64):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        folder = Path(folder).expanduser()
        vision, text, tok = _find(folder, "vision_model.onnx"), _find(folder, "text_model.onnx"), \
            _find(folder, "tokenizer.json")
        if not (vision and text and tok):
            raise ModelError(f"{folder} needs vision_model.onnx, text_model.onnx and tokenizer.json")
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        try:
            self.vision = ort.InferenceSession(str(vision), opts, providers=ort.get_available_providers())
            self.text = ort.InferenceSession(str(text), opts, providers=ort.get_available_providers())
        except Exception as e:  # onnxruntime raises its own exception types for a bad file
            raise ModelError(f"cannot load the ONNX embedder in {folder}: {e}") from e
        self.tokenizer = Tokenizer.from_file(str(tok))
        self.tokenizer.enable_truncation(max_tokens)
        pre = _find(folder, "preprocessor_config.json")
        cfg = json.loads(pre.read_text()) if pre else {}
        size = cfg.get("crop_size") or cfg.get("size") or 224
        self.size = int(size.get("height") or size.get("shortest_edge") or 224) if isinstance(size, dict) else int(size)
        shape = self.vision.get_inputs()[0].shape
        if isinstance(shape[-1], int):  # a fixed input size in the graph wins
            self.size = shape[-1]
        self.mean = np.array(cfg.get("image_mean", CLIP_MEAN), dtype=np.float32).reshape(1, 3, 1, 1)
        self.std = np.array(cfg.get("image_std", CLIP_STD), dtype=np.float32).reshape(1, 3, 1, 1)
        self.pad_to = max_tokens if "siglip" in json.dumps(cfg).lower() else None  # SigLIP was trained padded
        self.name = folder.name
        self.dim = int(self.embed_texts(["a photo"]).shape[1])
        logger.info("image-text embedder %s loaded (%d dims, %d px)", folder, self.dim, self.size)

    def _pixels(self, jpeg: bytes) -> np.ndarray:
        from PIL import Image

        try:
            img = Image.open(io.BytesIO(jpeg)).convert("RGB")
        except Exception as e:  # Pillow raises several types for a broken file
            raise ModelError(f"cannot decode the frame: {e}") from e
        w, h = img.size
        scale = self.size / min(w, h)  # shortest side to `size`, then the centre square
        img = img.resize((max(self.size, round(w * scale)), max(self.size, round(h * scale))), Image.BICUBIC)
        left, top = (img.width - self.size) // 2, (img.height - self.size) // 2
        img = img.crop((left, top, left + self.size, top + self.size))
        return np.asarray(img, dtype=np.float32).transpose(2, 0, 1) / 255.0

    def embed_images(self, jpegs: list[bytes]) -> np.ndarray:
        x = (np.stack([self._pixels(j) for j in jpegs]) - self.mean) / self.std
        return _unit(_pick(self.vision, {"pixel_values": x.astype(np.float32)}))

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(texts)
        n = self.pad_to or max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), n), dtype=np.int64)
        mask = np.zeros((len(encs), n), dtype=np.int64)
        pad = self.tokenizer.token_to_id("<pad>") or 0
        ids[:] = pad
        for i, e in enumerate(encs):
            ids[i, :len(e.ids)], mask[i, :len(e.ids)] = e.ids, 1
        return _unit(_pick(self.text, {"input_ids": ids, "attention_mask": mask}))


def _pick(session, feeds: dict) -> np.ndarray:
    """Run with the inputs the graph asks for; the embedding output is `*embeds`, else the pooled one."""
    wanted = {i.name for i in session.get_inputs()}
    outs = session.get_outputs()
    names = [o.name for o in outs]
    name = next((n for n in names if n.endswith("embeds")), None) or \
        next((n for n in names if "pool" in n), names[0])
    y = session.run([name], {k: v for k, v in feeds.items() if k in wanted})[0]
    return y[:, 0] if y.ndim == 3 else y


def _unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


HANDLERS = {"llava15": "Llava15ChatHandler", "llava16": "Llava16ChatHandler", "moondream": "MoondreamChatHandler",
            "nanollava": "NanoLlavaChatHandler", "minicpmv26": "MiniCPMv26ChatHandler",
            "qwen25vl": "Qwen25VLChatHandler"}


class FrameCaptioner:
    """A multimodal GGUF that describes one frame in a sentence. Synchronous; one call at a time."""

    def __init__(self, model: str | Path, projector: str | Path, *, chat_handler: str = "llava15",
                 threads: int | None = None, n_gpu_layers: int = 0, n_ctx: int = 4096):
        from llama_cpp import Llama, llama_chat_format

        for p in (model, projector):
            if not Path(p).expanduser().is_file():
                raise ModelError(f"no captioner file at {p}")
        cls = getattr(llama_chat_format, HANDLERS.get(chat_handler, ""), None)
        if cls is None:
            raise ModelError(f"unknown chat handler {chat_handler!r} (known: {', '.join(HANDLERS)})")
        self.llm = Llama(model_path=str(Path(model).expanduser()), n_ctx=n_ctx, n_threads=threads,
                         n_gpu_layers=n_gpu_layers, verbose=False,
                         chat_handler=cls(clip_model_path=str(Path(projector).expanduser()), verbose=False))
        self.name = Path(model).name
        self._lock = threading.Lock()
        close_at_exit(self)

    def close(self) -> None:
        """Frees the model and its projector now (at exit this runs by itself: `models.lifetime`)."""
        with self._lock:
            free_llama(self.llm)

    def caption(self, jpeg: bytes, prompt: str, max_tokens: int = 60) -> str:
        url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode()
        with self._lock:
            out = self.llm.create_chat_completion(messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": prompt}]}],
                max_tokens=max_tokens, temperature=0.0)
        return (out["choices"][0]["message"]["content"] or "").strip()
