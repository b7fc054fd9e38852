"""Helpers for tests against a real mosquitto and a real daemon process."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {port}")


class Mosquitto:
    def __init__(self, folder: Path, port: int | None = None):
        exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        if not os.path.exists(exe):
            raise RuntimeError("mosquitto is not installed (apt-get install mosquitto; .ci/run does it)")
        self.port = port or free_port()
        self.folder = folder
        conf = folder / "mosquitto.conf"
        # started as root, mosquitto drops to its own user, who cannot write pytest's private folders:
        # its persistence file would silently never be written
        as_root = "user root\n" if os.geteuid() == 0 else ""
        conf.write_text(
            f"{as_root}listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"persistence_location {folder}/\nmax_queued_messages 100000\n"
        )
        self.proc = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def daemon_env(port: int, **extra: str) -> dict:
    env = dict(os.environ)
    env = {k: v for k, v in env.items() if not k.startswith("CHORUS__")}
    env.update({
        "CHORUS__MQTT__HOST": "127.0.0.1", "CHORUS__MQTT__PORT": str(port),
        "CHORUS__HOUSE__TIMEZONE": "Asia/Shanghai", "CHORUS__LLM__N_CTX": "4096",
        # the daemon's plumbing through the fastest real model; the default one answers in test_answer_base
        "CHORUS__LLM__MODEL": "tiny",
        "CHORUS__CONSOLIDATION__INPUT_TOKENS": "600", "CHORUS__CONSOLIDATION__OUTPUT_TOKENS": "200",
        "CHORUS__CONSOLIDATION__MAX_EVENTS": "3", "CHORUS__ANSWER__CONTEXT_TOKENS": "1500",
        "CHORUS__DAEMON__CONSOLIDATE_EVERY_S": "5", "CHORUS__DAEMON__SILENCE_S": "3", "CHORUS__DAEMON__GRACE_S": "0",
        "CHORUS__DAEMON__STATS_EVERY_S": "2", "CHORUS_LOG_LEVEL": "INFO",
    })
    env.update(extra)
    return env


def start_daemon(db: Path, env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "daemon.cli", "run", "--db", str(db)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=open(log, "ab"))


def wait_until(cond, timeout: float, step: float = 0.3):
    """cond()'s first truthy value, or its last value when the time is up."""
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v or time.time() > deadline:
            return v
        time.sleep(step)


def wait_ready(log: Path, timeout: float = 120) -> None:
    if not wait_until(lambda: log.exists() and " ready: " in log.read_text(errors="replace"), timeout):
        raise TimeoutError(f"daemon not ready; log:\n{log.read_text(errors='replace')[-3000:]}")


def query(db: Path, sql: str, args: tuple = ()):
    import sqlean

    c = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return c.execute(sql, args).fetchall()
    finally:
        c.close()


def tally(db: Path, sent_ids: set[str]) -> dict:
    """Captions sent / stored / duplicated / lost, and the file's integrity check."""
    rows = query(db, "SELECT ext_id FROM observations")
    stored = [r[0] for r in rows]
    return {"sent": len(sent_ids), "stored": len(set(stored) & sent_ids), "duplicated": len(stored) - len(set(stored)),
            "lost": len(sent_ids - set(stored)), "integrity": query(db, "PRAGMA integrity_check")[0][0]}



async def send(port: int, items, listen: list[str], wait_s: float = 4, until=None, *, v5: bool = False) -> list:
    """Publish `items` ((topic, payload) or (topic, payload, MQTT 5 user properties)) at QoS 1, then
    collect the JSON that arrives on `listen` for `wait_s` seconds or until `until(got)`."""
    import aiomqtt
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    got: list[tuple[str, dict]] = []
    protocol = aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311
    async with aiomqtt.Client("127.0.0.1", port, protocol=protocol) as c:
        for t in listen:
            await c.subscribe(t, qos=1)
        for topic, payload, *user in items:
            props = None
            if user and user[0]:
                props = Properties(PacketTypes.PUBLISH)
                props.UserProperty = list(user[0].items())
            await c.publish(topic, payload, qos=1, properties=props)

        async def loop():
            async for m in c.messages:
                try:
                    got.append((str(m.topic), json.loads(bytes(m.payload))))
                except ValueError:
                    pass
                if until and until(got):
                    return

        if listen:
            try:
                await asyncio.wait_for(loop(), wait_s)
            except TimeoutError:
                pass
    return got
