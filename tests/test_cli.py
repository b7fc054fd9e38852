"""The command line as a newcomer meets it: a help line for every command, an example in every
command's help, and a command that loads the model exiting without a traceback."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

import pytest

from daemon.cli import build_parser
from tests.mqtt_util import ROOT


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) of every sub-command, nested ones included (`import egolife`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


ALL = [path for path, _ in commands(build_parser())]


def cli(*argv: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "daemon.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80", **(env or {})}, timeout=timeout)


def test_help_lists_every_command_on_one_line_with_what_it_does():
    r = cli("--help")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for name in (p[0] for p in ALL if len(p) == 1):
        line = next((ln for ln in lines if ln.split()[:1] == [name] and ln.startswith("    ")), None)
        assert line and len(line.split()) > 2 and len(line) <= 80, (name, r.stdout)


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_every_command_help_shows_an_example_that_parses(path, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*path, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    examples = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("chorus ")]
    assert len(examples) == 1 and examples[0].startswith("chorus " + " ".join(path) + " "), out
    build_parser().parse_args(shlex.split(examples[0])[1:])  # real use: it parses


@pytest.mark.slow
def test_a_command_that_loads_the_model_exits_without_a_traceback(tmp_path):
    """llama-cpp-python's finalisers, left to interpreter shutdown, can print `TypeError: 'NoneType'
    object is not callable` (seen at the end of `./dev test`); every loaded model is freed before."""
    db = str(tmp_path / "m.sqlite")
    lines = tmp_path / "robot1.jsonl"
    lines.write_text(json.dumps({"agent": "robot1", "start": "DAY1 11:09:43", "text": "I put the charger in the drawer"})
                     + "\n")
    env = {"CHORUS__HOUSE__TIMEZONE": "Asia/Shanghai", "CHORUS__LLM__N_CTX": "2048", "CHORUS__LLM__N_THREADS": "2",
           "CHORUS__LLM__MODEL": "tiny", "CHORUS__ANSWER__CHOOSE": "generate",
           "CHORUS__ANSWER__CONTEXT_TOKENS": "600", "CHORUS__RETRIEVAL__DENSE": "false",
           "CHORUS__LLM__TIME_LIMIT_S": "30"}  # a reply cut short by the limit still ran the model
    assert cli("import", "jsonl", str(lines), "--db", db, env=env).returncode == 0
    r = cli("ask", "Where is the charger?", "--as-of", "DAY1 12:00", "--planner", "rule", "--db", db, "--json", "-v",
            env=env, timeout=600)
    assert "loaded" in r.stderr and json.loads(r.stdout)["status"] in ("ok", "error"), r.stderr
    assert "Traceback" not in r.stderr and "TypeError" not in r.stderr, r.stderr
