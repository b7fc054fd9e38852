"""Several replies to an open question, and the one to show.

A 0.5B answerer's greedy reply is one draw among many it finds likely; where it wanders (a copied
caption, the wrong moment), other samples of the same prompt often agree with each other and not
with it. After the greedy reply, `n - 1` more are sampled (the prompt is in the model's state
already: only the replies are new); each usable one (`guard.check_open` kept the model's words) is
read by the first encoder, and the shown one is

- `agree`: the reply whose sentence vector is nearest, on average, to the other replies' (the
  consensus of the draws: minimum Bayes risk under cosine);
- `support`: the reply nearest the excerpts shown (each excerpt weighted 1/rank^0.5, as `vote.dense`);
- `both`: the sum of the two;
- `pmi`: the reply the evidence makes most likely: its log-probability after the prompt less that
  after a prompt without evidence (`models.scoring.score_choices`), so that a reply is judged by what
  the excerpts add to it, not by how common its words are;
- `likelihood`: the reply's mean log-probability after the prompt.
When the model can be read (`read`), both model readings are recorded whatever the way, so that a
benchmark run can compare them all (`tests/bench_samples.py`).

Ties go to the earliest reply, so the greedy one wins unless another is plainly better.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from assistant.guard import MODEL, Reply
from assistant.letters import can_score
from assistant.prompts import ANSWER_PREFIX
from assistant.vote import DenseReader, dense
from models.errors import ModelError
from models.llm import Usage
from models.scoring import score_choices

Reads = Callable[[list[str]], tuple[list[float], list[float]]]  # texts -> (mean log-probability, pmi)


def reads(llm, messages: list[dict], usage: Usage) -> Reads | None:
    """The model's readings of replies to `messages` (`models.scoring.score_choices`: each reply's
    first 32 tokens after the answer's prefix, the prompt without evidence read last), its usage
    counted; None for a model that cannot be read so."""
    def read(texts: list[str]) -> tuple[list[float], list[float]]:
        sc, u = score_choices(llm, messages, ANSWER_PREFIX, [], texts, neutral_last=True, most=32)
        usage.add(u)
        return sc.options, sc.pmi
    return read if can_score(llm) else None


def chosen(replies: Sequence[Reply], reader: DenseReader, units, question: str, how: str,
           read: Reads | None = None) -> tuple[int, dict]:
    """The index of the reply to show among `replies` (all usable) and each one's scores; `read`:
    the model's readings of texts, needed by `pmi` and `likelihood`."""
    texts = [r.text for r in replies]
    embed = getattr(reader.embedder, "embed_query", reader.embedder.embed)
    vecs = np.asarray(embed(texts), dtype=np.float64)
    n = len(replies)
    sim = vecs @ vecs.T
    agree = (sim.sum(axis=1) - np.diag(sim)) / max(n - 1, 1)
    support = dense(reader.excerpts(units), vecs)  # the replies' own vectors, not read again
    got = read(texts) if read is not None and n > 1 else None  # one reply: nothing to compare
    mean, pmi = got or ([0.0] * n, [0.0] * n)
    total = {"agree": agree, "support": support, "pmi": np.asarray(pmi), "likelihood": np.asarray(mean),
             "both": agree + (support / max(support.max(), 1e-9) if support.any() else 0)}[how]
    best = int(np.argmax(total))
    return best, {"agree": [round(float(x), 4) for x in agree], "support": [round(float(x), 4) for x in support],
                  **({"pmi": [round(x, 4) for x in pmi], "likelihood": [round(x, 4) for x in mean]} if got else {}),
                  "texts": texts, "pick": best}


def best_of(first: Reply, more: Callable[[int], Reply], n: int, reader: DenseReader | None, units, question: str,
            how: str, model: tuple | None = None) -> Reply:
    """`first` (the greedy reply) and `n - 1` more from `more(i)`; the one `chosen` shows, its
    scores in `scores["samples"]`. The usable replies only (`guard.check_open` kept the model's
    words): when none is, or there is no encoder, the first as it is. `model`: (the LLM, the
    messages it answered, the usage to count in), for the model's readings (`reads`)."""
    if n <= 1 or reader is None or first.status != "ok":
        return first
    replies = [r for r in (first, *(more(i) for i in range(1, n)))  # a reply drawn twice counts twice
               if r.mode == MODEL and r.status == "ok"]
    if not replies:
        return first
    try:
        best, scores = chosen(replies, reader, units, question, how, reads(*model) if model else None)
    except ModelError as e:  # the model could not read them: the greedy reply, as without choosing
        return replace(first, guard=first.guard or f"not chosen: {e}")
    r = replies[best]
    return Reply(r.text, r.choice, r.cites, r.mode, r.guard, r.status, r.error, r.raw,
                 {**(r.scores or {}), "samples": scores})
