"""The live audio worker: audio chunks per agent -> utterances (Silero VAD) -> faster-whisper ->
transcripts, hearing each agent's stream through `daemon/audio_stream.py`.

Two kinds of task: `listen` places each agent's chunks in stream time and cuts utterances in a
worker thread; `transcribe` (one or more, `speech.workers`) recognises them one at a time in
another thread and stores the lines as transcript observations through the same store path as
captions. A fault inside either (a model error, a locked database, a full disk) costs the batch or
the utterance, is reported on `errors` (throttled) and never ends the worker; a full disk is waited
out, the utterance kept. Between the two waits a backlog bounded in seconds of speech: when recognition falls behind, the oldest utterance is
dropped and reported (`audio_backlog`), so memory never grows without bound.

The agent's watermark advances only up to the audio that is settled (found silent, or
transcribed and stored), so a 10-minute window does not close before its speech is in memory.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from daemon.audio_stream import AgentAudio, Utterance, load_transcriber, observations
from daemon.poison import PoisonJournal
from memory.errors import StorageFull
from memory.store import Store
from models.config import SpeechSettings
from models.speech import RATE, Transcriber, pcm16_to_float
from streams.errors import SchemaViolation, StreamError
from streams.link import Inbound
from streams.messages import AUDIO_RATE, MediaHeader, split_media
from streams.wire import Drops, plausible_ms

logger = logging.getLogger(__name__)


class AudioWorker:
    def __init__(self, store: Store, settings: SpeechSettings, *, report: Callable[..., None],
                 advance: Callable[[str, int], None], journal: PoisonJournal | None = None,
                 model: Transcriber | None = None):
        """`model`: Whisper, or None to load it (`load`) before the first utterance."""
        self.store, self.s, self.journal = store, settings, journal
        self.report, self.advance = report, advance  # advance(agent, ms): the agent's watermark
        self.queue: asyncio.Queue[tuple[str, MediaHeader, bytes, str, str]] = asyncio.Queue()
        self.queued_bytes = 0  # the queue is bounded in bytes: chunk sizes vary
        self.heard_at: dict[str, float] = {}  # agent -> wall clock of its last chunk
        self.streams: dict[str, AgentAudio] = {}
        self.backlog: deque[Utterance] = deque()
        self.pending: dict[str, list[int]] = {}  # agent -> starts of its utterances not yet stored
        self._ready = asyncio.Event()
        self.model = model
        self._loading = threading.Lock()
        self.counts = {"chunks": 0, "rejected": 0, "dropped": 0, "late": 0, "gaps": 0, "jumps": 0, "utterances": 0,
                       "transcripts": 0, "backlog_dropped": 0, "failed": 0, "audio_s": 0.0, "speech_s": 0.0,
                       "asr_s": 0.0}
        self.drops = Drops()
        self.jumps = Drops()  # gaps and jumps in the agents' streams, reported the same way

    def load(self) -> None:
        self.model = load_transcriber(self.s, workers=self.s.workers)

    # -- from the link (never blocks) ---------------------------------------------------
    def offer(self, agent: str, m: Inbound) -> None:
        try:
            h, pcm = split_media(m.payload, m.user, where=m.topic, max_bytes=self.s.max_chunk_bytes)
            if h.rate != AUDIO_RATE:
                raise SchemaViolation(f"rate {h.rate}: audio must be PCM s16le at {AUDIO_RATE} Hz mono", where=m.topic)
            if len(pcm) % 2 or not pcm:
                raise SchemaViolation(f"{len(pcm)} bytes is not whole 16-bit samples", where=m.topic)
            if not plausible_ms(h.ts, int(time.time() * 1000)):
                self.counts["rejected"] += 1
                return self.report("bad_time", f"ts {h.ts} is not a plausible epoch-ms time", topic=m.topic,
                                   agent=agent, id=h.id)
        except StreamError as e:
            self.counts["rejected"] += 1
            return self.report(e.code, str(e), topic=m.topic, agent=agent, id=e.id)
        if self.queued_bytes + len(pcm) <= self.s.queue_mb * 1e6:
            self.queue.put_nowait((agent, h, pcm, m.topic, m.key))
            self.queued_bytes += len(pcm)
        else:
            self.counts["dropped"] += 1
            if self.drops.note():
                self.report("queue_full", f"audio queue full: {self.counts['dropped']} chunks dropped so far",
                            topic=m.topic, agent=agent)

    # -- voice activity -----------------------------------------------------------------
    async def listen(self) -> None:
        while True:
            try:
                batch = [await asyncio.wait_for(self.queue.get(), timeout=self.s.idle_flush_s / 2)]
            except TimeoutError:
                self._flush_idle()
                continue
            while not self.queue.empty() and len(batch) < 200:
                batch.append(self.queue.get_nowait())
            self.queued_bytes -= sum(len(item[2]) for item in batch)
            now = time.monotonic()
            self.heard_at.update((item[0], now) for item in batch)
            if self.journal:
                self.journal.begin("speech-vad", [item[4] for item in batch])
            try:
                found, notes = await asyncio.to_thread(self._detect, batch)
            except Exception as e:  # a fault of the VAD model: this batch is lost, the stream goes on
                logger.exception("voice activity detection failed")
                self.counts["failed"] += 1
                self.report("model_error", f"voice activity detection failed on {len(batch)} chunks: "
                                           f"{type(e).__name__}: {e}", agent=batch[0][0])
                continue
            finally:
                if self.journal:
                    self.journal.end("speech-vad")
            for note, agent, topic, h in notes:
                self.counts[{"late": "late", "gap": "gaps", "jump": "jumps"}[note]] += 1
                if note != "late" and self.jumps.note():
                    n = self.counts["gaps"] + self.counts["jumps"]
                    self.report("audio_gap", f"audio of {agent} jumps at seq {h.seq} (ts {h.ts}); "
                                             f"{n} gaps so far", topic=topic, agent=agent, id=h.id)
            for u in found:
                self._enqueue(u)
            for agent in {item[0] for item in batch}:
                self._advance(agent)

    def _flush_idle(self) -> None:
        """An agent that stopped sending (switched off, out of range) mid-sentence: cut what it said."""
        now = time.monotonic()
        for agent, stream in self.streams.items():
            if stream.gate.speech_start is not None and now - self.heard_at.get(agent, now) >= self.s.idle_flush_s:
                for u in stream.flush():
                    self._enqueue(u)
                self._advance(agent)

    def _detect(self, batch) -> tuple[list[Utterance], list]:
        found, notes = [], []
        for agent, h, pcm, topic, _ in batch:
            stream = self.streams.get(agent)
            if stream is None:
                stream = self.streams[agent] = AgentAudio(agent, h.ts, self.s)
            samples = pcm16_to_float(pcm)
            cuts, note = stream.take(h, samples)
            found += cuts
            if note:
                notes.append((note, agent, topic, h))
            if note != "late":
                self.counts["chunks"] += 1
                self.counts["audio_s"] += len(samples) / RATE
        return found, notes

    def _enqueue(self, u: Utterance) -> None:
        self.counts["utterances"] += 1
        self.backlog.append(u)
        self.pending.setdefault(u.agent, []).append(u.start_ms)
        while self.backlog_s() > self.s.backlog_s and len(self.backlog) > 1:
            old = self.backlog.popleft()  # the oldest goes: what is said now matters more than what is late
            self.pending[old.agent].remove(old.start_ms)
            self.counts["backlog_dropped"] += 1
            self.report("audio_backlog", f"speech recognition is behind by more than {self.s.backlog_s:.0f} s; "
                                         f"dropped {old.seconds:.1f} s of {old.agent}'s speech at {old.start_ms}",
                        agent=old.agent)
            self._advance(old.agent)
        self._ready.set()

    def backlog_s(self) -> float:
        return sum(u.seconds for u in self.backlog)

    def _advance(self, agent: str) -> None:
        stream = self.streams.get(agent)
        if stream is None:
            return
        mark = min([stream.settled_ms(), *self.pending.get(agent, [])])
        self.advance(agent, mark)

    # -- recognition --------------------------------------------------------------------
    async def transcribe(self) -> None:
        while True:
            while not self.backlog:
                self._ready.clear()
                await self._ready.wait()
            u = self.backlog.popleft()
            try:
                stored = await asyncio.to_thread(self._recognise, u)
                self.counts["transcripts"] += stored
            except StorageFull as e:  # the disk is full: keep the utterance, try again later
                self.counts["failed"] += 1
                self.report("disk_full", f"transcripts wait for disk space: {e}", agent=u.agent)
                self.backlog.appendleft(u)
                await asyncio.sleep(5)
                continue
            except Exception as e:  # a model error, a locked database: this utterance is lost, not the worker
                logger.exception("recognising %s's speech at %d failed", u.agent, u.start_ms)
                self.counts["failed"] += 1
                self.report("speech_failed", f"{u.seconds:.1f} s of speech at {u.start_ms} not transcribed: "
                                             f"{type(e).__name__}: {e}", agent=u.agent)
            self.pending[u.agent].remove(u.start_ms)
            self._advance(u.agent)

    def _recognise(self, u: Utterance) -> int:
        with self._loading:  # several recognition workers: the model loads once
            if self.model is None:
                self.load()
        heard = self.model.transcribe(u.audio)
        self.counts["speech_s"] += heard.audio_s
        self.counts["asr_s"] += heard.seconds
        obs = observations(u, heard)
        if obs:
            r = self.store.add(obs)
            logger.info("heard %s at %d: %s", u.agent, u.start_ms, " / ".join(o.text for o in obs))
            return r.inserted
        return 0

    def forget_idle(self, idle_s: float) -> set[str]:
        """Forget the audio state of agents silent for `idle_s` with nothing pending; their names."""
        now = time.monotonic()
        gone = {a for a, t in self.heard_at.items() if now - t > idle_s and not self.pending.get(a)
                and (a not in self.streams or self.streams[a].gate.speech_start is None)}
        for a in gone:
            self.heard_at.pop(a, None)
            self.streams.pop(a, None)
            self.pending.pop(a, None)
        return gone

    def stats(self) -> dict:
        c = dict(self.counts)
        c["rtf"] = round(c["asr_s"] / c["speech_s"], 3) if c["speech_s"] else None
        c["backlog_s"] = round(self.backlog_s(), 1)
        for k in ("audio_s", "speech_s", "asr_s"):
            c[k] = round(c[k], 1)
        return c
