"""`chorus run`: the daemon. It runs the parts `daemon/build.py` made from the settings: named
tasks in one TaskGroup, messages routed from the link to the part that handles them; a dead worker
ends the process non-zero so that systemd restarts it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from functools import partial
from pathlib import Path

from daemon import outlook
from daemon.admission import Gate, Reports
from daemon.asking import Asking
from daemon.audio_worker import AudioWorker
from daemon.broker import EmbeddedBroker
from daemon.consolidation import Consolidation
from daemon.frame_worker import FrameWorker
from daemon.indexer import Indexer
from daemon.ingestor import Ingestor
from daemon.notify import notify, watchdog_period_s
from daemon.poison import PoisonJournal
from daemon.questions import QuestionDesk
from daemon.settings import Settings
from memory.browse import Browse
from memory.clock import HouseClock
from models.yielding import Foreground
from streams.errors import StreamError
from streams.link import Inbound, Link

logger = logging.getLogger(__name__)
VERSION = "0.1.0"


class Daemon:
    def __init__(self, settings: Settings, *, db: Path | str, clock: HouseClock, link: Link, reports: Reports,
                 gate: Gate, ingestor: Ingestor, desk: QuestionDesk, asking: Asking | None = None,
                 consolidation: Consolidation | None = None, indexer: Indexer | None = None,
                 audio: AudioWorker | None = None, frames: FrameWorker | None = None,
                 journal: PoisonJournal | None = None,
                 broker: EmbeddedBroker | None = None, browse: Browse | None = None, llm=None, writer=None,
                 closing: threading.Event | None = None, foreground: Foreground | None = None):
        """Finished parts (built by `daemon.build.daemon`; tests hand in fakes). `closing` is set
        when the process stops, for work in threads that must end with it; `foreground` counts the
        questions in flight, before which background work holds off."""
        self.settings, self.db, self.clock = settings, db, clock
        self.link, self.reports, self.gate = link, reports, gate
        self.watch = reports.watch  # agents' statuses and the latest errors, for the web page and Home Assistant
        self.ingestor, self.desk, self.asking = ingestor, desk, asking
        self.consolidation, self.indexer, self.llm = consolidation, indexer, llm
        self.writer = writer or llm  # the consolidation's model (the same instance unless configured apart)
        self.audio, self.frames = audio, frames
        self.journal, self.broker, self.browse = journal, broker, browse
        self.closing = closing or threading.Event()
        self.foreground = foreground
        self.started = time.time()

    def report(self, code: str, message: str, **where) -> None:
        self.reports.report(code, message, **where)

    def route(self, m: Inbound) -> bool:
        """Send a message on its way; True when it was taken (a caption: acknowledged once stored)."""
        try:
            return self._route(m)
        except Exception as e:  # nothing a sender does may end the link's receive loop
            logger.exception("routing %s", m.topic)
            self.report("internal", f"{type(e).__name__}: {e}", topic=m.topic)
            return False

    def _route(self, m: Inbound) -> bool:
        try:
            kind, agent = self.link.topics.parse(m.topic)
        except StreamError as e:
            self.report(e.code, str(e), topic=m.topic)
            return False
        refused = self.gate.check(agent) if agent is not None and kind != "status" else None
        if refused:
            self.report(*refused, topic=m.topic, agent=agent)
            return False
        if kind != "status" and self.journal and self.journal.is_poison(m.key):  # it ended the process twice: never again
            self.report("poison", "this message was being handled at each of the last two crashes of the daemon; "
                                  "it is refused", topic=m.topic, agent=agent)
            return False
        if kind == "caption":
            self.ingestor.offer(agent, m.payload, m.topic, ack=partial(self.link.ack, m), key=m.key)
            return True
        if kind == "query":
            self.desk.offer(m)
        elif kind == "audio" and self.audio:
            self.audio.offer(agent, m)
        elif kind == "frame" and self.frames:
            self.frames.offer(agent, m)
        elif kind == "status":
            self.watch.agent(agent, m.payload)
        elif kind in ("audio", "frame"):
            self.report("unsupported", f"{kind} streams are turned off in the settings", topic=m.topic,
                        agent=agent)
        return False

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            async with asyncio.TaskGroup() as tg:
                for name, job in self.jobs():
                    tg.create_task(job, name=name)
                await stop.wait()
                loop.call_later(5, _dump_tasks)
                raise _Stop
        except* _Stop:
            if self.journal:
                self.journal.close()  # a clean stop: nothing was in flight when we died
        finally:
            notify("STOPPING=1")
            for model in {id(m): m for m in (self.llm, self.writer) if m is not None}.values():
                model.closing.set()  # a generation in a worker thread ends at its next token
            self.closing.set()  # and a background embedding at its next batch
            if self.foreground is not None:
                self.foreground.close()  # background work paused for a question stops waiting
            await self.link.close()
            if self.broker:
                await self.broker.stop()
        logger.info("stopped")
        return 0

    def jobs(self) -> list[tuple[str, object]]:
        """(task name, coroutine) of everything the daemon runs."""
        s = self.settings
        jobs = [("mqtt-link", self.link.run(self.route)), ("ingest", self.ingestor.run()),
                ("questions", self.desk.run())]
        if self.audio:
            jobs.append(("speech-vad", self.audio.listen()))
            jobs += [(f"speech-asr-{i}", self.audio.transcribe()) for i in range(s.speech.workers)]
        if self.frames:
            jobs.append(("frames", self.frames.write()))
            if self.frames.captioner:
                jobs.append(("frame-captions", self.frames.caption()))
            jobs.append(("frame-retention", self.frames.retain()))
        if self.consolidation:
            jobs.append(("consolidation", self.consolidation.run(self.ingestor.closed_until)))
        jobs.append(("stats", self._stats()))
        if self.indexer:
            jobs.append(("indexer", self.indexer.run()))
        jobs += [("watchdog", self._ready_and_watchdog(self.llm.name if self.llm else "none")),
                 ("forget-idle", self._forget_idle())]
        if self.asking and self.browse:  # the web page, Home Assistant discovery
            jobs += outlook.jobs(self.supervision(), self.asking, self.browse)
        return jobs

    def supervision(self) -> outlook.Supervised:
        return outlook.Supervised(settings=self.settings, db=self.db, clock=self.clock, link=self.link,
                                  watch=self.watch, stats=self.stats, info=self.info,
                                  closed_until=self.ingestor.closed_until, report=self.report)

    # -- background jobs ----------------------------------------------------------------
    async def _forget_idle(self) -> None:
        """State kept per agent is bounded: agents quiet for `agent_idle_s` are forgotten."""
        idle_s = self.settings.daemon.agent_idle_s
        while True:
            await asyncio.sleep(min(60.0, idle_s / 4))
            gone = self.ingestor.forget_idle(idle_s)
            for part in (self.audio, self.frames):
                if part is not None:
                    gone |= part.forget_idle(idle_s)
            if gone:
                logger.info("forgot the state of %d idle agent(s)", len(gone))

    def info(self) -> dict:
        """The retained `status/info` message (also `GET /api/status`)."""
        return {"version": VERSION, "db": str(self.db), "started": self.started, "pid": os.getpid(),
                "model": self.llm.name if self.llm else None,
                "consolidation_model": self.writer.name if self.writer else None,
                "house": {"day1": str(self.settings.house.day1), "timezone": self.settings.house.timezone}}

    def stats(self) -> dict:
        """The `stats` message (also `GET /api/stats`); `consolidation` also carries the error counts."""
        lat = sorted(self.desk.latency_ms)
        c = self.consolidation.counts if self.consolidation else {"windows": 0, "events": 0, "consolidation_failed": 0}
        consolidation = {"windows": c["windows"], "events": c["events"], **self.reports.counts,
                         "consolidation_failed": c["consolidation_failed"]}
        return {"captions": self.ingestor.counts, "questions": self.desk.counts, "consolidation": consolidation,
                "queues": {"captions": self.ingestor.queue.qsize(), "questions": self.desk.queue.qsize(),
                           "outbox": self.link.outbox.qsize()},
                "link": {"connects": self.link.connects, "dropped": self.link.dropped},
                "speech": self.audio.stats() if self.audio else None,
                "frames": self.frames.stats() if self.frames else None,
                "gate": self.gate.counts, "foreground": self.foreground.counts if self.foreground else None,
                "answer_ms_p50": lat[len(lat) // 2] if lat else None,
                "watermarks": {a: self.clock.iso(w) for a, w in self.ingestor.watermarks.items()}}

    async def _stats(self) -> None:
        while True:
            await self.link.connected.wait()
            self.link.publish(self.link.topics.status_info, json.dumps(self.info()).encode(), qos=1, retain=True)
            self.link.publish(self.link.topics.stats, json.dumps(self.stats()).encode(), qos=0)
            await asyncio.sleep(self.settings.daemon.stats_every_s)

    async def _ready_and_watchdog(self, model: str) -> None:
        await self.link.connected.wait()
        notify(f"READY=1\nSTATUS=serving; model {model}")
        from daemon.readiness import backlog, ready_lines

        r, m = self.settings.retrieval, self.settings.llm
        queued = await asyncio.to_thread(backlog, self.ingestor.store, r.encoder, r.dense,
                                         m.consolidation_model or m.model, r.second_encoder)
        for line in ready_lines(model, self.db, queued):
            logger.info("%s", line)
            if not logger.isEnabledFor(logging.INFO):  # `./dev run` logs warnings only: say it anyway
                print(f"chorus: {line}", file=sys.stderr, flush=True)
        period = watchdog_period_s()
        while period:
            await asyncio.sleep(period)
            healthy = self.link.connected.is_set() and await asyncio.to_thread(self.ingestor.store.ping)
            if healthy:  # no ping when the loop, the database or the link is sick: systemd restarts us
                notify("WATCHDOG=1")


def _dump_tasks() -> None:
    import io

    for t in asyncio.all_tasks():
        buf = io.StringIO()
        t.print_stack(file=buf)
        logger.error("still running: %s %s\n%s", t.get_name(), t.cancelling(), buf.getvalue())


class _Stop(Exception):
    pass
