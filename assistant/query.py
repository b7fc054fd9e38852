"""What a question carries into retrieval, and the result it gets back."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memory.records import Unit

_FIRST_PERSON = re.compile(r"\b(i|me|my|mine|myself)\b", re.I)


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


def speaks_of_self(question: str) -> bool:
    return bool(_FIRST_PERSON.search(question))
