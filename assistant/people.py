"""Open "who" questions answered by scoring the people, not by free generation.

A 0.5B answerer asked "Who used the screwdriver first?" without options mostly writes the name
of the asker or of the first wearer in its excerpts (on EgoLifeQA DAY1-2 open mode it named Jake
or Lucia for 19 of 25 such questions). The people who can be the answer are few and known: the
wearers, and the speakers in the excerpts shown. Each is read as a multiple-choice option would
be (`models.scoring`: the model's log-probability of the name after the evidence, plus the
evidence's vote of `assistant.vote`), and the answer names the best one with the time of the
excerpt that bears it out: "Alice, around 11:16 on DAY1."

A person the question already names is not its answer ("Who helped Alice ...?"), nor is the asker
when the question speaks of them ("Who came to visit my room?") or of their group as the ones the
answer joins ("Who joined us on the way home?"; "Among us, who ...?" keeps them).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np

from assistant import vote
from assistant.context import speaker_of, unit_lines
from assistant.query import Query, person_name, question_word, speaks_of_group, speaks_of_self
from memory.records import Unit
from memory.tokenize import query_tokens
from models.llm import Usage
from models.scoring import log_softmax, score_choices

_OR = re.compile(r"\b([A-Z][a-z]+)\s*,?\s+or\s+([A-Z][a-z]+)\b")
_NAME = re.compile(r"^[A-Z][a-z]{1,19}$")
# speaker labels that are no one's name ("Others: ..." is how the transcripts mark a crowd)
NOT_NAMES = frozenset({"Others", "Other", "Everyone", "Someone", "Unknown", "Speaker", "All", "Crowd"})


_WITH = re.compile(r"\bwith\b|和谁|跟谁|与谁", re.I)


def asks_companions(question: str) -> bool:
    """A "who" question about company ("Who was I with ...?", "Who did I eat with?"): its answer is
    often more than one person."""
    return bool(_WITH.search(question))


def asks_who(question: str) -> bool:
    """A question whose answer is a person ("Who ...?", "When we shop, who ...?"), not one that only
    speaks of one ("What did the person who bought it say?")."""
    return question_word(question) == "who"


def candidates(q: Query, agents: Iterable[str], units: list[Unit]) -> list[str]:
    """The people who may answer `q`: the wearers' names, then the speakers of the excerpts shown
    (a name-like label seen twice at least), less those the question names and, when it speaks in
    the first person or of "us" (not "among us"), the asker; only those offered, when the question offers some ("Alice or Tasha")."""
    names: list[str] = [n for n in map(person_name, agents) if query_tokens(n)]
    speakers = Counter(who for u in units for line in unit_lines(u)
                       if (who := speaker_of(line)) and _NAME.match(who) and who not in NOT_NAMES)
    names += [who for who, n in speakers.items() if n >= 2 or who in names]  # a label seen once may be no one
    offered = {n for pair in _OR.findall(q.question) for n in pair} & set(names)
    if len(offered) >= 2:  # "Was it Alice or Tasha who ...?"
        return [n for n in dict.fromkeys(names) if n in offered]
    asked = set(query_tokens(q.question))
    drop = {n for n in names if set(query_tokens(n)) & asked}
    if q.asker and (speaks_of_self(q.question) or speaks_of_group(q.question)):
        drop.add(person_name(q.asker))
    return [n for n in dict.fromkeys(names) if n not in drop]


def shows(u: Unit, name: str) -> bool:
    """Whether the excerpt is the person's own view or names them."""
    own = set(query_tokens(name))
    return own <= set(query_tokens(person_name(u.agent))) or own <= set(query_tokens(u.text))


def sentence(names: list[str], unit: Unit | None, q: Query, label: Callable[[int], str]) -> str:
    """"Alice, around 11:16 on DAY1.", "You (Jake) and Tasha, around ..." (the asker first);
    without a unit, the names alone."""
    me = person_name(q.asker) if q.asker else None
    who = " and ".join(f"You ({n})" if n == me else n for n in sorted(names, key=lambda n: n != me))
    if unit is None:
        return f"{who}."
    day, _, hms = label(unit.start_ms).partition(" ")
    return f"{who}, around {hms[:5]} on {day}."


def pick(llm, messages: list[dict], prefix: str, names: list[str], readings: Callable[[list[str]], dict],
         weights: dict[str, float], reading: str) -> tuple[str, dict, Usage]:
    """The best of `names` after `messages` and `prefix`: the model's `reading` of each name
    ("total": its words' total log-probability, the name's own; "likelihood": their mean, which
    favours a name of two tokens; "pmi": the total less that without the evidence) as
    log-probabilities among the names, plus the evidence's vote (`readings(names)`, `weights`).
    Returns (the name, every score, the model's usage)."""
    sc, usage = score_choices(llm, messages, prefix, [], names, with_options=True, fresh=True)
    own = np.asarray({"pmi": sc.pmi, "total": sc.totals}.get(reading, sc.options), dtype=np.float64)
    ev = readings(names)
    total = vote.combined(log_softmax(own), ev, weights)
    best = names[int(np.argmax(total))]
    scores = {"people": names, "ranked": [names[i] for i in np.argsort(-total, kind="stable")],
              "likelihood": [round(x, 4) for x in sc.options], "pmi": [round(x, 4) for x in sc.pmi],
              "total": [round(x, 4) for x in sc.totals],
              "evidence": {k: [round(float(x), 4) for x in v] for k, v in ev.items()}, "pick": best,
              "seconds": round(usage.seconds, 3)}
    return best, scores, usage
