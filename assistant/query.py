"""What a question carries into retrieval, and the result it gets back."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memory.records import Unit

_FIRST_PERSON = re.compile(r"\b(i|me|my|mine|myself)\b", re.I)
_WE = re.compile(r"\b(we|us|our|ours|ourselves)\b", re.I)
_AMONG_US = re.compile(r"\b(?:among|of|between)\s+us\b", re.I)


@dataclass(frozen=True)
class Query:
    question: str
    as_of_ms: int
    options: tuple[str, ...] = ()
    asker: str | None = None
    agents: tuple[str, ...] | None = None
    budget: int = 15


@dataclass
class Retrieved:
    units: list[Unit]
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: dict = field(default_factory=dict)


def person_name(agent: str) -> str:
    """'A1_JAKE' -> 'Jake': the name people use for an agent in speech and questions."""
    return agent.rsplit("_", 1)[-1].title() if "_" in agent else agent


def person_names(agents) -> dict[str, str]:
    """Agent id -> the name prompts and plans use. Names are unique: agents whose names collide
    (`A1_JAKE`, `Z_JAKE`) are called by their ids, so that two people never merge into one."""
    agents = sorted(set(agents))
    first = [person_name(a) for a in agents]
    taken = {n for n in first if first.count(n) > 1} | {a for a in agents}
    return {a: (a if n in taken and n != a else n) for a, n in zip(agents, first, strict=True)}


def speaks_of_self(question: str) -> bool:
    return bool(_FIRST_PERSON.search(question))


def speaks_of_group(question: str) -> bool:
    """The question speaks of the asker's group ("Who joined us?", "when we first started") as
    those the answer is set against, not among ("Among us, who ...?", "Which of us ...?")."""
    return bool(_WE.search(question)) and not _AMONG_US.search(question)


_WH = re.compile(r"\b(who(?:m|se)?|when|where|what|which|how|why)\b", re.I)
_ZH_WHEN = re.compile(r"什么时候|几点|多久以前|哪天")
_CLAUSE = re.compile(r"(?:^|[,;:.?!]\s*)(?:and\s+|so\s+|then\s+)?(who(?:m|se)?|when|where|what|which|how|why)\b", re.I)


def question_word(question: str) -> str | None:
    """The question's own wh-word, lower case: the last one that opens a clause ("When we go out,
    who sits next to me?" -> "who"; "When I buy clothes, what do I not buy?" -> "what"), else the
    first anywhere ("Tell me who came"); "whom" and "whose" read as "who"."""
    if re.search(r"\bhow come\b", question, re.I):  # "How come Jake left?" asks why
        return "why"
    if not _WH.search(question):  # a Chinese question: 谁 (who), 什么时候 / 几点 / 多久以前 (when)
        return "who" if "谁" in question else "when" if _ZH_WHEN.search(question) else None
    opening = _CLAUSE.findall(question)
    word = opening[-1] if opening else (m.group(1) if (m := _WH.search(question)) else None)
    return None if word is None else ("who" if word.lower().startswith("who") else word.lower())


# words of a question that say what was done or how, not to what: never its key objects ("When was
# the last time I saw durian?" is about durian; "saw" is in every line of what Jake saw)
ACTION_WORDS = frozenset("""see saw seen look looked looking watch watched notice noticed take took taken give gave
    given put get got come came go went gone stood stand standing sit sat sitting help helped helping join joined use
    used using like liked want wanted need needed plan planned planning check checked mention mentioned say said tell
    told talk talked ask asked show shown showed make made do did does doing done hold held bring brought find found
    keep kept leave happen happened think thought know knew try tried beside next near close behind besides else
    other another also still already together""".split())
