"""Test media made on the spot: speech from espeak-ng (16 kHz PCM), JPEG frames from Pillow, and a
tiny ONNX image-text model built with the `onnx` package (no vision weights ship on PyPI)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np

SENTENCES = [
    "I put the red charger in the kitchen drawer.",
    "Tasha is baking a chocolate cake for the party tonight.",
    "The blue umbrella is behind the front door.",
    "We should water the flowers on the balcony tomorrow morning.",
    "Jake lost his keys near the sofa in the living room.",
]


def speak(text: str, *, speed: int = 150) -> np.ndarray:
    """int16 samples at 16 kHz mono of `text` read by espeak-ng."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed (apt-get install espeak-ng; ./dev test does it)")
    wav = subprocess.run([exe, "-v", "en-us", "-s", str(speed), "--stdout", text], check=True,
                         capture_output=True).stdout
    with wave.open(io.BytesIO(wav)) as w:
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32)
    from scipy.signal import resample_poly

    g = np.gcd(16000, rate)
    return np.clip(resample_poly(x, 16000 // g, rate // g), -32768, 32767).astype("<i2")


def conversation(sentences: list[str], gap_s: float = 1.0) -> np.ndarray:
    silence = np.zeros(int(16000 * gap_s), dtype="<i2")
    parts = [silence]
    for s in sentences:
        parts += [speak(s), silence]
    return np.concatenate(parts)


def jpeg(color: tuple[int, int, int], size: tuple[int, int] = (64, 48), noise: int = 0, seed: int = 0) -> bytes:
    from PIL import Image

    a = np.empty((size[1], size[0], 3), dtype=np.int16)
    a[:] = color
    if noise:
        a += np.random.default_rng(seed).integers(-noise, noise + 1, a.shape, dtype=np.int16)
    buf = io.BytesIO()
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def tiny_clip(folder: Path, size: int = 32) -> Path:
    """A CLIP-shaped ONNX pair: the image vector is the mean colour (RGB), the text vector the sum of
    its words' colours; 'red', 'green', 'blue' (and words for them) point along the three axes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    words = ["<pad>", "<unk>", "red", "green", "blue", "tomato", "grass", "sky", "a", "the", "photo", "of"]
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    table = np.full((len(words), 3), 0.01, dtype=np.float32)
    for w, axis in (("red", 0), ("tomato", 0), ("green", 1), ("grass", 1), ("blue", 2), ("sky", 2)):
        table[vocab[w], axis] = 1.0
    table[vocab["<pad>"]] = 0
    text = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["emb"], axis=0),
         helper.make_node("ReduceSum", ["emb", "axes"], ["text_embeds"], keepdims=0)],
        "text", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("text_embeds", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([1], np.int64), "axes")])
    # pixels arrive normalised with the CLIP mean/std: undo it, so the vector is the plain colour
    mean = np.array([0.48145466, 0.4578275, 0.40821073], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.26862954, 0.26130258, 0.27577711], np.float32).reshape(1, 3, 1, 1)
    vision = helper.make_graph(
        [helper.make_node("Mul", ["pixel_values", "std"], ["scaled"]),
         helper.make_node("Add", ["scaled", "mean"], ["rgb"]),
         helper.make_node("ReduceMean", ["rgb", "hw"], ["pooled"], keepdims=0),
         helper.make_node("Sub", ["pooled", "grey"], ["image_embeds"])],
        "vision", [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, size, size])],
        [helper.make_tensor_value_info("image_embeds", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(std, "std"), numpy_helper.from_array(mean, "mean"),
         numpy_helper.from_array(np.array([2, 3], np.int64), "hw"),
         numpy_helper.from_array(np.full((1, 3), 0.3, np.float32), "grey")])
    for graph, name in ((text, "text_model.onnx"), (vision, "vision_model.onnx")):
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        m.ir_version = 9
        onnx.checker.check_model(m)
        onnx.save(m, str(folder / name))
    (folder / "preprocessor_config.json").write_text(json.dumps({"crop_size": size}))
    return folder


def wer(ref: str, hyp: str) -> float:
    """Word error rate: word-level edit distance over the reference length (case, punctuation ignored)."""
    import re

    r, h = (re.findall(r"[a-z0-9']+", s.lower()) for s in (ref, hyp))
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
    return d[len(h)] / max(1, len(r))
