"""The HTTP JSON API: the MQTT contracts over HTTP. `POST /api/ask` takes the body of the `query`
topic (validated by the same model) and returns the answer JSON, or with `?stream=1` the chunks of
the `stream` mode as NDJSON; the GETs read the memory by time. Read-only except asking; a frame is
found by agent and time, never by a path from the request. Errors are the coded ones of MQTT."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from aiohttp import web

from assistant.wire import unit_json
from daemon.asking import AskError, Asking, error_body
from daemon.watch import Watch
from memory.browse import Browse
from memory.clock import DAY_MS, HouseClock
from memory.errors import TimeFormatError
from memory.records import WINDOW_MS
from streams.errors import StreamError
from streams.messages import AGENT_NAME, QueryMessage, dumps

logger = logging.getLogger(__name__)
HTTP_STATUS = {"bad_schema": 400, "bad_encoding": 400, "bad_as_of": 400, "bad_time": 400, "bad_topic": 400,
               "bad_reply_to": 400, "unauthorized": 401, "not_allowed": 403, "not_found": 404,
               "unsupported": 405, "too_large": 413, "queue_full": 503, "internal": 500}
MAX_SPAN_MS = {"events": 8 * DAY_MS, "units": DAY_MS, "lines": DAY_MS, "timeline": 2 * DAY_MS}
MAX_BODY = 64 * 1024


class Coded(Exception):
    """A refused request: a code of the MQTT contract and the HTTP status that goes with it."""

    def __init__(self, code: str, message: str, status: int | None = None, qid: str | None = None):
        super().__init__(message)
        self.code, self.status, self.qid = code, status or HTTP_STATUS.get(code, 400), qid

    def response(self) -> web.Response:
        return json_response(error_body(self.qid, self.code, str(self)), self.status)


def json_response(body: dict, status: int = 200) -> web.Response:
    return web.Response(body=dumps(body), status=status, content_type="application/json")


class Api:
    def __init__(self, asking: Asking, browse: Browse, clock: HouseClock, watch: Watch, *,
                 stats: Callable[[], dict], info: Callable[[], dict], mqtt: Callable[[], dict],
                 closed_until: Callable[[int], int], report: Callable[..., None]):
        self.asking, self.browse, self.clock, self.watch = asking, browse, clock, watch
        self.stats_of, self.info_of, self.mqtt_of = stats, info, mqtt
        self.closed_until, self.report = closed_until, report
        self._rate: tuple[float, int] | None = None  # (time, captions stored) of the previous /api/stats
        self.requests = 0

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/api/ask", self.ask), web.get("/api/events", self.events),
                web.get("/api/units", self.units), web.get("/api/lines", self.lines),
                web.get("/api/timeline", self.timeline), web.get(r"/api/frames/{agent}/{ts:\d+}.jpg", self.frame),
                web.get("/api/status", self.status), web.get("/api/stats", self.stats)]

    # -- asking ---------------------------------------------------------------------------
    async def ask(self, request: web.Request) -> web.StreamResponse:
        where = "POST /api/ask"
        if request.content_type != "application/json":
            raise Coded("bad_schema", "the body must be JSON (Content-Type: application/json)", 415)
        body = await request.read()
        try:
            q = QueryMessage.from_bytes(body, where=where)
            self.asking.query_of(q)  # a bad as_of is an HTTP error before any chunk
        except StreamError as e:
            self.report(e.code, str(e), topic=where, id=e.id)  # parsed once: the id comes with the error
            raise Coded(e.code, str(e), qid=e.id) from None
        except AskError as e:
            self.report(e.code, str(e), topic=where, id=q.id)
            raise Coded(e.code, str(e), qid=q.id) from None
        if request.query.get("stream", "") not in ("1", "true") and not q.stream:
            chunks = [c async for c in self.asking.ask(q, stream=False)]  # one: the answer or an error
            return json_response(chunks[-1], _status_of(chunks[-1]))
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson; charset=utf-8",
                                           "Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        await resp.prepare(request)
        async for chunk in self.asking.ask(q, stream=True):
            await resp.write(dumps(chunk) + b"\n")
        await resp.write_eof()
        return resp

    # -- reading the memory -----------------------------------------------------------------
    def _span(self, request: web.Request, kind: str) -> tuple[int, int]:
        q = request.query
        if "from" not in q or "to" not in q:
            raise Coded("bad_time", "from and to are required (DAY1 11:00, ISO 8601 or epoch ms)")
        try:
            start, end = self.clock.parse(q["from"][:64]), self.clock.parse(q["to"][:64])
        except (TimeFormatError, ValueError, OverflowError) as e:
            raise Coded("bad_time", str(e)) from None
        if not 0 <= start < end or end - start > MAX_SPAN_MS[kind] or end > 10**14:
            raise Coded("bad_time", f"from must be before to, at most {MAX_SPAN_MS[kind] // 3_600_000} hours apart")
        return start, end

    def _agent(self, value: str | None) -> str:
        if not value or not AGENT_NAME.match(value):
            raise Coded("bad_schema", "agent: 1-64 of A-Z a-z 0-9 _ . - is required")
        return value

    async def events(self, request: web.Request) -> web.Response:
        start, end = self._span(request, "events")
        events, windows = await asyncio.to_thread(
            lambda: (self.browse.events(start, end), self.browse.windows(start, end)))
        return json_response({"from": self.clock.iso(start), "to": self.clock.iso(end),
                              "events": [self.event_json(e) for e in events],
                              "windows": [w | {"start": self.clock.iso(w["start_ms"])} for w in windows]})

    def event_json(self, e) -> dict:
        """As on the `events` topic."""
        return {"id": e.id, "who": list(e.who), "what": e.what, "where": e.where, "how": e.how,
                "start": self.clock.iso(e.start_ms), "end": self.clock.iso(e.end_ms), "start_ms": e.start_ms,
                "end_ms": e.end_ms, "model": e.model}

    async def units(self, request: web.Request) -> web.Response:
        agent = self._agent(request.query.get("agent"))
        start, end = self._span(request, "units")
        units = await asyncio.to_thread(self.browse.units, agent, start, end)
        return json_response({"agent": agent, "from": self.clock.iso(start), "to": self.clock.iso(end),
                              "units": [unit_json(u, self.clock) for u in units]})

    async def lines(self, request: web.Request) -> web.Response:
        agent = self._agent(request.query.get("agent"))
        start, end = self._span(request, "lines")
        lines = await asyncio.to_thread(self.browse.lines, agent, start, end)
        return json_response({"agent": agent, "from": self.clock.iso(start), "to": self.clock.iso(end), "lines": [
            {"id": x.id, "kind": x.kind, "start": self.clock.iso(x.start_ms), "end": self.clock.iso(x.end_ms),
             "start_ms": x.start_ms, "end_ms": x.end_ms, "text": x.text, "speaker": x.speaker} for x in lines]})

    async def timeline(self, request: web.Request) -> web.Response:
        """Coverage per agent in buckets (10 minutes over a day, 1 minute over an hour or two),
        and the windows with their events."""
        start, end = self._span(request, "timeline")
        bucket = WINDOW_MS if end - start > 3 * 3_600_000 else 60_000

        def read():
            return (self.browse.agents(), self.browse.coverage(start, end, bucket),
                    self.browse.windows(start, end), self.browse.events(start, end))

        agents, coverage, windows, events = await asyncio.to_thread(read)
        return json_response({"from": self.clock.iso(start), "to": self.clock.iso(end), "from_ms": start,
                              "to_ms": end, "bucket_ms": bucket, "agents": agents, "coverage": coverage,
                              "windows": windows, "events": [self.event_json(e) for e in events]})

    async def frame(self, request: web.Request) -> web.StreamResponse:
        agent = self._agent(request.match_info["agent"])
        ts = int(request.match_info["ts"][:16])
        try:
            within = min(max(float(request.query.get("within", "60")), 0.0), 3600.0)
        except ValueError:
            raise Coded("bad_schema", "within: seconds, a number") from None
        f = await asyncio.to_thread(self.browse.frame_near, agent, ts, int(within * 1000))
        if f is None or not f.path.is_file():
            raise Coded("not_found", f"no frame of {agent} within {within:g} s of {ts}")
        return web.FileResponse(f.path, headers={
            "Content-Type": "image/jpeg", "Cache-Control": "private, max-age=3600",
            "X-Chorus-Frame-Ts": str(f.ts_ms), "X-Chorus-Frame-Time": self.clock.iso(f.ts_ms)})

    # -- the daemon ------------------------------------------------------------------------
    def days(self, first: int | None, last: int | None) -> list[dict]:
        if first is None or last is None:
            return []
        d0, d1 = self.clock.day_of(first)[0], self.clock.day_of(last)[0]
        out = []
        for d in range(d0, min(d1, d0 + 400) + 1):
            start = self.clock.at(d, 0)
            out.append({"day": d, "label": f"DAY{d}", "date": self.clock.local(start).date().isoformat(),
                        "from_ms": start, "to_ms": self.clock.at(d + 1, 0)})
        return out

    async def status(self, request: web.Request) -> web.Response:
        until = self.closed_until(int(time.time() * 1000))

        def read():
            return self.browse.summary(until), self.browse.span(), self.browse.agents()

        summary, (first, last), known = await asyncio.to_thread(read)
        info = self.info_of()
        marks = self.stats_of().get("watermarks") or {}
        agents = [{"agent": a, "status": self.watch.agents.get(a, {}).get("status", "unknown"),
                   "since": self.watch.agents.get(a, {}).get("since"), "watermark": marks.get(a)}
                  for a in sorted(set(known) | set(self.watch.agents))]
        return json_response({
            "status": "online", "info": info, "mqtt": self.mqtt_of(), "agents": agents,
            "agents_online": self.watch.online(), "memory": summary | {"days": self.days(first, last)},
            "errors": self.watch.latest_errors(), "web": {"questions": self.asking.counts,
                                                          "last_answer": self.asking.last}})

    async def stats(self, request: web.Request) -> web.Response:
        """The `stats` message, with the consolidation backlog and captions per second."""
        body = self.stats_of()
        summary = await asyncio.to_thread(self.browse.summary, self.closed_until(int(time.time() * 1000)))
        now, stored = time.monotonic(), body.get("captions", {}).get("stored", 0)
        rate = None
        if self._rate and now - self._rate[0] >= 0.5:
            rate = round((stored - self._rate[1]) / (now - self._rate[0]), 2)
        if not self._rate or now - self._rate[0] >= 0.5:
            self._rate = (now, stored)
        body["backlog"] = {"windows_pending": summary["windows_pending"]}
        body["memory"] = summary
        body["captions_per_s"] = rate
        body["web"] = {"questions": self.asking.counts, "waiting": self.asking.waiting}
        return json_response(body)


def _status_of(body: dict) -> int:
    if body.get("status") == "ok":
        return 200
    return HTTP_STATUS.get(body.get("code") or "internal", 500)

