"""The service commands: `run` (the daemon) and `config check` (the `ExecStartPre` of the unit)."""

from __future__ import annotations

import argparse
import json
import sys

import daemon.cli.options as options
from daemon.cli.options import Command
from daemon.cli.support import UserError, out, settings_of


def cmd_run(args) -> int:
    from daemon import build
    from daemon.writer_lock import AlreadyRunning, WriterLock

    settings = settings_of(args)
    lock = WriterLock(args.db or settings.store.path)
    try:
        lock.acquire()  # held for the process's life; the kernel lets go when it ends
    except AlreadyRunning as e:
        raise UserError(str(e)) from None
    return build.run_daemon(settings, args.db)


RUN = Command("run", "the daemon: captions in over MQTT, answers out", "chorus run --config /etc/chorus/chorus.toml",
              options.common, cmd_run)


def config_arguments(p: argparse.ArgumentParser) -> None:
    actions = options.commands(p, "action")
    check = options.command(actions, "check", "validate the configuration; exit code 2 on errors",
                            "chorus config check --config /etc/chorus/chorus.toml")
    options.common(check)


def cmd_config(args) -> int:
    from daemon.settings import check_config, redacted

    settings, problems = check_config(args.config)
    if problems:
        for line in problems:
            print(f"config: {line}", file=sys.stderr)
        return 2
    out(args, redacted(settings), "configuration ok\n" + json.dumps(redacted(settings), indent=2))
    return 0


CONFIG = Command("config", "check the configuration", "chorus config check --config /etc/chorus/chorus.toml",
                 config_arguments, cmd_config)
