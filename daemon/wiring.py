"""Builds the shared parts from settings: the clock, the store, the model, the assistant pieces."""

from __future__ import annotations

from pathlib import Path

from daemon.settings import Settings
from memory.clock import HouseClock


def clock_of(settings: Settings) -> HouseClock:
    return HouseClock.of(settings.house.day1, settings.house.timezone)


def open_store(settings: Settings, db: Path | None = None, *, reserve: bool = False, ingest: bool = False):
    """The store; with `reserve`, writes stop short of the free-space reserve; `ingest`: the live
    captions' connection, whose commits are durable before they are acknowledged and whose
    segments have a cap."""
    from memory.store import SegmentCap, Store

    d = settings.daemon
    cap = SegmentCap(d.segment_max_observations, d.segment_max_kb * 1024) if ingest else None
    return Store(db or settings.store.path, reserve_mb=settings.store.reserve_mb if reserve else 0,
                 durable=ingest and d.durable_ack, segment_cap=cap)


def link_config(settings: Settings, host: str, port: int, **kw):
    """The MQTT link of the daemon: credentials and TLS from the settings (the password stays a
    secret until this point and is never logged)."""
    from streams.link import LinkConfig

    m = settings.mqtt
    return LinkConfig(
        host=host, port=port, username=m.username, password=m.password.get_secret_value() if m.password else None,
        client_id=m.client_id, root=m.root, tls=m.tls, tls_ca=_str(m.tls_ca), tls_cert=_str(m.tls_cert),
        tls_key=_str(m.tls_key), receive_max=m.receive_max, max_packet=max_packet(settings), **kw,
    )


def max_packet(settings: Settings) -> int:
    """The largest message the daemon takes (a frame, an audio chunk, a caption), plus headers."""
    return max(settings.frames.max_frame_bytes, settings.speech.max_chunk_bytes,
               settings.daemon.max_caption_bytes) + 65_536


def client_kwargs(settings: Settings) -> dict:
    """Credentials and TLS for the short-lived clients of the CLI (replay, chat, load)."""
    from streams.link import tls_context

    cfg = link_config(settings, settings.mqtt.host or "127.0.0.1", settings.mqtt.port)
    return {"username": cfg.username, "password": cfg.password, "tls_context": tls_context(cfg)}


def _str(p: Path | None) -> str | None:
    return str(p) if p else None


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
