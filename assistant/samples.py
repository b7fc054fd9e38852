"""Several replies to an open question, and the one to show.

A 0.5B answerer's greedy reply is one draw among many it finds likely; where it wanders (a copied
caption, the wrong moment), other samples of the same prompt often agree with each other and not
with it. After the greedy reply, `n - 1` more are sampled (the prompt is in the model's state
already: only the replies are new); each usable one (`guard.check_open` kept the model's words) is
read by the first encoder, and the shown one is

- `agree`: the reply whose sentence vector is nearest, on average, to the other replies' (the
  consensus of the draws: minimum Bayes risk under cosine);
- `support`: the reply nearest the excerpts shown (each excerpt weighted 1/rank^0.5, as `vote.dense`);
- `both`: the sum of the two.

Ties go to the earliest reply, so the greedy one wins unless another is plainly better.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from assistant.guard import MODEL, Reply
from assistant.vote import DenseReader, dense


def chosen(replies: Sequence[Reply], reader: DenseReader, units, question: str, how: str) -> tuple[int, dict]:
    """The index of the reply to show among `replies` (all usable) and each one's scores."""
    texts = [r.text for r in replies]
    embed = getattr(reader.embedder, "embed_query", reader.embedder.embed)
    vecs = np.asarray(embed(texts), dtype=np.float64)
    n = len(replies)
    sim = vecs @ vecs.T
    agree = (sim.sum(axis=1) - np.diag(sim)) / max(n - 1, 1)
    support = dense(reader.excerpts(units), vecs)  # the replies' own vectors, not read again
    total = {"agree": agree, "support": support,
             "both": agree + (support / max(support.max(), 1e-9) if support.any() else 0)}[how]
    best = int(np.argmax(total))
    return best, {"agree": [round(float(x), 4) for x in agree], "support": [round(float(x), 4) for x in support],
                  "texts": texts, "pick": best}


def best_of(first: Reply, more: Callable[[int], Reply], n: int, reader: DenseReader | None, units, question: str,
            how: str) -> Reply:
    """`first` (the greedy reply) and `n - 1` more from `more(i)`; the one `chosen` shows, its
    scores in `scores["samples"]`. The usable replies only (`guard.check_open` kept the model's
    words): when none is, or there is no encoder, the first as it is."""
    if n <= 1 or reader is None or first.status != "ok":
        return first
    replies = [r for r in (first, *(more(i) for i in range(1, n)))  # a reply drawn twice counts twice
               if r.mode == MODEL and r.status == "ok"]
    if not replies:
        return first
    best, scores = chosen(replies, reader, units, question, how)
    r = replies[best]
    return Reply(r.text, r.choice, r.cites, r.mode, r.guard, r.status, r.error, r.raw,
                 {**(r.scores or {}), "samples": scores})
