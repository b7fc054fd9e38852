"""The default answering model (`base`, Qwen2.5-Coder-0.5B) reads the memory's own language: an
English question is answered from Chinese first-person lines, each read as its wearer's."""

import pytest

from assistant.answer import Answerer
from assistant.config import AnswerSettings, SearchSettings
from assistant.query import Query
from daemon.settings import Settings
from memory.records import Observation
from memory.store import Store

pytestmark = pytest.mark.slow
# four wearers at the same moment, each busy with screws; only Alice tightens them
LINES = {"A3_TASHA": "我把一袋螺丝递给别人", "A2_ALICE": "我依旧在拧螺丝", "A6_SHURE": "我看着桌上的螺丝盒",
         "A4_LUCIA": "我在找螺丝刀"}


# four wearers, each at their own task 10 s apart; only Alice's is the screwdriver
SHELF = {"A2_ALICE": "Alice tightens the screws of the shelf with the screwdriver",
         "A3_TASHA": "Tasha washes strawberries in the kitchen",
         "A4_LUCIA": "Lucia waters the flowers on the balcony", "A6_SHURE": "Shure tunes the guitar"}


def add_captions(store: Store, t: int, lines: dict[str, str]) -> None:
    store.add([Observation(agent, "caption", t + i * 10_000, t + i * 10_000 + 4000, text)
               for i, (agent, text) in enumerate(lines.items())])


@pytest.fixture(scope="module")
def base_llm():
    from models.bundled import resolve
    from models.llm import LocalLLM

    assert Settings().llm.model == "base"  # what a fresh install answers with
    llm = LocalLLM(resolve("base"), n_ctx=4096, n_threads=2, time_limit_s=900)
    yield llm
    llm.close()


def test_chinese_first_person_lines_answer_an_english_question(tmp_path, clock, base_llm):
    store = Store(tmp_path / "screws.sqlite")
    try:
        t = clock.parse("DAY1 11:16:00")
        store.add([Observation(agent, "caption", t, t + 4000, text, lang="zh") for agent, text in LINES.items()])
        # the default reading (`choose = "cyclic"`, the letters scored in every cyclic order of the
        # options); generated under the schema, base takes the first option here (Tasha)
        assert AnswerSettings().choose == "cyclic"
        answerer = Answerer(store, clock, AnswerSettings(shared_top_n=0), base_llm, budget=4,
                            search=SearchSettings(dense=False))
        q = Query("谁在拧螺丝？Who was tightening the screws?", t + 60_000, ("Tasha", "Alice", "Shure", "Lucia"),
                  asker="A1_JAKE")
        a = answerer.answer(q)
        assert len(a.gathered.units) == 4
        assert a.status == "ok" and a.choice == "B", (a.answer, a.scores)
        assert any(u.agent == "A2_ALICE" for u in a.evidence) and a.usage.completion_tokens == 0
        assert a.scores["picks"]["cyclic"] == "B" and len(a.scores["cyclic"]) == 4
        plain = Answerer(store, clock, AnswerSettings(shared_top_n=0, choose="letter", name_wearer=False), base_llm,
                         budget=4, search=SearchSettings(dense=False)).answer(q)
        assert plain.status == "ok" and plain.choice in "ABCD"
    finally:
        store.close()


def test_the_evidence_s_vote_joins_the_model_s_scores(tmp_path, clock, base_llm):
    """The options the excerpts name and the memory holds with the question's matter get a vote;
    the choice is the model's cyclic scores plus the standardised votes, whichever the model leant to."""
    import numpy as np

    from assistant import vote
    from models.scoring import log_softmax

    store = Store(tmp_path / "vote.sqlite")
    try:
        t = clock.parse("DAY1 11:16:00")
        add_captions(store, t, {**SHELF, "A4_LUCIA": "Lucia hands Alice a box of screws"})
        q = Query("Who used the screwdriver first?", t + 120_000, ("Tasha", "Alice", "Shure", "Lucia"),
                  asker="A1_JAKE")
        settings = AnswerSettings(shared_top_n=0, vote_mentions=2.0, vote_lexical=2.0)
        a = Answerer(store, clock, settings, base_llm, budget=4, search=SearchSettings(dense=False)).answer(q)
        assert a.status == "ok" and a.usage.completion_tokens == 0
        ev = a.scores["evidence"]
        assert ev["mentions"][1] == max(ev["mentions"]) > sorted(ev["mentions"])[-2]  # Alice named most
        assert ev["lexical"][1] == max(ev["lexical"])
        assert a.scores["picks"]["evidence"] == "B"
        readings = {k: np.array(v) for k, v in ev.items()}
        total = vote.combined(log_softmax(np.array(a.scores["cyclic"])), readings,
                              {"mentions": 2.0, "lexical": 2.0})
        assert a.choice == a.scores["picks"]["voted"] == "ABCD"[int(np.argmax(total))] == "B", a.scores
    finally:
        store.close()


def test_an_open_answer_is_a_sentence_that_names_people_and_a_time(tmp_path, clock, base_llm):
    """What a supervisor reads for an open question: one or two sentences naming who and when,
    never a bare copied line ("Jake: We can or we can't.") nor the prompt's scaffolding."""
    import re

    from assistant.guard import degenerate, garbage

    store = Store(tmp_path / "lunch.sqlite")
    try:
        t = clock.parse("DAY1 11:53:00")
        said = [("A1_JAKE", "Jake: Are we providing lunch?"), ("A1_JAKE", "Jake: We can or we can't. How many people?"),
                ("A5_KATRINA", "Katrina: About twenty people, so a barbecue would be tiring."),
                ("A6_SHURE", "Shure: Skewers, charcoal and meat can all be delivered the same day."),
                ("A4_LUCIA", "Lucia: Then let's order a big pizza for dinner at 5:30.")]
        store.add([Observation(agent, "transcript", t + i * 20_000, t + i * 20_000 + 5000, text)
                   for i, (agent, text) in enumerate(said)])
        # the model writes it (the talk of the span quoted instead is `test_the_lunch_question_...` below)
        answerer = Answerer(store, clock, AnswerSettings(shared_top_n=0, planner="rule", talk_span=False), base_llm,
                            budget=5, search=SearchSettings(dense=False))
        a = answerer.answer(Query("What were we talking about at lunch on DAY1?", clock.parse("DAY1 13:00:00"),
                                  asker="A1_JAKE"))
        assert a.status == "ok" and a.mode in ("model", "extractive"), (a.answer, a.guard, a.reply)
        # the model's own words hold no scaffolding; an extractive answer names its excerpt ("Jake's view")
        assert garbage(a.answer) is None and not re.match(r"^[A-Z]\w*:\s", a.answer), a.answer
        assert a.mode != "model" or degenerate(a.answer) is None, a.answer
        assert len(re.findall(r"[.!?](?:\s|$)", a.answer)) <= 2 or a.mode == "extractive", a.answer
        assert re.search(r"\b(Jake|Katrina|Shure|Lucia)\b", a.answer) and re.search(r"\d", a.answer), a.answer
        # it says what was said, not the question back ("Jake was talking about lunch on DAY1.")
        assert re.search(r"provid|people|barbecue|skewer|charcoal|meat|pizza|deliver|twenty|dinner", a.answer,
                         re.I), a.answer
        assert a.evidence and all(u.agent in dict(said) for u in a.evidence)
    finally:
        store.close()


def test_the_lunch_question_on_real_memory_quotes_the_talk_of_the_span(slice_db, clock, base_llm):
    """The README's question over DAY1 11:00-13:00 of three EgoLife wearers, with the default model
    loaded: the talk of the span, quoted from the evidence shown, in time order, no model asked."""
    import re

    from assistant.guard import garbage

    store = Store(slice_db)
    try:
        answerer = Answerer(store, clock, AnswerSettings(shared_top_n=0), base_llm, budget=15,
                            search=SearchSettings(dense=False))
        a = answerer.answer(Query("What were we talking about at lunch on DAY1?", clock.parse("DAY1 13:00:00"),
                                  asker="A1_JAKE"))
        assert (a.status, a.mode) == ("ok", "quoted") and a.usage.prompt_tokens == 0, (a.answer, a.mode, a.guard)
        assert a.answer.startswith("From 11:00 to 13:00 on DAY1, the talk went: ") and garbage(a.answer) is None
        told = re.findall(r'at (1[12]:\d\d) (\w+) said "([^"]+)"', a.answer)
        assert len(told) >= 2 and [t for t, *_ in told] == sorted(t for t, *_ in told), a.answer
        assert len(a.evidence) == len(told) and len(a.gathered.units) >= 4  # the span's moments were shown
        for (hm, who, words), u in zip(told, a.evidence, strict=True):
            # each quote is a turn of the excerpt cited for it, said by that speaker at that minute
            lines = [x.split(": ", 1)[1] for x in u.text.splitlines() if x.startswith(f"{who}: ")]
            first = words.split(". ")[0].split("，")[0]
            assert any(first in x for x in lines) and clock.label(u.start_ms)[5:10] == hm, (words, u.text)
    finally:
        store.close()


def test_an_open_who_question_names_the_person_the_evidence_and_the_model_back(tmp_path, clock, base_llm):
    """Without options, "who" is answered by scoring the people (the wearers, the speakers shown):
    the name, the time of the excerpt that bears it out, and that excerpt cited."""
    store = Store(tmp_path / "who.sqlite")
    try:
        t = clock.parse("DAY1 11:16:00")
        add_captions(store, t, SHELF)
        answerer = Answerer(store, clock, AnswerSettings(shared_top_n=0), base_llm, budget=4,
                            search=SearchSettings(dense=False))
        a = answerer.answer(Query("Who used the screwdriver?", t + 120_000, asker="A1_JAKE"))
        assert a.status == "ok" and a.mode == "model" and a.usage.completion_tokens == 0, (a.answer, a.scores)
        assert a.scores["pick"] == "Alice", a.scores
        assert a.answer == "Alice, around 11:16 on DAY1.", a.answer
        assert a.evidence[0].agent == "A2_ALICE" and a.cited
        assert set(a.scores["people"]) >= {"Alice", "Tasha", "Lucia", "Shure"}
        generated = Answerer(store, clock, AnswerSettings(shared_top_n=0, open_who="generate"), base_llm, budget=4,
                             search=SearchSettings(dense=False)).answer(Query("Who used the screwdriver?",
                                                                              t + 120_000, asker="A1_JAKE"))
        assert generated.scores is None and generated.usage.completion_tokens > 0
    finally:
        store.close()


def test_the_readme_question_is_answered_from_alice_s_own_untranslated_caption(slice_db, tmp_path, clock, base_llm):
    """The README's example on the real slice (DAY1 11-13, Jake, Alice, Lucia): the first time
    anyone used the screwdriver is Alice's own caption at 11:11:38, 用螺丝刀戳破了, never
    translated. The entity chain reaches it through the glossary the slice's own translations teach,
    the encounter reading ranks Alice first, and with that reading in the vote (`vote_encounter`;
    0 by default: leave-one-day-out set it so on DAY1-2) the default model answers B."""
    import shutil

    db = tmp_path / "slice.sqlite"
    shutil.copy(slice_db, db)
    store = Store(db)
    try:
        q = Query("Who used the screwdriver first?", clock.parse("DAY1 11:21:02"), ("Tasha", "Alice", "Shure", "Lucia"),
                  asker="A1_JAKE")
        got = {}
        a = Answerer(store, clock, AnswerSettings(shared_top_n=0, vote_encounter=1.0), base_llm,
                     search=SearchSettings(dense=False)).answer(q, shown=lambda units, events: got.setdefault("units", units))
        first = [u for u in got["units"] if u.agent == "A2_ALICE" and "用螺丝刀戳破了" in u.text]
        assert first, [(u.agent, clock.label(u.start_ms)) for u in got["units"]]
        assert a.scores["evidence"]["encounter"][1] == 1.0, a.scores["evidence"]
        assert a.choice == "B", a.scores
    finally:
        store.close()


def test_a_question_reads_the_same_whatever_the_model_held_before(slice_db, clock):
    """The README's question on real memory, asked again after other questions have filled the
    model's context: the same numbers to the last digit, so the same answer. A question's first
    reading starts from the saved head (`fresh`); reusing whatever the context held moved the
    readings of the model loaded as the daemon loads it (flash attention) in their third decimal,
    and the daemon answered `D. Lucia` and `A. Tasha` by turns while it consolidated."""
    from daemon.build import llm

    store = Store(slice_db)
    try:  # the model as the daemon loads it (its context and attention settings)
        answerer = Answerer(store, clock, AnswerSettings(), llm(Settings()), budget=15,
                            search=SearchSettings(dense=False))
        t = clock.parse("DAY1 11:21:02")
        readme = Query("Who used the screwdriver first?", t, ("Tasha", "Alice", "Shure", "Lucia"), asker="A1_JAKE")
        first = answerer.answer(readme)
        assert first.status == "ok" and len(first.scores["cyclic"]) == 4
        for other in (Query("Who was holding the screws?", t, ("Jake", "Alice", "Lucia", "Katrina"), asker="A1_JAKE"),
                      Query("Who is assembling the shelf?", t, asker="A1_JAKE"), readme):
            answerer.answer(other)
            again = answerer.answer(readme)
            assert again.scores["cyclic"] == first.scores["cyclic"] and again.choice == first.choice, other.question
    finally:
        store.close()


def test_several_open_replies_are_drawn_and_the_agreed_one_shown_the_same_each_time(tmp_path, clock, base_llm):
    """`answer.open_samples`: the default model's greedy reply and sampled ones (other seeds), each
    checked by the guards; the one shown is among them, reads as a sentence of the evidence's
    matter, and is the same when the question is asked again after another prompt."""
    import re

    from assistant.guard import garbage
    from assistant.vote import DenseReader
    from models.multilingual import MultilingualEncoder

    store = Store(tmp_path / "dinner.sqlite")
    try:
        t = clock.parse("DAY1 11:53:00")
        said = [("A5_KATRINA", "Katrina: About twenty people, so a barbecue would be tiring."),
                ("A4_LUCIA", "Lucia: Then let's order a big pizza for dinner at 5:30."),
                ("A6_SHURE", "Shure: Pizza is fine, I will order it on my phone.")]
        store.add([Observation(agent, "transcript", t + i * 20_000, t + i * 20_000 + 5000, text)
                   for i, (agent, text) in enumerate(said)])
        answerer = Answerer(store, clock, AnswerSettings(shared_top_n=0, planner="rule", talk_span=False,
                                                         open_samples=4), base_llm, budget=3,
                            search=SearchSettings(dense=False))
        answerer.dense = DenseReader(MultilingualEncoder())  # the daemon's first encoder
        q = Query("What did Lucia want to order for dinner?", clock.parse("DAY1 13:00:00"), asker="A1_JAKE")
        a = answerer.answer(q)
        s = (a.scores or {}).get("samples")
        assert s, (a.answer, a.mode, a.guard, a.reply)
        assert a.status == "ok" and a.mode == "model" and len(s["texts"]) >= 2, (a.answer, a.guard, a.reply)
        assert len(set(s["texts"])) >= 2, s["texts"]  # the draws differ from the greedy reply
        assert a.answer.startswith(s["texts"][s["pick"]].rstrip(".")), (a.answer, s)
        # the model's readings of every reply: the evidence makes each one more likely than no evidence does
        assert len(s["pmi"]) == len(s["likelihood"]) == len(s["texts"]) and min(s["pmi"]) > 0, s
        assert garbage(a.answer) is None and re.search(r"pizza|barbecue", a.answer, re.I), a.answer
        answerer.answer(Query("Who will order the pizza?", clock.parse("DAY1 13:00:00"), asker="A1_JAKE"))
        again = answerer.answer(q)
        assert (again.answer, again.scores["samples"]["texts"]) == (a.answer, s["texts"])
    finally:
        store.close()


def test_an_answer_about_the_asker_is_told_to_them_through_the_model(tmp_path, clock, base_llm):
    """Jake's own captions are rendered as his ("Jake's view: Jake adjusts ..."), so the model
    answers his "What am I doing ...?" with his name; he reads "you" (`assistant.address`)."""
    import re

    store = Store(tmp_path / "camera.sqlite")
    try:
        t = clock.parse("DAY2 11:00:00")
        store.add([Observation("A1_JAKE", "caption", t, t + 4000, "I adjust the action camera on the shelf"),
                   Observation("A1_JAKE", "caption", t + 20_000, t + 24_000, "I turn the action camera to face the table"),
                   Observation("A3_TASHA", "caption", t + 40_000, t + 44_000, "Tasha washes strawberries in the kitchen")])
        answerer = Answerer(store, clock, AnswerSettings(shared_top_n=0, planner="rule", open_when=False), base_llm,
                            budget=5, search=SearchSettings(dense=False))
        a = answerer.answer(Query("What am I doing near the action camera?", clock.parse("DAY2 11:05:00"),
                                  asker="A1_JAKE"))
        assert a.status == "ok" and a.mode == "model", (a.answer, a.guard, a.reply)
        shown = re.sub(r"\([^)]*\)", "", a.answer)  # the source in parentheses stays as recorded
        assert re.search(r"\byou\b", shown, re.I) and not re.search(r"\b(Jake|I|my)\b", shown), a.answer
        assert "camera" in a.answer.lower(), a.answer
        # and when it was seen: the time of the excerpt the answer's words come from (issue 13)
        assert re.search(r"\(around 11:00 on DAY2\)|DAY2 11:00", a.answer), a.answer
    finally:
        store.close()
