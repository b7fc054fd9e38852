"""Entity memory: people encounters kept by revision, the entity chain, people present, events as a way in."""

from __future__ import annotations

from assistant.chains import chain_order, chain_scores
from assistant.config import SearchSettings
from assistant.hybrid import HybridRetriever
from assistant.query import Query
from assistant.temporal import read_intent
from memory.entities import MENTIONED, SPEAKER, WEARER, EntityMemory, biography, occasions, people_of
from memory.events import Event, EventStore
from memory.lexical import EVENTS, LexicalIndex
from memory.records import Observation

MIN = 60_000


def cap(clock, agent, hhmm, text, kind="caption", speaker=None):
    h, m = hhmm
    t = clock.at(1, h * 3600 + m * 60)
    return Observation(agent, kind, t, t + 2000, text, speaker=speaker)


def house(store, clock):
    """A morning of three wearers: the marker moves about; Alice fixes the shelf."""
    store.add([
        cap(clock, "A3_TASHA", (9, 0), "washed the cups"),
        cap(clock, "A1_JAKE", (10, 0), "I put the black marker on the whiteboard ledge"),
        cap(clock, "A1_JAKE", (10, 31), "the black marker lies on the second-floor table"),
        cap(clock, "A4_LUCIA", (10, 32), "Lucia: where is the marker", kind="transcript", speaker="Lucia"),
        cap(clock, "A1_JAKE", (11, 1), "Shure holds the black marker and writes the plan"),
        cap(clock, "A2_ALICE", (10, 45), "我依旧在拧螺丝，Tasha跟Lucia正在另一边"),
        cap(clock, "A2_ALICE", (10, 46), "I keep tightening the screws of the shelf"),
        cap(clock, "A1_JAKE", (10, 47), "we talk about dinner plans and pizza"),
    ])


def test_people_of_a_segment_by_role():
    roles = people_of("Lucia: 这里\nTasha跟Lucia正在另一边\nOK then", "alice", {"alice", "tasha", "lucia"})
    assert roles == {"alice": WEARER, "lucia": SPEAKER | MENTIONED, "tasha": MENTIONED}


def test_encounters_kept_by_revision_and_read_as_of(store, clock):
    house(store, clock)
    em = EntityMemory(store)
    assert em.refresh() > 0 and em.refresh() == 0  # nothing new: nothing read again
    with_tasha = em.with_people(["Tasha"])
    assert len(with_tasha) == 2  # her own view, and Alice's caption that names her
    assert em.present(with_tasha)[with_tasha[0]] >= {"alice", "tasha", "lucia"}  # latest first
    early = clock.at(1, 10 * 3600 + 40 * 60)
    assert len(em.with_people(["Tasha"], as_of=early)) == 1  # Alice's line not yet recorded then
    store.add([cap(clock, "A3_TASHA", (11, 5), "Katrina: 我们去买菜", kind="transcript", speaker="Katrina")])
    assert em.refresh() == 1
    assert len(em.with_people(["katrina", "tasha"])) == 1  # speaker and wearer meet
    assert em.with_people(["katrina", "alice"]) == []


def test_people_present_from_arrays_match_the_table_and_follow_new_segments(store, clock):
    """`present_of` (per-person id arrays kept per revision) says what `present` (SQL) says, and
    sees a segment added after its arrays were made."""
    house(store, clock)
    em = EntityMemory(store)
    em.refresh()
    ids = [r[0] for r in store.db.execute("SELECT id FROM segments")] + [10_000]  # one id of no segment
    people = {"alice", "tasha", "lucia", "katrina"}
    full = em.present(ids)
    assert em.present_of(ids, people) == {i: full[i] & people for i in full if full[i] & people}
    assert em.present_of(ids, {"katrina"}) == {}
    store.add([cap(clock, "A3_TASHA", (11, 5), "Katrina: 我们去买菜", kind="transcript", speaker="Katrina")])
    em.refresh()
    new = [r[0] for r in store.db.execute("SELECT id FROM segments")]
    assert len(em.present_of(new, {"katrina"})) == 1


def test_chain_takes_occasions_in_the_order_asked(store, clock):
    house(store, clock)
    ix = LexicalIndex(store)
    ix.refresh()
    as_of = clock.at(1, 11 * 3600 + 5 * 60)
    q = Query("Where was the black marker before?", as_of, ())
    intent = read_intent(q.question, as_of, clock)
    assert chain_order(q.question, intent) == "latest"
    scores = chain_scores(ix, ["marker"], q, "latest", None, lambda ms: clock.day_of(ms)[0])
    starts = {u.start_ms: scores[i] for i, u in store.units(list(scores)).items()}
    # the occasion under way (11:01) is skipped; the one before it ranks first, the first one after
    assert max(starts, key=starts.get) // (10 * MIN) == clock.at(1, 10 * 3600 + 30 * 60) // (10 * MIN)
    assert starts[min(starts)] < max(starts.values())
    first = chain_scores(ix, ["marker"], q, "earliest", None, lambda ms: clock.day_of(ms)[0])
    best = max(first, key=first.get)
    assert store.units([best])[best].start_ms < clock.at(1, 10 * 3600 + 30 * 60)


def test_retriever_finds_a_named_person_in_their_own_view(store, clock):
    house(store, clock)
    s = SearchSettings(dense=False, scales=False, context=False, temporal=False, hierarchy=False,
                       people_weight=1.0, chain_weight=0.0)
    ix = LexicalIndex(store)
    r = HybridRetriever(store, clock, s, index=ix, entities=EntityMemory(store))
    off = HybridRetriever(store, clock, s.model_copy(update={"entity_memory": False}), index=ix)
    q = Query("What was Alice doing with the screws?", clock.at(1, 12 * 3600), (), budget=3)
    top = r.retrieve(q).units[0]
    assert top.agent == "A2_ALICE"
    assert r.named(q) == {"alice"}
    assert off.named(q) == set()


def test_events_lead_to_the_units_of_their_window(store, clock):
    house(store, clock)
    ev = EventStore(store)
    w = clock.at(1, 10 * 3600 + 40 * 60)
    ev.replace(w, [Event(("Alice",), "fixed the shelf with a screwdriver", "second floor", "")],
               model="test", prompt_version="t", input_hash="h", rev=store.revision())
    s = SearchSettings(dense=False, entity_memory=False, hierarchy_weight=5.0)
    ix = LexicalIndex(store)
    r = HybridRetriever(store, clock, s, index=ix, event_index=LexicalIndex(store, EVENTS))
    q = Query("When was the shelf fixed?", clock.at(1, 12 * 3600), (), budget=5)
    got = r.retrieve(q).units
    assert got and w <= got[0].start_ms < w + 10 * MIN
    off = HybridRetriever(store, clock, s.model_copy(update={"hierarchy": False}), index=ix,
                          event_index=LexicalIndex(store, EVENTS))
    assert off.retrieve(q).units[0].score < got[0].score


def test_biography_is_one_compact_line(clock):
    occ = occasions([1, 2, 3], [clock.at(1, 36000), clock.at(1, 36010), clock.at(2, 40000)], [1, 2, 1])
    line = biography("marker", occ, {1: "Jake", 2: "Alice"}, clock.label)
    assert line == "marker: seen on 2 occasion(s): DAY1 10:00 (Jake, Alice); DAY2 11:06 (Jake)"


def test_key_entities_are_things_not_time_words(store, clock):
    house(store, clock)
    store.add([cap(clock, "A1_JAKE", (10, 50), "previously I could not open the jar, originally it was shut")])
    ix = LexicalIndex(store)
    ix.refresh()
    r = HybridRetriever(store, clock, SearchSettings(dense=False), index=ix, entities=EntityMemory(store))
    q = Query("Previously, Alice couldn't open the jar. Who originally helped her?", clock.at(1, 12 * 3600), ())
    assert set(r.key_entities(q)) == {"jar", "open"}
    # what was done to it is not the object: "saw" is in every line of what someone saw
    store.add([cap(clock, "A1_JAKE", (10, 55), "I saw the durian and saw the jar")])
    ix.refresh()
    seen = Query("When was the last time I saw durian?", clock.at(1, 12 * 3600), ())
    assert r.key_entities(seen) == ["durian"]
    loose = HybridRetriever(store, clock, SearchSettings(dense=False, objects_only=False), index=ix)
    assert set(loose.key_entities(seen)) == {"durian", "saw"}
    me = Query("Who was with me at the whiteboard?", clock.at(1, 12 * 3600), (), asker="A1_JAKE")
    assert r.named(me) == {"jake"}


def test_a_store_that_cannot_be_written_keeps_its_encounters(store, clock):
    house(store, clock)
    em = EntityMemory(store)
    em.refresh()
    before = em.with_people(["lucia"])
    store.add([cap(clock, "A4_LUCIA", (11, 30), "Lucia: 我们走吧", kind="transcript", speaker="Lucia")])
    store.db.execute("PRAGMA query_only = ON")
    try:
        assert em.refresh() == 0  # logged, not raised: a question is still answered
        assert em.with_people(["lucia"]) == before
    finally:
        store.db.execute("PRAGMA query_only = OFF")
    assert em.refresh() == 1 and len(em.with_people(["lucia"])) == len(before) + 1


def test_the_last_time_a_thing_was_done_is_where_it_is_seen_not_named(store, clock):
    """"The last time we watched a movie": the caption that shows one, not the later talk that
    names one; "the last time the movie was mentioned": the talk."""
    store.add([
        cap(clock, "A1_JAKE", (10, 0), "I'm watching the movie on the projector"),
        cap(clock, "A2_ALICE", (10, 40), "If you watch my movie, listen to my CD", kind="transcript", speaker="Alice"),
        cap(clock, "A3_TASHA", (10, 50), "Which movie was it again?", kind="transcript", speaker="Tasha"),
    ])
    s = SearchSettings(dense=False, scales=False, context=False, hierarchy=False, widen=0)
    ix = LexicalIndex(store)
    as_of = clock.at(1, 11 * 3600 + 30 * 60)

    def latest(question, settings=s):
        r = HybridRetriever(store, clock, settings, index=ix, entities=EntityMemory(store))
        return clock.label(r.retrieve(Query(question, as_of, (), budget=1)).units[0].start_ms)

    assert latest("When was the last time we watched a movie?") == "DAY1 10:00:00"
    assert latest("When was the last time a movie was mentioned?") == "DAY1 10:50:00"
    assert latest("When was the last time we watched a movie?", s.model_copy(update={"chain_seen": False})) \
        == "DAY1 10:50:00"
