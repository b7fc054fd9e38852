"""The frame worker in process: sampling, bounds, coded errors, vectors; the frames an answer shows."""

import asyncio

from assistant.frames import FrameFinder
from assistant.query import Query
from daemon.frame_worker import FrameWorker
from memory.frames import FrameSettings, FrameStore
from memory.records import Unit
from models.config import VisionSettings
from models.vision import ImageTextEmbedder
from streams.link import Inbound
from streams.messages import MediaHeader
from tests.media_util import jpeg, tiny_clip

T0 = 1735700000000
TOPIC = "chorus/v1/agents/{}/frame"


def frame(agent, ts, seq, color, v5=True):
    h = MediaHeader(ts=ts, seq=seq)
    data = jpeg(color, size=(64, 48), noise=5, seed=seq)
    if v5:
        return Inbound(TOPIC.format(agent), data, 0, user=dict(h.user_properties()))
    return Inbound(TOPIC.format(agent), h.with_bytes(data), 0)


async def drain(seeing: FrameWorker):
    task = asyncio.create_task(seeing.write())
    try:
        for _ in range(200):
            await asyncio.sleep(0.02)
            if seeing.queue.empty() and seeing.queued_bytes == 0:
                await asyncio.sleep(0.1)
                break
    finally:
        task.cancel()


async def test_frames_are_sampled_bounded_checked_and_embedded(store, tmp_path):
    reports = []
    embedder = ImageTextEmbedder(tiny_clip(tmp_path / "clip"))
    fs = FrameStore(store, tmp_path / "frames")
    seeing = FrameWorker(fs, FrameSettings(every_ms=1000, queue_mb=0.01), VisionSettings(),
                    report=lambda code, msg, **w: reports.append(code), embedder=embedder)
    for i in range(10):  # 4 frames a second from a fast camera: one a second is kept
        seeing.offer("cam1", frame("cam1", T0 + i * 250, i, (30, 50, 210), v5=i % 2 == 0))
    seeing.offer("cam2", Inbound(TOPIC.format("cam2"), MediaHeader(ts=T0, seq=0).with_bytes(b"not a jpeg"), 0))
    seeing.offer("cam2", Inbound(TOPIC.format("cam2"), b"no header at all", 0))
    seeing.offer("cam2", frame("cam2", 5, 1, (1, 1, 1)))  # 1970
    await drain(seeing)
    assert seeing.counts["stored"] == 3 and seeing.counts["skipped"] == 7
    assert sorted(reports) == ["bad_frame", "bad_schema", "bad_time"]
    assert fs.counts() == {"frames": 3, "bytes": fs.total_bytes(), "vectors": 3}
    for i in range(40):  # far more than 10 kB at once: the queue drops and says so
        seeing.offer("cam3", frame("cam3", T0 + i * 1000, i, (200, 30, 30)))
    assert seeing.counts["dropped"] > 0 and "queue_full" in reports and seeing.queued_bytes <= 10_000


def test_an_answer_shows_frames_near_its_evidence_then_frames_matching_the_question(store, tmp_path):
    embedder = ImageTextEmbedder(tiny_clip(tmp_path / "clip"))
    fs = FrameStore(store, tmp_path / "frames")
    fs.ensure_vectors(embedder.name, embedder.dim)
    for agent, color, base in (("a1", (200, 30, 30), T0), ("a2", (30, 50, 210), T0 + 600_000)):
        for i in range(3):
            f = fs.add(agent, base + i * 10_000, i, jpeg(color))
            fs.add_vector(f.id, embedder.embed_images([f.path.read_bytes()])[0])
    evidence = [Unit(1, "a1", T0, T0 + 30_000, "I look at the tomatoes")]
    q = Query("when did I see the blue sky?", as_of_ms=T0 + 3_600_000)
    found = FrameFinder(fs, embedder).find(q, evidence)
    assert [(f.agent, why) for f, why, _ in found] == [("a1", "near_evidence")] + [("a2", "matches_question")] * 3
    early = Query("when did I see the blue sky?", as_of_ms=T0 + 600_000)  # before a2's frames except the first
    got = FrameFinder(fs, embedder).find(early, [])
    assert got[0][0].ts_ms == T0 + 600_000 and all(f.ts_ms <= early.as_of_ms for f, _, _ in got)
    assert [d for _, _, d in got] == sorted(d for _, _, d in got)
    assert FrameFinder(fs).find(q, []) == []  # no embedder, no evidence: no frames


async def test_a_clock_that_jumps_back_cannot_defeat_every_ms(store, tmp_path):
    fs = FrameStore(store, tmp_path / "frames")
    seeing = FrameWorker(fs, FrameSettings(every_ms=1000), VisionSettings(), report=lambda *a, **k: None)
    for i in range(20):  # a camera whose clock runs backwards two seconds a frame, twenty frames at once
        seeing.offer("cam9", frame("cam9", T0 - i * 2000, i, (90, 90, 90)))
    await drain(seeing)
    assert fs.counts()["frames"] == 1 and seeing.counts["skipped"] == 19


def test_another_id_at_the_same_agent_time_and_seq_is_a_duplicate_not_an_overwrite(store, tmp_path):
    fs = FrameStore(store, tmp_path / "frames")
    first, second = jpeg((200, 0, 0), size=(32, 24)), jpeg((0, 200, 0), size=(32, 24))
    f = fs.add("cam8", T0, 1, first, "id-a")
    assert f is not None and fs.add("cam8", T0, 1, second, "id-b") is None
    assert f.path.read_bytes() == first and fs.counts()["frames"] == 1
