"""Captions from the wire into the store, in batches, with a watermark per agent.

A QoS 1 caption is acknowledged to the broker only once its batch is committed (or once it is
rejected), so a crash loses nothing: the broker sends the unacknowledged ones again and
ingestion is idempotent (agent + message id), so a resend is a no-op. A full disk holds the batch
(unacknowledged, retried with backoff, `disk_full` on errors) while the broker keeps the rest.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable

from daemon.ingest import to_observation
from memory.errors import RecordError, StorageFull
from memory.store import Store
from streams.errors import StreamError
from streams.messages import AgentCaption, CaptionMessage

logger = logging.getLogger(__name__)
EPOCH_2000_MS = 946_684_800_000
FUTURE_SLACK_MS = 86_400_000
# a caption is one line of untrusted text: no control characters or line breaks that could pose as
# other lines ("Question: ...", "[Alice] ...") in a prompt
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
Ack = Callable[[], None]


class Ingestor:
    def __init__(self, store: Store, *, queue_size: int, max_bytes: int, grace_ms: int, silence_s: float,
                 report: Callable[..., None]):
        self.store = store
        self.queue: asyncio.Queue[tuple[str, bytes, str, Ack | None]] = asyncio.Queue(maxsize=queue_size)
        self.max_bytes, self.grace_ms, self.silence_s = max_bytes, grace_ms, silence_s
        self.report = report  # report(code, message, topic=, agent=, id=)
        self.watermarks: dict[str, int] = {}
        self.last_data = 0.0
        self.counts = {"stored": 0, "duplicates": 0, "rejected": 0, "dropped": 0, "disk_full": 0}
        self.on_batch: Callable[[], None] | None = None
        self.blocked_since: float | None = None  # the disk is full: waiting for space

    def offer(self, agent: str, payload: bytes, topic: str, ack: Ack | None = None) -> None:
        """Called from the link's receive loop: never blocks; a full queue drops and says so.
        `ack` is called once the caption is committed or rejected."""
        try:
            self.queue.put_nowait((agent, payload, topic, ack))
        except asyncio.QueueFull:
            if ack:
                ack()  # dropped for good: the receive maximum keeps QoS 1 below the queue size
            self.counts["dropped"] += 1
            if self.counts["dropped"] in (1, 10, 100) or self.counts["dropped"] % 1000 == 0:
                self.report("queue_full", f"caption queue full: {self.counts['dropped']} dropped so far",
                            topic=topic, agent=agent)

    def parse(self, agent: str, payload: bytes, topic: str) -> AgentCaption | None:
        if len(payload) > self.max_bytes:
            self.counts["rejected"] += 1
            self.report("too_large", f"caption of {len(payload)} bytes (limit {self.max_bytes})", topic=topic,
                        agent=agent)
            return None
        try:
            msg = CaptionMessage.from_bytes(payload, where=topic)
            now = int(time.time() * 1000)
            if not EPOCH_2000_MS <= msg.ts <= now + FUTURE_SLACK_MS:
                self.counts["rejected"] += 1
                self.report("bad_time", f"ts {msg.ts} is not a plausible epoch-ms time (2000 .. now + 1 day)",
                            topic=topic, agent=agent, id=msg.id)
                return None
            if msg.end - now > FUTURE_SLACK_MS:
                self.counts["rejected"] += 1
                self.report("bad_time", f"end_ts {msg.end} is more than a day ahead of now", topic=topic,
                            agent=agent, id=msg.id)
                return None
            text = _CONTROL.sub(" ", msg.text).strip()
            if not text:
                raise StreamError("text has nothing but control characters", where=topic)
            return AgentCaption(agent=agent, msg=msg.model_copy(update={"text": text}) if text != msg.text else msg)
        except StreamError as e:
            self.counts["rejected"] += 1
            self.report(e.code, str(e), topic=topic, agent=agent, id=_id_of(payload))
        except (ValueError, UnicodeDecodeError) as e:
            self.counts["rejected"] += 1
            self.report("bad_input", str(e), topic=topic, agent=agent)
        except Exception as e:  # whatever else a payload provokes, the daemon keeps serving
            logger.exception("caption on %s", topic)
            self.counts["rejected"] += 1
            self.report("internal", f"{type(e).__name__}: {e}", topic=topic, agent=agent)
        return None

    async def run(self) -> None:
        while True:
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
            captions = [c for c in (self.parse(*item[:3]) for item in batch) if c]
            if captions:
                await self._store_until_done(captions)
            for *_, ack in batch:  # committed or rejected: the broker may forget them now
                if ack:
                    ack()
            if self.on_batch:
                self.on_batch()

    async def _store_until_done(self, captions: list[AgentCaption]) -> None:
        """Store the batch; while the disk is full, hold it and try again with backoff (questions
        are still answered: reading needs no space)."""
        wait = 1.0
        while True:
            try:
                await asyncio.to_thread(self._store, captions)
                if self.blocked_since is not None:
                    logger.warning("disk space is back after %.0fs: storing again", time.monotonic() - self.blocked_since)
                    self.blocked_since = None
                return
            except StorageFull as e:
                self.counts["disk_full"] += 1
                if self.blocked_since is None:
                    self.blocked_since = time.monotonic()
                self.report("disk_full", f"{len(captions)} captions wait for disk space (retrying; the broker "
                            f"keeps the rest): {e}", agent=captions[0].agent)
                await asyncio.sleep(wait)
                wait = min(wait * 2, 30.0)

    def _store(self, captions: list[AgentCaption]) -> None:
        try:
            r = self.store.add(to_observation(c) for c in captions)
            self.counts["stored"] += r.inserted
            self.counts["duplicates"] += r.duplicates
        except RecordError:  # one bad record spoils its batch: store them one by one
            for c in captions:
                try:
                    r = self.store.add([to_observation(c)])
                    self.counts["stored"] += r.inserted
                    self.counts["duplicates"] += r.duplicates
                except RecordError as e:
                    self.counts["rejected"] += 1
                    self.report("bad_record", str(e), agent=c.agent, id=c.msg.id)
        for c in captions:
            self.watermarks[c.agent] = max(self.watermarks.get(c.agent, 0), c.msg.end)
        self.last_data = time.monotonic()

    def advance(self, agent: str, ms: int) -> None:
        """Data of `agent` made elsewhere (transcripts, frames) is in memory up to `ms`."""
        if ms > self.watermarks.get(agent, 0):
            self.watermarks[agent] = ms
            self.last_data = time.monotonic()
            if self.on_batch:
                self.on_batch()

    def closed_until(self, now_ms: int) -> int:
        """Event time up to which windows are closed: the newest data seen minus the grace while
        streams run; the wall clock once they have been silent for `silence_s`."""
        if not self.watermarks or time.monotonic() - self.last_data > self.silence_s:
            return now_ms
        return max(self.watermarks.values()) - self.grace_ms


def _id_of(payload: bytes) -> str | None:
    import json

    try:
        v = json.loads(payload)
        return str(v.get("id"))[:128] if isinstance(v, dict) and v.get("id") is not None else None
    except ValueError:
        return None
