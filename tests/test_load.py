"""`chorus load`: bounded, loopback only, and what it sends at ten times realistic rates arrives:
every caption stored once, the daemon still up. (Rates and latencies: tests/bench_load.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from daemon.cli import main
from tests.mqtt_util import ROOT, Mosquitto, daemon_env, query, start_daemon, wait_ready, wait_until


@pytest.mark.parametrize("argv", [["--seconds", "0"], ["--seconds", "99999"], ["--kinds", "smell"]])
def test_load_is_bounded(argv, capsys):
    assert main(["load", *argv]) == 2
    assert "chorus:" in capsys.readouterr().err


def test_load_refuses_a_broker_off_this_machine(monkeypatch, capsys):
    monkeypatch.setenv("CHORUS__MQTT__HOST", "192.0.2.10")
    assert main(["load", "--seconds", "1"]) == 2
    assert "this machine only" in capsys.readouterr().err


@pytest.mark.slow
def test_ten_times_realistic_load_arrives_whole(tmp_path):
    broker = Mosquitto(tmp_path)
    env = daemon_env(broker.port, CHORUS__DAEMON__CONSOLIDATE_EVERY_S="3600", CHORUS__DAEMON__SILENCE_S="3600")
    db = tmp_path / "load.sqlite"
    proc = start_daemon(db, env, tmp_path / "daemon.log")
    try:
        wait_ready(tmp_path / "daemon.log")
        run = subprocess.run([sys.executable, "-m", "daemon.cli", "load", "--agents", "3", "--seconds", "5", "--json"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        rep = json.loads(run.stdout)
        assert rep["sent"]["caption"] >= 3 * 5 * 5 - 3 and rep["sent"]["audio"] > rep["sent"]["frame"] > 0
        n = rep["sent"]["caption"]
        assert wait_until(lambda: query(db, "SELECT COUNT(*) FROM observations")[0][0] >= n, 60)
        rows = query(db, "SELECT COUNT(*), COUNT(DISTINCT ext_id) FROM observations WHERE ext_id LIKE 'load%'")
        assert rows[0] == (n, n)
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
        broker.stop()
