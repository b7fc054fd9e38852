"""The `lexical` retriever (the default before the hybrid one): bilingual BM25 (bm25s, day
shards) over 30-second segments.

The same moment is often in several wearers' segments (they heard the same words), so by
default one unit per 30-second slot is kept: the budget buys more distinct moments.
"""

from __future__ import annotations

import time
from dataclasses import replace

from assistant.query import Query, Retrieved, person_name, speaks_of_self
from memory.glossary import SURE, Glossary
from memory.lexical import LexicalIndex
from memory.store import Store
from memory.tokenize import query_tokens

OPTION_WEIGHT = 0.5
OVERFETCH = 4


class LexicalRetriever:
    """Scores segments against the question, its options (weighted lower) and the asker's name."""

    name = "default"

    def __init__(self, store: Store, index: LexicalIndex | None = None, *, per_slot: int = 1,
                 glossary: Glossary | None = None, cross_lingual: float = 0.0):
        """`glossary` with `cross_lingual` > 0: a query's English words bring their translations
        (`memory.glossary`) at that share of their weight."""
        self.store = store
        self.index = index or LexicalIndex(store)
        self.per_slot = per_slot
        self.glossary, self.cross_lingual = glossary, cross_lingual

    def translated(self, w: dict[str, float]) -> dict[str, float]:
        """The weighted words with their translations added (as they are without a glossary)."""
        if self.glossary is None or self.cross_lingual <= 0:
            return w
        return self.glossary.expand(w, self.cross_lingual)

    def translations_of(self, token: str) -> set[str]:
        """The tokens a query would add for this one (none without a glossary)."""
        if self.glossary is None or self.cross_lingual <= 0:
            return set()
        return self.glossary.translations(token)

    def same_words(self, text: str) -> set[str]:
        """The translations the glossary is sure of (`memory.glossary.SURE`) of the text's words,
        whether or not the search adds translations (none without a glossary)."""
        return {z for t in query_tokens(text) for z in self.sure(t, shortest=1)}

    def sure(self, token: str, shortest: int = 2) -> set[str]:
        """The translations of one token the glossary is sure of, of `shortest` characters or more
        (a lone 劳 of 麦当劳, McDonald's, is also in 勤劳, hard-working); none without a glossary."""
        if self.glossary is None:
            return set()
        return {z for z in self.glossary.translations(token, SURE) if len(z) >= shortest}

    def weights(self, q: Query, translate: bool = True) -> dict[str, float]:
        w: dict[str, float] = {}
        for t in query_tokens(q.question):
            w[t] = w.get(t, 0.0) + 1.0
        for opt in q.options:
            for t in query_tokens(opt):
                w[t] = w.get(t, 0.0) + OPTION_WEIGHT
        if q.asker and speaks_of_self(q.question):
            for t in query_tokens(person_name(q.asker)):
                w[t] = w.get(t, 0.0) + OPTION_WEIGHT
        return self.translated(w) if translate else w

    def agent_ids(self, names) -> list[int] | None:
        if not names:
            return None
        known = {v: k for k, v in self.store.agents().items()}
        return [known[a] for a in names if a in known]

    def retrieve(self, q: Query) -> Retrieved:
        t0 = time.perf_counter()
        self.index.refresh()
        hits = self.index.search(
            self.weights(q), k=q.budget * OVERFETCH, as_of=q.as_of_ms, agents=self.agent_ids(q.agents)
        )
        units = self.store.units([i for i, _ in hits])
        out, per_slot = [], {}
        for i, score in hits:
            u = units.get(i)
            if u is None or per_slot.get(u.start_ms, 0) >= self.per_slot:
                continue
            per_slot[u.start_ms] = per_slot.get(u.start_ms, 0) + 1
            out.append(replace(u, score=round(score, 4)))
            if len(out) == q.budget:
                break
        return Retrieved(out, {"retrieval": (time.perf_counter() - t0) * 1000})
