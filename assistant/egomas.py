"""`egomas-reference`: the released EgoMAS agent-memory retrieval, reproduced for comparison.

rank_bm25's BM25Okapi over the same 30-second segments; text lower-cased, punctuation removed,
split on spaces; top-k by raw score. It is built once over the whole memory, then each question
filters by as-of time (and agents) before taking the top k, so both retrievers see the same data.
"""

from __future__ import annotations

import re
import string
import time

import numpy as np

from assistant.query import Query, Retrieved
from memory.store import Store

_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")


def egomas_tokens(text: str) -> list[str]:
    return _PUNCT.sub("", text.lower()).split()


class EgoMASReference:
    name = "egomas-reference"

    def __init__(self, store: Store):
        from rank_bm25 import BM25Okapi  # the reference's own library, only when it is asked for

        self.store = store
        rows = store.segment_rows()
        self.ids = np.array([r[0] for r in rows], dtype=np.int64)
        self.agents = np.array([r[1] for r in rows], dtype=np.int32)
        self.asof = np.array([r[2] for r in rows], dtype=np.int64)
        self.bm25 = BM25Okapi([egomas_tokens(r[3]) for r in rows]) if rows else None

    def retrieve(self, q: Query) -> Retrieved:
        t0 = time.perf_counter()
        if self.bm25 is None:
            return Retrieved([], {"retrieval": 0.0})
        scores = np.asarray(self.bm25.get_scores(egomas_tokens(q.question)))
        mask = self.asof <= q.as_of_ms
        if q.agents:
            known = {v: k for k, v in self.store.agents().items()}
            mask &= np.isin(self.agents, [known[a] for a in q.agents if a in known])
        cand = np.flatnonzero(mask)
        top = cand[np.argsort(-scores[cand], kind="stable")[: q.budget]]
        units = self.store.units([int(self.ids[i]) for i in top])
        from dataclasses import replace

        out = [replace(units[int(self.ids[i])], score=round(float(scores[i]), 4)) for i in top]
        return Retrieved(out, {"retrieval": (time.perf_counter() - t0) * 1000})
