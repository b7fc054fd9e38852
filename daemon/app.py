"""`chorus run`: the daemon. Named tasks in one TaskGroup; a dead worker ends the process non-zero
so that systemd restarts it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import threading
import time
from functools import partial
from pathlib import Path

from daemon import outlook, wiring
from daemon.asking import Asking
from daemon.broker import EmbeddedBroker, listening
from daemon.guard import Gate, ReportThrottle
from daemon.ingestor import Ingestor
from daemon.notify import notify, watchdog_period_s
from daemon.poison import PoisonJournal
from daemon.questions import QuestionDesk
from daemon.settings import Settings
from daemon.watch import Watch
from memory.records import WINDOW_MS
from models.yielding import Foreground
from streams.errors import StreamError
from streams.link import Inbound, Link
from streams.messages import dumps, error_payload

logger = logging.getLogger(__name__)
VERSION = "0.1.0"


class Daemon:
    def __init__(self, settings: Settings, db: Path | None = None):
        self.settings = settings
        self.db = db or settings.store.path
        self.clock = wiring.clock_of(settings)
        self.started = time.time()
        self.broker: EmbeddedBroker | None = None
        self.counts = {"windows": 0, "events": 0, "errors_sent": 0, "errors_held": 0, "consolidation_failed": 0}
        self._kick = asyncio.Event()
        self.closing = threading.Event()  # asked by work in threads that must end with the process
        self.foreground = Foreground()  # questions in flight: background work holds off meanwhile
        self.hearing = self.seeing = None
        d = settings.daemon
        self.gate = Gate(d.allow_agents, d.rate_per_agent, d.rate_burst, total_rate=d.rate_total,
                         total_burst=d.rate_total_burst, max_agents=d.max_agents)
        self.throttle = ReportThrottle(max_keys=d.max_agents)
        self.journal: PoisonJournal | None = None  # opened by run(): it reads and writes files beside the db
        self.watch = Watch()  # agents' statuses and the latest errors, for the web page and Home Assistant

    # -- start-up -------------------------------------------------------------------------
    async def _broker_host(self) -> tuple[str, int]:
        m = self.settings.mqtt
        if m.host:
            return m.host, m.port
        if await asyncio.to_thread(listening, "127.0.0.1", m.port):
            logger.info("using the MQTT broker listening on localhost:%d", m.port)
            return "127.0.0.1", m.port
        if not self.settings.daemon.embedded_broker:
            return "127.0.0.1", m.port
        self.broker = EmbeddedBroker("127.0.0.1", m.port)
        await self.broker.start()
        return "127.0.0.1", m.port

    def report(self, code: str, message: str, **where) -> None:
        held = self.throttle.admit(code, where.get("agent"))
        if held is None:  # a flood of the same complaint: counted, said later
            self.counts["errors_held"] += 1
            return
        if held:
            message += f" ({held} more like this held back)"
        logger.warning("%s: %s (%s)", code, message, {k: v for k, v in where.items() if v})
        self.counts["errors_sent"] += 1
        self.watch.error(code, message, where)
        self.link.publish(self.link.topics.errors, error_payload(code, message, **where), qos=0)

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
        elif kind == "audio" and self.hearing:
            self.hearing.offer(agent, m)
        elif kind == "frame" and self.seeing:
            self.seeing.offer(agent, m)
        elif kind == "status":
            self.watch.agent(agent, m.payload)
        elif kind in ("audio", "frame"):
            self.report("unsupported", f"{kind} streams are turned off in the settings", topic=m.topic,
                        agent=agent)
        return False

    async def run(self) -> int:
        s = self.settings
        notify("EXTEND_TIMEOUT_USEC=300000000")
        notify("STATUS=loading models")
        self.journal = PoisonJournal(self.db)
        host, port = await self._broker_host()
        llm = await asyncio.to_thread(wiring.build_llm, s)
        embedder, captioner = await asyncio.to_thread(wiring.build_vision, s)
        from assistant.answer import Answerer
        from assistant.consolidate import Consolidator
        from assistant.frames import FrameFinder
        from assistant.retrievers import Retrievers
        from memory.events import EventStore

        # one connection per worker thread; SQLite (WAL) orders the writers
        ingest_store = wiring.open_store(s, self.db, reserve=True, ingest=True)
        self.consolidator = Consolidator(EventStore(wiring.open_store(s, self.db)), llm, self.clock, s.consolidation,
                                         foreground=self.foreground)
        retrievers = Retrievers(wiring.open_store(s, self.db), self.clock, s.retrieval)
        answerer = Answerer(retrievers.store, self.clock, s.answer, llm, budget=s.retrieval.budget,
                            retrievers=retrievers)
        answerer.frames = FrameFinder(wiring.frame_store(s, retrievers.store), embedder)
        self.link = Link(wiring.link_config(s, host, port, protocol="3.1.1" if self.broker else "auto"), self.route)
        d = s.daemon
        self.ingestor = Ingestor(ingest_store, queue_size=d.caption_queue, max_bytes=d.max_caption_bytes,
                                 grace_ms=int(d.grace_s * 1000), silence_s=d.silence_s, report=self.report,
                                 queue_mb=d.caption_queue_mb, max_late_ms=int(d.max_late_h * 3_600_000),
                                 journal=self.journal, on_batch=self._maybe_kick)
        if s.speech.enabled:
            from daemon.hearing import Hearing

            self.hearing = Hearing(wiring.open_store(s, self.db), s.speech, report=self.report,
                                   advance=self.ingestor.advance, journal=self.journal)
            await asyncio.to_thread(self.hearing.load)
        if s.frames.enabled:
            from daemon.seeing import Seeing

            self.seeing = Seeing(wiring.frame_store(s, wiring.open_store(s, self.db)), s.frames, s.vision,
                                 report=self.report, embedder=embedder, captioner=captioner, journal=self.journal)
        asking = Asking(answerer, self.clock, asker=s.retrieval.asker, budget=s.retrieval.budget,
                        foreground=self.foreground)
        self.desk = QuestionDesk(asking, self.clock, self.link.topics, self.link.publish,
                                 queue_size=s.daemon.query_queue, asker=s.retrieval.asker,
                                 budget=s.retrieval.budget, report=self.report, journal=self.journal)
        self._closed_until = 0
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.link.run(), name="mqtt-link")
                tg.create_task(self.ingestor.run(), name="ingest")
                tg.create_task(self.desk.run(), name="questions")
                if self.hearing:
                    tg.create_task(self.hearing.listen(), name="speech-vad")
                    for i in range(s.speech.workers):
                        tg.create_task(self.hearing.transcribe(), name=f"speech-asr-{i}")
                if self.seeing:
                    tg.create_task(self.seeing.write(), name="frames")
                    if captioner:
                        tg.create_task(self.seeing.caption(), name="frame-captions")
                    tg.create_task(self.seeing.retain(), name="frame-retention")
                tg.create_task(self._scheduler(), name="consolidation")
                tg.create_task(self._stats(), name="stats")
                tg.create_task(self._indexer(retrievers), name="indexer")
                tg.create_task(self._ready_and_watchdog(llm.name, retrievers.store), name="watchdog")
                tg.create_task(self._forget_idle(), name="forget-idle")
                for name, job in outlook.jobs(self, asking):  # the web page, Home Assistant discovery
                    tg.create_task(job, name=name)
                await stop.wait()
                loop.call_later(5, _dump_tasks)
                raise _Stop
        except* _Stop:
            self.journal.close()  # a clean stop: nothing was in flight when we died
        finally:
            notify("STOPPING=1")
            llm.closing.set()  # a generation in a worker thread ends at its next token
            self.closing.set()  # and a background embedding at its next batch
            self.foreground.close()  # background work paused for a question stops waiting
            await self.link.close()
            if self.broker:
                await self.broker.stop()
        logger.info("stopped")
        return 0

    # -- background jobs ----------------------------------------------------------------
    def _maybe_kick(self) -> None:
        """New data closed a window on the watermark: consolidate now, not at the next tick."""
        until = self.ingestor.closed_until(int(time.time() * 1000))
        if until // WINDOW_MS > self._closed_until // WINDOW_MS:
            self._closed_until = until
            self._kick.set()

    async def _scheduler(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        every = self.settings.daemon.consolidate_every_s
        trigger = (CronTrigger(minute="*/10", timezone="UTC") if every == 600
                   else IntervalTrigger(seconds=every, timezone="UTC"))
        scheduler = AsyncIOScheduler(timezone="UTC")
        scheduler.add_job(self._tick, trigger, id="consolidate", max_instances=1, coalesce=True,
                          misfire_grace_time=None)
        scheduler.start()
        try:
            await self.consolidate()  # once at start-up: catch up on what came while we were down
            while True:
                await self._kick.wait()
                self._kick.clear()
                await self.consolidate()
        finally:
            scheduler.shutdown(wait=False)

    async def _tick(self) -> None:
        """The scheduled job only wakes the consolidation loop: one pass at a time, missed ticks coalesce."""
        self._kick.set()

    async def consolidate(self) -> None:
        """One pass over the closed windows; only the scheduler loop calls it, so passes never overlap."""
        loop = asyncio.get_running_loop()
        until = self.ingestor.closed_until(int(time.time() * 1000))

        def publish_window(r) -> None:
            if r.status != "written":
                return
            for e in r.events:
                body = {"id": e.id, "who": list(e.who), "what": e.what, "where": e.where, "how": e.how,
                        "start": self.clock.iso(e.start_ms), "end": self.clock.iso(e.end_ms), "model": e.model}
                loop.call_soon_threadsafe(partial(self.link.publish, self.link.topics.events, dumps(body), qos=1))
            self.counts["windows"] += 1
            self.counts["events"] += len(r.events)

        try:
            results = await asyncio.to_thread(self.consolidator.run, until_ms=until, on_window=publish_window)
        except Exception as e:  # a full disk or a sick database: the windows stay pending, retried next tick
            from memory.db import is_full

            self.counts["consolidation_failed"] += 1
            full = is_full(e) or is_full(e.__cause__ or e)
            logger.warning("consolidation pass failed (%s: %s); windows stay pending", type(e).__name__, e)
            self.report("disk_full" if full else "internal", f"consolidation paused: {type(e).__name__}: {e}")
            return
        if any(r.status == "preempted" for r in results):
            self._kick.set()

    async def _indexer(self, retrievers) -> None:
        """Embeds new units in the background, on a connection of its own, so that a question
        never waits for a backlog (at start-up: whatever arrived while the daemon was down); it
        stops at its next batch while a question is answered, leaving the cores to the answer."""
        from assistant.retrievers import Retrievers

        if not await asyncio.to_thread(retrievers.dense_ok):
            return
        mine = Retrievers(wiring.open_store(self.settings, self.db), self.clock, self.settings.retrieval,
                          embedder_factory=lambda: retrievers.vectors()[1])
        while True:
            try:
                done = await asyncio.to_thread(mine.prepare, lexical=False, batch=32,
                                               stop=self.foreground.between(self.closing.is_set))
                if any(done.values()):
                    logger.info("embedded %s", done)
            except Exception as e:  # a full disk: the vectors wait, the daemon keeps serving
                from memory.db import is_full

                full = is_full(e) or is_full(e.__cause__ or e)
                logger.warning("embedding paused (%s: %s)", type(e).__name__, e)
                self.report("disk_full" if full else "internal", f"embedding paused: {type(e).__name__}: {e}")
            await asyncio.sleep(self.settings.daemon.index_every_s)

    async def _forget_idle(self) -> None:
        """State kept per agent is bounded: agents quiet for `agent_idle_s` are forgotten."""
        idle_s = self.settings.daemon.agent_idle_s
        while True:
            await asyncio.sleep(min(60.0, idle_s / 4))
            gone = self.ingestor.forget_idle(idle_s)
            for part in (self.hearing, self.seeing):
                if part is not None:
                    gone |= part.forget_idle(idle_s)
            if gone:
                logger.info("forgot the state of %d idle agent(s)", len(gone))

    def info(self) -> dict:
        """The retained `status/info` message (also `GET /api/status`)."""
        return {"version": VERSION, "db": str(self.db), "started": self.started, "pid": os.getpid(),
                "model": self.consolidator.llm.name if self.consolidator.llm else None,
                "house": {"day1": str(self.settings.house.day1), "timezone": self.settings.house.timezone}}

    def stats(self) -> dict:
        """The `stats` message (also `GET /api/stats`)."""
        lat = sorted(self.desk.latency_ms)
        return {"captions": self.ingestor.counts, "questions": self.desk.counts, "consolidation": self.counts,
                "queues": {"captions": self.ingestor.queue.qsize(), "questions": self.desk.queue.qsize(),
                           "outbox": self.link.outbox.qsize()},
                "link": {"connects": self.link.connects, "dropped": self.link.dropped},
                "speech": self.hearing.stats() if self.hearing else None,
                "frames": self.seeing.stats() if self.seeing else None,
                "gate": self.gate.counts, "foreground": self.foreground.counts,
                "answer_ms_p50": lat[len(lat) // 2] if lat else None,
                "watermarks": {a: self.clock.iso(w) for a, w in self.ingestor.watermarks.items()}}

    async def _stats(self) -> None:
        while True:
            await self.link.connected.wait()
            self.link.publish(self.link.topics.status_info, json.dumps(self.info()).encode(), qos=1, retain=True)
            self.link.publish(self.link.topics.stats, json.dumps(self.stats()).encode(), qos=0)
            await asyncio.sleep(self.settings.daemon.stats_every_s)

    async def _ready_and_watchdog(self, model: str, store) -> None:
        await self.link.connected.wait()
        notify(f"READY=1\nSTATUS=serving; model {model}")
        from daemon.readiness import backlog, ready_lines

        r = self.settings.retrieval
        for line in ready_lines(model, self.db, await asyncio.to_thread(backlog, store, r.encoder, r.dense)):
            logger.info("%s", line)
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


def run(settings: Settings, db: Path | None = None) -> int:
    return asyncio.run(Daemon(settings, db).run())
