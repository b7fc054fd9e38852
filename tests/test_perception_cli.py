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
    # the words of the first sentence heard (8 kHz speech: Whisper tiny once heard "charger" as "thread harder")
    heard = set(re.findall(r"[a-z]+", first["lines"][0]["text"].lower()))
    assert first["inserted"] == 2 and len(heard & {"red", "charger", "kitchen", "drawer"}) >= 2, first["lines"]
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
