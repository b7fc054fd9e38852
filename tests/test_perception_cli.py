"""`chorus transcribe` and `chorus frames` on real files."""

import json
import re
import wave

from daemon.cli import main
from memory.frames import FrameStore
from memory.store import Store
from tests.media_util import SENTENCES, conversation, jpeg, tiny_clip


def run(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_transcribe_a_recording_twice_stores_it_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CHORUS__HOUSE__TIMEZONE", "Asia/Shanghai")
    monkeypatch.setenv("CHORUS__SPEECH__THREADS", "2")
    path = tmp_path / "talk.wav"
    with wave.open(str(path), "wb") as w:  # 8 kHz stereo: read, mixed down and resampled
        w.setnchannels(2), w.setsampwidth(2), w.setframerate(8000)
        mono = conversation(SENTENCES[:2])[::2]
        w.writeframes(mono.repeat(2).tobytes())
    db = str(tmp_path / "m.sqlite")
    first = run(capsys, "transcribe", str(path), "--agent", "robot1", "--start", "DAY1 11:00:00", "--db", db)
    # the content words heard, over both sentences: tiny.en falls back to sampling on the first of
    # this aliased 8 kHz recording and hears it differently from run to run ("I will demand charger
    # in my kitchen drawer", "I will command target in location drawer"); the second it hears the
    # same each time ("Ash, in making a chocolate cake for the party to hide"). A rate read wrongly
    # (8 kHz played as 16 kHz) gives "That's all."
    heard = set(re.findall(r"[a-z]+", " ".join(x["text"] for x in first["lines"]).lower()))
    words = {"red", "charger", "kitchen", "drawer", "baking", "chocolate", "cake", "party", "tonight"}
    assert first["inserted"] == 2 and len(heard & words) >= 4, first["lines"]
    assert first["lines"][0]["start"].startswith("2025-01-01T11:00:0")
    again = run(capsys, "transcribe", str(path), "--agent", "robot1", "--start", "DAY1 11:00:00", "--db", db)
    assert again["inserted"] == 0 and again["duplicates"] == 2


def test_frames_search_by_text_and_retention_now(tmp_path, capsys, monkeypatch):
    db = tmp_path / "m.sqlite"
    fs = FrameStore(Store(db))
    for i, c in enumerate([(210, 40, 30), (30, 50, 210)]):
        fs.add("cam", 1735700000000 + i * 1000, i, jpeg(c))
    monkeypatch.setenv("CHORUS__VISION__EMBEDDER", str(tiny_clip(tmp_path / "clip")))
    got = run(capsys, "frames", "--search", "the sky", "--db", str(db))  # vectors are made on the way
    assert got["counts"]["frames"] == 2 and got["frames"][0]["ts_ms"] == 1735700001000
    monkeypatch.setenv("CHORUS__FRAMES__MAX_MB", "0.000001")
    got = run(capsys, "frames", "--enforce", "--db", str(db))
    assert got["retention"]["deleted"] == 2 and not list((tmp_path / "m.sqlite.frames").rglob("*.jpg"))
