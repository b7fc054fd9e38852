"""How units of context read to the answering model, and what they cost in tokens."""

from __future__ import annotations

from collections.abc import Callable

from assistant.query import Query, person_name
from memory.records import Unit
from memory.tokenize import query_tokens


def fit_units(units: list[Unit], q: Query, budget: int, count: Callable[[str], int],
              label: Callable[[int], str]) -> tuple[list[Unit], str]:
    """Units numbered for citation, each cut to its share of the token budget.

    Within a unit the lines that share words with the question (and its sub-queries) are kept
    first, in their own order.
    """
    if not units:
        return [], "(none found)"
    wanted = set(query_tokens(" ".join((q.question, *q.options))))
    for u in units:
        wanted |= set(query_tokens(u.extra.get("query", "")))
    share = max(40, budget // len(units))
    blocks = []
    for n, u in enumerate(units, 1):
        head = f"[{n}] {person_name(u.agent)}, {label(u.start_ms)}-{label(u.end_ms)[-8:]}"
        lines = u.text.split("\n")
        ranked = sorted(range(len(lines)), key=lambda i: -len(wanted & set(query_tokens(lines[i]))))
        chosen, used = set(), count(head)
        for i in ranked:
            c = count(lines[i]) + 1
            if used + c > share:
                continue
            chosen.add(i)
            used += c
        blocks.append(head + "\n" + "\n".join(lines[i] for i in sorted(chosen)))
    return list(units), "\n\n".join(blocks)
