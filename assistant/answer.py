"""Answering: shared memory -> planner -> per-agent units -> responder, citing its evidence.

The same `Answerer` serves MQTT, the chat, `chorus ask` and the benchmark. Switches give the
EgoMAS ablation: without shared memory the planner and the responder see no events; without
dynamic retrieval the units are the flat top units of all agents. With `search` settings the
retrieval is the hybrid one (`assistant.hybrid`); without, EgoMAS's BM25 alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from assistant.agentwise import MemorySearch
from assistant.config import AnswerSettings, SearchSettings
from assistant.context import fit_units
from assistant.frames import FrameFinder, frames_json
from assistant.planner import Request, plan
from assistant.prompts import ANSWER_SYSTEM, answer_schema
from assistant.query import Query, person_name
from assistant.retrievers import Retrievers
from memory.clock import HouseClock
from memory.events import Event
from memory.frames import FrameStore
from memory.records import Unit
from memory.store import Store
from memory.tokenize import estimate_tokens
from models.errors import ModelError
from models.llm import HIGH, LocalLLM, Usage

LETTERS = "ABCD"


@dataclass
class Gathered:
    events: list[Event]
    units: list[Unit]
    requests: list[Request] = field(default_factory=list)
    planner: str = "none"
    timings_ms: dict[str, float] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)


@dataclass
class Answer:
    question: str
    answer: str
    choice: str | None
    evidence: list[Unit]
    cited: bool
    gathered: Gathered
    context_tokens: int
    timings_ms: dict[str, float]
    usage: Usage
    status: str = "ok"
    error: str = ""
    frames: list = field(default_factory=list)  # (Frame, why, distance) shown with the answer


class Answerer:
    def __init__(
        self, store: Store, clock: HouseClock, settings: AnswerSettings, llm: LocalLLM | None = None, *,
        shared: bool = True, dynamic: bool = True, budget: int = 15, planner: str | None = None,
        search: SearchSettings | None = None, retrievers: Retrievers | None = None,
    ):
        hybrid = None
        if search is not None or retrievers is not None:
            retrievers = retrievers or Retrievers(store, clock, search)
            hybrid = retrievers.make("default")
        self.search = MemorySearch(store, settings, hybrid)
        self.clock, self.settings, self.llm = clock, settings, llm
        self.shared, self.dynamic, self.budget = shared, dynamic, budget
        self.planner = planner or settings.planner
        self.frames = FrameFinder(FrameStore(store))  # the daemon swaps in one with its embedder

    # -- retrieval ----------------------------------------------------------------------
    def gather(self, q: Query) -> Gathered:
        t0 = time.perf_counter()
        self.search.refresh()
        events = self.search.shared(q) if self.shared else []
        t1 = time.perf_counter()
        timings = {"shared": (t1 - t0) * 1000}
        if not self.dynamic:
            units = self.search.flat.retrieve(replace(q, budget=self.budget)).units
            timings["retrieval"] = (time.perf_counter() - t1) * 1000
            return Gathered(events, units, timings_ms=timings)
        requests, planner, usage = plan(
            self.planner, self.llm, q, events, self.events_text(events), self.search.agents(q),
            self.settings.max_requests,
        )
        t2 = time.perf_counter()
        per_request = [self.search.for_agent(r, q) for r in requests]
        timings.update(planning=(t2 - t1) * 1000, retrieval=(time.perf_counter() - t2) * 1000)
        return Gathered(events, _round_robin(per_request, self.budget), requests, planner, timings, usage)

    def events_text(self, events: list[Event]) -> str:
        return "\n".join(
            f"[{self.clock.label(e.start_ms)[:-3]}-{self.clock.label(e.end_ms)[-8:-3]}] {e.text()}" for e in events
        )

    # -- answering ----------------------------------------------------------------------
    def answer(self, q: Query, shown: Callable[[list[Unit], list[Event]], None] | None = None) -> Answer:
        """`shown(units, events)`: told what the model is given, before it reads (a page shows it)."""
        g = self.gather(q)
        count = self.llm.count if self.llm else estimate_tokens
        events_text = self.events_text(g.events)
        units, excerpts = self.fit(g.units, q, self.settings.context_tokens - count(events_text), count)
        if shown is not None:
            shown(units, g.events)
        context = (f"Shared memory:\n{events_text}\n\n" if events_text else "") + f"Excerpts:\n{excerpts}"
        context_tokens = count(context)
        t0 = time.perf_counter()
        usage = Usage()
        usage.add(g.usage)
        choices = tuple(LETTERS[i] for i, o in enumerate(q.options[:4]) if o)
        if self.llm is None:
            raise ModelError("answering needs a model")
        asker = (f"The asker is {person_name(q.asker)}: 'I', 'me', 'my' in the question mean "
                 f"{person_name(q.asker)}.\n") if q.asker else ""
        options = "".join(f"\n{LETTERS[i]}. {q.options[i]}" for i in range(len(choices)))
        ask = "Choose the letter of the right option." if choices else "Answer in one or two short sentences."
        messages = [
            {"role": "system", "content": ANSWER_SYSTEM.format(asker=asker)},
            {"role": "user", "content": f"{context}\n\nQuestion (asked at {self.clock.label(q.as_of_ms)}): "
                                        f"{q.question}{options}\n{ask}"},
        ]
        status, error, choice, text, cites = "ok", "", None, "", []
        try:
            reply, u = self.llm.json(messages, answer_schema(len(units), choices, 400),
                                     max_tokens=self.settings.answer_tokens, priority=HIGH)
            usage.add(u)
            cites = [i for i in dict.fromkeys(reply.evidence) if 1 <= i <= len(units)]
            if choices:
                choice = reply.choice
                text = f"{choice}. {q.options[LETTERS.index(choice)]}"
            else:
                text = reply.answer.strip()
        except ModelError as e:
            status, error = "error", str(e)
        timings = dict(g.timings_ms, answering=(time.perf_counter() - t0) * 1000)
        evidence = [units[i - 1] for i in cites] or units[:3]
        return Answer(q.question, text, choice, evidence, bool(cites), replace(g, units=units), context_tokens,
                      timings, usage, status, error, self.frames.find(q, evidence))

    def fit(self, units: list[Unit], q: Query, budget: int, count) -> tuple[list[Unit], str]:
        return fit_units(units, q, budget, count, self.clock.label)


def _round_robin(lists: list[list[Unit]], budget: int) -> list[Unit]:
    """Best first from each request in turn, each unit once, at most `budget`."""
    out, seen = [], set()
    for rank in range(max((len(x) for x in lists), default=0)):
        for xs in lists:
            if rank < len(xs) and xs[rank].id not in seen and len(out) < budget:
                seen.add(xs[rank].id)
                out.append(xs[rank])
    return out


def unit_json(u: Unit, clock: HouseClock, cited: bool | None = None) -> dict:
    d = {"agent": u.agent, "start": clock.iso(u.start_ms), "end": clock.iso(u.end_ms),
         "start_ms": u.start_ms, "end_ms": u.end_ms, "text": u.text, "kind": "segment", "ids": list(u.obs_ids)}
    return d if cited is None else d | {"cited": cited}


def answer_json(a: Answer, clock: HouseClock, as_of_ms: int) -> dict:
    """The answer as it goes out on the wire and in `chorus ask --json`."""
    g = a.gathered
    return {
        "status": a.status, "question": a.question, "as_of": clock.iso(as_of_ms), "answer": a.answer,
        "choice": a.choice, "cited": a.cited, "error": a.error or None,
        # what the model cited first, then the rest of what it was shown, so nothing is hidden
        "evidence": [unit_json(u, clock, a.cited) for u in a.evidence]
        + [unit_json(u, clock, False) for u in g.units if u not in a.evidence],
        "plan": {"planner": g.planner, "requests": [{"agent": r.agent, "query": r.query} for r in g.requests]},
        "events": [{"who": list(e.who), "what": e.what, "where": e.where, "how": e.how,
                    "start": clock.iso(e.start_ms), "end": clock.iso(e.end_ms)} for e in g.events],
        "frames": frames_json(a.frames, clock),
        "context": {"units": len(g.units), "tokens": a.context_tokens},
        "timings_ms": {k: round(v, 1) for k, v in a.timings_ms.items()},
        "tokens": {"prompt": a.usage.prompt_tokens, "completion": a.usage.completion_tokens},
    }
