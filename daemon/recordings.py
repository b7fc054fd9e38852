"""From wire messages and recordings to stored observations."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from memory.clock import HouseClock
from memory.records import Observation
from memory.store import AddResult, Store
from streams import egolife
from streams.jsonl import read_jsonl
from streams.messages import AgentCaption

logger = logging.getLogger(__name__)


def to_observation(ac: AgentCaption) -> Observation:
    m = ac.msg
    return Observation(
        agent=ac.agent, kind=m.kind, start_ms=m.ts, end_ms=m.end, text=m.text,
        speaker=m.speaker, lang=m.lang, ext_id=m.id,
    )


@dataclass
class ImportReport:
    files: int = 0
    added: AddResult = field(default_factory=AddResult)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "files": self.files, "inserted": self.added.inserted,
            "duplicates": self.added.duplicates, "segments": self.added.segments,
            "errors": len(self.errors),
        }


def import_egolife(
    store: Store, root: Path, clock: HouseClock, *, days: set[int] | None = None,
    agents: set[str] | None = None, progress: Callable[[Iterable], Iterable] = iter,
) -> ImportReport:
    """Import an EgoLifeCap folder; one transaction per hour file, so a kill loses one file at most."""
    report = ImportReport()
    for f in progress(egolife.discover(root, days, agents)):
        try:
            captions = egolife.read_hour(f, clock.at)
        except egolife.RecordingError as e:
            report.errors.append(str(e))
            logger.warning("skipped %s: %s", f.path, e)
            continue
        report.added += store.add(to_observation(c) for c in captions)
        report.files += 1
    return report


def import_jsonl(store: Store, path: Path, clock: HouseClock, *, batch: int = 2000) -> ImportReport:
    """Import a generic JSON-lines file; bad lines are reported with their line number and skipped."""
    report = ImportReport(files=1)
    pending: list[Observation] = []
    for n, item in read_jsonl(path, clock.parse):
        if isinstance(item, Exception):
            report.errors.append(str(item))
            continue
        try:
            ob = to_observation(item)
            ob.check()
        except ValueError as e:
            report.errors.append(f"{path}:{n}: {e}")
            continue
        pending.append(ob)
        if len(pending) >= batch:
            report.added += store.add(pending)
            pending = []
    if pending:
        report.added += store.add(pending)
    return report
