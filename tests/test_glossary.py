"""The glossary learnt from the memory's own translated lines, and English questions that find
untranslated Chinese lines through it."""

from __future__ import annotations

import contextlib
import logging

from assistant.lexical import LexicalRetriever
from assistant.query import Query
from memory.glossary import Glossary
from memory.records import Observation
from memory.store import Store
from memory.tokenize import tokenize

# (Chinese, English) said by Jake, each pair at one moment: the glossary's only teacher
PAIRS = [
    ("螺丝刀在哪里", "Where is the screwdriver?"),
    ("把螺丝刀给我", "Give me the screwdriver."),
    ("这个螺丝刀太小了", "This screwdriver is too small."),
    ("我们中午吃披萨吧", "Let's have pizza for lunch."),
    ("披萨到了", "The pizza has arrived."),
    ("还要一块披萨吗", "Another slice of pizza?"),
    ("花放在桌子上", "The flowers are on the table."),
    ("我去买花", "I'll go buy flowers."),
    ("这些花很好看", "These flowers are pretty."),
]


@contextlib.contextmanager
def _caplog_errors(into: list):
    """Warnings of the glossary's logger gathered into `into`."""

    class Keep(logging.Handler):
        def emit(self, record):
            into.append(record.getMessage())

    log = logging.getLogger("memory.glossary")
    h = Keep(logging.WARNING)
    log.addHandler(h)
    try:
        yield
    finally:
        log.removeHandler(h)


def _paired(store: Store, clock, start="DAY1 10:00:00") -> None:
    t = clock.parse(start)
    obs = []
    for k, (zh, en) in enumerate(PAIRS * 2):
        at = t + 60_000 * k
        obs += [Observation("A1_JAKE", "transcript", at, at + 3000, f"Jake: {zh}", speaker="Jake", lang="zh"),
                Observation("A1_JAKE", "transcript", at, at + 3000, f"Jake: {en}", speaker="Jake", lang="en")]
    store.add(obs)


def test_words_align_with_their_translations(store, clock):
    _paired(store, clock)
    g = Glossary(store)
    assert g.refresh()
    assert g.terms["screwdriv"][0][0] in {"螺丝", "丝刀", "螺丝刀"}, g.terms["screwdriv"]
    assert g.terms["pizza"][0][0] in {"披萨", "披", "萨"}, g.terms["pizza"]
    assert all(z not in {"披萨", "披", "萨"} for z, _ in g.terms["flower"])  # no word borrows another's
    added = g.expand({"screwdriv": 1.0}, 0.5)
    assert set(added) > {"screwdriv"} and all(0 < w <= 0.5 for t, w in added.items() if t != "screwdriv")
    assert g.expand({"screwdriv": 1.0}, 0.0) == {"screwdriv": 1.0}


def test_an_english_question_finds_an_untranslated_caption(store, clock):
    _paired(store, clock)
    at = clock.parse("DAY1 11:05:00")
    store.add([Observation("A2_ALICE", "caption", at, at + 3000, "我用螺丝刀拧紧了架子", lang="zh"),
               Observation("A4_LUCIA", "caption", at, at + 3000, "我在厨房洗碗", lang="zh")])
    g = Glossary(store)
    q = Query("Who used the screwdriver?", as_of_ms=clock.parse("DAY1 12:00:00"), budget=30)
    plain = LexicalRetriever(store).retrieve(q).units
    found = LexicalRetriever(store, glossary=g, cross_lingual=0.5)
    g.refresh()
    crossed = found.retrieve(q).units
    assert not any(u.agent == "A2_ALICE" for u in plain)
    alice = [u for u in crossed if u.agent == "A2_ALICE"]
    assert alice and "螺丝刀" in alice[0].text
    assert not any(u.agent == "A4_LUCIA" for u in crossed)  # the dishes share no word with it


def test_kept_beside_the_database_and_learnt_again_as_memory_grows(tmp_path, clock):
    s = Store(tmp_path / "m.sqlite")
    _paired(s, clock)
    g = Glossary(s)
    assert g.refresh() and not g.refresh() and not g.learn_if_due()
    again = Glossary(s)  # read back, not learnt again
    assert again.terms == g.terms and not again.learn_if_due()
    _paired(s, clock, "DAY2 10:00:00")  # twice the memory
    assert not g.refresh()  # a question never waits for it to be learnt again
    assert again.learn_if_due()  # the indexer's
    assert not g.refresh() and g.built_at == again.built_at  # learnt by the other one: read, not learnt again
    s.close()


def test_the_same_glossary_whatever_the_order_and_two_writers_at_once(tmp_path):
    """More tokens tie than are kept: the same three, whatever order the pairs came in (and
    whatever the hash seed); two threads saving at once leave one whole file."""
    import threading

    from memory.glossary import learn

    pairs = [("今天天气非常好我们出去散步吧", "walk outside")] * 3 + [("别的东西", "other")] * 3
    first = learn(pairs)["walk"]
    assert learn(pairs[::-1])["walk"] == first and len(first) == 3
    assert all(len(z) == 2 for z, _ in first)  # the ties go to the bigrams
    s = Store(tmp_path / "m.sqlite")
    a, b = Glossary(s), Glossary(s)
    a.terms = b.terms = {"walk": first}
    errors = []

    def save(g):
        for _ in range(30):
            g._save()

    threads = [threading.Thread(target=save, args=(g,)) for g in (a, b)]
    with _caplog_errors(errors):
        [t.start() for t in threads]
        [t.join() for t in threads]
    assert not errors and Glossary(s).terms == {"walk": first}
    assert not list(tmp_path.glob("**/*.tmp*"))
    s.close()


def test_the_real_week_teaches_the_words_of_its_questions(slice_db):
    """Two hours of DAY1, three wearers: Jake's translated lines teach "screw", and a search for
    tightening screws then reaches Alice's captions, which are Chinese only."""
    s = Store(slice_db, readonly=True)
    try:
        g = Glossary(s, persist=False)  # the session's slice is read-only
        g.refresh()
        assert "螺丝" in [z for z, _ in g.terms["screw"]], g.terms.get("screw")
        q = Query("Who was tightening screws?", as_of_ms=10**15, budget=15)
        crossed = LexicalRetriever(s, glossary=g, cross_lingual=0.25).retrieve(q).units
        plain = LexicalRetriever(s).retrieve(q).units

        def untranslated(units):  # the screws said in Chinese only
            return [u for u in units if "screw" not in tokenize(u.text) and "螺丝" in u.text]

        assert len(untranslated(crossed)) > len(untranslated(plain)), [u.text[:80] for u in crossed]
    finally:
        s.close()


def test_the_switch_reaches_the_default_retriever(store, clock):
    """`retrieval.translations` on: the hybrid search (as answering uses it) learns the glossary
    before the question and finds the untranslated caption; off, it does not."""
    from assistant.config import SearchSettings
    from assistant.retrievers import Retrievers

    _paired(store, clock)
    at = clock.parse("DAY1 11:05:00")
    store.add([Observation("A2_ALICE", "caption", at, at + 3000, "我用螺丝刀拧紧了架子", lang="zh")])
    q = Query("Who used the screwdriver?", as_of_ms=clock.parse("DAY1 12:00:00"), budget=30)
    for on in (False, True):
        r = Retrievers(store, clock, SearchSettings(dense=False, translations=on, translation_weight=0.5))
        hybrid = r.make("default")
        hybrid.refresh()
        got = hybrid.retrieve(q).units
        assert any(u.agent == "A2_ALICE" for u in got) == on, on


def _screwdriver_morning(store: Store, clock) -> None:
    """Alice opens bags with the screwdriver (her own caption, never translated) before Shure uses
    it (an English line); the translated pairs that teach the glossary come in the afternoon."""
    _paired(store, clock, "DAY1 14:00:00")
    t = clock.parse("DAY1 15:00:00")
    for k, (zh, en) in enumerate([("用剪刀剪开", "Use the scissors to cut it."), ("我用一下", "Let me use it."),
                                  ("用这个吧", "Use this one.")] * 2):
        at = t + 60_000 * k
        store.add([Observation("A1_JAKE", "transcript", at, at + 3000, f"Jake: {zh}", speaker="Jake", lang="zh"),
                   Observation("A1_JAKE", "transcript", at, at + 3000, f"Jake: {en}", speaker="Jake", lang="en")])
    at = clock.parse("DAY1 11:05:00")
    store.add([Observation("A2_ALICE", "caption", at, at + 3000, "遇上了不好开的我就用螺丝刀戳破了", lang="zh"),
               Observation("A6_SHURE", "transcript", at + 900_000, at + 903_000,
                           "Shure: I am using the screwdriver now", speaker="Shure", lang="en"),
               Observation("A4_LUCIA", "caption", at + 600_000, at + 603_000, "我在厨房洗碗", lang="zh")])


def test_object_encounters_hold_a_word_or_its_translations(store, clock):
    from memory.entities import object_encounters
    from memory.lexical import LexicalIndex

    _screwdriver_morning(store, clock)
    ix = LexicalIndex(store)
    ix.refresh()
    english = object_encounters(ix, ["screwdriv"])[0]
    either = object_encounters(ix, [("screwdriv", "丝刀")])[0]
    agents = {u.agent for u in store.units([int(i) for i in either]).values()}
    assert len(either) > len(english) and {"A2_ALICE", "A6_SHURE"} <= agents and "A4_LUCIA" not in agents
    assert not len(object_encounters(ix, [("screwdriv", "丝刀"), ("pizza",)], as_of=clock.parse("DAY1 12:00:00"))[0])


def test_the_chain_follows_an_object_in_every_language_to_its_first_encounter(store, clock):
    """"Who used the screwdriver first?": Alice's Chinese caption is the first encounter; the chain
    reaches it through the glossary (`chain_translations`), and its line is among those shown."""
    from assistant.config import SearchSettings
    from assistant.context import fit_units
    from assistant.hybrid import HybridRetriever
    from memory.entities import EntityMemory
    from memory.tokenize import estimate_tokens

    _screwdriver_morning(store, clock)
    for k, who in enumerate(("Katrina", "Tasha", "Jake")):  # later English lines that match the question better
        at = clock.parse("DAY1 11:30:00") + 600_000 * k
        store.add([Observation(f"A{k + 3}_{who.upper()}", "transcript", at, at + 3000,
                               f"{who}: who used the screwdriver? I need to use the screwdriver", speaker=who,
                               lang="en")])
    g = Glossary(store)
    g.refresh()
    s = SearchSettings(dense=False, scales=False, context=False, hierarchy=False)
    q = Query("Who used the screwdriver first?", as_of_ms=clock.parse("DAY1 12:00:00"),
              options=("Tasha", "Alice", "Shure", "Lucia"), budget=2)

    def units(settings):
        return HybridRetriever(store, clock, settings, entities=EntityMemory(store), glossary=g).retrieve(q).units

    on, off = units(s), units(s.model_copy(update={"chain_translations": False}))
    assert any(u.agent == "A2_ALICE" for u in on)
    assert not any(u.agent == "A2_ALICE" for u in off)
    assert not any(u.agent == "A2_ALICE" for u in units(s.model_copy(update={"chain_slots": 0})))
    lex = LexicalRetriever(store, glossary=g)
    assert "丝刀" in lex.same_words(q.question) and "丝刀" not in LexicalRetriever(store).same_words(q.question)
    alice = [u for u in on if u.agent == "A2_ALICE"]
    filler = alice[0].__class__(alice[0].id, "A2_ALICE", alice[0].start_ms, alice[0].end_ms,
                                "先撕开外机的塑料袋\n" + alice[0].text)  # a first line that says nothing of it
    _, plain = fit_units([filler], q, 200, estimate_tokens, clock.label, filler=0)
    _, crossed = fit_units([filler], q, 200, estimate_tokens, clock.label, filler=0,
                           also=lex.same_words(q.question))
    assert "螺丝刀" not in plain and "Alice就用螺丝刀戳破了" in crossed
