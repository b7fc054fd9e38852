"""Shared fixtures: the real EgoLife data (read-only), a house clock, stores in temporary files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory.clock import HouseClock
from memory.records import Observation
from memory.store import Store

ROOT = Path(__file__).resolve().parents[1]
EGOLIFE = Path(os.environ.get("CHORUS_EGOLIFE", ROOT.parent / "shared" / "data" / "egolife"))


@pytest.fixture(scope="session")
def egolife() -> Path:
    if not (EGOLIFE / "EgoLifeCap").is_dir():
        pytest.fail(f"EgoLife data not found at {EGOLIFE} (set CHORUS_EGOLIFE)")
    return EGOLIFE


@pytest.fixture(scope="session")
def clock() -> HouseClock:
    return HouseClock.of("2025-01-01", "Asia/Shanghai")


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(tmp_path / "memory.sqlite")
    yield s
    s.close()


# a few synthetic moments of DAY1 (house clock above): who handled the screwdriver, and other things
HOUSE_LINES = [
    ("A1_JAKE", "caption", "11:02:00", "Jake unpacks the toolbox: a screwdriver, a hammer and tape"),
    ("A2_ALICE", "caption", "11:05:00", "Alice picks up the screwdriver from the table"),
    ("A2_ALICE", "caption", "11:06:00", "Alice tightens the shelf screws with the screwdriver"),
    ("A2_ALICE", "transcript", "11:07:00", "Alice: this screwdriver is too small for the shelf"),
    ("A2_ALICE", "caption", "11:08:00", "Alice turns the screwdriver on the last screw"),
    ("A2_ALICE", "caption", "11:09:00", "Alice puts the screwdriver back in the toolbox"),
    ("A4_LUCIA", "caption", "11:10:00", "Lucia waters the plants by the window"),
    ("A4_LUCIA", "transcript", "11:11:00", "Lucia: shall we cook lunch together?"),
    ("A3_TASHA", "caption", "11:15:00", "Tasha borrows the screwdriver to open a box"),
    ("A1_JAKE", "caption", "11:25:00", "Jake makes coffee in the kitchen"),
]


@pytest.fixture
def house(tmp_path, clock) -> Store:
    """A small memory of four agents on DAY1 11:00-11:30 (`HOUSE_LINES`), no EgoLife data needed."""
    s = Store(tmp_path / "house.sqlite")
    obs = []
    for agent, kind, at, text in HOUSE_LINES:
        t = clock.parse(f"DAY1 {at}")
        obs.append(Observation(agent, kind, t, t + 4000, text, lang="en",
                               speaker=text.split(":")[0] if kind == "transcript" else None))
    s.add(obs)
    yield s
    s.close()


@pytest.fixture(scope="session")
def slice_db(tmp_path_factory, egolife, clock) -> Path:
    """DAY1 11:00-13:00 of three agents, imported once for the session (read-only for tests)."""
    from daemon.recordings import import_egolife

    path = tmp_path_factory.mktemp("slice") / "slice.sqlite"
    s = Store(path)
    files = {"A1_JAKE", "A2_ALICE", "A4_LUCIA"}
    import_egolife(s, egolife / "EgoLifeCap", clock, days={1}, agents=files,
                   progress=lambda fs: [f for f in fs if f.hour in (11, 12)])
    s.close()
    return path


class FakeLLM:
    """A scripted stand-in for control-flow tests: replies are dicts validated by the real schema."""

    name = "fake-llm"

    def __init__(self, replies):
        self.replies = list(replies)
        self.calls = []

    def count(self, text: str) -> int:
        return max(1, len(text) // 4)

    def json(self, messages, schema, **kw):
        from models.llm import Usage

        self.calls.append((messages, schema, kw))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return schema.model_validate(reply), Usage(100, 10, 0.01)


@pytest.fixture(scope="session")
def tiny_llm():
    from models.bundled import tiny
    from models.llm import LocalLLM

    llm = LocalLLM(tiny(), n_ctx=4096, n_threads=2, time_limit_s=900)
    yield llm
    llm.close()
