"""Frames on disk with their rows, retention under a quota, nearest frames, vectors found by text."""

import pytest

from memory.errors import RecordError
from memory.frames import FrameStore, jpeg_size
from memory.records import Unit
from tests.media_util import jpeg, tiny_clip

T0 = 1735700000000


@pytest.fixture
def frames(store, tmp_path):
    return FrameStore(store, tmp_path / "frames")


def test_a_frame_is_a_file_and_a_row_and_a_resend_is_a_no_op(frames):
    data = jpeg((200, 30, 30), size=(64, 48))
    f = frames.add("robot1", T0, 1, data)
    assert f.path.read_bytes() == data and (f.width, f.height) == (64, 48)
    assert f.path.relative_to(frames.root).as_posix() == f"robot1/2025-01-01/02/{T0}-1.jpg"
    assert frames.add("robot1", T0, 1, data) is None
    assert frames.counts() == {"frames": 1, "bytes": len(data), "vectors": 0}


def test_not_a_jpeg_is_refused_and_nothing_is_written(frames):
    with pytest.raises(RecordError):
        frames.add("robot1", T0, 1, b"GIF89a....")
    assert frames.counts()["frames"] == 0 and not frames.root.exists()


def test_jpeg_size_reads_the_frame_header():
    assert jpeg_size(jpeg((1, 2, 3), size=(320, 240))) == (320, 240)
    assert jpeg_size(b"\xff\xd8\xff") is None


def test_retention_holds_the_quota_deleting_the_oldest_first(frames):
    sizes = []
    for i in range(40):  # 40 s of one agent and 40 s of another, interleaved in time
        for agent, color in (("a1", (200, 30, 30)), ("a2", (30, 30, 200))):
            f = frames.add(agent, T0 + i * 1000, i, jpeg(color, size=(96, 72), noise=40, seed=i))
            sizes.append((f.ts_ms, f.bytes, f.path))
    quota = sum(b for _, b, _ in sizes) // 3
    r = frames.enforce(max_bytes=quota, max_age_ms=10**12, now_ms=T0 + 60_000)
    assert r.kept_bytes <= quota and r.kept_bytes + r.freed == sum(b for _, b, _ in sizes)
    left = frames.db.execute("SELECT MIN(ts_ms) FROM frames").fetchone()[0]
    assert all(not p.exists() for ts, _, p in sizes if ts < left)  # every older file is gone
    assert all(p.exists() for ts, _, p in sizes if ts > left)
    assert sorted(p.name for p in frames.root.rglob("*.jpg")) == sorted(
        r[0].rsplit("/", 1)[1] for r in frames.db.execute("SELECT path FROM frames"))


def test_retention_by_age(frames):
    for i in range(10):
        frames.add("a1", T0 + i * 60_000, i, jpeg((9, 9, 9)))
    r = frames.enforce(max_bytes=10**9, max_age_ms=5 * 60_000, now_ms=T0 + 10 * 60_000)
    assert r.deleted == 5 and r.kept == 5


def test_sweep_removes_files_the_store_does_not_know(frames):
    frames.add("a1", T0, 0, jpeg((9, 9, 9)))
    stray = frames.root / "a1" / "2025-01-01" / "02" / "123-4.jpg"
    stray.write_bytes(b"x")
    assert frames.sweep() == 1 and not stray.exists() and frames.counts()["frames"] == 1


def test_frames_nearest_to_evidence_inside_first_and_not_after_as_of(frames):
    for i in range(0, 120, 10):
        frames.add("a1", T0 + i * 1000, i, jpeg((9, 9, 9)))
    frames.add("a2", T0 + 15_000, 0, jpeg((9, 9, 9)))
    u = Unit(1, "a1", T0 + 30_000, T0 + 60_000, "text")
    got = frames.near("a1", u.start_ms, u.end_ms, limit=3)
    assert [f.ts_ms - T0 for f in got] == [40_000, 50_000, 30_000]
    assert [f.ts_ms - T0 for f in frames.for_evidence([u], as_of_ms=T0 + 35_000)] == []
    assert frames.near("a3", T0, T0 + 10**6) == []


def test_text_finds_frames_through_an_onnx_image_text_model(frames, tmp_path):
    from models.vision import ImageTextEmbedder

    e = ImageTextEmbedder(tiny_clip(tmp_path / "clip"))
    frames.ensure_vectors(e.name, e.dim)
    colors = {"red": (210, 40, 30), "green": (40, 190, 50), "blue": (30, 50, 210)}
    ids = {}
    for i, (name, c) in enumerate(colors.items()):
        f = frames.add("cam", T0 + i * 1000, i, jpeg(c, size=(80, 60), noise=10, seed=i))
        frames.add_vector(f.id, e.embed_images([f.path.read_bytes()])[0])
        ids[name] = f.id
    for text, want in (("a photo of the sky", "blue"), ("tomato", "red"), ("the grass", "green")):
        hits = frames.search(e.embed_texts([text])[0], k=1)
        assert [f.id for f, _ in hits] == [ids[want]], text
    # only frames captured by as_of count, however well they match
    assert [f.id for f, _ in frames.search(e.embed_texts(["sky"])[0], k=3, as_of_ms=T0 + 500)] == [ids["red"]]
    frames.enforce(max_bytes=0, max_age_ms=10**12)
    assert frames.counts() == {"frames": 0, "bytes": 0, "vectors": 0}
    frames.ensure_vectors("another-model", 5)  # a different model starts the vectors afresh
    assert frames.vector_count() == 0
