"""Questions over MQTT: validated, answered off the event loop, replied on `reply_to`,
the MQTT v5 response topic or `answer/{id}`; the id always travels in the body too."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace

from assistant.answer import Answerer
from assistant.query import Query
from assistant.wire import answer_json
from daemon.poison import PoisonJournal
from memory.clock import HouseClock
from memory.errors import TimeFormatError
from streams.errors import StreamError
from streams.link import Inbound
from streams.messages import QueryMessage, dumps
from streams.topics import Topics

logger = logging.getLogger(__name__)
_SAFE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# what a broker refuses in a topic name (MQTT 5 1.5.4, 4.7): wildcards, NUL, control characters,
# non-characters; lone surrogates never get this far (the JSON parser refuses them)
_NOT_TOPIC = re.compile(r"[+#\x00-\x1f\x7f-\x9f\ufdd0-\ufdef\ufffe\uffff]|[\U0001fffe-\U0010ffff]")
ABSURD_AS_OF_MS = 30 * 366 * 86_400_000  # further from now than this is a typo, not a question


class QuestionDesk:
    def __init__(self, answerer: Answerer, clock: HouseClock, topics: Topics, publish: Callable[..., bool], *,
                 queue_size: int, asker: str, budget: int, report: Callable[..., None],
                 journal: PoisonJournal | None = None):
        self.answerer, self.clock, self.topics, self.publish = answerer, clock, topics, publish
        self.journal = journal
        self.queue: asyncio.Queue[Inbound] = asyncio.Queue(maxsize=queue_size)
        self.asker, self.budget, self.report = asker, budget, report
        self.counts = {"questions": 0, "answered": 0, "failed": 0, "dropped": 0}
        self.latency_ms: list[float] = []

    def offer(self, m: Inbound) -> None:
        try:
            self.queue.put_nowait(m)
        except asyncio.QueueFull:
            self.counts["dropped"] += 1
            self.report("queue_full", "too many questions waiting", topic=m.topic)

    async def run(self) -> None:
        while True:
            m = await self.queue.get()
            self.counts["questions"] += 1
            if self.journal:
                self.journal.begin("questions", [m.key] if m.key else [])
            try:
                await self.handle(m)
            except Exception as e:  # one bad question never ends the desk
                logger.exception("question on %s", m.topic)
                self._fail(replace(m, response_topic=None), None, None, "internal", f"{type(e).__name__}: {e}")
            finally:
                if self.journal:
                    self.journal.end("questions")

    def reply_topic(self, q: QueryMessage | None, m: Inbound, qid: str | None) -> str:
        if q and q.reply_to:
            return q.reply_to
        if m.response_topic:
            return m.response_topic
        # the id of a refused question is the asker's raw text: only a well-formed one names a topic
        return self.topics.answer(qid if qid and _SAFE_ID.fullmatch(qid) else "unknown")

    def _unsafe(self, topic: str | None) -> bool:
        """A reply topic the broker would refuse, or one that would land on an agent's stream or the
        daemon's own topics."""
        if not topic:
            return False
        if _NOT_TOPIC.search(topic) or len(topic.encode("utf-8", "replace")) > 65535 or topic.startswith("$"):
            return True
        return topic.startswith(self.topics.root + "/") and not topic.startswith(self.topics.answer(""))

    def _send(self, topic: str, body: dict, m: Inbound) -> None:
        if _NOT_TOPIC.search(topic):  # not a topic one may publish to: nobody can get it
            logger.warning("no reply for question %r: %r is not a publishable topic", body.get("id"), topic)
            return
        self.publish(topic, dumps(body), qos=1, correlation=m.correlation)

    def _fail(self, m: Inbound, q: QueryMessage | None, qid: str | None, code: str, message: str) -> None:
        self.counts["failed"] += 1
        self.report(code, message, topic=m.topic, id=qid)
        self._send(self.reply_topic(q, m, qid), {"id": qid, "status": "error", "code": code, "error": message}, m)

    async def handle(self, m: Inbound) -> None:
        t0 = time.perf_counter()
        try:
            q = QueryMessage.from_bytes(m.payload, where=m.topic)
        except StreamError as e:  # parsed once: the id comes with the error
            if self._unsafe(m.response_topic):
                m = replace(m, response_topic=None)
            return self._fail(m, None, e.id, e.code, str(e))
        if self._unsafe(q.reply_to) or self._unsafe(m.response_topic):
            # an answer must never land on an agent's stream or the daemon's own topics
            q = q.model_copy(update={"reply_to": None})
            m = replace(m, response_topic=None)
            return self._fail(m, q, q.id, "bad_reply_to", "reply_to (and the MQTT 5 response topic) must be a "
                                                          "plain topic outside chorus/v1 (or under its answer/)")
        now = int(time.time() * 1000)
        try:
            as_of = now if q.as_of in (None, "", "now") else self.clock.parse(q.as_of)
        except (TimeFormatError, ValueError, OverflowError) as e:
            return self._fail(m, q, q.id, "bad_as_of", str(e))
        if abs(as_of - now) > ABSURD_AS_OF_MS:
            return self._fail(m, q, q.id, "bad_as_of", f"as_of {q.as_of!r} is more than 30 years from now")
        query = Query(q.question, as_of, tuple(q.options), asker=q.asker or self.asker,
                      agents=tuple(q.agents) if q.agents else None, budget=self.budget)
        topic = self.reply_topic(q, m, q.id)
        if q.stream:
            self._send(topic, {"id": q.id, "status": "working", "stage": "retrieval"}, m)
        loop = asyncio.get_running_loop()

        def shown(units, events) -> None:  # in the worker thread: the evidence is chosen, the model reads
            stage = {"id": q.id, "status": "working", "stage": "answering", "units": len(units), "events": len(events)}
            loop.call_soon_threadsafe(self._send, topic, stage, m)

        try:
            a = await (asyncio.to_thread(self.answerer.answer, query, shown) if q.stream
                       else asyncio.to_thread(self.answerer.answer, query))
        except Exception as e:  # the daemon keeps serving; the asker learns why
            logger.exception("question %s failed", q.id)
            return self._fail(m, q, q.id, "internal", f"{type(e).__name__}: {e}")
        body = answer_json(a, self.clock, as_of) | {"id": q.id}
        body["timings_ms"]["total"] = round((time.perf_counter() - t0) * 1000, 1)
        if q.stream:
            for i, u in enumerate(body["evidence"]):
                self._send(topic, {"id": q.id, "status": "partial", "evidence_index": i, "evidence": u}, m)
        self._send(topic, body, m)
        self.counts["answered" if a.status == "ok" else "failed"] += 1
        self.latency_ms = (self.latency_ms + [body["timings_ms"]["total"]])[-200:]
