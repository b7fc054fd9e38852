import json
from pathlib import Path

import pytest

from daemon.cli import main
from daemon.recordings import import_jsonl
from memory.store import Store
from streams.egolife import discover, hour_of, parse_srt, read_hour


def test_hour_and_day_from_irregular_file_names():
    assert hour_of(Path("A4_LUCIA_DAY6_14000000.mp4.srt")) == 14
    assert hour_of(Path("DAY6_A4_LUCIA_21000000.mp4.srt")) == 21
    assert hour_of(Path("A1_JAKE_DAY1_09000000.jsonl")) == 9


def test_all_agents_and_days_are_discovered(egolife):
    files = discover(egolife / "EgoLifeCap")
    assert {f.agent for f in files} == {"A1_JAKE", "A2_ALICE", "A3_TASHA", "A4_LUCIA", "A5_KATRINA", "A6_SHURE"}
    assert {f.day for f in files} == set(range(1, 8))
    assert {f.stream for f in files} == {"caption", "transcript", "translated"}
    lucia6 = [f for f in files if f.agent == "A4_LUCIA" and f.day == 6 and f.stream == "transcript"]
    assert 21 in {f.hour for f in lucia6} and len(lucia6) == 11


def test_srt_offsets_within_the_hour_and_bad_blocks_skipped():
    text = "1\n00:09:43,500 --> 00:09:44,800\n我拿着手机\n\nX\nbroken\n\n2\n01:00:00,100 --> 01:00:01,000\nlast\n"
    entries = list(parse_srt("\ufeff" + text))
    assert [(e.index, e.start_s, e.lines) for e in entries] == [(1, 583.5, ("我拿着手机",)), (2, 3600.1, ("last",))]


def test_real_hour_keeps_both_languages_and_speakers(egolife, clock):
    files = [f for f in discover(egolife / "EgoLifeCap", {1}, {"A1_JAKE"}) if f.hour == 11]
    by_stream = {f.stream: read_hour(f, clock.at) for f in files}
    first = by_stream["caption"][0].msg
    assert clock.label(first.ts) == "DAY1 11:09:43" and first.ts % 1000 == 500 and first.lang == "zh"
    en = by_stream["translated"][0].msg
    assert en.text == "I'm holding my phone." and en.ts == first.ts and en.lang == "en"
    tr = by_stream["transcript"]
    assert {m.msg.lang for m in tr} == {"zh", "en"}
    assert tr[1].msg.speaker == "Jake" and tr[1].msg.text == "Okay, then we need a stopwatch."


def test_import_slice_then_again_inserts_nothing(tmp_path, egolife, capsys):
    db = tmp_path / "m.sqlite"
    args = ["import", "egolife", str(egolife / "EgoLifeCap"), "--days", "1", "--agents", "A1_JAKE,A2_ALICE",
            "--db", str(db), "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["inserted"] > 10_000 and first["duplicates"] == 0 and first["counts"]["agents"] == 2
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["inserted"] == 0 and second["duplicates"] == first["inserted"]
    s = Store(db)
    kinds = dict(s.db.execute("SELECT kind || '/' || lang, COUNT(*) FROM observations GROUP BY 1").fetchall())
    assert set(kinds) == {"caption/zh", "caption/en", "transcript/zh", "transcript/en"}


def test_jsonl_import_reports_bad_lines_and_keeps_good_ones(tmp_path, clock, store):
    f = tmp_path / "rec.jsonl"
    lines = [
        {"agent": "robot1", "kind": "caption", "start": "DAY1 10:00:00", "end": "DAY1 10:00:02",
         "text": "I put the charger in the drawer", "lang": "en", "id": "r1"},
        {"agent": "robot1", "start": 1735700000000, "text": "no id, no end"},
        {"agent": "robot/1", "start": "DAY1 10:00:00", "text": "bad agent"},
        {"agent": "robot1", "start": "whenever", "text": "bad time"},
        {"agent": "robot1", "start": "DAY1 10:00:00", "text": "x", "kind": "smell"},
        {"agent": "robot1", "start": "DAY1 10:00:00", "text": "x", "colour": "red"},
        {"agent": "robot1", "start": "DAY1 10:00:09", "end": "DAY1 10:00:01", "text": "ends first"},
    ]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n{broken json\n[1, 2]\n", encoding="utf-8")
    report = import_jsonl(store, f, clock)
    assert report.added.inserted == 2
    assert len(report.errors) == 7
    assert any(":3:" in e and "agent" in e for e in report.errors)
    assert any(":8:" in e for e in report.errors)
    assert import_jsonl(store, f, clock).added.inserted == 0
    row = store.db.execute("SELECT start_ms, end_ms, text FROM observations WHERE ext_id = 'r1'").fetchone()
    assert tuple(row) == (clock.parse("DAY1 10:00:00"), clock.parse("DAY1 10:00:02"), "I put the charger in the drawer")


def test_import_of_missing_folder_is_a_clear_error(tmp_path, capsys):
    assert main(["import", "egolife", str(tmp_path / "nope"), "--db", str(tmp_path / "m.sqlite")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["import", "egolife", str(tmp_path / "empty"), "--db", str(tmp_path / "m.sqlite")]) == 2
    assert "not an EgoLifeCap folder" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["caption", "transcript"])
def test_kind_is_carried(tmp_path, clock, store, kind):
    f = tmp_path / "one.jsonl"
    f.write_text(json.dumps({"agent": "a", "kind": kind, "start": 1, "text": "t", "speaker": "Bo"}) + "\n")
    import_jsonl(store, f, clock)
    assert store.db.execute("SELECT kind FROM observations").fetchone()[0] == kind
