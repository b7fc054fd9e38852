"""The systemd side: the notify protocol against a fake NOTIFY_SOCKET, and the unit file."""

import os
import shutil
import socket
import subprocess
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


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not on this machine")
def test_unit_file_passes_systemd_analyze_verify(tmp_path):
    unit = (ROOT / "systemd" / "chorus.service").read_text()
    fake = tmp_path / "chorus"  # verify checks that ExecStart exists: point it at a stand-in
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    unit = unit.replace("/opt/chorus/.venv/bin/chorus", str(fake))
    (tmp_path / "chorus.service").write_text(unit)
    r = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "chorus.service")],
                       capture_output=True, text=True)
    problems = [ln for ln in (r.stdout + r.stderr).splitlines()
                if "chorus.service" in ln and "Documentation" not in ln]
    assert r.returncode == 0 or not problems, r.stdout + r.stderr
