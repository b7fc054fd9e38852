import pytest
import sqlean

from memory.db import Database
from memory.errors import RecordError, SchemaError
from memory.records import Observation
from memory.schema import MIGRATIONS
from memory.store import Store

T0 = 1_735_700_000_000 - 1_735_700_000_000 % 30_000


def ob(agent="robot1", start=T0, text="picked up the red charger", kind="caption", ext_id=None, **kw):
    return Observation(agent, kind, start, kw.pop("end", start + 1000), text, ext_id=ext_id, **kw)


def test_same_observation_twice_is_a_noop(store):
    first = store.add([ob(ext_id="a1"), ob(start=T0 + 2000, text="walked to the kitchen")])
    again = store.add([ob(ext_id="a1"), ob(start=T0 + 2000, text="walked to the kitchen")])
    assert (first.inserted, first.duplicates) == (2, 0)
    assert (again.inserted, again.duplicates) == (0, 2)
    assert store.counts()["observations"] == 2


def test_external_id_is_the_key_per_agent(store):
    store.add([ob(ext_id="x", text="one"), ob(ext_id="x", text="changed text", agent="robot2")])
    assert store.add([ob(ext_id="x", text="a resend with other text")]).inserted == 0
    assert store.counts()["observations"] == 2


def test_segments_merge_30_seconds_per_agent(store):
    store.add([
        ob(text="opened the fridge"), ob(start=T0 + 29_000, text="took out milk"),
        ob(start=T0 + 30_000, text="closed the fridge"),
        ob(agent="robot2", text="Jake: hello", kind="transcript", speaker="Jake"),
    ])
    rows = store.db.execute(
        "SELECT a.name, s.start_ms, s.end_ms, s.text, s.obs_ids FROM segments s JOIN agents a ON a.id = s.agent_id "
        "ORDER BY a.name, s.start_ms"
    ).fetchall()
    assert [(r[0], r[1] - T0, r[2] - r[1]) for r in rows] == [
        ("robot1", 0, 30_000), ("robot1", 30_000, 30_000), ("robot2", 0, 30_000)
    ]
    assert rows[0][3] == "opened the fridge\ntook out milk"
    assert rows[2][3] == "Jake: Jake: hello"
    assert len(rows[0][4].split(",")) == 2


def test_late_observation_rebuilds_its_segment(store):
    store.add([ob(start=T0 + 10_000, text="second")])
    rev = store.revision()
    store.add([ob(start=T0 + 1_000, text="first")])
    text, seg_rev = store.db.execute("SELECT text, rev FROM segments").fetchone()
    assert text == "first\nsecond" and seg_rev > rev


def test_beside_is_the_same_agents_next_or_previous_segment_as_of_a_time(store):
    from memory.records import joined

    store.add([ob(text="opened the fridge"), ob(start=T0 + 31_000, text="took out milk", end=T0 + 33_000),
               ob(start=T0 + 40_000, text="opened the fridge", end=T0 + 41_000),
               ob(agent="robot2", start=T0 + 30_000, text="robot2 sweeps")])
    units = {(u.agent, u.start_ms): u for u in store.units([r[0] for r in store.db.execute("SELECT id FROM segments")]).values()}
    first, second = units[("robot1", T0)], units[("robot1", T0 + 30_000)]
    assert store.beside([first], 1)[first.id] == second  # robot2's segment at that slot is not robot1's
    assert store.beside([second], -1)[second.id] == first
    assert store.beside([first], 1, as_of_ms=T0 + 40_500) == {}  # it holds a line ending after that time
    assert store.beside([first], 1, as_of_ms=T0 + 41_000)[first.id] == second
    assert store.beside([second], 1) == {} and store.beside([first], 2) == {}
    both = joined(first, second)
    assert (both.id, both.start_ms, both.end_ms) == (first.id, T0, T0 + 60_000)
    assert both.text.split("\n") == ["opened the fridge", "took out milk"]  # a line already said is not repeated
    assert both.obs_ids == first.obs_ids + second.obs_ids


def test_between_is_every_agents_segments_of_a_span_as_of_a_time(store):
    store.add([ob(text="opened the fridge"), ob(start=T0 + 31_000, text="took out milk", end=T0 + 33_000),
               ob(agent="robot2", start=T0 + 30_000, text="robot2 sweeps", end=T0 + 50_000),
               ob(start=T0 + 95_000, text="closed the fridge", end=T0 + 96_000)])
    got = store.between(T0, T0 + 90_000)
    assert [(u.agent, u.start_ms) for u in got] == [("robot1", T0), ("robot1", T0 + 30_000), ("robot2", T0 + 30_000)]
    assert got[1].text == "took out milk" and got[1].obs_ids
    # a segment holding a line that ends after the question's time is not yet memory
    assert [(u.agent, u.start_ms) for u in store.between(T0, T0 + 90_000, as_of_ms=T0 + 40_000)] == [
        ("robot1", T0), ("robot1", T0 + 30_000)]
    assert store.between(T0 + 120_000, T0 + 180_000) == []


def test_rebuild_segments_reproduces_them(store):
    store.add([ob(start=T0 + i * 7_000, text=f"step {i}") for i in range(20)])
    before = store.db.execute("SELECT agent_id, start_ms, text, obs_ids FROM segments ORDER BY start_ms").fetchall()
    assert store.rebuild_segments() == len(before)
    after = store.db.execute("SELECT agent_id, start_ms, text, obs_ids FROM segments ORDER BY start_ms").fetchall()
    assert [tuple(r) for r in before] == [tuple(r) for r in after]


def test_bad_observation_stores_nothing_of_its_batch(store):
    store.add([ob(ext_id="keep")])
    with pytest.raises(RecordError):
        store.add([ob(ext_id="new"), ob(ext_id="bad", text="   ")])
    with pytest.raises(RecordError):
        store.add([ob(ext_id="rev", end=T0 - 5)])
    assert store.counts()["observations"] == 1


def test_atomic_rolls_back_nested_savepoint_only(store):
    db = store.db
    with db.atomic():
        store.add([ob(ext_id="outer")])
        with pytest.raises(ZeroDivisionError), db.atomic():
            store.add([ob(ext_id="inner", start=T0 + 5000)])
            raise ZeroDivisionError
    assert [r[0] for r in db.execute("SELECT ext_id FROM observations")] == ["outer"]


def test_older_database_file_is_migrated_forward(tmp_path):
    path = tmp_path / "old.sqlite"
    old = Database(path, MIGRATIONS[:1])  # a file written by the first release
    old.execute("INSERT INTO agents VALUES (1, 'robot1', 0)")
    old.execute(
        "INSERT INTO observations VALUES (1, 1, 'caption', ?, ?, 'old text', NULL, 'en', 'k1', 0)", (T0, T0 + 4000)
    )
    old.execute("INSERT INTO segments VALUES (1, 1, ?, ?, 'old text', '1')", (T0, T0 + 30_000))
    old.close()
    s = Store(path)
    assert s.db.applied_migrations() == [name for name, _ in MIGRATIONS]
    assert tuple(s.db.execute("SELECT last_ms, rev FROM segments").fetchone()) == (T0 + 4000, 1)
    assert s.add([ob(ext_id="k1", text="old text")]).inserted == 0  # its rows are still the keys
    assert s.add([ob(ext_id="k2")]).inserted == 1
    s.close()


def test_newer_database_file_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    Store(path).close()
    conn = sqlean.connect(str(path))
    conn.execute("INSERT INTO migrations VALUES ('9999_from_the_future', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="9999_from_the_future"):
        Store(path)


def test_sqlite_vec_is_loaded_and_wal_is_on(store):
    assert store.db.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
