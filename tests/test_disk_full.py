"""A full disk: the store refuses with StorageFull and writes nothing; the live daemon reports
`disk_full`, keeps answering questions, and stores everything once space returns.

The live test puts the database on a real small file system (a 16 MB tmpfs mounted for the test)
and fills it with a ballast file, so SQLite meets a genuine ENOSPC. Where the test may not mount
(no CAP_SYS_ADMIN), it falls back to the store's free-space reserve (`store.reserve_mb`) set just
below the free space of the temporary folder, and the ballast fills that margin instead.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import aiomqtt
import pytest

from memory.errors import StorageFull
from memory.records import Observation
from memory.store import Store
from streams.load import Resilient
from tests.mqtt_util import Mosquitto, daemon_env, query, start_daemon, tally, wait_ready, wait_until

R = "chorus/v1"
TS = 1_735_700_000_000


def obs(i: int) -> Observation:
    return Observation("robot1", "caption", TS + i * 1000, TS + i * 1000 + 500, f"caption {i}", ext_id=f"o{i}")


def test_store_below_its_reserve_refuses_and_writes_nothing(tmp_path):
    free_mb = shutil.disk_usage(tmp_path).free / 1_048_576
    s = Store(tmp_path / "m.sqlite", reserve_mb=free_mb + 1024)  # the reserve is more than the disk has
    with pytest.raises(StorageFull):
        s.add([obs(i) for i in range(2000)])
    assert s.counts()["observations"] == 0
    s.reserve_bytes = 0  # space returns
    assert s.add([obs(i) for i in range(2000)]).inserted == 2000
    assert s.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


class SmallDisk:
    """A folder whose file system fills up on demand, and empties again."""

    def __init__(self, tmp_path: Path):
        self.folder = tmp_path / "small"
        self.folder.mkdir()
        self.mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(self.folder)],
                                      capture_output=True).returncode == 0
        self.reserve_mb = 0.0
        if not self.mounted:  # no mount allowed: a reserve 24 MB below the free space, filled by the ballast
            self.reserve_mb = shutil.disk_usage(self.folder).free / 1_048_576 - 24
        self.ballast = self.folder / "ballast"

    def fill(self) -> None:
        """Write the ballast until the file system (or the margin above the reserve) is full."""
        limit = None if self.mounted else 24 * 1_048_576
        chunk = b"\0" * 65536
        written = 0
        with open(self.ballast, "wb") as f:
            try:
                while limit is None or written < limit:
                    f.write(chunk)
                    f.flush()
                    written += len(chunk)
            except OSError:
                pass

    def free(self) -> None:
        self.ballast.unlink(missing_ok=True)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.folder)], capture_output=True)


@pytest.mark.slow
def test_daemon_on_a_full_disk_reports_keeps_answering_then_stores_everything(tmp_path):
    disk = SmallDisk(tmp_path)
    broker = Mosquitto(tmp_path)
    db = disk.folder / "full.sqlite"
    env = daemon_env(broker.port, CHORUS__STORE__RESERVE_MB=str(disk.reserve_mb), CHORUS__ANSWER__PLANNER="rule",
                     CHORUS__DAEMON__CONSOLIDATE_EVERY_S="3600", CHORUS__DAEMON__SILENCE_S="3600",
                     CHORUS__MQTT__CLIENT_ID="chorus-disk")
    proc = start_daemon(db, env, tmp_path / "daemon.log")
    n1, n2 = 200, 3000
    ids = {f"d{i}" for i in range(n1 + n2)}
    errors: list[dict] = []

    def items(lo, hi):
        for i in range(lo, hi):
            body = {"id": f"d{i}", "ts": TS + i * 200, "text": f"robot{i % 3} stacks crate {i} on pallet {i % 9}"}
            yield f"{R}/agents/robot{i % 3}/caption", json.dumps(body).encode()

    async def publish(lo, hi):
        pub = Resilient("127.0.0.1", broker.port, client_id="disk-publisher")
        for topic, payload in items(lo, hi):
            await pub.publish(topic, payload)
        await pub.close()

    async def listen_errors(stop: asyncio.Event):
        async with aiomqtt.Client("127.0.0.1", broker.port) as c:
            await c.subscribe(f"{R}/errors")
            async for m in c.messages:
                errors.append(json.loads(bytes(m.payload)))
                if stop.is_set():
                    return

    async def ask() -> dict:
        async with aiomqtt.Client("127.0.0.1", broker.port) as c:
            await c.subscribe(f"{R}/answer/full-q", qos=1)
            await c.publish(f"{R}/query", json.dumps({"id": "full-q", "question": "Who stacked crate 7?",
                                                      "as_of": TS + 3_600_000}), qos=1)
            async for m in c.messages:
                body = json.loads(bytes(m.payload))
                if body.get("status") in ("ok", "error"):
                    return body

    async def scenario() -> dict:
        stop = asyncio.Event()
        listener = asyncio.create_task(listen_errors(stop))
        await publish(0, n1)
        assert await asyncio.to_thread(wait_until, lambda: count() == n1, 60)
        await asyncio.to_thread(disk.fill)
        await publish(n1, n1 + n2)  # the broker takes them all: they wait there for space
        full = await asyncio.to_thread(wait_until, lambda: any(e["code"] == "disk_full" for e in errors), 120)
        assert full, errors[-5:]
        stuck = count()
        answer = await asyncio.wait_for(ask(), 300)  # questions are answered while the disk is full
        disk.free()
        stop.set()
        listener.cancel()
        return {"stuck_at": stuck, "answer": answer}

    def count() -> int:
        return query(db, "SELECT COUNT(*) FROM observations")[0][0] if db.exists() else 0

    try:
        wait_ready(tmp_path / "daemon.log")
        got = asyncio.run(scenario())
        assert wait_until(lambda: count() == n1 + n2, 180), count()
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
        broker.stop()
        t = tally(db, ids)
        disk.close()
    print("\nFAULT", json.dumps({"fault": "disk full" + (" (tmpfs)" if disk.mounted else " (reserve)"), **t,
                                 "stored_when_full": got["stuck_at"], "answer_while_full": got["answer"]["status"]}))
    assert got["stuck_at"] < n1 + n2 and got["answer"]["status"] == "ok"
    assert (t["stored"], t["duplicated"], t["lost"], t["integrity"]) == (n1 + n2, 0, 0, "ok")


def test_a_full_disk_is_recognised_in_each_form_it_takes():
    import errno

    import sqlean as sqlite3

    from memory.db import is_full

    assert is_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_full(sqlite3.OperationalError("database or disk is full"))
    # sqlite-vec's own words for a full disk met while adding a vector table's first chunk
    assert is_full(sqlite3.OperationalError("Internal sqlite-vec error: Could not insert a new vector chunk"))
    assert not is_full(sqlite3.OperationalError("no such table: vec_segments"))
    assert not is_full(OSError(errno.EACCES, "Permission denied"))
