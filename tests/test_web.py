"""The web page and HTTP API of a running daemon: real mosquitto, real `chorus run`, real SQLite
(the EgoLife slice), the tiny model answering, a real HTTP client and a real headless Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiomqtt
import pytest

from tests.cdp_util import Browser, chromium
from tests.mqtt_util import ROOT, Mosquitto, free_port, query, start_daemon, wait_until
from tests.web_util import Http, seeded_copy, web_env

pytestmark = pytest.mark.slow
R = "chorus/v1"
EXAMPLE = {"question": "Who used the screwdriver first?", "options": ["Tasha", "Alice", "Shure", "Lucia"],
           "as_of": "DAY1 12:00"}
DOCS = ROOT / "docs"


@dataclass
class Served:
    http: Http
    port: int
    db: Path
    broker: Mosquitto
    log: Path


def wait_web(log: Path, port: int, timeout: float = 180) -> None:
    line = f"web page: open http://127.0.0.1:{port}/"
    if not wait_until(lambda: log.exists() and line in log.read_text(errors="replace"), timeout):
        raise TimeoutError(f"no {line!r}; log:\n{log.read_text(errors='replace')[-3000:]}")


async def publish(port: int, items: list[tuple[str, bytes | str, bool]]) -> None:
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V311) as c:
        for topic, payload, retain in items:
            await c.publish(topic, payload, qos=1, retain=retain)


@pytest.fixture(scope="module")
def served(tmp_path_factory, slice_db, clock):
    tmp = tmp_path_factory.mktemp("web")
    db = seeded_copy(slice_db, tmp, clock)
    broker = Mosquitto(tmp)
    port = free_port()
    log = tmp / "daemon.log"
    proc = start_daemon(db, web_env(broker.port, port), log)
    try:
        wait_web(log, port)
        asyncio.run(publish(broker.port, [
            (f"{R}/agents/A1_JAKE/status", "online", True), (f"{R}/agents/A2_ALICE/status", "offline", True),
            (f"{R}/agents/robot1/caption", b"{not json", False)]))
        yield Served(Http(port), port, db, broker, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        broker.stop()
    assert code == 0, log.read_text()[-3000:]


def test_the_daemon_says_where_the_page_is(served):
    assert f"chorus: web page: open http://127.0.0.1:{served.port}/ in a browser\n" in served.log.read_text()
    status, headers, body = served.http.request("GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"/static/app.js" in body and b"http" not in body.replace(b"http-equiv", b"")  # nothing from outside
    assert "default-src 'self'" in headers["content-security-policy"]
    for name in ("app.js", "app.css", "icon.svg"):
        assert served.http.request("GET", f"/static/{name}")[0] == 200


def test_status_stats_agents_and_latest_errors(served):
    def status():
        s = served.http.json("GET", "/api/status")[1]
        online = s["agents_online"] == ["A1_JAKE"]
        return s if online and any(e["code"] == "bad_schema" for e in s["errors"]) else None

    s = wait_until(status, 30)
    assert s, served.http.json("GET", "/api/status")[1]
    assert s["status"] == "online" and s["mqtt"]["connected"] and s["info"]["house"]["timezone"] == "Asia/Shanghai"
    by = {a["agent"]: a["status"] for a in s["agents"]}
    assert by == {"A1_JAKE": "online", "A2_ALICE": "offline", "A4_LUCIA": "unknown"}
    assert s["memory"]["observations"] > 1000 and s["memory"]["events"] == 13 and s["memory"]["frames"] == 360
    assert [d["label"] for d in s["memory"]["days"]] == ["DAY1"]
    code, st = served.http.json("GET", "/api/stats")
    assert code == 200 and {"captions", "questions", "queues", "backlog", "captions_per_s", "frames"} <= set(st)
    assert st["backlog"]["windows_pending"] == 0 and st["frames"]["kept"] == 360


def test_events_units_lines_and_timeline(served, clock):
    code, ev = served.http.json("GET", "/api/events?from=DAY1%2011:00&to=DAY1%2011:30")
    assert code == 200 and len(ev["events"]) == 3
    assert {"who", "what", "where", "how", "start", "end"} <= set(ev["events"][0])
    assert ev["events"][0]["start"] == "2025-01-01T11:00:00+08:00"
    assert [w["state"] for w in ev["windows"]] == ["consolidated"] * 3
    t0, t1 = clock.at(1, 11 * 3600 + 1200), clock.at(1, 11 * 3600 + 1500)
    code, un = served.http.json("GET", f"/api/units?agent=A1_JAKE&from={t0}&to={t1}")
    assert code == 200 and 5 <= len(un["units"]) <= 10
    assert all(u["agent"] == "A1_JAKE" and u["end_ms"] > t0 and u["start_ms"] < t1 for u in un["units"])
    code, li = served.http.json("GET", f"/api/lines?agent=A2_ALICE&from={t0}&to={t1}")
    assert code == 200 and li["lines"] and all(t0 <= x["start_ms"] < t1 for x in li["lines"])
    day = served.http.json("GET", f"/api/timeline?from={clock.at(1, 0)}&to={clock.at(2, 0)}")[1]
    assert day["bucket_ms"] == 600_000 and day["agents"] == ["A1_JAKE", "A2_ALICE", "A4_LUCIA"]
    assert len(day["coverage"]["A1_JAKE"]) == 12 and sum(c["frame"] for c in day["coverage"]["A4_LUCIA"]) == 120
    assert len(day["windows"]) == 13 and all(w["events"] == 1 for w in day["windows"])  # 13:00: a spill
    hour = served.http.json("GET", "/api/timeline?from=DAY1%2012:00&to=DAY1%2013:00")[1]
    assert hour["bucket_ms"] == 60_000 and len(hour["coverage"]["A2_ALICE"]) > 30


def test_frames_by_agent_and_time_only(served, clock):
    at = clock.at(1, 12 * 3600 + 10 * 60 + 30)
    status, headers, body = served.http.request("GET", f"/api/frames/A1_JAKE/{at}.jpg")
    assert status == 200 and headers["content-type"] == "image/jpeg" and body[:2] == b"\xff\xd8"
    assert headers["x-chorus-frame-ts"] == str(clock.at(1, 12 * 3600 + 10 * 60 + 15))
    far = clock.at(1, 15 * 3600)
    assert served.http.json("GET", f"/api/frames/A1_JAKE/{far}.jpg")[1]["code"] == "not_found"
    assert served.http.request("GET", f"/api/frames/A1_JAKE/{far}.jpg?within=3600")[0] == 404  # 2 h away
    for path in (f"/api/frames/..%2F..%2Fetc/{at}.jpg", "/api/frames/A1_JAKE/..%2Fpasswd.jpg",
                 f"/api/frames/A1_JAKE/{at}.jpg/../../../etc/passwd", "/api/frames/%2Fetc%2Fpasswd/1.jpg"):
        status, _, body = served.http.request("GET", path)
        assert status in (400, 404) and b"root:" not in body, path


BAD = [
    ("POST", "/api/ask", b'{"id": "x", "question": "hi"}', {"Content-Type": "text/plain"}, 415, "bad_schema"),
    ("POST", "/api/ask", b"{not json", {}, 400, "bad_schema"),
    ("POST", "/api/ask", {"id": "b1"}, {}, 400, "bad_schema"),
    ("POST", "/api/ask", {"id": "b2", "question": "hi", "options": list("abcde")}, {}, 400, "bad_schema"),
    ("POST", "/api/ask", {"id": "b3", "question": "hi", "extra": 1}, {}, 400, "bad_schema"),
    ("POST", "/api/ask", {"id": "a#b", "question": "hi"}, {}, 400, "bad_schema"),
    ("POST", "/api/ask", {"id": "b4", "question": "hi", "as_of": "year 3000"}, {}, 400, "bad_as_of"),
    ("POST", "/api/ask", {"id": "b5", "question": "hi", "as_of": 10**20}, {}, 400, "bad_as_of"),
    ("POST", "/api/ask", b'{"id": "b6", "question": "\xff\xfe"}', {}, 400, "bad_encoding"),
    ("POST", "/api/ask", b'{"id": "b7", "question": "' + b"x" * 100_000 + b'"}', {}, 413, "too_large"),
    ("GET", "/api/events", None, {}, 400, "bad_time"),
    ("GET", "/api/events?from=DAY1%2012:00&to=DAY1%2011:00", None, {}, 400, "bad_time"),
    ("GET", "/api/events?from=yesterday-ish&to=DAY1%2011:00", None, {}, 400, "bad_time"),
    ("GET", "/api/events?from=DAY1&to=DAY30", None, {}, 400, "bad_time"),
    ("GET", "/api/units?agent=..%2Fx&from=DAY1&to=DAY1%2001:00", None, {}, 400, "bad_schema"),
    ("GET", "/api/units?from=DAY1&to=DAY1%2001:00", None, {}, 400, "bad_schema"),
    ("GET", "/api/frames/A1_JAKE/1.jpg?within=lots", None, {}, 400, "bad_schema"),
    ("GET", "/api/nothing", None, {}, 404, "not_found"),
    ("GET", "/static/..%2F..%2Fsettings.py", None, {}, 404, "not_found"),
    ("PUT", "/api/status", b"{}", {}, 405, "unsupported"),
    ("DELETE", "/api/events", None, {}, 405, "unsupported"),
    ("GET", "/api/status", None, {"Host": "evil.example:8420"}, 403, "not_allowed"),
]


@pytest.mark.parametrize(("method", "path", "body", "headers", "status", "code"), BAD,
                         ids=[f"{m} {p[:40]} {c}" for m, p, _, _, _, c in BAD])
def test_bad_requests_get_the_coded_errors(served, method, path, body, headers, status, code):
    got, _, data = served.http.request(method, path, body, headers=headers)
    reply = json.loads(data)
    assert (got, reply["status"], reply["code"]) == (status, "error", code), reply


def test_ask_returns_the_answer_json_and_writes_nothing(served):
    before = query(served.db, "SELECT (SELECT COUNT(*) FROM observations), (SELECT COUNT(*) FROM events)")
    code, a = served.http.json("POST", "/api/ask", {"id": "w-1", **EXAMPLE}, timeout=600)
    assert code == 200 and a["id"] == "w-1" and a["status"] == "ok" and a["choice"] in ("A", "B", "C", "D")
    assert a["answer"].startswith(a["choice"] + ". ")
    assert a["evidence"] and all(e["end"] <= "2025-01-01T12:00:00+08:00" for e in a["evidence"])
    assert {"agent", "start", "end", "text", "kind"} <= set(a["evidence"][0])
    assert a["frames"] and a["frames"][0]["why"] == "near_evidence"
    assert a["plan"]["planner"] == "rule" and "events" in a
    assert query(served.db, "SELECT (SELECT COUNT(*) FROM observations), (SELECT COUNT(*) FROM events)") == before


def test_ask_streams_working_evidence_answer(served):
    code, chunks = served.http.stream("/api/ask?stream=1", {"id": "w-2", **EXAMPLE, "as_of": "DAY1 12:30"})
    assert code == 200
    assert chunks[0] == {"id": "w-2", "status": "working", "stage": "retrieval"}
    reading = chunks[1]  # over HTTP: what the model reads, before it has read it
    assert reading["stage"] == "answering" and len(reading["context"]) == chunks[-1]["context"]["units"]
    assert {u["start"] for u in chunks[-1]["evidence"]} <= {u["start"] for u in reading["context"]}
    assert chunks[-1]["status"] == "ok" and chunks[-1]["id"] == "w-2"
    partial = [c for c in chunks if c["status"] == "partial"]
    assert [c["evidence_index"] for c in partial] == list(range(len(chunks[-1]["evidence"])))
    assert [c["evidence"] for c in partial] == chunks[-1]["evidence"]


@pytest.mark.skipif(chromium() is None, reason="chromium is not installed (apt-get install chromium; ./dev test "
                                               "installs it)")
async def test_a_browser_asks_sees_the_evidence_and_finds_the_moment(served, tmp_path):
    shots = []
    async with Browser(tmp_path) as b:
        await b.goto(f"http://127.0.0.1:{served.port}/")
        await b.wait_for("document.querySelector('#daemon-state').textContent === 'online'", 30, "the daemon online")
        await b.click("#example")  # what a newcomer does: the example fills the form
        assert await b.eval("document.querySelector('#q').value") == EXAMPLE["question"]
        await b.type("#as-of", "DAY1 12:00")
        await b.click("#ask-button")
        await b.wait_for("document.querySelector('#progress li.now, #progress li.done') !== null", 10, "progress")
        await b.wait_for("!document.querySelector('#answer').hidden", 600, "the answer")
        answer = await b.eval("document.querySelector('#answer-text').textContent")
        assert answer[:3] in ("A. ", "B. ", "C. ", "D. "), answer
        cited = await b.eval("[...document.querySelectorAll('#evidence li')].map(li => li.innerText)")
        assert cited and any(a in cited[0] for a in ("A1_JAKE", "A2_ALICE", "A4_LUCIA")) and "DAY1 1" in cited[0]
        # each item leads with the lines that bear out the answer, above its whole text
        bears = await b.eval("[...document.querySelectorAll('#evidence li')].map(li => "
                             "li.querySelector('.bears')?.textContent || '')")
        assert bears and all(bears), bears
        await b.wait_for("[...document.querySelectorAll('#evidence img.thumb, #frames img')]"
                         ".some(i => i.complete && i.naturalWidth > 0)", 20, "a frame thumbnail")
        shots.append(await b.screenshot(tmp_path / "ask.png"))

        await b.click("nav a[data-view=timeline]")
        await b.wait_for("document.querySelectorAll('.agent-lane').length === 3", 20, "three agent rows")
        await b.wait_for("document.querySelectorAll('#events-lane .cell.win').length === 13", 20, "13 windows")
        await b.click("#events-lane .cell.win:nth-child(4)")  # DAY1 11:30: zooms to its hour
        await b.wait_for("document.querySelectorAll('#detail-events li.event').length >= 1", 20, "window events")
        assert "11:00" in await b.eval("document.querySelector('#zoom-label').textContent")
        await b.click(".agent-lane[data-agent=A2_ALICE]", fx=0.6)  # a moment of Alice's, 11:36
        await b.wait_for("document.querySelector('#detail-title').innerText.includes('A2_ALICE')", 10, "Alice")
        await b.wait_for("document.querySelectorAll('#detail-lines li.line').length >= 1", 20, "Alice's lines")
        title = await b.eval("document.querySelector('#detail-title').innerText")
        assert "A2_ALICE" in title and "DAY1 11:3" in title, title
        await b.wait_for("document.querySelector('#detail-frame img').naturalWidth > 0", 20, "the nearest frame")
        events = await b.eval("[...document.querySelectorAll('#detail-events li.event')].map(li => li.innerText)")
        assert events and "DAY1 11:30" in events[0]
        shots.append(await b.screenshot(tmp_path / "timeline.png"))

        await b.click("nav a[data-view=now]")
        await b.wait_for("document.querySelectorAll('#now-agents tbody tr').length === 3", 20, "the agents")
        await b.wait_for("document.querySelector('#now-errors').innerText.includes('bad_schema')", 20, "an error")
        online = await b.eval("document.querySelector('#now-agents td.online').parentElement.innerText")
        assert "A1_JAKE" in online
        shots.append(await b.screenshot(tmp_path / "now.png"))
        assert not [c for c in b.console if c.startswith("exception")], b.console
    assert all(p.stat().st_size > 10_000 for p in shots)
    if os.environ.get("CHORUS_WRITE_DOCS"):  # `CHORUS_WRITE_DOCS=1 pytest tests/test_web.py -k browser`
        from PIL import Image

        DOCS.mkdir(exist_ok=True)
        for p in shots:  # small: a palette of 128 colours
            Image.open(p).convert("RGB").quantize(128).save(DOCS / f"web-{p.stem}.png", optimize=True)


@pytest.mark.parametrize(("host", "token", "problem"), [
    ("127.0.0.1", None, None), ("localhost", None, None), ("::1", None, None),
    ("0.0.0.0", None, "web: Value error, web.host '0.0.0.0' is not loopback: set web.token"),
    ("192.168.1.20", None, "is not loopback"), ("0.0.0.0", "t" * 24, None),
    ("0.0.0.0", "short-secret", "web.token: Value error, must be at least 16 characters"),
])
def test_settings_want_a_token_off_loopback(monkeypatch, tmp_path, host, token, problem):
    from daemon.settings import check_config

    monkeypatch.setenv("CHORUS__WEB__HOST", host)
    if token:
        monkeypatch.setenv("CHORUS__WEB__TOKEN", token)
    settings, problems = check_config(None)
    if problem is None:
        assert problems == [] and settings.web.host == host
    else:
        assert settings is None and problem in problems[0], problems
        assert token is None or token not in problems[0]


def test_token_rule(tmp_path, slice_db):
    """Off loopback a token is required (no token: the daemon refuses to start); with one, every
    request carries it: Bearer, ?token= (which sets the page's cookie) or that cookie."""
    env = web_env(1883, free_port(), CHORUS__WEB__HOST="0.0.0.0")
    env.pop("CREDENTIALS_DIRECTORY", None)
    check = subprocess.run([sys.executable, "-m", "daemon.cli", "config", "check"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 2 and "web.token" in check.stderr and "not loopback" in check.stderr
    run = subprocess.run([sys.executable, "-m", "daemon.cli", "run", "--db", str(tmp_path / "x.sqlite")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "web.token" in run.stderr

    token = "s3cret-token-" + "x" * 20
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "web__token").write_text(token + "\n")
    broker = Mosquitto(tmp_path)
    port = free_port()
    log = tmp_path / "daemon.log"
    db = tmp_path / "t.sqlite"
    db.write_bytes(slice_db.read_bytes())
    proc = start_daemon(db, web_env(broker.port, port, CHORUS__WEB__HOST="0.0.0.0", CREDENTIALS_DIRECTORY=str(creds)),
                        log)
    try:
        shown = f"web page: open http://{socket.gethostname()}:{port}/ in a browser with ?token="
        assert wait_until(lambda: shown in log.read_text(errors="replace"), 180), log.read_text()[-2000:]
        anon, bearer = Http(port), Http(port, token)
        for path in ("/", "/static/app.js", "/api/status", "/api/events?from=DAY1&to=DAY2"):
            status, _, body = anon.request("GET", path)
            assert status == 401 and json.loads(body)["code"] == "unauthorized", path
            assert bearer.request("GET", path)[0] == 200, path
        assert Http(port, "wrong-token-" + "y" * 20).request("GET", "/api/status")[0] == 401
        status, headers, _ = anon.request("GET", f"/?token={token}")
        assert status == 200 and "httponly" in headers["set-cookie"].lower() and "samesite=strict" in \
            headers["set-cookie"].lower()
        cookie = headers["set-cookie"].split(";")[0]
        assert anon.request("GET", "/api/stats", headers={"Cookie": cookie})[0] == 200
        assert anon.request("GET", "/api/status", headers={"Host": "chorus.example"})[0] == 401  # a token, not Host
        assert bearer.request("GET", "/api/status", headers={"Host": "chorus.example"})[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        broker.stop()
    assert token not in log.read_text()


def test_a_taken_port_leaves_the_daemon_serving(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        broker = Mosquitto(tmp_path)
        log = tmp_path / "daemon.log"
        proc = start_daemon(tmp_path / "p.sqlite", web_env(broker.port, taken), log)
        try:
            assert wait_until(lambda: "web page not served" in log.read_text(errors="replace"), 180)
            time.sleep(1)
            assert proc.poll() is None and " ready: " in log.read_text()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
            broker.stop()
