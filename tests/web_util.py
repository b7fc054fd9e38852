"""A memory to look at and a plain HTTP client: the EgoLife slice with shared-memory events for
every window (written here, so that no model spends the tests' minutes consolidating) and one
labelled camera frame per agent-minute; requests made with http.client, so a test can set any
header (Host included) and read a streamed answer line by line."""

from __future__ import annotations

import http.client
import io
import json
import shutil
from pathlib import Path

from memory.clock import HouseClock
from memory.events import Event, EventStore
from memory.frames import FrameStore
from memory.store import Store
from tests.mqtt_util import daemon_env

AGENT_COLORS = {"A1_JAKE": (70, 110, 190), "A2_ALICE": (60, 150, 110), "A4_LUCIA": (190, 120, 60)}


def web_env(broker_port: int, web_port: int, **extra: str) -> dict:
    """The daemon of these tests: no speech models and no dense vectors (the page is under test, not
    perception or retrieval), the rule planner and a short context (a question costs the shared
    cores a minute, not five), frames of 2025 kept."""
    env = daemon_env(broker_port, CHORUS__WEB__PORT=str(web_port), CHORUS__SPEECH__ENABLED="false",
                     CHORUS__RETRIEVAL__DENSE="false", CHORUS__ANSWER__PLANNER="rule",
                     CHORUS__RETRIEVAL__BUDGET="8", CHORUS__FRAMES__MAX_AGE_H="1000000")
    env["CHORUS__ANSWER__CONTEXT_TOKENS"] = "800"
    return env | extra


def labelled_jpeg(color: tuple[int, int, int], text: str) -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (192, 144), color)
    d = ImageDraw.Draw(img)
    d.rectangle((0, 100, 192, 144), fill=(20, 20, 20))
    try:
        font = ImageFont.load_default(size=15)
    except TypeError:  # Pillow before 10.1: the small bitmap font
        font = ImageFont.load_default()
    d.text((8, 112), text, fill=(255, 255, 255), font=font)
    d.ellipse((70, 25, 120, 75), outline=(255, 255, 255), width=3)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=70)
    return buf.getvalue()


def seeded_copy(slice_db: Path, folder: Path, clock: HouseClock) -> Path:
    """A copy of the slice with an event per window (its first English caption) and frames."""
    db = folder / "memory.sqlite"
    shutil.copy(slice_db, db)
    s = Store(db)
    try:
        es = EventStore(s)
        for w in es.windows(until_ms=10**15):
            rev, obs = es.observations(w["start_ms"])
            who = tuple(sorted({o.agent.rsplit("_", 1)[-1].title() for o in obs}))
            english = [o.text for o in obs if o.text.isascii() and len(o.text) > 20]
            what = english[0][:160] if english else "the team works together in the house"
            es.replace(w["start_ms"], [Event(who, what, "the house", "written by the web test")], model="seed",
                       prompt_version="seed", input_hash=f"seed-{w['start_ms']}", rev=rev)
        fs = FrameStore(s)
        for agent, color in AGENT_COLORS.items():
            for minute in range(120):
                ts = clock.at(1, 11 * 3600 + minute * 60 + 15)
                fs.add(agent, ts, minute, labelled_jpeg(color, f"{agent} {clock.label(ts)[5:]}"))
    finally:
        s.close()
    return db


class Http:
    def __init__(self, port: int, token: str | None = None):
        self.port, self.token = port, token

    def request(self, method: str, path: str, body: bytes | dict | None = None, headers: dict | None = None,
                timeout: float = 30) -> tuple[int, dict, bytes]:
        h = dict(headers or {})
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        if body is not None:
            h.setdefault("Content-Type", "application/json")
        if self.token:
            h.setdefault("Authorization", f"Bearer {self.token}")
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def json(self, method: str, path: str, body=None, **kw) -> tuple[int, dict]:
        status, _, data = self.request(method, path, body, **kw)
        return status, json.loads(data)

    def stream(self, path: str, body: dict, timeout: float = 600) -> tuple[int, list[dict]]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            chunks = []
            while line := r.readline():
                chunks.append(json.loads(line))
            return r.status, chunks
        finally:
            c.close()
