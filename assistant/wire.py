"""An answer as it goes out: on the wire (MQTT, HTTP) and in `chorus ask --json`."""

from __future__ import annotations

from assistant.answer import Answer
from assistant.context import bearing_lines
from assistant.frames import frames_json
from assistant.guard import MODEL, QUOTED, TIMED
from memory.clock import HouseClock
from memory.records import Unit


def unit_json(u: Unit, clock: HouseClock, cited: bool | None = None, answer: tuple[str, str] | None = None) -> dict:
    """`answer`: (the answer, the question): `lines` then holds the unit's lines that bear it out,
    which `chorus ask` and the chat show."""
    d = {"agent": u.agent, "start": clock.iso(u.start_ms), "end": clock.iso(u.end_ms),
         "start_ms": u.start_ms, "end_ms": u.end_ms, "text": u.text, "kind": "segment", "ids": list(u.obs_ids)}
    if answer is not None:
        d["lines"] = bearing_lines(u, *answer)
    return d if cited is None else d | {"cited": cited}


def answer_json(a: Answer, clock: HouseClock, as_of_ms: int) -> dict:
    """The answer as it goes out on the wire and in `chorus ask --json`."""
    g = a.gathered
    # an extractive or not-found answer's words are the evidence's own or a fixed phrase ("I don't
    # find this ..."): the lines shown then bear out the question
    bears = (a.answer if a.mode in (MODEL, TIMED, QUOTED) else "", a.question)
    return {
        "status": a.status, "question": a.question, "as_of": clock.iso(as_of_ms), "answer": a.answer,
        "choice": a.choice, "cited": a.cited, "error": a.error or None,
        # model: the model's words; extractive: its reply was unusable (`guard` says why) and the
        # answer is the evidence itself; not_found: the memory does not hold it; timed: a "when"
        # question told the time of its best excerpt; quoted: a question about what was said in a
        # span told by a few turns of its talk
        "mode": a.mode, "guard": a.guard, "model_reply": a.reply,
        # what the model cited first, then the rest of what it was shown, so nothing is hidden
        "evidence": [unit_json(u, clock, a.cited, bears) for u in a.evidence]
        + [unit_json(u, clock, False, bears) for u in g.units if u not in a.evidence],
        "plan": {"planner": g.planner, "requests": [{"agent": r.agent, "query": r.query} for r in g.requests]},
        "events": [{"who": list(e.who), "what": e.what, "where": e.where, "how": e.how,
                    "start": clock.iso(e.start_ms), "end": clock.iso(e.end_ms)} for e in g.events],
        "frames": frames_json(a.frames, clock),
        "context": {"units": len(g.units), "tokens": a.context_tokens},
        "timings_ms": {k: round(v, 1) for k, v in a.timings_ms.items()},
        "tokens": {"prompt": a.usage.prompt_tokens, "completion": a.usage.completion_tokens,
                   "cached": a.usage.cached_tokens},  # cached: prompt tokens the model's state already held
    }
