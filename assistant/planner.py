"""Planners: which agents' memories to search, and for what (EgoMAS's agent-wise requests).

The LLM planner writes requests under a schema whose `person` is one of the known agents. Its
sub-queries must be about the question: one made of boilerplate alone ("Which one of the above
choices is correct?") is dropped, and every kept one carries the question's content words it lacks. The rule planner (also the fallback
when the LLM's plan is unusable) takes the names in the question, its options and the retrieved
events, plus the asker when the question says "I", each with the question as sub-query; with no
name at all it asks every agent.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass

from assistant.prompts import PLAN_SYSTEM, plan_schema
from assistant.query import Query, person_name, person_names, speaks_of_self
from memory.events import Event
from memory.records import Unit
from memory.tokenize import query_tokens
from models.errors import ModelError
from models.llm import HIGH, LocalLLM, Usage

logger = logging.getLogger(__name__)
# words of a sub-query that are about answering, not about what happened
_BOILERPLATE = frozenset(query_tokens(
    "which one above choice choices option options correct incorrect answer answers question right wrong "
    "following true false best search memory memories"))


@dataclass(frozen=True)
class Request:
    agent: str
    query: str


def rule_plan(q: Query, events: list[Event], agents: list[str], max_requests: int) -> list[Request]:
    by_name = {n.lower(): a for a, n in person_names(agents).items()}
    by_name.update({a.lower(): a for a in agents})
    votes: Counter[str] = Counter()
    text = " ".join((q.question, *q.options))
    for word in re.findall(r"[A-Za-z0-9_]+", text):
        if word.lower() in by_name:
            votes[by_name[word.lower()]] += 3
    for e in events:
        for n in e.who:
            if n.lower() in by_name:
                votes[by_name[n.lower()]] += 1
    if q.asker in agents and speaks_of_self(q.question):
        votes[q.asker] += 3
    chosen = [a for a, _ in votes.most_common(max_requests)] or agents[:max_requests]
    if q.agents:
        chosen = [a for a in chosen if a in q.agents] or list(q.agents)
    return [Request(a, q.question) for a in chosen]


def llm_plan(
    llm: LocalLLM, q: Query, events_text: str, agents: list[str], max_requests: int
) -> tuple[list[Request], Usage]:
    agent_of = {n: a for a, n in person_names(agents).items()}
    names = tuple(sorted(agent_of))
    asker = f"The asker is {person_name(q.asker)}: 'I', 'me', 'my' mean {person_name(q.asker)}.\n" if q.asker else ""
    options = "".join(f"\n{chr(65 + i)}. {o}" for i, o in enumerate(q.options) if o)
    messages = [
        {"role": "system", "content": PLAN_SYSTEM.format(max=max_requests)},
        {"role": "user", "content": (
            f"People: {', '.join(names)}.\n{asker}Shared-memory events:\n{events_text or '(none found)'}\n\n"
            f"Question: {q.question}{options}\n\nWhose memories should be searched, and for what?"
        )},
    ]
    plan, usage = llm.json(messages, plan_schema(names, max_requests), max_tokens=60 * max_requests, priority=HIGH,
                           fresh=True)
    seen, out = set(), []
    for r in plan.requests:
        agent = agent_of.get(r.person)
        query = sub_query(r.query, q)
        key = (agent, query.lower())
        if agent and query and key not in seen and (not q.agents or agent in q.agents):
            seen.add(key)
            out.append(Request(agent, query))
    return out, usage


def sub_query(query: str, q: Query) -> str:
    """The planner's sub-query with the question's content words it lacks, or "" when it is
    boilerplate alone."""
    query = " ".join(query.split())
    own = set(query_tokens(query))
    if not own - _BOILERPLATE:
        return ""
    words = [w for w in q.question.replace("?", " ").split() if query_tokens(w)
             and not set(query_tokens(w)) <= own | _BOILERPLATE]
    return " ".join([query, *dict.fromkeys(words)])


def plan(
    kind: str, llm: LocalLLM | None, q: Query, events: list[Event], events_text: str, agents: list[str],
    max_requests: int,
) -> tuple[list[Request], str, Usage]:
    """(requests, which planner made them, model usage)."""
    usage = Usage()
    if not agents:  # an empty memory: nobody to ask
        return [], "none", usage
    if kind == "llm" and llm is not None:
        try:
            requests, usage = llm_plan(llm, q, events_text, agents, max_requests)
            if requests:
                return requests, "llm", usage
            logger.info("LLM plan named no usable agent; using the rule planner")
        except ModelError as e:
            logger.warning("LLM planner failed (%s); using the rule planner", e)
    return rule_plan(q, events, agents, max_requests), "rule", usage


def merge(flat: list[Unit], per_request: list[list[Unit]], budget: int, share: float) -> list[Unit]:
    """The flat search's best `share` of the budget first (the context is never much worse than the
    best search), then the planned requests' units and the rest of the flat ones in turn."""
    head = flat[: round(budget * share)]
    seen = {u.id for u in head}
    rest = round_robin([*per_request, flat[len(head):]], budget, seen)
    return head + rest[: budget - len(head)]


def round_robin(lists: list[list[Unit]], budget: int, seen: set[int] | None = None) -> list[Unit]:
    """Best first from each request in turn, each unit once (and none of `seen`), at most `budget`."""
    out, seen = [], set(seen or ())
    for rank in range(max((len(x) for x in lists), default=0)):
        for xs in lists:
            if rank < len(xs) and xs[rank].id not in seen and len(out) < budget:
                seen.add(xs[rank].id)
                out.append(xs[rank])
    return out
