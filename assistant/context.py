"""How units of context read to the answering model, and what they cost in tokens."""

from __future__ import annotations

from collections.abc import Callable

from memory.records import Unit
from memory.tokenize import estimate_tokens


def render_unit(u: Unit, label: Callable[[int], str]) -> str:
    return f"[{u.agent} {label(u.start_ms)} - {label(u.end_ms)[-8:]}]\n{u.text}"


def context_tokens(units: list[Unit], label: Callable[[int], str]) -> int:
    return sum(estimate_tokens(render_unit(u, label)) for u in units)
