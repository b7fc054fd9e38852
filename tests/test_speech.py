"""Speech: espeak-ng audio through the streaming Silero VAD and the bundled Whisper tiny.en."""

import asyncio

import numpy as np
import pytest

from daemon.audio_stream import AgentAudio
from daemon.audio_worker import AudioWorker
from models.config import SpeechSettings
from models.speech import pcm16_to_float
from models.vad import Utterances
from streams.link import Inbound
from streams.messages import MediaHeader
from tests.media_util import SENTENCES, conversation, speak, wer

T0 = 1735700000000


@pytest.fixture(scope="module")
def talk():
    return conversation(SENTENCES[:3], gap_s=1.0)


@pytest.fixture(scope="module")
def transcriber():
    from models.bundled import whisper_tiny_en
    from models.speech import Transcriber

    return Transcriber(whisper_tiny_en(), threads=2)


@pytest.mark.parametrize("chunk", [160, 1600, 5000])
def test_utterances_are_cut_at_the_pauses_whatever_the_chunk_size(talk, chunk):
    u = Utterances()
    x = pcm16_to_float(talk.tobytes())
    cuts = []
    for i in range(0, len(x), chunk):
        cuts += u.feed(x[i:i + chunk])
    cuts += u.flush()
    assert len(cuts) == 3
    loud = np.flatnonzero(np.abs(talk) > 300)  # the voiced samples: espeak pads its sentences with silence
    pauses = np.flatnonzero(np.diff(loud) > 8000)  # 0.5 s without voice: between sentences
    spans = list(zip(np.r_[loud[0], loud[pauses + 1]], np.r_[loud[pauses], loud[-1]], strict=True))
    assert len(spans) == 3
    for c, (a, b) in zip(cuts, spans, strict=True):
        assert c.start <= a and c.end >= b - 1600  # the whole sentence, give or take 0.1 s at the end
        assert np.array_equal(c.audio, x[c.start:c.end])
    assert u.settled >= cuts[-1].end - 16000


def test_silence_gives_nothing(talk):
    u = Utterances()
    assert u.feed(np.zeros(16000 * 5, dtype=np.float32)) == [] and u.flush() == []


def test_whisper_tiny_en_transcribes_espeak_sentences(transcriber):
    errors = [wer(s, " ".join(x.text for x in transcriber.transcribe(pcm16_to_float(speak(s).tobytes())).lines))
              for s in SENTENCES]
    assert sum(errors) / len(errors) < 0.2, errors


def chunks(pcm: np.ndarray, ms: int = 100):
    n = 16 * ms
    for seq, i in enumerate(range(0, len(pcm), n)):
        yield MediaHeader(ts=T0 + i // 16, seq=seq), pcm[i:i + n]


def feed(stream: AgentAudio, items):
    out, notes = [], []
    for h, pcm in items:
        cuts, note = stream.take(h, pcm16_to_float(pcm.tobytes()))
        out += cuts
        notes.append(note)
    return out, notes


def test_stream_time_survives_lost_chunks_duplicates_and_a_restart(talk):
    s = SpeechSettings(gap_fill_ms=1000)
    items = list(chunks(talk))
    lost = [it for k, it in enumerate(items) if k not in (3, 4)]  # 200 ms lost in the first silence
    dup = lost[:20] + [lost[19]] + lost[20:]  # one chunk delivered twice
    stream = AgentAudio("r1", T0, s)
    cuts, notes = feed(stream, dup)
    cuts += stream.utterances(stream.gate.flush())
    assert notes.count("gap") == 1 and notes.count("late") == 1
    clean = AgentAudio("r1", T0, s)
    ref, _ = feed(clean, items)
    ref += clean.utterances(clean.gate.flush())
    assert [(u.start_ms, u.end_ms) for u in cuts] == [(u.start_ms, u.end_ms) for u in ref]
    # the agent restarts an hour later with seq 0: the stream starts again at its new time
    later = [(MediaHeader(ts=h.ts + 3_600_000, seq=h.seq), p) for h, p in items]
    more, notes = feed(stream, later)
    more += stream.utterances(stream.gate.flush())
    assert notes[0] == "jump" and len(more) == 3
    assert abs(more[0].start_ms - 3_600_000 - ref[0].start_ms) <= 40


async def test_transcripts_are_stored_and_the_watermark_follows_the_settled_audio(store, talk):
    marks, reports = {}, []
    h = AudioWorker(store, SpeechSettings(threads=2), report=lambda *a, **k: reports.append((a, k)),
                advance=lambda agent, ms: marks.__setitem__(agent, max(ms, marks.get(agent, 0))))
    h.load()
    for hd, pcm in chunks(talk, 200):
        h.offer("robot1", Inbound("chorus/v1/agents/robot1/audio", pcm.tobytes(), 0, user=dict(hd.user_properties())))
    h.offer("robot1", Inbound("chorus/v1/agents/robot1/audio", b"\x00" * 3, 0, user={"ts": str(T0), "seq": "999"}))
    tasks = [asyncio.create_task(h.listen()), asyncio.create_task(h.transcribe())]
    try:
        for _ in range(600):
            await asyncio.sleep(0.05)
            if h.counts["transcripts"] >= 2 and h.queue.empty() and not h.backlog and not h.pending["robot1"]:
                break
    finally:
        for t in tasks:
            t.cancel()
    rows = store.db.execute("SELECT kind, start_ms, end_ms, text FROM observations ORDER BY start_ms").fetchall()
    assert [r["kind"] for r in rows] == ["transcript"] * len(rows) and len(rows) >= 2
    assert wer(" ".join(SENTENCES[:2]), " ".join(r["text"] for r in rows[:2])) < 0.25
    assert T0 + 700 <= rows[0]["start_ms"] <= T0 + 1300  # stream time: after 1 s of silence (less the 0.2 s pad)
    assert marks["robot1"] >= rows[1]["end_ms"]
    assert [a[0] for a, _ in reports] == ["bad_schema"]  # the odd-length chunk


async def test_the_backlog_is_bounded_and_its_overflow_reported(store, talk):
    reports = []
    h = AudioWorker(store, SpeechSettings(backlog_s=4.0), report=lambda *a, **k: reports.append(a[0]),
                advance=lambda agent, ms: None)
    for hd, pcm in chunks(talk, 500):  # recognition never runs: it is as far behind as it can be
        h.offer("r1", Inbound("t", pcm.tobytes(), 0, user=dict(hd.user_properties())))
    task = asyncio.create_task(h.listen())
    try:
        for _ in range(200):
            await asyncio.sleep(0.05)
            if h.queue.empty() and h.counts["utterances"] >= 2:
                break
    finally:
        task.cancel()
    assert h.backlog_s() <= 4.0 and h.counts["backlog_dropped"] >= 1
    assert "audio_backlog" in reports


async def test_an_agent_that_stops_mid_sentence_has_its_words_cut_after_the_idle_time(store, talk):
    h = AudioWorker(store, SpeechSettings(idle_flush_s=0.4), report=lambda *a, **k: None, advance=lambda a, ms: None)
    cut_at = len(talk) * 5 // 12  # somewhere inside the second sentence
    for hd, pcm in chunks(talk[:cut_at], 100):
        h.offer("r1", Inbound("t", pcm.tobytes(), 0, user=dict(hd.user_properties())))
    task = asyncio.create_task(h.listen())
    try:
        for _ in range(100):
            await asyncio.sleep(0.05)
            if h.counts["utterances"] >= 2:
                break
    finally:
        task.cancel()
    assert h.counts["utterances"] == 2 and h.backlog[1].end_ms <= T0 + cut_at // 16
    assert h.queued_bytes == 0
