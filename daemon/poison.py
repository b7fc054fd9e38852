"""Messages that kill the process are not delivered to it forever.

Each worker says which messages it is handling (`begin`) and when it is done (`end`); their keys
sit in a tiny file next to the database (`<db>.inflight`, rewritten as they change, never synced:
it must survive the process, not the machine). A clean stop removes it. At start-up a leftover file
means the last run died while handling those messages: its keys are recorded as one death in
`<db>.deaths` (the last two are kept), they become suspects that are handled one at a time, and
a message in flight at each of the last two deaths is poison: refused with `poison`, acknowledged,
never handled again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

logger = logging.getLogger(__name__)
MAX_KEYS = 5000  # per death: a batch is at most 1000 captions, plus questions, audio and frames


class PoisonJournal:
    def __init__(self, db: str | Path):
        base = str(db)
        self.inflight_path, self.deaths_path = Path(base + ".inflight"), Path(base + ".deaths")
        self._now: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()  # begin/end come from the loop and from worker threads
        deaths = self._read_deaths()
        left = self._read_inflight()
        if left:
            deaths = (deaths + [left[:MAX_KEYS]])[-2:]
            self._write_deaths(deaths)
            logger.warning("the last run died while handling %d message(s): they are handled one at a time now%s",
                           len(left), "; one seen at both of the last two deaths is refused" if len(deaths) == 2 else "")
        self.suspects: frozenset[str] = frozenset(left)
        self.poison: frozenset[str] = (frozenset(deaths[0]) & frozenset(deaths[1])) if len(deaths) == 2 else frozenset()
        self._write()

    def is_poison(self, key: str) -> bool:
        return key in self.poison

    def is_suspect(self, key: str) -> bool:
        return key in self.suspects

    def begin(self, worker: str, keys) -> None:
        with self._lock:
            self._now[worker] = tuple(keys)
            self._write()

    def end(self, worker: str) -> None:
        with self._lock:
            if self._now.pop(worker, None):
                self._write()

    def close(self) -> None:
        """A clean stop: nothing was left half done."""
        with self._lock:
            self._now.clear()
            self.inflight_path.unlink(missing_ok=True)

    # -- files ----------------------------------------------------------------------------
    def _write(self) -> None:
        keys = [k for ks in self._now.values() for k in ks]
        try:
            tmp = self.inflight_path.with_name(self.inflight_path.name + ".tmp")
            tmp.write_text("\n".join(keys))
            os.replace(tmp, self.inflight_path)
        except OSError as e:  # a full disk: the journal is a safety net, not a reason to stop
            logger.debug("in-flight journal not written: %s", e)

    def _read_inflight(self) -> list[str]:
        try:
            return [k for k in self.inflight_path.read_text().split("\n") if k][:MAX_KEYS]
        except (OSError, UnicodeDecodeError):
            return []

    def _read_deaths(self) -> list[list[str]]:
        try:
            v = json.loads(self.deaths_path.read_text())
            return [[str(k) for k in d][:MAX_KEYS] for d in v["deaths"]][-2:]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def _write_deaths(self, deaths: list[list[str]]) -> None:
        try:
            tmp = self.deaths_path.with_name(self.deaths_path.name + ".tmp")
            tmp.write_text(json.dumps({"deaths": deaths}))
            os.replace(tmp, self.deaths_path)
        except OSError as e:
            logger.warning("deaths journal not written: %s", e)
