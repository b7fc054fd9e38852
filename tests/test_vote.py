"""The evidence's vote on multiple choice (`assistant.vote`): which options the excerpts and the
memory back, standardised and added to the model's scores."""

import numpy as np
import pytest

from assistant.vote import (
    DenseReader,
    as_asker,
    combined,
    dense,
    lexical,
    mentions,
    own_words,
    standardised,
    timing,
    wearer,
    when,
)
from memory.lexical import LexicalIndex
from memory.records import Observation, Unit


def unit(i: int, text: str, agent: str = "A1_JAKE") -> Unit:
    return Unit(i, agent, 0, 30_000, text)


def test_an_option_is_judged_by_its_own_words_not_the_question_s():
    assert own_words("the screwdriver on the table", "Where was the screwdriver?") == {"tabl"}
    assert own_words("screwdriver", "Where was the screwdriver?") == {"screwdriv"}  # nothing of its own left


def test_mentions_count_the_best_excerpts_most():
    units = [unit(1, "Alice: I keep tightening the screws"), unit(2, "Shure holds the box"),
             unit(3, "Shure laughs"), unit(4, "Shure goes out")]
    m = mentions(units, "Who tightened the screws?", ["Tasha", "Alice", "Shure", "Lucia"])
    assert m[0] == m[3] == 0 and m[1] == pytest.approx(1.0)
    assert m[2] == pytest.approx(2 ** -0.5 + 3 ** -0.5 + 4 ** -0.5)  # three lower excerpts outweigh one first
    flat = mentions(units, "Who tightened the screws?", ["Alice", "Shure"], decay=4.0)
    assert flat[0] > flat[1]  # with a steep decay the first excerpt decides
    half = mentions([unit(1, "the red cup on the table")], "Where is the cup?", ["red box", "on the table"])
    assert list(half) == pytest.approx([0.5, 1.0])


def test_mentions_read_the_30_s_the_search_chose_of_a_widened_excerpt():
    from dataclasses import replace

    core = unit(1, "Alice: I keep tightening the screws")
    wide = replace(core, end_ms=core.end_ms + 30_000, text=core.text + "\nShure takes the screwdriver",
                   extra={"core": core.text})
    opts = ["Alice", "Shure"]
    assert list(mentions([wide], "Who tightened the screws?", opts)) == pytest.approx([1.0, 0.0])
    plain = replace(wide, extra={})  # without the mark, the whole text counts
    assert list(mentions([plain], "Who tightened the screws?", opts)) == pytest.approx([1.0, 1.0])


def test_an_option_is_mentioned_in_its_translation_too():
    units = [unit(1, "我们中午吃披萨吧", "A2_ALICE"), unit(2, "Jake: hot pot tonight?")]
    opts = ["Pizza", "Hot pot"]
    assert list(mentions(units, "What is for lunch?", opts)) == pytest.approx([0, 2 ** -0.5])
    glossary = {"pizza": {"披萨"}}
    m = mentions(units, "What is for lunch?", opts, translations=lambda t: glossary.get(t, set()))
    assert list(m) == pytest.approx([1.0, 2 ** -0.5])


def test_lexical_support_is_the_gain_of_the_option_over_the_question_alone(store, clock):
    t = clock.parse("DAY1 11:16:00")
    store.add([Observation("A2_ALICE", "caption", t, t + 4000, "Alice tightens the screws with a screwdriver"),
               Observation("A3_TASHA", "caption", t + 60_000, t + 64_000, "Tasha washes strawberries"),
               Observation("A4_LUCIA", "caption", t + 120_000, t + 124_000, "Lucia reads a book about screws")])
    ix = LexicalIndex(store)
    ix.refresh()
    base = {"screwdriv": 1.0}
    got = lexical(ix, base, ["Tasha", "Alice", "Lucia", "Bob"], as_of=t + 600_000)
    # Alice shares a moment with the screwdriver; a name alone scores its own moment, less; Bob none
    assert got[1] > max(got[0], got[2]) > 0 and got[3] == 0
    assert lexical(ix, base, ["Alice"], as_of=t - 1)[0] == 0  # nothing before the question's time
    store.add([Observation("A5_KATRINA", "caption", t + 180_000, t + 184_000, "我和Katrina用螺丝刀", lang="zh")])
    ix.refresh()
    plain = lexical(ix, base, ["Katrina", "Tasha"], as_of=t + 600_000)
    crossed = lexical(ix, base, ["Katrina", "Tasha"], as_of=t + 600_000,
                      translate=lambda w: {**w, "丝刀": w.get("screwdriv", 0.0)})
    assert crossed[0] > plain[0] and crossed[0] > crossed[1]  # her screwdriver is said in Chinese only


def test_standardised_and_combined():
    assert list(standardised(np.array([2.0, 2.0, 2.0]))) == [0, 0, 0]
    z = standardised(np.array([0.0, 1.0, 2.0, 5.0]))
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)
    model = [-0.2, -1.8, -2.5, -3.0]  # the model leans to A
    readings = {"mentions": np.array([0.0, 3.0, 0.0, 0.0]), "lexical": np.array([0.1, 0.5, 0.0, 0.0])}
    assert int(np.argmax(combined(model, readings, {"mentions": 0.0, "lexical": 0.0}))) == 0
    assert int(np.argmax(combined(model, readings, {"mentions": 1.0, "lexical": 0.5}))) == 1
    assert int(np.argmax(combined(None, readings, {"mentions": 1.0}))) == 1


def test_options_that_name_times_are_read_against_the_question_s_time(clock):
    as_of = clock.parse("DAY3 15:00:00")
    hour = 3_600_000
    four = when("About four hours ago", as_of, clock)
    assert four.lo <= as_of - 4 * hour <= four.hi
    noon = when("Yesterday at noon", as_of, clock)
    assert noon.lo <= clock.parse("DAY2 12:30:00") <= noon.hi
    night = when("Last night", as_of, clock)
    assert night.lo <= clock.parse("DAY2 21:00:00") <= night.hi
    before = when("The day before yesterday at noon", as_of, clock)
    assert before.lo <= clock.parse("DAY1 12:00:00") <= before.hi
    assert when("On the table", as_of, clock) is None and when("Alice", as_of, clock) is None
    units = [Unit(1, "A1_JAKE", clock.parse("DAY3 11:02:00"), clock.parse("DAY3 11:02:30"), "coffee")]
    got = timing(units, ["About an hour ago", "About four hours ago", "About eight hours ago", "One day ago"],
                 as_of, clock)
    assert int(np.argmax(got)) == 1
    assert not timing(units, ["Alice", "Tasha", "About an hour ago", "Shure"], as_of, clock).any()  # one time only


def test_an_option_that_is_the_asker_is_read_with_the_asker_s_name():
    assert as_asker("Me", "A1_JAKE") == "Jake" and as_asker("Me, Lucia, Shure", "A1_JAKE") == "Jake, Lucia, Shure"
    assert as_asker("Melon", "A1_JAKE") == "Melon" and as_asker("Me", None) == "Me"


def test_the_wearer_reading_counts_the_views_of_the_people_an_option_names():
    units = [unit(1, "我依旧在拧螺丝", "A2_ALICE"), unit(2, "Shure: 好", "A6_SHURE"), unit(3, "看了一下", "A2_ALICE")]
    w = wearer(units, ["Tasha", "Alice", "Shure", "Alice, Shure"])
    assert w[0] == 0 and w[1] == pytest.approx(1 + 3 ** -0.5) and w[2] == pytest.approx(2 ** -0.5)
    assert w[3] == pytest.approx(w[1] + w[2])  # an option naming two people has both views
    assert list(wearer(units, ["Jake"])) == [0]  # lines that only name Shure are not Shure's view


def test_the_encounter_reading_ranks_people_by_when_they_are_seen_with_the_object():
    from assistant.vote import encounter
    from memory.tokenize import query_tokens

    key = {"screwdriv", "丝刀"}
    names = {t for n in ("Alice", "Shure", "Lucia", "Tasha", "Jake", "Katrina") for t in query_tokens(n)}
    a = Unit(1, "A2_ALICE", 0, 30_000, "先撕开外机的塑料袋\n遇上了不好开的我就用螺丝刀戳破了")
    s = Unit(2, "A6_SHURE", 60_000, 90_000, "Lucia: 你要把那个也上上\n后我正在使用螺丝刀")
    k = Unit(3, "A1_JAKE", 120_000, 150_000, "Lucia: This screwdriver has no magnet\nTasha用螺丝刀在扭着螺丝")
    opts = ["Tasha", "Alice", "Shure", "Lucia"]
    first = encounter([k, s, a], opts, "earliest", key, names)  # the order shown does not matter
    assert list(first) == pytest.approx([1 / 4, 1.0, 0.5, 1 / 3])  # Lucia and Tasha: one unit, Lucia's line first
    last = encounter([a, s, k], opts, "latest", key, names)
    assert last[0] == 1.0 and last[1] == min(last)
    assert not encounter([a, s, k], opts, None, key, names).any()  # no order asked
    assert not encounter([a, s, k], opts, "earliest", set(), names).any()  # no object
    assert not encounter([a], ["Shure", "Lucia"], "earliest", key, names).any()  # neither seen with it


def test_the_dense_reading_meets_an_option_in_another_language():
    """Through the bundled multilingual encoder: an English option is near the Chinese excerpt
    that says it, though no word is shared; the first excerpts count most."""
    from models.multilingual import MultilingualEncoder

    read = DenseReader(MultilingualEncoder())
    options = ["Eating pizza", "Washing the dishes", "Playing the guitar"]
    pizza, dishes = unit(1, "我们在桌子旁边吃披萨"), unit(2, "我在厨房洗碗")
    r = read([pizza], "What were we doing at noon?", options)
    assert r["dense"].argmax() == 0 and r["dense_q"].argmax() == 0
    r = read([dishes], "What were we doing at noon?", options)
    assert r["dense"].argmax() == 1 and r["dense_q"].argmax() == 1
    both = read([pizza, dishes], "What were we doing at noon?", options)
    flipped = read([dishes, pizza], "What were we doing at noon?", options)
    assert both["dense"][0] - both["dense"][1] > flipped["dense"][0] - flipped["dense"][1]  # the first counts most
    assert both["dense"][2] == pytest.approx(min(both["dense"]))  # nothing of either says guitar
    assert dense(np.zeros((0, 4)), np.ones((2, 4))).tolist() == [0.0, 0.0]


def test_the_dense_reader_keeps_at_most_its_share_of_vectors_and_reads_each_excerpt_once():
    class Counting:
        def __init__(self):
            self.read = 0

        def embed(self, texts):
            self.read += len(texts)
            return np.array([[1.0 if "pizza" in t else 0.0, 1.0 if "pizza" not in t else 0.0] for t in texts])

    e = Counting()
    read = DenseReader(e, keep=3)
    first = [unit(1, "pizza"), unit(2, "dishes")]
    read(first, "q", ["pizza"])
    assert e.read == 2 + 2  # two excerpts, the option alone and with the question
    read(first, "q", ["pizza"])
    assert e.read == 4 + 2  # the excerpts were kept: only the options read again
    r = read([unit(2, "dishes"), unit(3, "pizza again"), unit(4, "tea")], "q", ["pizza", "tea"])
    assert set(read._units) == {(2, "dishes"), (3, "pizza again"), (4, "tea")} and r["dense"][0] > 0  # full: this question's kept
    assert r["dense_top"].tolist() == [1.0, 1.0]
