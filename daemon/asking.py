"""Questions from every door (the MQTT desk, the web page and its API) answered one at a time:
the answerer's indices and its store connection are not for two threads at once.

`Asking.answer` is what the MQTT question desk calls; `Asking.ask` is the HTTP side: a validated
`QueryMessage` in, the chunks of the MQTT `stream` mode out (working, each piece of evidence, the
answer JSON), the last one always the answer or a coded error. Over HTTP one more `working` chunk
(stage `answering`) carries the context the model reads, as soon as it is chosen: on a small box
the reading takes a minute, and the page shows the moments meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator

from assistant.answer import Answer, Answerer
from assistant.query import Query
from assistant.wire import answer_json, unit_json
from daemon.questions import ABSURD_AS_OF_MS
from memory.clock import HouseClock
from memory.errors import TimeFormatError
from models.yielding import Foreground
from streams.messages import QueryMessage

logger = logging.getLogger(__name__)


class AskError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class Asking:
    def __init__(self, answerer: Answerer, clock: HouseClock, *, asker: str, budget: int, waiting: int = 20,
                 foreground: Foreground | None = None):
        """`foreground` is told of each question for the whole of it (waiting included): background
        work (embedding, consolidation) holds off meanwhile."""
        self.answerer, self.clock, self.asker, self.budget = answerer, clock, asker, budget
        self.foreground = foreground or Foreground()
        self._lock = threading.Lock()
        self.waiting, self.max_waiting = 0, waiting
        self.counts = {"questions": 0, "answered": 0, "failed": 0, "refused": 0}
        self.last: dict | None = None  # the latest answer given over HTTP

    def answer(self, query: Query, shown=None) -> Answer:
        """Blocking: waits for any question under way, then answers this one."""
        with self.foreground.question(), self._lock:
            return self.answerer.answer(query, shown) if shown else self.answerer.answer(query)

    def query_of(self, q: QueryMessage, now_ms: int | None = None) -> tuple[Query, int]:
        """The question as the answerer takes it, and its as-of time; AskError(bad_as_of) when the
        time is unreadable or absurd (the same rule as the MQTT desk)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        try:
            as_of = now if q.as_of in (None, "", "now") else self.clock.parse(q.as_of)
        except (TimeFormatError, ValueError, OverflowError) as e:
            raise AskError("bad_as_of", str(e)) from None
        if abs(as_of - now) > ABSURD_AS_OF_MS:
            raise AskError("bad_as_of", f"as_of {q.as_of!r} is more than 30 years from now")
        query = Query(q.question, as_of, tuple(q.options), asker=q.asker or self.asker,
                      agents=tuple(q.agents) if q.agents else None, budget=self.budget)
        return query, as_of

    async def ask(self, q: QueryMessage, *, stream: bool) -> AsyncIterator[dict]:
        """Chunks of one answer: with `stream`, `working` then each piece of evidence (`partial`),
        always last the answer JSON (status ok) or an error body (status error, code)."""
        self.counts["questions"] += 1
        t0 = time.perf_counter()
        try:
            query, as_of = self.query_of(q)
        except AskError as e:
            self.counts["refused"] += 1
            yield error_body(q.id, e.code, str(e))
            return
        if self.waiting >= self.max_waiting:
            self.counts["refused"] += 1
            yield error_body(q.id, "queue_full", "too many questions waiting")
            return
        if stream:
            yield {"id": q.id, "status": "working", "stage": "retrieval"}
        loop, chunks = asyncio.get_running_loop(), asyncio.Queue()

        def shown(units, events) -> None:  # in the worker thread, before the model reads
            chunk = {"id": q.id, "status": "working", "stage": "answering",
                     "context": [unit_json(u, self.clock) for u in units], "events": len(events)}
            loop.call_soon_threadsafe(chunks.put_nowait, chunk)

        self.waiting += 1
        job = asyncio.ensure_future(asyncio.to_thread(self.answer, query, shown if stream else None))
        try:
            while not job.done():
                got = asyncio.ensure_future(chunks.get())
                await asyncio.wait({job, got}, return_when=asyncio.FIRST_COMPLETED)
                if got.done():
                    yield got.result()
                else:
                    got.cancel()
            while not chunks.empty():  # told just before the answer came
                yield chunks.get_nowait()
            a = job.result()
        except Exception as e:  # the daemon keeps serving; the asker learns why
            logger.exception("question %s failed", q.id)
            self.counts["failed"] += 1
            yield error_body(q.id, "internal", f"{type(e).__name__}: {e}")
            return
        finally:
            self.waiting -= 1
        body = answer_json(a, self.clock, as_of) | {"id": q.id}
        body["timings_ms"]["total"] = round((time.perf_counter() - t0) * 1000, 1)
        if stream:
            for i, u in enumerate(body["evidence"]):
                yield {"id": q.id, "status": "partial", "evidence_index": i, "evidence": u}
        self.counts["answered" if a.status == "ok" else "failed"] += 1
        self.last = {"question": body["question"], "answer": body["answer"], "status": body["status"],
                     "time": time.time()}
        yield body


def error_body(qid: str | None, code: str, message: str) -> dict:
    """The error reply of the MQTT desk, also the body of an HTTP error."""
    return {"id": qid, "status": "error", "code": code, "error": message}
