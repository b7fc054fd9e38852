"""Builds the shared parts from settings: the clock, the store, the model, the assistant pieces."""

from __future__ import annotations

from pathlib import Path

from daemon.settings import Settings
from memory.clock import HouseClock


def clock_of(settings: Settings) -> HouseClock:
    return HouseClock.of(settings.house.day1, settings.house.timezone)


def open_store(settings: Settings, db: Path | None = None):
    from memory.store import Store

    return Store(db or settings.store.path)


def build_llm(settings: Settings):
    """The one model of this process (loaded once; the bundled profile resolved to its file)."""
    from models.bundled import resolve
    from models.llm import shared_llm

    s = settings.llm
    return shared_llm(
        resolve(s.model), n_ctx=s.n_ctx, n_threads=s.n_threads, n_gpu_layers=s.n_gpu_layers, seed=s.seed,
        temperature=s.temperature, time_limit_s=s.time_limit_s, chat_format=s.chat_format,
    )


def frame_store(settings: Settings, store):
    from memory.frames import FrameStore

    return FrameStore(store, settings.frames.dir)


def build_vision(settings: Settings):
    """(embedder, captioner), each None unless configured by path."""
    v = settings.vision
    embedder = captioner = None
    if v.embedder:
        from models.vision import ImageTextEmbedder

        embedder = ImageTextEmbedder(v.embedder, threads=v.threads)
    if v.captioner:
        from models.errors import ModelError
        from models.vision import FrameCaptioner

        if not v.projector:
            raise ModelError("vision.captioner needs vision.projector (its mmproj GGUF)")
        captioner = FrameCaptioner(v.captioner, v.projector, chat_handler=v.chat_handler, threads=v.threads,
                                   n_gpu_layers=v.n_gpu_layers)
    return embedder, captioner
