"""The systemd side: the notify protocol against a fake NOTIFY_SOCKET, and the unit file."""

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import wave
from pathlib import Path

import pytest

from daemon.notify import notify, watchdog_period_s

ROOT = Path(__file__).resolve().parents[1]


def test_notify_sends_datagrams_to_the_socket(tmp_path, monkeypatch):
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as srv:
        srv.bind(path)
        srv.settimeout(2)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        assert notify("READY=1\nSTATUS=serving")
        assert srv.recv(1024) == b"READY=1\nSTATUS=serving"
        assert notify("WATCHDOG=1")
        assert srv.recv(1024) == b"WATCHDOG=1"


def test_notify_is_a_noop_outside_systemd(monkeypatch, tmp_path):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify("READY=1") is False
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "gone.sock"))
    assert notify("READY=1") is False


def test_watchdog_period_is_half_of_watchdog_sec(monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "120000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert watchdog_period_s() == 60
    monkeypatch.setenv("WATCHDOG_PID", "1")
    assert watchdog_period_s() is None


def test_daemon_reports_ready_on_a_fake_notify_socket(tmp_path):
    """A real daemon with a real broker says EXTEND_TIMEOUT while loading, then READY, then STOPPING."""
    from tests.mqtt_util import Mosquitto, daemon_env, start_daemon

    broker = Mosquitto(tmp_path)
    path = str(tmp_path / "n.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(120)
    proc = start_daemon(tmp_path / "m.sqlite", daemon_env(broker.port, NOTIFY_SOCKET=path), tmp_path / "log")
    try:
        seen = []
        while not any(m.startswith("READY=1") for m in seen):
            seen.append(srv.recv(4096).decode())
        assert seen[0].startswith("EXTEND_TIMEOUT_USEC=")
        proc.terminate()
        assert proc.wait(30) == 0
        srv.settimeout(1)
        try:
            while True:
                seen.append(srv.recv(4096).decode())
        except TimeoutError:
            pass
        assert "STOPPING=1" in seen, seen
    finally:
        srv.close()
        if proc.poll() is None:
            proc.kill()
        broker.stop()


UNIT = ROOT / "systemd" / "chorus.service"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(
    not ANALYZE, reason="systemd-analyze is not on this machine (Debian package systemd; ./dev test installs it)")


def deployable(folder: Path, unit: str | None = None) -> Path:
    """The unit as `verify` can check it here: ExecStart points at a stand-in for /opt/chorus."""
    fake = folder / "chorus"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    path = folder / "chorus.service"
    path.write_text((unit or UNIT.read_text()).replace("/opt/chorus/.venv/bin/chorus", str(fake)))
    return path


def gpu_variant() -> str:
    """The unit with the GPU drop-in of its comments (the `#   Key=value` lines) in force."""
    return re.sub(r"(?m)^#   (\w+=)", r"\1", UNIT.read_text())


def security(path: Path) -> tuple[subprocess.CompletedProcess, float]:
    """`systemd-analyze security --offline` with the issue's threshold (2.0) and the exposure it gives."""
    help_text = subprocess.run([ANALYZE, "security", "--help"], capture_output=True, text=True).stdout
    if "--offline" not in help_text:
        pytest.skip("this systemd-analyze has no security --offline (systemd 250 or newer has)")
    r = subprocess.run([ANALYZE, "security", "--offline=true", "--threshold=20", "--no-pager", str(path)],
                       capture_output=True, text=True)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout)
    assert m, r.stdout + r.stderr
    return r, float(m.group(1))


# a complaint of `verify` about another unit file of this machine (its path and line first)
_OTHER_UNIT = re.compile(r"^/\S+\.(service|socket|target|timer|mount|slice|path|swap|scope)(\.d/\S+\.conf)?:\d+: ")


def verify(path: Path) -> tuple[int, list[str]]:
    """`systemd-analyze verify`: its exit code and every line of output that is not about another
    unit of this machine. It exits 0 on warnings too (an unknown key, a bad value), so a clean
    unit is one with exit code 0 and no such line."""
    r = subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True)
    lines = (r.stdout + r.stderr).splitlines()
    return r.returncode, [ln for ln in lines if ln.startswith(str(path)) or not _OTHER_UNIT.match(ln)]


@needs_analyze
@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_unit_file_passes_systemd_analyze_verify(tmp_path, variant):
    code, complaints = verify(deployable(tmp_path, gpu_variant() if variant == "gpu" else None))
    assert code == 0 and not complaints, complaints


@needs_analyze
@pytest.mark.parametrize("change", [("[Service]\n", "[Service]\nNoSuchKey=1\n"),
                                    ("\nProtectSystem=", "\nProtectSystem=bogus\n#ProtectSystem="),
                                    ("/opt/chorus/.venv/bin/chorus run", "/opt/nowhere/chorus run")])
def test_verify_check_sees_a_broken_unit(tmp_path, change):
    """The check above fails on a unit with a warning or an error in it."""
    unit = UNIT.read_text()
    assert change[0] in unit
    code, complaints = verify(deployable(tmp_path, unit.replace(change[0], change[1], 1)))
    assert code != 0 or complaints


@needs_analyze
def test_unit_rates_safe_in_systemd_analyze_security(tmp_path):
    r, exposure = security(deployable(tmp_path))
    assert r.returncode == 0 and exposure <= 2.0, r.stdout
    assert "SystemCallFilter=" in UNIT.read_text() and "PrivateUsers=yes" in UNIT.read_text()


@needs_analyze
def test_gpu_drop_in_of_the_comments_stays_under_the_threshold(tmp_path):
    unit = gpu_variant()
    assert "PrivateDevices=no" in unit.split("[Install]")[0], "the GPU lines are in the unit's comments"
    r, exposure = security(deployable(tmp_path, unit))
    assert r.returncode == 0 and exposure <= 2.0, r.stdout


# -- the daemon inside the unit's sandbox: a filter that stops a model runtime shows here ----------
def systemd_run_blocker() -> str | None:
    """Why the daemon cannot run under `systemd-run` here, or None."""
    if os.geteuid() != 0:
        return "systemd-run of a system service needs root"
    if not shutil.which("systemd-run") or not shutil.which("systemctl"):
        return "systemd-run is not on this machine"
    state = subprocess.run(["systemctl", "is-system-running"], capture_output=True, text=True).stdout.strip()
    if state not in ("running", "degraded"):
        return f"systemd is not running here (systemctl is-system-running: {state or 'no answer'})"
    return None


def emulation_blocker() -> str | None:
    import ctypes.util

    if os.geteuid() != 0:
        return "the emulated sandbox mounts its own /proc: root only"
    if not ANALYZE or not shutil.which("unshare"):
        return "the emulated sandbox needs systemd-analyze (the filter's groups) and unshare"
    if not ctypes.util.find_library("seccomp"):
        return "libseccomp is not on this machine"
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        return "this container may not make mount namespaces"
    return None


def under_systemd_run(name: str, env: dict, folder: Path) -> list[str]:
    """`systemd-run` with the unit's sandboxing, as root (the test's files are root's; the unit runs
    as a DynamicUser), the test folder writable, the pytest environment's models readable."""
    from tests.sandbox import run_properties

    props = run_properties(UNIT)
    if any(str(p).startswith(("/root", "/home", "/run/user")) for p in (ROOT, Path(sys.executable).resolve())):
        props.append("ProtectHome=read-only")  # this checkout lives in a home; /opt/chorus does not
    args = ["systemd-run", f"--unit={name}", "--quiet", "--wait", "--collect", "--pipe",
            f"--working-directory={ROOT}", "-p", f"BindPaths={folder}"]
    for p in props:
        args += ["-p", p]
    for k, v in env.items():
        if k.startswith("CHORUS") or k in ("PATH", "PYTHONPATH", "HOME"):
            args.append(f"--setenv={k}={v}")
    return [*args, "--"]


async def caption_then_question(port: int, db: Path) -> dict:
    import aiomqtt

    from tests.mqtt_util import query, wait_until

    now = int(time.time() * 1000)
    body = {"id": "sb-1", "ts": now - 60_000, "text": "I put the red charger in the kitchen drawer"}
    async with aiomqtt.Client("127.0.0.1", port) as c:
        await c.subscribe("chorus/v1/answer/sb-q", qos=1)
        await c.publish("chorus/v1/agents/robot1/caption", json.dumps(body), qos=1)
        stored = await asyncio.to_thread(wait_until, lambda: query(db, "SELECT text FROM observations"), 30)
        assert stored == [(body["text"],)]
        await c.publish("chorus/v1/query", json.dumps({"id": "sb-q", "question": "Where is the red charger?"}),
                        qos=1)
        async for m in c.messages:
            reply = json.loads(bytes(m.payload))
            if reply.get("status") in ("ok", "error"):
                return reply
    raise AssertionError("no answer")


def daemon_in_sandbox(tmp_path: Path, wrap, stop) -> None:
    """The daemon loads every bundled model (LLM, MiniLM, Whisper, VAD), stores a caption and
    answers a question inside the sandbox; `chorus transcribe` runs Whisper there too. `wrap(name,
    env)` gives the command line that puts a command in the sandbox, `stop(name, proc)` ends it."""
    from tests.mqtt_util import Mosquitto, daemon_env, wait_ready

    broker = Mosquitto(tmp_path)
    db, log = tmp_path / "m.sqlite", tmp_path / "daemon.log"
    env = daemon_env(broker.port)
    cli = [sys.executable, "-m", "daemon.cli"]
    proc = subprocess.Popen([*wrap("chorus-test-daemon", env), *cli, "run", "--db", str(db)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=open(log, "ab"))
    try:
        wait_ready(log, 180)
        reply = asyncio.run(asyncio.wait_for(caption_then_question(broker.port, db), 300))
        assert reply["status"] == "ok", reply
        assert any("charger" in e["text"] for e in reply["evidence"]), reply
    finally:
        stop("chorus-test-daemon", proc)
        code = proc.wait(60)
        broker.stop()
    text = log.read_text(errors="replace")
    assert code == 0 and "Traceback" not in text, text[-4000:]
    if shutil.which("espeak-ng"):
        from tests.media_util import SENTENCES, conversation

        wav = tmp_path / "speech.wav"
        with wave.open(str(wav), "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
            w.writeframes(conversation(SENTENCES[:1]).tobytes())
        r = subprocess.run([*wrap("chorus-test-transcribe", env), *cli, "transcribe", str(wav), "--agent", "robot1",
                            "--start", "DAY1 11:00:00", "--db", str(tmp_path / "t.sqlite"), "--json"],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-4000:]
        assert "charger" in r.stdout.lower(), r.stdout


@pytest.mark.slow
def test_daemon_serves_under_systemd_run_with_the_units_sandbox(tmp_path):
    if reason := systemd_run_blocker():
        pytest.skip(reason)

    def stop(name, proc):  # the service, not systemd-run: it then exits with the service's status
        subprocess.run(["systemctl", "stop", f"{name}-{os.getpid()}"], capture_output=True)

    daemon_in_sandbox(tmp_path, lambda name, env: under_systemd_run(f"{name}-{os.getpid()}", env, tmp_path), stop)


@pytest.mark.slow
def test_daemon_serves_in_the_units_emulated_system_call_filter_and_proc(tmp_path):
    """Where systemd does not run (a container), the parts of the sandbox that can stop a model
    runtime, emulated: the system-call filter, W^X when set, the private /proc, no capabilities."""
    if systemd_run_blocker() is None:
        pytest.skip("systemd runs here: the daemon runs in the real sandbox instead (the test above)")
    if reason := emulation_blocker():
        pytest.skip(reason)
    from tests.sandbox import emulated

    daemon_in_sandbox(tmp_path, lambda name, env: emulated(UNIT), lambda name, proc: proc.terminate())
