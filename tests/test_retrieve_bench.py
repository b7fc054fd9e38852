import json

import pytest
import sqlean as sqlite3

from assistant.bench import hit
from daemon.cli import main
from memory.records import Unit
from memory.store import Store


@pytest.fixture
def house(monkeypatch):
    monkeypatch.setenv("CHORUS__HOUSE__DAY1", "2025-01-01")
    monkeypatch.setenv("CHORUS__HOUSE__TIMEZONE", "Asia/Shanghai")


def run_json(capsys, args):
    assert main(args + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_retrieve_prints_units_before_as_of(house, slice_db, clock, capsys):
    as_of = "DAY1 11:21:02"
    got = run_json(capsys, ["retrieve", "Who used the screwdriver first?", "--as-of", as_of, "--db", str(slice_db)])
    assert got["question"] == "Who used the screwdriver first?"
    assert got["as_of"] == "2025-01-01T11:21:02+08:00"
    units = got["units"]
    assert 1 <= len(units) <= 15
    assert set(units[0]) >= {"agent", "start", "end", "start_ms", "end_ms", "text", "ids", "score"}
    assert [u["score"] for u in units] == sorted((u["score"] for u in units), reverse=True)
    # a unit of 30 s, joined by its wearer's next 30 s (`retrieval.widen`) unless that is a unit already
    assert units[0]["start"].endswith("+08:00") and {u["end_ms"] - u["start_ms"] for u in units} <= {30_000, 60_000}
    assert any(u["end_ms"] - u["start_ms"] == 60_000 for u in units)
    assert any("screwdriver" in u["text"].lower() or "螺丝刀" in u["text"] for u in units)
    cut = clock.parse(as_of)
    s = Store(slice_db, readonly=True)
    ids = [i for u in units for i in u["ids"]]
    latest = s.db.execute(f"SELECT MAX(end_ms) FROM observations WHERE id IN ({','.join(map(str, ids))})").fetchone()[0]
    assert latest <= cut


def test_retrieve_by_agent_and_budget(house, slice_db, capsys):
    got = run_json(capsys, ["retrieve", "flowers on the table", "--as-of", "DAY1 13:00", "--agent", "A2_ALICE",
                            "--budget", "4", "--db", str(slice_db)])
    assert len(got["units"]) == 4 and {u["agent"] for u in got["units"]} == {"A2_ALICE"}


def test_retrieve_before_any_memory_is_empty(house, slice_db, capsys):
    got = run_json(capsys, ["retrieve", "screwdriver", "--as-of", "DAY1 08:00", "--db", str(slice_db)])
    assert got["units"] == []


def test_retrieve_rejects_unreadable_time(house, slice_db, capsys):
    assert main(["retrieve", "x", "--as-of", "teatime", "--db", str(slice_db)]) == 2
    assert "unreadable time" in capsys.readouterr().err


def test_hit_at_w_bounds():
    u = Unit(1, "a", 100_000, 130_000, "t")
    assert hit([u], [100_000], 0) and hit([u], [130_000], 0)
    assert not hit([u], [99_999], 0) and hit([u], [99_999], 30_000)
    assert not hit([u], [160_001], 30_000) and hit([u], [430_000], 300_000)
    wide = Unit(2, "a", 0, 61_000, "hour summary")
    assert not hit([wide], [30_000], 0)  # coarse units do not count


def test_bench_compares_retrievers_on_a_slice(house, slice_db, egolife, tmp_path, capsys):
    items = json.loads((egolife / "EgoLifeQA" / "EgoLifeQA_A1_JAKE_DAY1.json").read_text())
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(items[:16]))
    rep = run_json(capsys, ["bench", "egolifeqa", str(qa), "--db", str(slice_db), "--limit", "12"])
    assert rep["questions"] == 12
    assert set(rep["retrievers"]) == {"default", "egomas-reference"}
    for r in rep["retrievers"].values():
        assert set(r) >= {"hit@0", "hit@30s", "hit@5min", "units", "tokens", "latency_ms_p50", "latency_ms_p95",
                          "by_type"}
        assert 0 <= r["hit@0"] <= r["hit@30s"] <= r["hit@5min"] <= 100
        assert 0 < r["units"] <= 15 and r["tokens"] > 0
        assert r["unit_tokens"] > 0  # the units handed over, in full (`tokens`: cut to the context)
        assert sum(t["n"] for t in r["by_type"].values()) == 12
    assert rep["retrievers"]["default"]["hit@5min"] > 0


def test_bench_measures_what_the_answerer_is_handed(house, slice_db, egolife, tmp_path, capsys):
    """`planned`, `planned+flat` and `daemon` (events first, as configured) are the answerer's own
    gathering measured as retrievers; with the flat search taking the whole budget first
    (`answer.flat_share` 1, the default) what the daemon hands over is the flat search's units."""
    items = json.loads((egolife / "EgoLifeQA" / "EgoLifeQA_A1_JAKE_DAY1.json").read_text())
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(items[:8]))
    rep = run_json(capsys, ["bench", "egolifeqa", str(qa), "--db", str(slice_db),
                            "--retrievers", "default,planned,daemon"])
    got = rep["retrievers"]
    assert set(got) == {"default", "planned", "daemon"}
    assert all(0 < r["units"] <= 15 for r in got.values())
    for w in ("hit@0", "hit@30s", "hit@5min"):
        assert got["daemon"][w] == got["default"][w]
    from assistant.bench import Planned
    from assistant.config import AnswerSettings

    s = AnswerSettings()
    assert Planned.settings_for("daemon", s) is s and s.shared_top_n > 0  # the events found first, as configured
    assert Planned.settings_for("planned+flat", s).shared_top_n == 0 and Planned.settings_for("planned", s).merge_flat is False


def test_every_kth_sample_with_offsets_is_disjoint_and_covers_the_file(house, slice_db, egolife, tmp_path, capsys):
    items = json.loads((egolife / "EgoLifeQA" / "EgoLifeQA_A1_JAKE_DAY1.json").read_text())
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(items[:10]))
    counts = [run_json(capsys, ["bench", "egolifeqa", str(qa), "--db", str(slice_db), "--retrievers", "lexical",
                                "--every", "3", "--offset", str(k)])["questions"] for k in range(3)]
    assert counts == [4, 3, 3]  # questions 0,3,6,9 / 1,4,7 / 2,5,8


def test_bench_both_encoders_per_day_and_leave_one_day_out(house, slice_db, egolife, tmp_path, capsys):
    qa = tmp_path / "qa.json"
    days = [json.loads((egolife / "EgoLifeQA" / f"EgoLifeQA_A1_JAKE_DAY{d}.json").read_text())[:4] for d in (1, 2)]
    qa.write_text(json.dumps(days[0] + days[1]))
    rep = run_json(capsys, ["bench", "egolifeqa", str(qa), "--db", str(slice_db), "--loo",
                            "--retrievers", "default,default@use-multilingual,egomas-reference,daemon"])
    assert set(rep["retrievers"]) == {"default", "default@use-multilingual", "egomas-reference", "daemon"}
    for r in rep["retrievers"].values():
        assert set(r["by_day"]) == {"DAY1", "DAY2"} and sum(d["n"] for d in r["by_day"].values()) == 8
    # nothing to tune in the reference, nor in the daemon's gathering (planned, not a hybrid retriever)
    assert set(rep["loo"]) == {"default", "default@use-multilingual"}
    for loo in rep["loo"].values():
        assert loo["folds"]["DAY1"]["tuned_on"] == ["DAY2"] and loo["folds"]["DAY2"]["tuned_on"] == ["DAY1"]
        assert loo["held_out"]["n"] == 8 and "dense_weight" in loo["folds"]["DAY1"]["weights"]
    s = Store(slice_db, readonly=True)
    tables = {r[0] for r in s.db.execute("SELECT name FROM vector_indices")}
    s.close()
    assert {"segments", "segments_use"} <= tables


def test_bench_before_a_time_as_the_memory_is(house, slice_db, egolife, clock, tmp_path, capsys):
    items = json.loads((egolife / "EgoLifeQA" / "EgoLifeQA_A1_JAKE_DAY1.json").read_text())[:12]
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(items))
    db = tmp_path / "copy.sqlite"
    src, dst = sqlite3.connect(slice_db), sqlite3.connect(db)
    src.backup(dst)
    dst.execute("DELETE FROM vector_indices WHERE name = 'segments'")  # as if MiniLM had never run
    dst.commit()
    src.close(), dst.close()
    rep = run_json(capsys, ["bench", "egolifeqa", str(qa), "--db", str(db), "--before", "DAY1 12:00", "--as-is",
                            "--retrievers", "default"])
    early = [i for i in items if i["query_time"]["date"] == "DAY1" and i["query_time"]["time"] < "12000000"]
    assert 0 < rep["questions"] == len(early) < 12
    s = Store(db, readonly=True)
    embedded = s.db.execute("SELECT rev FROM vector_indices WHERE name = 'segments'").fetchone()
    s.close()
    assert embedded is None or embedded[0] == 0  # nothing was embedded for the measurement


def test_bench_rejects_unknown_retriever(house, slice_db, egolife, capsys):
    qa = egolife / "EgoLifeQA" / "EgoLifeQA_A1_JAKE_DAY1.json"
    assert main(["bench", "egolifeqa", str(qa), "--db", str(slice_db), "--retrievers", "magic"]) == 2
    assert "unknown retriever" in capsys.readouterr().err


def test_one_unit_per_moment_by_default(house, slice_db, capsys):
    """Several wearers hear the same words; the budget goes to distinct 30-second moments."""
    got = run_json(capsys, ["retrieve", "screwdriver magnet screws", "--as-of", "DAY1 13:00", "--db", str(slice_db)])
    starts = [u["start_ms"] for u in got["units"]]
    assert len(starts) >= 8 and len(set(starts)) == len(starts)


def test_status_reports_the_memory_without_a_broker(house, slice_db, capsys, monkeypatch):
    monkeypatch.setenv("CHORUS__MQTT__PORT", "1")  # nothing listens there
    got = run_json(capsys, ["status", "--db", str(slice_db)])
    assert got["counts"]["agents"] == 3 and got["counts"]["observations"] > 10_000
    assert got["windows_pending"] > 0 and got["daemon"] is None
    assert got["first"].startswith("2025-01-01T11:")


def test_a_question_does_not_wait_for_a_long_backlog(house, egolife, clock, tmp_path, capsys, monkeypatch):
    """An imported hour has more units than a question may embed inline: `chorus retrieve` searches
    them by their words at once, says so, and leaves the embedding to `chorus index`."""
    import assistant.hybrid
    from daemon.recordings import import_egolife

    db = tmp_path / "hour.sqlite"
    s = Store(db)
    import_egolife(s, egolife / "EgoLifeCap", clock, days={1}, agents={"A1_JAKE"},
                   progress=lambda fs: [f for f in fs if f.hour == 11])
    s.close()
    monkeypatch.setattr(assistant.hybrid, "INLINE_EMBED", 20)
    assert main(["retrieve", "screwdriver", "--as-of", "DAY1 12:00", "--db", str(db), "--json"]) == 0
    got = capsys.readouterr()
    assert "have no vectors yet" in got.err and "chorus index" in got.err
    units = json.loads(got.out)["units"]
    assert units and any("screwdriver" in u["text"].lower() for u in units)
    s = Store(db, readonly=True)
    assert s.db.execute("SELECT COUNT(*) FROM vec_segments").fetchone()[0] == 0
    s.close()
    assert main(["index", "--db", str(db)]) == 0  # embeds the backlog; the next question has no note
    capsys.readouterr()
    assert main(["retrieve", "screwdriver", "--as-of", "DAY1 12:00", "--db", str(db), "--json"]) == 0
    assert "no vectors yet" not in capsys.readouterr().err
