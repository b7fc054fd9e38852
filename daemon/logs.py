"""Logging to stderr for journald: level, logger, message; no timestamps of our own."""

from __future__ import annotations

import logging
import os
import sys


def setup(verbose: int = 0) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    level = os.environ.get("CHORUS_LOG_LEVEL", logging.getLevelName(level)).upper()
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not os.environ.get("JOURNAL_STREAM") and sys.stderr.isatty():
        fmt = "%(asctime)s " + fmt
    logging.basicConfig(level=level, format=fmt, stream=sys.stderr, force=True)
    for noisy in ("bm25s", "transitions", "apscheduler.executors", "amqtt"):
        logging.getLogger(noisy).setLevel(max(logging.getLogger().level, logging.WARNING))
