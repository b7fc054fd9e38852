"""Shared fixtures: the real EgoLife data (read-only), a house clock, stores in temporary files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory.clock import HouseClock
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
