"""Multiple choice helped by the evidence itself: how well the memory backs each option, added to
the model's own scores.

A 0.5B answerer reading 1,000 tokens of excerpts often misses what the excerpts plainly say; the
retrieval already knows which options the evidence mentions. The readings need no model:

- `mentions`: how much of each option's own words (not the question's) the excerpts shown hold,
  the first excerpts counting most (rank^-0.5), so "Alice" wins when Alice's view and the lines
  naming her are among the best excerpts (of an excerpt widened by the next 30 s, the 30 s the
  search chose: `retrieval.widen`);
- `lexical`: the best BM25 score of the whole memory (up to the question's time) for the
  question's words with that option's words, less that of the question alone: highest where the
  option and the question's matter occur together, anywhere, found or not by the 15 units shown
  (a rare option word alone raises it too, less);
- `wearer`: how much of the excerpts shown (the first counting most) is the view of a person the
  option names: for "who" questions, the retriever's best moments seen through Alice's own glasses
  speak for Alice even when their lines are in a language the question's words do not match;
- `encounter`: for a question that asks an order ("who used the screwdriver first", "who last
  had the scissors"), how early (or late) each person an option names is seen with the question's
  key object in the excerpts shown: the wearer in their own lines (Alice's 用螺丝刀戳破了), a
  speaker in their speech, a person named in a line; the first (or last) person ranked 1, the
  next 1/2, and so on (the object read with its translations the glossary is sure of);
- `dense`: how near each option's meaning lies to the excerpts shown, in any language: the
  cosine of the option's sentence vector (the first encoder, multilingual) with each excerpt's,
  the first excerpts counting most (rank^-0.5), so "Eating pizza" meets 吃披萨 though no word
  is shared; `dense_q` the same for the question followed by the option (the option read in
  the question's sense); `dense_top` the option's nearest excerpt alone;
- `timing`: for options that are times ("About four hours ago", "Yesterday at noon", "Last
  night"), how close the excerpts shown lie to each option's time, read relative to the question's
  time like a question's own time words (`assistant.temporal`).

An option that is the asker ("Me", "Me, Lucia, Shure") is read with the asker's name.

Each reading is standardised across the options of one question (mean 0, spread 1) and added to
the model's per-option log-probabilities with the weights of `answer.vote_*` (for an open "who"
question's people, `answer.who_*`); the weights were
set by leave-one-day-out on EgoLifeQA DAY1-2 (docs/figures.md, "Answers: the evidence's vote").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from assistant.context import speaker_of
from assistant.query import person_name
from assistant.temporal import DAY, HOUR, PARTS, Intent, read_intent
from memory.clock import HouseClock
from memory.lexical import LexicalIndex
from memory.records import Unit
from memory.tokenize import query_tokens, tokenize

_ME = re.compile(r"\b(?:me|myself)\b|^\s*i\s*$", re.I)
_PART = re.compile(r"\b(morning|noon|afternoon|evening|night)\b", re.I)


def as_asker(option: str, asker: str | None) -> str:
    """The option with "me" read as the asker: "Me, Lucia" -> "Jake, Lucia" when Jake asks."""
    return _ME.sub(person_name(asker), option) if asker else option


def own_words(option: str, question: str) -> set[str]:
    """An option's tokens that the question does not already hold (all of them when none is left)."""
    words = set(query_tokens(option))
    return (words - set(query_tokens(question))) or words


def mentions(units: Sequence[Unit], question: str, options: Sequence[str], decay: float = 0.5,
             translations: Callable[[str], set[str]] = lambda t: set()) -> np.ndarray:
    """Per option: the share of its own words each excerpt holds (a word or one of its
    `translations`), summed with weight 1/rank^decay."""
    sets = [{t: {t} | translations(t) for t in own_words(o, question)} for o in options]
    out = np.zeros(len(options))
    for rank, u in enumerate(units):
        words, w = set(tokenize(u.extra.get("core", u.text))), 1.0 / (rank + 1) ** decay
        for i, own in enumerate(sets):
            if own:
                out[i] += w * sum(1 for forms in own.values() if forms & words) / len(own)
    return out


def wearer(units: Sequence[Unit], options: Sequence[str], decay: float = 0.5) -> np.ndarray:
    """Per option: the excerpts shown from the view of a person the option names (its first-person
    lines are that person's doing), summed with weight 1/rank^decay."""
    sets = [set(query_tokens(o)) for o in options]
    out = np.zeros(len(options))
    for rank, u in enumerate(units):
        who, w = set(query_tokens(person_name(u.agent))), 1.0 / (rank + 1) ** decay
        for i, named in enumerate(sets):
            if who and who <= named:
                out[i] += w
    return out


def dense(unit_vecs: np.ndarray, option_vecs: np.ndarray, decay: float = 0.5) -> np.ndarray:
    """Per option: the cosine of its vector with each excerpt's (unit length both), summed with
    weight 1/rank^decay; all zero without excerpts."""
    if len(unit_vecs) == 0 or len(option_vecs) == 0:
        return np.zeros(len(option_vecs))
    w = 1.0 / np.arange(1, len(unit_vecs) + 1) ** decay
    return (np.asarray(option_vecs, dtype=np.float64) @ np.asarray(unit_vecs, dtype=np.float64).T) @ w


class DenseReader:
    """`dense` and `dense_q` of one encoder; the excerpts' vectors kept for the next question
    (an excerpt shown again is not read again)."""

    def __init__(self, embedder, keep: int = 512):
        self.embedder, self.keep = embedder, keep
        self._units: dict[tuple[int, str], np.ndarray] = {}

    def excerpts(self, units: Sequence[Unit]) -> np.ndarray:
        """The excerpts' vectors [n, dim], each read once."""
        keys = [(u.id, u.extra.get("core", u.text)) for u in units]
        new = [k for k in dict.fromkeys(keys) if k not in self._units]
        if len(self._units) + len(new) > self.keep:  # full: only this question's excerpts are kept
            self._units = {k: self._units[k] for k in keys if k in self._units}
        if new:
            self._units.update(zip(new, self.embedder.embed([t for _, t in new]), strict=True))
        return np.array([self._units[k] for k in keys])

    def __call__(self, units: Sequence[Unit], question: str, options: Sequence[str]) -> dict[str, np.ndarray]:
        unit_vecs = self.excerpts(units)
        embed = getattr(self.embedder, "embed_query", self.embedder.embed)
        vecs = embed([*options, *(f"{question} {o}" for o in options)])
        n = len(options)
        return {"dense": dense(unit_vecs, vecs[:n]), "dense_q": dense(unit_vecs, vecs[n:]),
                "dense_top": (vecs[:n] @ unit_vecs.T).max(axis=1) if len(units) else np.zeros(n)}


def lexical(index: LexicalIndex, base: Mapping[str, float], options: Sequence[str], as_of: int,
            translate: Callable[[dict[str, float]], dict[str, float]] = dict) -> np.ndarray:
    """Per option: the best BM25 score of `base` (the question's weighted words) with the option's
    words added (weight 1 each), less the best of `base` alone; `translate` adds each query's
    translations (`LexicalRetriever.translated`), so "pizza" finds 披萨 too."""
    queries = []
    for o in options:
        w = dict(base)
        for t in query_tokens(o):
            w[t] = w.get(t, 0.0) + 1.0
        queries.append(translate(w))
    *found, alone = index.search_many([*queries, translate(dict(base))], k=1, as_of=as_of)
    floor = alone[0][1] if alone else 0.0
    return np.array([(hits[0][1] - floor) if hits else 0.0 for hits in found])


def standardised(x: np.ndarray) -> np.ndarray:
    """Mean 0 and spread 1 across the options; all zero when the options do not differ."""
    x = np.asarray(x, dtype=np.float64)
    sd = x.std()
    return (x - x.mean()) / sd if sd > 1e-9 else np.zeros_like(x)


def combined(model: Sequence[float] | None, readings: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """The model's scores (zeros without one) plus each standardised reading times its weight."""
    n = len(next(iter(readings.values())))
    total = np.zeros(n) if model is None else np.asarray(model, dtype=np.float64).copy()
    for name, x in readings.items():
        total += weights.get(name, 0.0) * standardised(x)
    return total


def when(option: str, as_of: int, clock: HouseClock) -> Intent | None:
    """The time an option names, relative to `as_of`; None when it names none."""
    s = re.sub(r"\bhalf a day\b", "12 hours", option.lower())
    day, secs = clock.day_of(as_of)
    midnight = clock.at(day, 0)
    if "before yesterday" in s:  # "the day before yesterday at noon", "the night before yesterday"
        base, part = midnight - 2 * DAY, _PART.search(s)
        if part:
            a, b = PARTS[part.group(1)]
            return Intent(base + a * HOUR, base + b * HOUR, None, HOUR)
        return Intent(base, base + DAY, None, 3 * HOUR)
    if "last night" in s:  # the night before, unless the question is asked at night
        if secs < 18 * 3600:
            return Intent(midnight - 6 * HOUR, midnight, None, HOUR)
        return Intent(midnight + 18 * HOUR, as_of, None, HOUR)
    intent = read_intent(s, as_of, clock)
    return intent if intent.ranged else None


def timing(units: Sequence[Unit], options: Sequence[str], as_of: int, clock: HouseClock) -> np.ndarray:
    """Per option that names a time: how near the excerpts lie to it (the sum of each excerpt's
    relevance to the option's range); all zero unless three options or more name times."""
    intents = [when(o, as_of, clock) for o in options]
    if sum(i is not None for i in intents) < 3:
        return np.zeros(len(options))
    return np.array([sum(i.relevance(u.start_ms) for u in units) if i else 0.0 for i in intents])


def encounter(units: Sequence[Unit], options: Sequence[str], order: str | None, key: set[str],
              names: set[str]) -> np.ndarray:
    """Per option: 1/rank of when the people it names are first (`order` "earliest") or last
    ("latest") seen with the object (`key`: its tokens in any language) in the excerpts; zero for
    an option whose people are not seen with it, all zero without an order or object. `names`:
    the tokens of the people's names a caption may hold."""
    out = np.zeros(len(options))
    if order not in ("earliest", "latest") or not key:
        return out
    seen: dict[str, list[int]] = {}
    for u in units:
        wearer = set(query_tokens(person_name(u.agent)))
        for k, line in enumerate(x for x in u.text.split("\n") if x.strip()):
            words = set(tokenize(line))
            if key & words:
                for p in _actors(line, words & names, wearer):
                    seen.setdefault(p, []).append(u.start_ms * 1000 + k)  # the line's order inside its unit
    pick = min if order == "earliest" else max
    when_of = {}
    for i, o in enumerate(options):
        times = [pick(seen[p]) for p in query_tokens(o) if p in seen]
        if times:
            when_of[i] = pick(times)
    for rank, i in enumerate(sorted(when_of, key=lambda i: when_of[i], reverse=order == "latest")):
        out[i] = 1.0 / (1 + rank)
    return out


def _actors(line: str, named: set[str], wearer: set[str]) -> set[str]:
    """The people a line shows with its object: a speech line's speaker; a caption's people named,
    else its wearer (a caption without a name is the wearer's own doing, 我 or not)."""
    speaker = speaker_of(line)
    return set(query_tokens(speaker)) if speaker else named or wearer
