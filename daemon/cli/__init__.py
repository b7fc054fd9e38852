"""`chorus`: the command line. `COMMANDS` is the table of sub-commands, in the order `chorus
--help` lists them; each module declares its commands' arguments next to their handlers, and
handlers import heavy modules inside themselves, so `chorus --help` starts fast."""

from __future__ import annotations

import argparse
import sys

from daemon import logs
from daemon.cli import bench, memory, perception, questions, service, wire
from daemon.cli.chat import CHAT
from daemon.cli.options import Command, Help, command, commands
from daemon.cli.support import UserError

COMMANDS: list[Command] = [
    memory.IMPORT, questions.RETRIEVE, questions.ASK, bench.BENCH, memory.CONSOLIDATE, memory.STATUS,
    memory.INDEX, service.RUN, wire.REPLAY, perception.TRANSCRIBE, perception.FRAMES, wire.LOAD, CHAT,
    service.CONFIG,
]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="chorus", description="Shared memory of a team of camera-wearing agents.",
                                 formatter_class=Help, epilog="`chorus COMMAND --help` shows a command's options and an example.")
    sub = commands(ap, "command")
    for c in COMMANDS:
        p = command(sub, c.name, c.help, c.example)
        c.arguments(p)
        p.set_defaults(handler=c.run)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup(args.verbose)
    from daemon.settings import ConfigError  # late: keeps `chorus --help` fast

    try:
        return args.handler(args)
    except ConfigError as e:
        for line in e.problems:
            print(f"config: {line}", file=sys.stderr)
        return 2
    except UserError as e:
        print(f"chorus: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `chorus ... | head`
        sys.stderr.close()
        return 0
