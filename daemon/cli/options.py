"""How a sub-command is declared: its entry in the table of `chorus` (name, one-line help, one
example of real use, its arguments, its handler) and the options several commands share, each
declared once here. Light on purpose: `chorus --help` imports this and argparse, nothing heavy."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Command:
    """One sub-command: `arguments(parser)` adds its options (and nested commands), `run(args)` is
    its handler and returns the exit code."""

    name: str
    help: str
    example: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


class Help(argparse.RawDescriptionHelpFormatter):
    """Examples kept as written; each sub-command and its help on one line in 80 columns."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=20)
        self._action_max_length = 16  # argparse leaves the indent of sub-command names out of its measure


def command(sub, name: str, help: str, example: str) -> argparse.ArgumentParser:
    """A sub-command: its one-line help in the parent's list, and one example of real use."""
    return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                          epilog=f"example:\n  {example}", formatter_class=Help)


def commands(parser: argparse.ArgumentParser, dest: str):
    return parser.add_subparsers(dest=dest, required=True, title="commands", metavar="COMMAND")


# -- options shared by several commands -----------------------------------------------------
def common(p: argparse.ArgumentParser) -> None:
    """What every command takes: the configuration, the memory file, JSON output, verbosity."""
    p.add_argument("--config", type=Path, help="TOML configuration (default: $CHORUS_CONFIG or /etc/chorus/chorus.toml)")
    p.add_argument("--db", type=Path, help="SQLite memory file (default: store.path of the configuration)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("-v", "--verbose", action="count", default=0)


def as_of(p: argparse.ArgumentParser, help: str = "only memory recorded before this time") -> None:
    p.add_argument("--as-of", default="now", help=help)


def asker(p: argparse.ArgumentParser, help: str = "who asks: 'I' in the question means this agent") -> None:
    p.add_argument("--asker", help=help)


def option(p: argparse.ArgumentParser, help: str = "a multiple-choice option (repeatable)") -> None:
    p.add_argument("--option", action="append", default=[], help=help)


def agent(p: argparse.ArgumentParser, help: str = "search only this agent (repeatable)") -> None:
    p.add_argument("--agent", action="append", help=help)


def planner(p: argparse.ArgumentParser, help: str = "default: answer.planner") -> None:
    p.add_argument("--planner", choices=["llm", "rule"], help=help)


def budget(p: argparse.ArgumentParser, help: str = "fine units in the context (default: retrieval.budget)") -> None:
    p.add_argument("--budget", type=int, help=help)


def recording_formats(parent: argparse.ArgumentParser, verb: str, tail: str) -> list[argparse.ArgumentParser]:
    """The `egolife DIR` and `jsonl FILE` sub-commands shared by `import` and `replay`."""
    fmt = commands(parent, "format")
    eg = command(fmt, "egolife", "an EgoLifeCap folder (DenseCaption/, Transcript/)",
                 f"chorus {verb} egolife ../shared/data/egolife/EgoLifeCap --days 1{tail}")
    eg.add_argument("path", type=Path)
    eg.add_argument("--days", help="comma-separated day numbers, e.g. 1,2")
    eg.add_argument("--agents", help="comma-separated agent names, e.g. A1_JAKE,A2_ALICE")
    jl = command(fmt, "jsonl", "generic JSON lines, one observation a line (see README)",
                 f"chorus {verb} jsonl robot1.jsonl{tail}")
    jl.add_argument("path", type=Path)
    return [eg, jl]
