"""The one place that turns settings into parts: the clock, the store, the MQTT link, the models,
the retrievers, the answerer, the consolidator, the frame finder, the perception workers, and the
daemon made of them. The command line and the daemon both build here; heavy libraries are
imported inside the function that needs them, so `chorus --help` stays fast."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from daemon.settings import Settings
from memory.clock import HouseClock

logger = logging.getLogger(__name__)


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


def llm(settings: Settings, role: str = "answer"):
    """The model of a role ("answer": answering and planning; "consolidation"), loaded once per
    process and file (the bundled profile resolved to its file): one instance when both are the same."""
    from models.bundled import resolve
    from models.llm import shared_llm

    s = settings.llm
    name = s.consolidation_model if role == "consolidation" and s.consolidation_model else s.model
    return shared_llm(
        resolve(name), n_ctx=s.n_ctx, n_threads=s.n_threads, n_gpu_layers=s.n_gpu_layers, seed=s.seed,
        temperature=s.temperature, time_limit_s=s.time_limit_s, chat_format=s.chat_format, flash_attn=s.flash_attn,
    )


def frame_store(settings: Settings, store):
    from memory.frames import FrameStore

    return FrameStore(store, settings.frames.dir)


def vision(settings: Settings):
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


def retrievers(store, clock: HouseClock, settings: Settings, **kw):
    from assistant.retrievers import Retrievers

    return Retrievers(store, clock, settings.retrieval, **kw)


def answerer(settings: Settings, store, clock: HouseClock, model, retrievers, *, budget: int | None = None,
             planner: str | None = None, shared: bool = True, dynamic: bool = True, frames=None):
    """The answerer over `retrievers` (its store and indices); `frames`: a frame finder (default:
    the store's frames, found by time only)."""
    from assistant.answer import Answerer

    return Answerer(store, clock, settings.answer, model, shared=shared, dynamic=dynamic,
                    budget=budget or settings.retrieval.budget, planner=planner, retrievers=retrievers,
                    frames=frames)


def consolidator(settings: Settings, store, clock: HouseClock, model, foreground=None):
    """`foreground`: questions in flight (`models.yielding.Foreground`), before which a window gives way."""
    from assistant.consolidate import Consolidator
    from memory.events import EventStore

    return Consolidator(EventStore(store), model, clock, settings.consolidation, foreground=foreground)


def frame_finder(settings: Settings, store, embedder):
    from assistant.frames import FrameFinder

    return FrameFinder(frame_store(settings, store), embedder)


def gate(settings: Settings):
    from daemon.admission import Gate

    d = settings.daemon
    return Gate(d.allow_agents, d.rate_per_agent, d.rate_burst, total_rate=d.rate_total,
                total_burst=d.rate_total_burst, max_agents=d.max_agents)


def reports(settings: Settings, link, watch=None):
    """Coded errors through the throttle onto `link` (and the web page's `watch`)."""
    from daemon.admission import Reports, ReportThrottle
    from daemon.watch import Watch

    return Reports(link, ReportThrottle(max_keys=settings.daemon.max_agents), watch or Watch())


def ingestor(settings: Settings, store, *, report, journal=None, on_batch=None):
    from daemon.ingestor import Ingestor

    d = settings.daemon
    return Ingestor(store, queue_size=d.caption_queue, max_bytes=d.max_caption_bytes,
                    grace_ms=int(d.grace_s * 1000), silence_s=d.silence_s, report=report,
                    queue_mb=d.caption_queue_mb, max_late_ms=int(d.max_late_h * 3_600_000),
                    journal=journal, on_batch=on_batch)


def audio_worker(settings: Settings, store, *, report, advance, journal=None, model=None):
    from daemon.audio_worker import AudioWorker

    return AudioWorker(store, settings.speech, report=report, advance=advance, journal=journal, model=model)


def frame_worker(settings: Settings, store, *, report, embedder=None, captioner=None, journal=None):
    from daemon.frame_worker import FrameWorker

    return FrameWorker(frame_store(settings, store), settings.frames, settings.vision, report=report,
                       embedder=embedder, captioner=captioner, journal=journal)


async def broker_address(settings: Settings):
    """(host, port, embedded broker or None): the configured broker, else one already listening
    on localhost, else (`daemon.embedded_broker`) one started here."""
    from daemon.broker import EmbeddedBroker, listening

    m = settings.mqtt
    if m.host:
        return m.host, m.port, None
    if await asyncio.to_thread(listening, "127.0.0.1", m.port):
        logger.info("using the MQTT broker listening on localhost:%d", m.port)
        return "127.0.0.1", m.port, None
    if not settings.daemon.embedded_broker:
        return "127.0.0.1", m.port, None
    broker = EmbeddedBroker("127.0.0.1", m.port)
    await broker.start()
    return "127.0.0.1", m.port, broker


async def daemon(settings: Settings, db: Path | None = None):
    """The daemon with every part loaded (models off the event loop, so an embedded broker serves
    meanwhile). One store connection per worker thread; SQLite (WAL) orders the writers."""
    import threading

    from daemon.app import Daemon
    from daemon.asking import Asking
    from daemon.audio_stream import load_transcriber
    from daemon.consolidation import Consolidation
    from daemon.notify import notify
    from daemon.poison import PoisonJournal
    from daemon.questions import QuestionDesk
    from memory.browse import Browse
    from models.yielding import Foreground
    from streams.link import Link

    s, db = settings, db or settings.store.path
    notify("EXTEND_TIMEOUT_USEC=300000000")
    notify("STATUS=loading models")
    clock, journal, closing = clock_of(s), PoisonJournal(db), threading.Event()
    foreground = Foreground()  # questions in flight: background work holds off meanwhile
    host, port, broker = await broker_address(s)
    model = await asyncio.to_thread(llm, s)
    writer = await asyncio.to_thread(llm, s, "consolidation")  # the same instance unless configured apart
    embedder, captioner = await asyncio.to_thread(vision, s)
    link = Link(link_config(s, host, port, protocol="3.1.1" if broker else "auto"))
    reported = reports(s, link)
    report = reported.report
    consolidation = Consolidation(consolidator(s, open_store(s, db), clock, writer, foreground), clock, link,
                                  every_s=s.daemon.consolidate_every_s, report=report)
    ingest = ingestor(s, open_store(s, db, reserve=True, ingest=True), report=report, journal=journal,
                      on_batch=consolidation.note)
    serving = retrievers(open_store(s, db), clock, s)
    answers = answerer(s, serving.store, clock, model, serving, frames=frame_finder(s, serving.store, embedder))
    asking = Asking(answers, clock, asker=s.retrieval.asker, budget=s.retrieval.budget, foreground=foreground)
    audio = frames = None
    if s.speech.enabled:
        whisper = await asyncio.to_thread(load_transcriber, s.speech, s.speech.workers)
        audio = audio_worker(s, open_store(s, db), report=report, advance=ingest.advance, journal=journal,
                             model=whisper)
    if s.frames.enabled:
        frames = frame_worker(s, open_store(s, db), report=report, embedder=embedder, captioner=captioner,
                              journal=journal)
    desk = QuestionDesk(asking, clock, link.topics, link.publish, queue_size=s.daemon.query_queue,
                        asker=s.retrieval.asker, budget=s.retrieval.budget, report=report, journal=journal)
    indexer = _indexer(s, db, clock, serving, stop=foreground.between(closing.is_set), report=report)
    return Daemon(s, db=db, clock=clock, link=link, reports=reported, gate=gate(s), ingestor=ingest, desk=desk,
                  asking=asking, consolidation=consolidation, indexer=indexer, audio=audio, frames=frames,
                  journal=journal, broker=broker, browse=Browse(open_store(s, db), s.frames.dir), llm=model, writer=writer,
                  closing=closing, foreground=foreground)


def _indexer(settings: Settings, db, clock: HouseClock, serving, *, stop, report):
    """The background indexer: a connection of its own, the serving retrievers' encoders lent to it."""
    from daemon.indexer import Indexer

    mine = retrievers(open_store(settings, db), clock, settings, lend=lambda name: serving.vectors(name)[1])
    return Indexer(serving, mine, every_s=settings.daemon.index_every_s, stop=stop, report=report)


def run_daemon(settings: Settings, db: Path | None = None) -> int:
    """`chorus run`: build the daemon and run it until SIGTERM or SIGINT."""

    async def serve() -> int:
        return await (await daemon(settings, db)).run()

    return asyncio.run(serve())
