"""Captions from the wire into the store, in batches, with a watermark per agent.

A QoS 1 caption is acknowledged to the broker only once its batch is committed with
`synchronous=FULL` (or once it is rejected), so neither a crash nor a power cut loses one: the broker
sends the unacknowledged ones again and ingestion is idempotent (agent + message id), so a resend is
a no-op. A full disk holds the batch (unacknowledged, retried with backoff, `disk_full` on errors)
while the broker keeps the rest. A caption the queue has no room for is not acknowledged either.

One agent cannot take the box: a caption older than `max_late_h` behind the newest data gets
`too_late`, a 30-second segment past its cap gets `segment_full` (the store refuses it), and the
queue is bounded in bytes as well as in captions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from daemon.poison import PoisonJournal
from daemon.recordings import to_observation
from memory.errors import RecordError, StorageFull
from memory.records import clean_line
from memory.store import Store
from streams.errors import StreamError
from streams.messages import AgentCaption, CaptionMessage
from streams.wire import FUTURE_SLACK_MS, Drops, plausible_ms

logger = logging.getLogger(__name__)
Ack = Callable[[], None]
# a test-only hook: a caption whose payload holds this marker ends the process as a native crash would
_CRASH_MARKER = os.environ.get("CHORUS_TEST_CRASH_MARKER", "").encode() or None


@dataclass(frozen=True)
class Item:
    agent: str
    payload: bytes
    topic: str
    ack: Ack | None
    key: str = ""


class Ingestor:
    def __init__(self, store: Store, *, queue_size: int, max_bytes: int, grace_ms: int, silence_s: float,
                 report: Callable[..., None], queue_mb: float = 64.0, max_late_ms: int = 48 * 3_600_000,
                 journal: PoisonJournal | None = None, on_batch: Callable[[int], None] | None = None):
        self.store = store
        self.queue: asyncio.Queue[Item] = asyncio.Queue(maxsize=queue_size)
        self.queued_bytes, self.queue_bytes = 0, int(queue_mb * 1e6)
        self.max_bytes, self.grace_ms, self.silence_s, self.max_late_ms = max_bytes, grace_ms, silence_s, max_late_ms
        self.report = report  # report(code, message, topic=, agent=, id=)
        self.journal = journal
        self.on_batch = on_batch  # on_batch(closed_until_ms): after each batch and each advance
        self.watermarks: dict[str, int] = {}  # replaced, never changed in place: readers iterate it
        self._marks = threading.Lock()
        self.newest = 0  # the newest event time of any agent
        self.seen: dict[str, float] = {}  # agent -> when it last stored (monotonic), to forget idle ones
        self.last_data = 0.0
        self.counts = {"stored": 0, "duplicates": 0, "rejected": 0, "dropped": 0, "disk_full": 0}
        self.drops = Drops()
        self.blocked_since: float | None = None  # the disk is full: waiting for space

    def offer(self, agent: str, payload: bytes, topic: str, ack: Ack | None = None, key: str = "") -> None:
        """Called from the link's receive loop: never blocks. `ack` is called once the caption is
        committed or rejected; a caption the queue has no room for is not acknowledged, so a QoS 1
        one stays with the broker (sent again on the next connection)."""
        if self.queued_bytes + len(payload) > self.queue_bytes or self.queue.full():
            self.counts["dropped"] += 1
            if self.drops.note():
                self.report("queue_full", f"caption queue full: {self.counts['dropped']} dropped so far",
                            topic=topic, agent=agent)
            return
        self.queue.put_nowait(Item(agent, payload, topic, ack, key))
        self.queued_bytes += len(payload)

    def parse(self, agent: str, payload: bytes, topic: str) -> AgentCaption | None:
        try:
            return self._parse(agent, payload, topic)
        except StreamError as e:
            self._reject(e.code, str(e), topic, agent, e.id)
        except ValueError as e:  # a value the checks above let through but a model refuses
            self._reject("bad_input", str(e), topic, agent, None)
        except Exception as e:  # whatever else a payload provokes, the daemon keeps serving
            logger.exception("caption on %s", topic)
            self._reject("internal", f"{type(e).__name__}: {e}", topic, agent, None)
        return None

    def _reject(self, code: str, message: str, topic: str, agent: str, mid: str | None) -> None:
        self.counts["rejected"] += 1
        self.report(code, message, topic=topic, agent=agent, id=mid)

    def _parse(self, agent: str, payload: bytes, topic: str) -> AgentCaption | None:
        if len(payload) > self.max_bytes:
            self._reject("too_large", f"caption of {len(payload)} bytes (limit {self.max_bytes})", topic, agent, None)
            return None
        if _CRASH_MARKER and _CRASH_MARKER in payload:
            os._exit(70)
        msg = CaptionMessage.from_bytes(payload, where=topic)
        now = int(time.time() * 1000)
        if not plausible_ms(msg.ts, now):
            self._reject("bad_time", f"ts {msg.ts} is not a plausible epoch-ms time (2000 .. now + 1 day)",
                         topic, agent, msg.id)
            return None
        if msg.end - now > FUTURE_SLACK_MS:
            self._reject("bad_time", f"end_ts {msg.end} is more than a day ahead of now", topic, agent, msg.id)
            return None
        newest = self.newest
        if newest - msg.ts > self.max_late_ms:
            self._reject("too_late", f"ts {msg.ts} is more than {self.max_late_ms / 3_600_000:g} h behind the newest "
                                     f"data ({newest}): send old recordings with `chorus import`", topic, agent, msg.id)
            return None
        text, speaker = clean_line(msg.text), clean_line(msg.speaker) if msg.speaker else msg.speaker
        if not text:
            raise StreamError("text has nothing but control characters", where=topic, id=msg.id)
        if (text, speaker) != (msg.text, msg.speaker):
            msg = msg.model_copy(update={"text": text, "speaker": speaker or None})
        return AgentCaption(agent=agent, msg=msg)

    async def run(self) -> None:
        while True:
            batch = await self._collect()
            self.queued_bytes -= sum(len(i.payload) for i in batch)
            journal = self.journal
            # messages in flight when the last run died go one at a time, so that a second death
            # names the one that caused it
            suspects = [i for i in batch if journal and journal.is_suspect(i.key)]
            plain = [i for i in batch if not (journal and journal.is_suspect(i.key))]
            for part in ([plain] if plain else []) + [[i] for i in suspects]:
                await self._handle(part)
            self._moved()

    async def _collect(self) -> list[Item]:
        batch = [await self.queue.get()]
        # up to 0.2 s of messages, but no waiting on a quiet queue: the broker sends no more than
        # its in-flight window (20 by default for MQTT 3.1.1 clients of mosquitto) before our acks
        deadline = time.monotonic() + 0.2
        idle = 0
        while len(batch) < 1000 and time.monotonic() < deadline and idle < 3:
            try:
                batch.append(self.queue.get_nowait())
                idle = 0
            except asyncio.QueueEmpty:
                idle += 1
                await asyncio.sleep(0.01)
        return batch

    async def _handle(self, batch: list[Item]) -> None:
        if self.journal:
            self.journal.begin("ingest", [i.key for i in batch if i.key])
        captions = [c for c in (self.parse(i.agent, i.payload, i.topic) for i in batch) if c]
        if captions:
            await self._store_until_done(captions)
        for i in batch:  # committed or rejected: the broker may forget them now
            if i.ack:
                i.ack()
        if self.journal:
            self.journal.end("ingest")

    async def _store_until_done(self, captions: list[AgentCaption]) -> None:
        """Store the batch; while the disk is full, hold it and try again with backoff (questions
        are still answered: reading needs no space). Any other failure of the store (a locked or
        sick database) is retried the same way: an acknowledged caption must be stored."""
        wait = 1.0
        while True:
            try:
                await asyncio.to_thread(self._store, captions)
                if self.blocked_since is not None:
                    logger.warning("storing again after %.0fs", time.monotonic() - self.blocked_since)
                    self.blocked_since = None
                return
            except StorageFull as e:
                self.counts["disk_full"] += 1
                self._blocked("disk_full", f"{len(captions)} captions wait for disk space (retrying; the broker "
                                           f"keeps the rest): {e}", captions[0].agent)
            except Exception as e:  # database is locked, an I/O error: hold the batch, keep the task
                logger.warning("storing %d captions failed: %s: %s", len(captions), type(e).__name__, e)
                self._blocked("store_failed", f"{len(captions)} captions wait: {type(e).__name__}: {e}",
                              captions[0].agent)
            await asyncio.sleep(wait)
            wait = min(wait * 2, 30.0)

    def _blocked(self, code: str, message: str, agent: str) -> None:
        if self.blocked_since is None:
            self.blocked_since = time.monotonic()
        self.report(code, message, agent=agent)

    def _store(self, captions: list[AgentCaption]) -> None:
        try:
            self._count(self.store.add(to_observation(c) for c in captions))
        except RecordError:  # one bad record spoils its batch: store them one by one
            for c in captions:
                try:
                    self._count(self.store.add([to_observation(c)]))
                except RecordError as e:
                    self._reject("bad_record", str(e), None, c.agent, c.msg.id)
        marks = dict(self.watermarks)
        for c in captions:
            marks[c.agent] = max(marks.get(c.agent, 0), c.msg.end)
        self._set_marks(marks, {c.agent for c in captions})

    def _count(self, r) -> None:
        self.counts["stored"] += r.inserted
        self.counts["duplicates"] += r.duplicates
        for ob, why in r.refused:
            self._reject("segment_full", why, None, ob.agent, ob.ext_id)

    def _set_marks(self, marks: dict[str, int], touched) -> None:
        """Publish new watermarks from any thread: readers on the loop see one dict or the next."""
        now = time.monotonic()
        with self._marks:
            self.watermarks = marks
            self.newest = max(self.newest, *marks.values()) if marks else self.newest
            self.last_data = now
            self.seen = self.seen | dict.fromkeys(touched, now)

    def advance(self, agent: str, ms: int) -> None:
        """Data of `agent` made elsewhere (transcripts, frames) is in memory up to `ms`."""
        if ms > self.watermarks.get(agent, 0):
            self._set_marks(self.watermarks | {agent: ms}, (agent,))
            self._moved()

    def _moved(self) -> None:
        if self.on_batch:
            self.on_batch(self.closed_until(int(time.time() * 1000)))

    def forget_idle(self, idle_s: float) -> set[str]:
        """Drop the watermarks of agents that stored nothing for `idle_s` (bounded state: their windows
        closed long ago); their names."""
        now = time.monotonic()
        with self._marks:
            gone = {a for a, t in self.seen.items() if now - t > idle_s}
            if gone:
                self.watermarks = {a: w for a, w in self.watermarks.items() if a not in gone}
                self.seen = {a: t for a, t in self.seen.items() if a not in gone}
        return gone

    def closed_until(self, now_ms: int) -> int:
        """Event time up to which windows are closed: the newest data seen minus the grace while
        streams run; the wall clock once they have been silent for `silence_s`."""
        marks = self.watermarks
        if not marks or time.monotonic() - self.last_data > self.silence_s:
            return now_ms
        return max(marks.values()) - self.grace_ms
