"""The multilingual dense index: the real USE Multilingual model, the view that reads every line,
vector tables kept apart per encoder, and the leave-one-day-out protocol of the bench."""

import numpy as np
import pytest

from assistant.config import SearchSettings
from assistant.egolifeqa import QAItem
from assistant.query import Query, Retrieved
from assistant.retrievers import Retrievers, known
from assistant.tuning import leave_one_day_out
from memory.records import Observation, Unit
from memory.tokenize import multilingual_view
from memory.vectors import VectorIndex
from tests.test_vectors import CountingEmbed


@pytest.fixture(scope="module")
def use():
    from models.multilingual import MultilingualEncoder

    return MultilingualEncoder()


def obs(agent, t_s, text, kind="caption", speaker=None):
    return Observation(agent, kind, t_s * 1000, t_s * 1000 + 1000, text, speaker=speaker)


def test_view_keeps_every_language_and_says_a_translated_line_once():
    text = ("Jake: 好然后一个秒表\nJake: Okay, then we need a stopwatch.\nTasha正在吃煎饼\n"
            "我向左转\nThen I turned left.\nShure: 哈哈哈\nKatrina: What kind of performance?")
    assert multilingual_view(text).splitlines() == [
        "Jake: Okay, then we need a stopwatch.", "Tasha正在吃煎饼", "Then I turned left.", "Shure: 哈哈哈",
        "Katrina: What kind of performance?"]
    assert multilingual_view("我拿着糖一边走") == "我拿着糖一边走"
    assert len(multilingual_view("\n".join(["一二三四五六七八九十"] * 50), max_chars=100)) <= 110


def test_real_use_ranks_a_translation_above_an_unrelated_line(use):
    zh, en, other = use.embed(["我依旧在拧螺丝", "I keep tightening the screws", "Lucia eats watermelon in the kitchen."])
    assert float(zh @ en) > float(zh @ other) + 0.3
    assert np.allclose(np.linalg.norm([zh, en, other], axis=1), 1.0, atol=1e-4)
    assert use.dim == 512 and use.embed([]).shape == (0, 512)


def test_an_english_question_finds_a_chinese_segment(store, use):
    store.add([obs("A2_ALICE", 0, "我在厨房切西瓜"), obs("A2_ALICE", 60, "Tasha在整理机器"),
               obs("A3_TASHA", 120, "我们在讨论明天的舞蹈"), obs("A4_LUCIA", 180, "Lucia: 稍等一下", "transcript", "Lucia"),
               obs("A4_LUCIA", 181, "Lucia: Hold on a second.", "transcript", "Lucia")])
    vi = VectorIndex(store, use.embed, model=use.name, dim=use.dim, key="use", view=multilingual_view)
    assert vi.refresh() == 4 and vi.pending() == 0  # every unit has a vector, whatever its language
    (best, _), *_ = vi.search(use.embed(["Who was cutting watermelon in the kitchen?"])[0], k=4)
    assert store.units([best])[best].text == "我在厨房切西瓜"


def test_encoders_keep_their_vectors_apart(store):
    store.add([obs("A", 0, "apple banana"), obs("B", 60, "只有中文")])
    en = VectorIndex(store, CountingEmbed(), model="letters", dim=26)
    multi_embed = CountingEmbed()
    multi = VectorIndex(store, multi_embed, model="letters-multi", dim=26, key="use", view=multilingual_view)
    assert en.refresh() == 2 and multi.refresh() == 2 and len(multi_embed.seen) == 2
    assert (en.table, multi.table) == ("vec_segments", "vec_segments_use")
    count = {t: store.db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in (en.table, multi.table)}
    assert count == {"vec_segments": 1, "vec_segments_use": 2}
    assert en.pending() == 0 and VectorIndex(store, CountingEmbed(), model="letters", dim=26).pending() == 0


def test_retriever_names_take_an_encoder(store, clock):
    assert known("default@minilm") and known("no-temporal@use-multilingual") and known("default")
    assert not known("lexical@minilm") and not known("default@word2vec") and not known("magic")
    store.add([obs("A", 0, "apple banana")])
    made = []

    def factory():
        made.append(1)
        return type("E", (), {"name": "letters", "dim": 26, "languages": "en", "embed": CountingEmbed()})()

    pool = Retrievers(store, clock, SearchSettings(encoder="minilm"), embedder_factory=factory)
    r = pool.make("default")
    assert r.vectors.table == "vec_segments" and r.event_vectors.table == "vec_events" and made == [1]


class Scripted:
    """Finds the target of a question exactly when its dense weight is the one its day wants."""

    def __init__(self, cfg, wants):
        self.cfg, self.wants = cfg, wants

    def retrieve(self, q):
        day, target = self.wants[q.question]
        hit = self.cfg["dense_weight"] == {1: 0.9, 2: 0.3}[day]
        return Retrieved([Unit(1, "A", target, target + 30_000, "x")] if hit else [], {"retrieval": 0.0})


def test_leave_one_day_out_never_reports_a_day_with_weights_set_on_it(clock):
    items, wants = [], {}
    for day in (1, 2):
        for n in range(3):
            t = clock.parse(f"DAY{day} 12:0{n}:00")
            items.append(QAItem(f"d{day}n{n}", "EventRecall", f"q{day}{n}", ("a", "b", "c", "d"), "A", t + 60_000,
                                (t,), "x"))
            wants[f"q{day}{n}"] = (day, t)
    configured = {"dense_weight": 0.6}
    rep = leave_one_day_out(items, lambda cfg: Scripted(cfg, wants), configured, clock, asker="A1_JAKE",
                            budget=15, grid={"dense_weight": (0.0, 0.3, 0.6, 0.9)})
    # DAY1 wants 0.9 and DAY2 wants 0.3: each is measured with the other's choice, so both miss
    assert rep["folds"]["DAY1"]["weights"] == {"dense_weight": 0.3}
    assert rep["folds"]["DAY2"]["weights"] == {"dense_weight": 0.9}
    assert rep["folds"]["DAY1"]["held_out"]["hit@0"] == 0.0 and rep["held_out"]["n"] == 6
    with pytest.raises(ValueError, match="two days"):
        leave_one_day_out(items[:3], lambda cfg: Scripted(cfg, wants), configured, clock, asker="I", budget=15)


def test_a_second_encoder_gives_the_chinese_only_memories_a_dense_search(store, clock, use):
    """MiniLM reads English lines only, so a wearer whose captions are all Chinese has no vector;
    USE beside it (`retrieval.second_encoder`) finds that wearer's moment for an English question."""
    store.add([obs("A1_JAKE", 0, "I look at my phone.", "caption"), obs("A1_JAKE", 60, "I walk to the door.", "caption"),
               obs("A2_ALICE", 120, "我在厨房切西瓜"), obs("A3_TASHA", 180, "我们在讨论明天的舞蹈")])
    s = SearchSettings(encoder="minilm", second_encoder="use-multilingual", second_dense_weight=1.0, dense_weight=0.3, scales=False,
                       context=False, entities=False, entity_memory=False, hierarchy=False, temporal=False)
    pool = Retrievers(store, clock, s, embedder_factory=None)
    done = pool.prepare()
    assert done["segments_use"] == 4  # every unit, whatever its language, has a vector of the second encoder
    assert pool.vectors("use-multilingual")[0].pending() == 0
    q = Query("Who was cutting watermelon in the kitchen?", 10**15, asker="A1_JAKE", budget=2)
    with_second = pool.make("default").retrieve(q).units
    without = pool.make("no-second").retrieve(q).units
    assert with_second[0].agent == "A2_ALICE" and with_second[0].text == "我在厨房切西瓜"
    assert "A2_ALICE" not in {u.agent for u in without}  # MiniLM alone: Alice's caption has no English to embed
    assert pool.make("no-second").second is None and pool.make("lexical-only").second is None


def test_the_encoders_catch_up_together_oldest_first(store, clock, use):
    """The daemon's catch-up after an import: with `step`, MiniLM and USE take turns through the
    backlog, so the first hours get the Chinese-reading vectors before MiniLM has done the rest
    (before, USE started only once MiniLM had embedded the whole week)."""
    for hour in range(3):
        store.add([obs("A1_JAKE", hour * 3600, f"I open box number {hour}."), obs("A2_ALICE", hour * 3600, "我在拧螺丝")])
    s = SearchSettings(encoder="minilm", second_encoder="use-multilingual")
    pool = Retrievers(store, clock, s, embedder_factory=None)
    turns = []
    done = pool.prepare(lambda total, name: lambda n: turns.append((name, n)), step=1)
    assert turns == [("segments", 2), ("segments_use", 2)] * 3  # the events have none
    assert done == {"segments": 6, "events": 0, "segments_use": 6}
    assert pool.vectors()[0].pending() == 0 and pool.vectors("use-multilingual")[0].pending() == 0
    store.add([obs("A2_ALICE", 4 * 3600, "我在切西瓜")])
    halted = pool.prepare(step=1, stop=lambda: True)  # a question in flight: not a row embedded
    assert sum(halted.values()) == 0 and pool.vectors("use-multilingual")[0].pending() == 1


def test_a_second_encoder_must_be_another():
    with pytest.raises(ValueError, match="is the encoder itself"):
        SearchSettings(encoder="minilm", second_encoder="minilm")
    assert SearchSettings(encoder="use-multilingual", second_encoder="minilm").second_encoder == "minilm"
    # the default second (USE beside MiniLM) is dropped when USE is the first: a configuration that
    # names only `encoder = "use-multilingual"` keeps working, with one encoder
    assert SearchSettings().second_encoder == "use-multilingual"
    assert SearchSettings(encoder="use-multilingual").second_encoder == ""
    assert SearchSettings(encoder="use-multilingual", second_encoder="").second_encoder == ""
