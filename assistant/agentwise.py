"""EgoMAS retrieval: shared-memory events by BM25, then each planned agent's own 30-second units.

With a hybrid retriever (the default of the daemon and the CLI), each planned request is the
hybrid search restricted to that agent, and the flat path is the hybrid search of everyone.
Without one, per agent is the released `retrieve_for_person`: the best `retrieve_top_k` units of
everyone are searched and those of the agent kept; when fewer than `agent_top_k` remain, the
search widens to `fallback_top_k`; units scoring under `score_threshold` (Okapi scale) are dropped.
"""

from __future__ import annotations

from dataclasses import replace

from assistant.chains import chain_order
from assistant.config import AnswerSettings
from assistant.hybrid import HybridRetriever
from assistant.lexical import LexicalRetriever
from assistant.planner import Request
from assistant.query import Query
from assistant.temporal import read_intent
from memory.events import Event, EventStore
from memory.lexical import EVENTS, SEGMENTS, LexicalIndex
from memory.records import Unit
from memory.store import Store
from memory.tokenize import query_tokens

# bm25s scores by Lucene's BM25, which is Okapi BM25 (rank_bm25, the released EgoMAS code) divided
# by k1 + 1; the threshold is given on the Okapi scale of the paper
OKAPI_SCALE = 1.5 + 1


class MemorySearch:
    """The indices of one store, refreshed before each question."""

    def __init__(self, store: Store, settings: AnswerSettings, hybrid: HybridRetriever | None = None):
        self.store = store
        self.settings = settings
        self.segments = hybrid.index if hybrid else LexicalIndex(store, SEGMENTS)
        self.event_index = LexicalIndex(store, EVENTS)
        self.events = EventStore(store)
        self.lexical = hybrid.lexical if hybrid else LexicalRetriever(store, self.segments)
        self.hybrid = hybrid
        self.flat = hybrid or self.lexical

    def refresh(self) -> None:
        if self.hybrid:
            self.hybrid.refresh()
        else:
            self.segments.refresh()
        self.event_index.refresh()

    def agents(self, q: Query | None = None, limit: int = 24) -> list[str]:
        """The people a plan may name: the agents with the most memory before `as_of` (never every agent
        ever seen: thousands of invented ids must not push the planner's prompt past the model's
        context), plus the asker and the agents the question is limited to."""
        if q is None:
            return sorted(self.store.agents().values())
        busiest = self.store.busiest_agents(q.as_of_ms, limit)
        named = [a for a in (q.asker, *(q.agents or ())) if a and a in set(self.store.agents().values())]
        return sorted(set(busiest) | set(named))

    def object_of(self, q: Query) -> tuple[str | None, set[str]]:
        """The order a question asks of its key object's encounters ("first", "last time") and
        the object's tokens in every language; (None, empty) without the entity memory."""
        h = self.hybrid
        if h is None or not h.s.entity_memory:
            return None, set()
        groups = h.entity_groups(q)
        order = chain_order(q.question, read_intent(q.question, q.as_of_ms, h.clock))
        return order, set(groups[0]) if groups else set()

    def shared(self, q: Query) -> list[Event]:
        """The top-n events of windows that ended by `as_of`, best first."""
        if self.settings.shared_top_n == 0:
            return []
        n = self.settings.shared_top_n
        hits = self.event_index.search(self.lexical.weights(q), k=n, as_of=q.as_of_ms)
        if self.hybrid:
            hits = self.hybrid.shared_events(q, hits, n)
        by_id = {e.id: e for e in self.events.events([i for i, _ in hits])}
        return [by_id[i] for i, _ in hits if i in by_id]

    def for_agent(self, req: Request, q: Query) -> list[Unit]:
        s = self.settings
        agent_id = {v: k for k, v in self.store.agents().items()}.get(req.agent)
        if agent_id is None:
            return []
        if self.hybrid and s.agent_search == "hybrid":
            sub = replace(q, question=req.query, agents=(req.agent,), budget=s.agent_top_k)
            return [replace(u, extra={**u.extra, "query": req.query}) for u in self.hybrid.retrieve(sub).units]
        weights = dict.fromkeys(query_tokens(req.query), 1.0)
        for t, w in self.lexical.weights(replace(q, question="")).items():  # the options, weighted lower
            weights[t] = weights.get(t, 0.0) + w
        rows: list[tuple[int, float]] = []
        for k in (s.retrieve_top_k, s.fallback_top_k):
            hits = self.segments.search(weights, k=k, as_of=q.as_of_ms)
            mine = {i for i, _ in self.segments.search(weights, k=k, as_of=q.as_of_ms, agents=[agent_id])}
            rows = [(i, sc) for i, sc in hits if i in mine]
            if len(rows) >= s.agent_top_k:
                break
        passed = [(i, sc) for i, sc in rows if sc * OKAPI_SCALE >= s.score_threshold][: s.agent_top_k]
        rows = passed or (rows[:1] if s.keep_best else [])  # a small memory scores low everywhere
        units = self.store.units([i for i, _ in rows])
        return [replace(units[i], score=round(sc, 4), extra={"query": req.query}) for i, sc in rows if i in units]
