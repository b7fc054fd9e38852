"""Frames: JPEGs from `agents/{agent}/frame` onto disk under the retention policy; with a vision
model configured, each stored frame gets a vector (text finds frames) and, every
`caption_every_s`, the newest frame of each agent gets a caption that becomes an observation.

Workers: `store` (write files and rows, embed), `caption` (the slow captioner, which only ever
sees the newest frame of each agent, so it can fall behind without a backlog), `retain`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from daemon.ingestor import EPOCH_2000_MS, FUTURE_SLACK_MS
from memory.errors import RecordError
from memory.frames import Frame, FrameSettings, FrameStore
from memory.records import Observation
from models.config import VisionSettings
from models.errors import ModelError
from streams.errors import StreamError
from streams.link import Inbound
from streams.messages import MediaHeader, split_media

logger = logging.getLogger(__name__)


class Seeing:
    def __init__(self, frames: FrameStore, fs: FrameSettings, vs: VisionSettings, *, report: Callable[..., None],
                 embedder=None, captioner=None):
        self.frames, self.fs, self.vs, self.report = frames, fs, vs, report
        self.embedder, self.captioner = embedder, captioner
        self.queue: asyncio.Queue[tuple[str, MediaHeader, bytes, str]] = asyncio.Queue()
        self.queued_bytes = 0  # bounded in bytes, not frames: a frame may be 5 kB or 2 MB
        self.last_kept: dict[str, int] = {}
        self.newest: dict[str, tuple[Frame, bytes]] = {}  # per agent, for the captioner
        self.last_caption: dict[str, int] = {}
        self._new = asyncio.Event()
        self._db = threading.Lock()  # one connection, used from worker threads one at a time
        self.counts = {"stored": 0, "duplicates": 0, "skipped": 0, "rejected": 0, "dropped": 0, "deleted": 0,
                       "embedded": 0, "captioned": 0}
        self.kept = {"frames": 0, "bytes": 0}
        if embedder is not None:
            frames.ensure_vectors(embedder.name, embedder.dim)

    def offer(self, agent: str, m: Inbound) -> None:
        try:
            h, jpeg = split_media(m.payload, m.user, where=m.topic, max_bytes=self.fs.max_frame_bytes)
        except StreamError as e:
            self.counts["rejected"] += 1
            return self.report(e.code, str(e), topic=m.topic, agent=agent)
        if not EPOCH_2000_MS <= h.ts <= time.time() * 1000 + FUTURE_SLACK_MS:
            self.counts["rejected"] += 1
            return self.report("bad_time", f"ts {h.ts} is not a plausible epoch-ms time", topic=m.topic, agent=agent,
                               id=h.id)
        last = self.last_kept.get(agent)
        if last is not None and 0 <= h.ts - last < self.fs.every_ms:
            self.counts["skipped"] += 1  # a fast camera: one frame per `every_ms` is kept
            return
        if self.queued_bytes + len(jpeg) <= self.fs.queue_mb * 1e6:
            self.queue.put_nowait((agent, h, jpeg, m.topic))
            self.queued_bytes += len(jpeg)
            self.last_kept[agent] = h.ts
        else:
            self.counts["dropped"] += 1
            if self.counts["dropped"] in (1, 10, 100) or self.counts["dropped"] % 1000 == 0:
                self.report("queue_full", f"frame queue full: {self.counts['dropped']} dropped so far",
                            topic=m.topic, agent=agent)

    async def store(self) -> None:
        await asyncio.to_thread(self.frames.sweep)
        if self.embedder is not None:
            n = await asyncio.to_thread(self._locked, backfill, self.frames, self.embedder)
            if n:
                logger.info("made vectors for %d frames stored before the embedder", n)
        while True:
            batch = [await self.queue.get()]
            while not self.queue.empty() and len(batch) < 50:
                batch.append(self.queue.get_nowait())
            self.queued_bytes -= sum(len(j) for _, _, j, _ in batch)
            for agent, topic, message in await asyncio.to_thread(self._write, batch):
                self.counts["rejected"] += 1
                self.report("bad_frame", message, topic=topic, agent=agent)
            if self.newest and self.captioner is not None:
                self._new.set()

    def _write(self, batch) -> list[tuple[str, str, str]]:
        problems, stored = [], []
        for agent, h, jpeg, topic in batch:
            try:
                with self._db:
                    f = self.frames.add(agent, h.ts, h.seq, jpeg, h.id)
            except RecordError as e:
                problems.append((agent, topic, str(e)))
                continue
            if f is None:
                self.counts["duplicates"] += 1
                continue
            self.counts["stored"] += 1
            stored.append((f, jpeg))
            self.newest[agent] = (f, jpeg)
        if self.embedder is not None and stored:
            try:
                vecs = self.embedder.embed_images([j for _, j in stored])
                with self._db:
                    for (f, _), v in zip(stored, vecs, strict=True):
                        self.frames.add_vector(f.id, v)
                self.counts["embedded"] += len(stored)
            except (ModelError, ValueError, OSError) as e:  # a frame the decoder refuses keeps its file
                problems.append((stored[0][0].agent, None, f"frame embedding failed: {e}"))
        return problems

    async def caption(self) -> None:
        if self.captioner is None:
            return
        while True:
            await self._new.wait()
            self._new.clear()
            now = time.monotonic()
            due = [a for a in self.newest if now - self.last_caption.get(a, -1e9) >= self.vs.caption_every_s]
            for agent in due:
                f, jpeg = self.newest.pop(agent)
                self.last_caption[agent] = now
                try:
                    await asyncio.to_thread(self._caption, f, jpeg)
                except ModelError as e:
                    self.report("model_error", f"captioning a frame failed: {e}", agent=agent)
            if self.newest:  # others wait for their period: look again then
                asyncio.get_running_loop().call_later(self.vs.caption_every_s / 4, self._new.set)

    def _caption(self, f: Frame, jpeg: bytes) -> None:
        text = self.captioner.caption(jpeg, self.vs.caption_prompt)
        if text:
            with self._db:
                self.frames.store.add([Observation(agent=f.agent, kind="frame_caption", start_ms=f.ts_ms, end_ms=f.ts_ms,
                                                   text=text, ext_id=f"frame-{f.ts_ms}")])
            self.counts["captioned"] += 1

    async def retain(self) -> None:
        while True:
            r = await asyncio.to_thread(self._enforce)
            self.counts["deleted"] += r.deleted
            self.kept = {"frames": r.kept, "bytes": r.kept_bytes}
            await asyncio.sleep(self.fs.retention_every_s)

    def _locked(self, fn, *args):
        with self._db:  # one worker thread at a time on the connection
            return fn(*args)

    def _enforce(self):
        with self._db:
            return self.frames.enforce(max_bytes=int(self.fs.max_mb * 1_000_000),
                                       max_age_ms=int(self.fs.max_age_h * 3_600_000))

    def stats(self) -> dict:
        return self.counts | {"kept": self.kept["frames"], "kept_bytes": self.kept["bytes"],
                              "queue": self.queue.qsize()}


def backfill(frames: FrameStore, embedder, batch: int = 32) -> int:
    """Vectors for the frames that have none (stored before the embedder was configured); a frame
    that cannot be read or decoded is skipped."""
    todo, done = frames.without_vectors(limit=10**7), 0
    for i in range(0, len(todo), batch):
        for f in todo[i:i + batch]:
            try:
                frames.add_vector(f.id, embedder.embed_images([f.path.read_bytes()])[0])
                done += 1
            except (ModelError, OSError) as e:
                logger.warning("no vector for frame %s: %s", f.path, e)
    return done
