"""The answer guards through the real default model (SmolLM2-135M) on a real EgoLife slice."""

import re

import pytest

from assistant.answer import Answerer
from assistant.config import AnswerSettings, SearchSettings
from assistant.guard import NOT_FOUND, degenerate, repeats
from assistant.query import Query
from memory.store import Store

pytestmark = pytest.mark.slow
LUNCH = "What were we talking about at lunch on DAY1?"


class Recording:
    """The real model, with every prompt it was given kept (and, with `loop`, told to repeat)."""

    def __init__(self, llm, loop: str = ""):
        self.llm, self.loop, self.calls, self.name = llm, loop, [], llm.name

    def count(self, text: str) -> int:
        return self.llm.count(text)

    def json(self, messages, schema, **kw):
        if self.loop:
            messages = [*messages[:-1], {"role": "user", "content": messages[-1]["content"] + self.loop}]
        self.calls.append(messages)
        return self.llm.json(messages, schema, **kw)


@pytest.fixture(scope="module")
def memory(slice_db):
    s = Store(slice_db)
    yield s
    s.close()


def answerer(memory, clock, llm, **kw):
    settings = AnswerSettings(planner="rule", context_tokens=1200, shared_top_n=0, **kw)
    return Answerer(memory, clock, settings, llm, budget=6, search=SearchSettings(dense=False))


def test_first_person_lines_reach_the_model_under_their_wearer(memory, clock, tiny_llm):
    llm = Recording(tiny_llm)
    a = answerer(memory, clock, llm).answer(Query("谁在拧螺丝？", clock.parse("DAY1 11:21:02")))
    prompt = llm.calls[-1][1]["content"]
    blocks = re.findall(r"^\[(\d+)\] (\w+)'s view, (DAY1 \d\d:\d\d:\d\d)-", prompt, re.M)
    assert [b[1] for b in blocks] == [u.agent.split("_")[1].title() for u in a.gathered.units]
    assert re.search(r"\[\d+\] Alice's view, DAY1 11:1\d:\d\d-\d\d:\d\d:\d\d\n(.*\n)*?.*拧螺丝", prompt)
    # a terse answer is shown with who saw it and when ("Alice (Alice's view, DAY1 11:16: ...)."):
    # the model's own words are what must not degenerate
    own = re.sub(r" \(\w+'s view, DAY1 \d\d:\d\d: .*\)\.$", "", a.answer)
    assert a.status == "ok" and own and (a.mode != "model" or degenerate(own) is None)
    assert a.mode == "model" or re.search(r"\w+'s view, DAY1 11:\d\d: ", a.answer)


def test_a_looping_reply_of_the_real_model_is_replaced_by_the_evidence(memory, clock, tiny_llm):
    loop = "\nBegin your answer with 'The answer is: The answer is: The answer is:'."  # forces the loop
    llm = Recording(tiny_llm, loop)
    # the model writes it: the talk of the span is not quoted instead (`tests/test_talk_span.py`)
    a = answerer(memory, clock, llm, repeat_penalty=1.0, talk_span=False).answer(
        Query(LUNCH, clock.parse("DAY1 13:00:00")))
    assert a.status == "ok" and a.mode == "extractive" and a.guard in ("repeated", "echo", "cut short")
    # a question about what was said is answered with the lines said, as who said them and when
    said = re.match(r'At 1[12]:\d\d on DAY1, (\w+) said: "([^"]+)"', a.answer)
    assert said, a.answer
    assert any(said.group(2) in line for u in a.gathered.units for line in u.text.splitlines())
    assert "The answer is: The answer is" not in a.answer and not repeats(a.answer)


def test_a_question_about_what_was_never_seen_is_not_answered(memory, clock, tiny_llm):
    llm = Recording(tiny_llm)
    a = answerer(memory, clock, llm).answer(
        Query("Where did Jake hide the purple giraffe costume?", clock.parse("DAY1 13:00:00")))
    assert a.status == "ok" and a.mode == "not_found" and "giraffe" in a.guard
    assert a.answer.startswith(NOT_FOUND + " The closest: ") and not llm.calls
