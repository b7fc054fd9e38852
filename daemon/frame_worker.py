"""The live frame worker: JPEGs from `agents/{agent}/frame` onto disk under the retention policy; with a vision
model configured, each stored frame gets a vector (text finds frames) and, every
`caption_every_s`, the newest frame of each agent gets a caption that becomes an observation.

Tasks: `write` (files and rows, vectors), `caption` (the slow captioner, which only ever sees
the newest frame of each agent, so it can fall behind without a backlog), `retain`. A fault inside
any of them (a full disk, a failed file write, a locked database, a model error) costs the frames
at hand, is reported on `errors` (throttled) and never ends the worker.

One frame per agent per `every_ms` of capture time is kept; a camera whose clock jumps backwards
gets one frame per `every_ms` of our clock: it cannot flood the disk.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from daemon.poison import PoisonJournal
from memory.db import is_full
from memory.errors import RecordError
from memory.frames import Frame, FrameSettings, FrameStore
from memory.records import Observation
from models.config import VisionSettings
from models.errors import ModelError
from streams.errors import StreamError
from streams.link import Inbound
from streams.messages import MediaHeader, split_media
from streams.wire import Drops, plausible_ms

logger = logging.getLogger(__name__)


class FrameWorker:
    def __init__(self, frames: FrameStore, fs: FrameSettings, vs: VisionSettings, *, report: Callable[..., None],
                 embedder=None, captioner=None, journal: PoisonJournal | None = None):
        self.frames, self.fs, self.vs, self.report, self.journal = frames, fs, vs, report, journal
        self.embedder, self.captioner = embedder, captioner
        self.queue: asyncio.Queue[tuple[str, MediaHeader, bytes, str, str]] = asyncio.Queue()
        self.queued_bytes = 0  # bounded in bytes, not frames: a frame may be 5 kB or 2 MB
        self.last_kept: dict[str, tuple[int, float]] = {}  # agent -> (capture ts, arrival monotonic)
        self.newest: dict[str, tuple[Frame, bytes]] = {}  # per agent, for the captioner
        self.last_caption: dict[str, int] = {}
        self._new = asyncio.Event()
        self._db = threading.Lock()  # one connection, used from worker threads one at a time
        self.counts = {"stored": 0, "duplicates": 0, "skipped": 0, "rejected": 0, "dropped": 0, "deleted": 0,
                       "embedded": 0, "captioned": 0, "failed": 0}
        self.drops = Drops()
        self.kept = {"frames": 0, "bytes": 0}
        if embedder is not None:
            frames.ensure_vectors(embedder.name, embedder.dim)

    def offer(self, agent: str, m: Inbound) -> None:
        try:
            h, jpeg = split_media(m.payload, m.user, where=m.topic, max_bytes=self.fs.max_frame_bytes)
        except StreamError as e:
            self.counts["rejected"] += 1
            return self.report(e.code, str(e), topic=m.topic, agent=agent, id=e.id)
        if not plausible_ms(h.ts, int(time.time() * 1000)):
            self.counts["rejected"] += 1
            return self.report("bad_time", f"ts {h.ts} is not a plausible epoch-ms time", topic=m.topic, agent=agent,
                               id=h.id)
        now = time.monotonic()
        last = self.last_kept.get(agent)
        # a fast camera: one frame per `every_ms` of capture time is kept; a frame from before the
        # last one kept (a clock that jumped back) only once `every_ms` has passed since, by our clock
        if last is not None and (abs(h.ts - last[0]) < self.fs.every_ms or (
                h.ts < last[0] and now - last[1] < self.fs.every_ms / 1000)):
            self.counts["skipped"] += 1
            return
        if self.queued_bytes + len(jpeg) <= self.fs.queue_mb * 1e6:
            self.queue.put_nowait((agent, h, jpeg, m.topic, m.key))
            self.queued_bytes += len(jpeg)
            self.last_kept[agent] = (h.ts, now)
        else:
            self.counts["dropped"] += 1
            if self.drops.note():
                self.report("queue_full", f"frame queue full: {self.counts['dropped']} dropped so far",
                            topic=m.topic, agent=agent)

    async def write(self) -> None:
        """The frame-writing loop."""
        try:
            await asyncio.to_thread(self.frames.sweep)
            if self.embedder is not None:
                n = await asyncio.to_thread(self._locked, backfill, self.frames, self.embedder)
                if n:
                    logger.info("made vectors for %d frames stored before the embedder", n)
        except Exception as e:  # a sick folder or database at start-up: frames still come in
            self._failed("frames_failed", f"start-up sweep of the frames folder failed: {type(e).__name__}: {e}")
        while True:
            batch = [await self.queue.get()]
            while not self.queue.empty() and len(batch) < 50:
                batch.append(self.queue.get_nowait())
            self.queued_bytes -= sum(len(item[2]) for item in batch)
            if self.journal:
                self.journal.begin("frames", [item[4] for item in batch])
            try:
                problems = await asyncio.to_thread(self._write, batch)
            except Exception as e:  # a full disk, a failed write, a locked database: these frames are lost
                full = is_full(e) or is_full(e.__cause__ or e)
                self._failed("disk_full" if full else "frames_failed",
                             f"{len(batch)} frames not stored: {type(e).__name__}: {e}", agent=batch[0][0])
                problems = []
            finally:
                if self.journal:
                    self.journal.end("frames")
            for agent, topic, message in problems:
                self.counts["rejected"] += 1
                self.report("bad_frame", message, topic=topic, agent=agent)
            if self.newest and self.captioner is not None:
                self._new.set()

    def _failed(self, code: str, message: str, agent: str | None = None) -> None:
        logger.warning("%s: %s", code, message)
        self.counts["failed"] += 1
        self.report(code, message, agent=agent)

    def _write(self, batch) -> list[tuple[str, str, str]]:
        problems, stored = [], []
        for agent, h, jpeg, topic, _ in batch:
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
                except Exception as e:  # a locked database, a full disk: this caption is lost, not the worker
                    self._failed("frames_failed", f"storing a frame caption failed: {type(e).__name__}: {e}", agent)
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
            try:
                r = await asyncio.to_thread(self._enforce)
                self.counts["deleted"] += r.deleted
                self.kept = {"frames": r.kept, "bytes": r.kept_bytes}
            except Exception as e:  # tried again at the next period
                self._failed("frames_failed", f"retention pass failed: {type(e).__name__}: {e}")
            await asyncio.sleep(self.fs.retention_every_s)

    def forget_idle(self, idle_s: float) -> set[str]:
        """Forget the per-agent state (last frame kept, caption timing) of agents quiet for `idle_s`."""
        now = time.monotonic()
        gone = {a for a, (_, seen) in self.last_kept.items() if now - seen > idle_s}
        for a in gone:
            self.last_kept.pop(a, None)
            self.newest.pop(a, None)
            self.last_caption.pop(a, None)
        return gone

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
