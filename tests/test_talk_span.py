"""A question about what was said in a span of time that names no topic ("What were we talking
about at lunch on DAY1?") is told a few turns of the span's talk, quoted, spread over the span
(`assistant.talk`), instead of the lines that hold its words."""

import re

import pytest

from assistant import talk
from assistant.answer import Answerer
from assistant.config import AnswerSettings, SearchSettings
from assistant.guard import GENERIC
from assistant.query import Query
from assistant.temporal import read_intent
from memory.records import Unit
from memory.store import Store
from tests.conftest import FakeLLM

NAMES = {"jake", "katrina", "lucia", "alice"}


def unit(agent, start, text, i=1):
    return Unit(i, agent, start, start + 30_000, text)


@pytest.mark.parametrize("question,span", [
    ("What were we talking about at lunch on DAY1?", True),
    ("What did we talk about this morning?", True),
    ("What did we discuss two hours ago?", True),
    ("What were Katrina and Jake discussing yesterday evening?", True),
    ("What did we discuss this morning about the dessert?", False),  # a topic: the dessert
    ("What did Katrina say about fruit yesterday?", False),
    ("What were we talking about at lunch?", True),  # the latest lunch begun an hour before: today's
    ("What were we talking about?", False),  # no span
    ("What did we eat at lunch on DAY1?", False),  # not about talk
])
def test_a_span_question_names_a_time_and_no_topic(question, span, clock):
    q = Query(question, clock.parse("DAY2 12:00:00"))
    assert talk.asks_span(q, read_intent(question, q.as_of_ms, clock), NAMES | GENERIC) is span


def test_a_speakers_lines_in_a_row_are_one_turn_and_an_english_twin_stands_for_its_chinese(clock):
    u = unit("A5_KATRINA", clock.parse("DAY1 11:47:30"), "\n".join([
        "Alice walks to the table.", "Alice: It makes you feel really connected to nature", "Alice: So that's my idea",
        "Shure: 野生动物拼图", "Shure: A wildlife puzzle", "Jake: 好", "Jake: 对"]))
    assert talk.turns(u) == [("Alice", "It makes you feel really connected to nature. So that's my idea"),
                             ("Shure", "A wildlife puzzle"), ("Jake", "好，对")]
    assert talk.speech_only(u).text.splitlines()[0].startswith("Alice: It makes")
    assert talk.speech_only(unit("A1_JAKE", 0, "Jake walks to the table.")) is None


def test_the_span_is_spread_and_told_by_its_fullest_turns_in_time_order(clock):
    lo, hi = clock.parse("DAY1 11:00:00"), clock.parse("DAY1 13:00:00")
    minute = 60_000
    units = [unit("A4_LUCIA", lo + 5 * minute, "Lucia: we are short on time so short videos would work", 1),
             unit("A1_JAKE", lo + 6 * minute, "Jake: ok", 2),  # the same part of the span, saying less
             unit("A2_ALICE", lo + 50 * minute, "Alice walks.", 3),  # no speech
             unit("A5_KATRINA", lo + 70 * minute, "Katrina: about twenty people will come so order pizza", 4),
             unit("A1_JAKE", lo + 110 * minute, "Jake: the wall cannot take stickers unless they leave no marks", 5)]
    picked = talk.across(units, lo, hi, 4, asker="A1_JAKE")
    assert [u.id for u in picked] == [1, 4, 5]
    text, cites = talk.span_sentence(picked, lo, hi, clock.label, most=2)
    assert text.startswith("From 11:00 to 13:00 on DAY1, the talk went: at 1")
    assert cites == [2, 3]  # the two fullest, told in time order
    assert re.search(r'at 12:10 Katrina said "about twenty people will come so order pizza"; at 12:50 Jake said '
                     r'"the wall cannot take stickers unless they leave no marks"\.$', text), text
    # a person the question names is quoted first
    text, cites = talk.span_sentence(picked, lo, hi, clock.label, most=1, speakers=frozenset({"Lucia"}))
    assert cites == [1] and "Lucia said" in text
    assert talk.span_sentence([units[2]], lo, hi, clock.label) == ("", [])


def test_the_lunch_question_is_told_what_was_said_then_without_the_model(tmp_path, clock):
    from memory.records import Observation

    store = Store(tmp_path / "span.sqlite")
    try:
        said = [("11:53:00", "A1_JAKE", "Jake: Are we providing lunch?"),
                ("12:10:00", "A5_KATRINA", "Katrina: About twenty people will come, so a barbecue would be tiring."),
                ("12:40:00", "A4_LUCIA", "Lucia: Then let's order a big pizza for dinner at 5:30."),
                ("13:20:00", "A4_LUCIA", "Lucia: After the question: never shown.")]
        store.add([Observation(agent, "transcript", clock.parse(f"DAY1 {t}"), clock.parse(f"DAY1 {t}") + 5000, text)
                   for t, agent, text in said])
        llm = FakeLLM([{"evidence": [1], "answer": "Jake was talking about lunch on DAY1."}])
        answerer = Answerer(store, clock, AnswerSettings(shared_top_n=0, planner="rule"), llm, budget=5,
                            search=SearchSettings(dense=False))
        q = Query("What were we talking about at lunch on DAY1?", clock.parse("DAY1 13:00:00"), asker="A1_JAKE")
        a = answerer.answer(q)
        assert (a.status, a.mode, a.gathered.planner) == ("ok", "quoted", "span") and not llm.calls, a.answer
        assert a.answer == ('From 11:00 to 13:00 on DAY1, the talk went: at 11:53 Jake said "Are we providing '
                            'lunch?"; at 12:10 Katrina said "About twenty people will come, so a barbecue would be '
                            'tiring."; at 12:40 Lucia said "Then let\'s order a big pizza for dinner at 5:30."')
        assert [u.agent for u in a.evidence] == ["A1_JAKE", "A5_KATRINA", "A4_LUCIA"]
        # switched off, the question is searched by its words and the model writes the answer
        off = Answerer(store, clock, AnswerSettings(shared_top_n=0, planner="rule", talk_span=False), llm, budget=5,
                       search=SearchSettings(dense=False)).answer(q)
        assert off.mode != "quoted" and llm.calls
    finally:
        store.close()
