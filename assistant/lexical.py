"""The default retriever: bilingual BM25 (bm25s, day shards) over 30-second segments."""

from __future__ import annotations

import time

from assistant.query import Query, Retrieved, person_name, speaks_of_self
from memory.lexical import LexicalIndex
from memory.store import Store
from memory.tokenize import query_tokens

OPTION_WEIGHT = 0.5


class LexicalRetriever:
    """Scores segments against the question, its options (weighted lower) and the asker's name."""

    name = "default"

    def __init__(self, store: Store, index: LexicalIndex | None = None):
        self.store = store
        self.index = index or LexicalIndex(store)

    def weights(self, q: Query) -> dict[str, float]:
        w: dict[str, float] = {}
        for t in query_tokens(q.question):
            w[t] = w.get(t, 0.0) + 1.0
        for opt in q.options:
            for t in query_tokens(opt):
                w[t] = w.get(t, 0.0) + OPTION_WEIGHT
        if q.asker and speaks_of_self(q.question):
            for t in query_tokens(person_name(q.asker)):
                w[t] = w.get(t, 0.0) + OPTION_WEIGHT
        return w

    def retrieve(self, q: Query) -> Retrieved:
        t0 = time.perf_counter()
        self.index.refresh()
        agent_ids = None
        if q.agents:
            known = {v: k for k, v in self.store.agents().items()}
            agent_ids = [known[a] for a in q.agents if a in known]
        hits = self.index.search(self.weights(q), k=q.budget, as_of=q.as_of_ms, agents=agent_ids)
        units = self.store.units([i for i, _ in hits])
        out = [_scored(units[i], s) for i, s in hits if i in units]
        return Retrieved(out, {"retrieval": (time.perf_counter() - t0) * 1000})


def _scored(u, score: float):
    from dataclasses import replace

    return replace(u, score=round(score, 4))
