"""The consolidation loop of the daemon: one pass over the closed windows at start-up, then one
each time the schedule ticks (every `daemon.consolidate_every_s`) or new data closes a window on
the watermark; passes never overlap and missed ticks coalesce. Written events are published on
`events`; a failed pass leaves its windows pending for the next one."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial

from assistant.consolidate import Consolidator
from memory.clock import HouseClock
from memory.records import WINDOW_MS
from streams.messages import dumps

logger = logging.getLogger(__name__)


class Consolidation:
    def __init__(self, consolidator: Consolidator, clock: HouseClock, link, *, every_s: float,
                 report: Callable[..., None]):
        self.consolidator, self.clock, self.link, self.every_s, self.report = consolidator, clock, link, every_s, report
        self.counts = {"windows": 0, "events": 0, "consolidation_failed": 0}
        self._kick = asyncio.Event()
        self._closed_until = 0

    def note(self, closed_until_ms: int) -> None:
        """New data moved the watermark: when it closed a window, consolidate now, not at the next tick."""
        if closed_until_ms // WINDOW_MS > self._closed_until // WINDOW_MS:
            self._closed_until = closed_until_ms
            self._kick.set()

    async def run(self, closed_until: Callable[[int], int]) -> None:
        """The loop; `closed_until(now_ms)` is the event time up to which windows are closed."""
        from apscheduler.schedulers.asyncio import AsyncIOScheduler
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        trigger = (CronTrigger(minute="*/10", timezone="UTC") if self.every_s == 600
                   else IntervalTrigger(seconds=self.every_s, timezone="UTC"))
        scheduler = AsyncIOScheduler(timezone="UTC")
        scheduler.add_job(self._tick, trigger, id="consolidate", max_instances=1, coalesce=True,
                          misfire_grace_time=None)
        scheduler.start()
        try:
            await self.once(closed_until)  # once at start-up: catch up on what came while we were down
            while True:
                await self._kick.wait()
                self._kick.clear()
                await self.once(closed_until)
        finally:
            scheduler.shutdown(wait=False)

    async def _tick(self) -> None:
        """The scheduled job only wakes the loop: one pass at a time, missed ticks coalesce."""
        self._kick.set()

    async def once(self, closed_until: Callable[[int], int]) -> None:
        """One pass over the closed windows; only the loop calls it, so passes never overlap."""
        loop = asyncio.get_running_loop()
        until = closed_until(int(time.time() * 1000))

        def publish_window(r) -> None:
            if r.status != "written":
                return
            for e in r.events:
                body = {"id": e.id, "who": list(e.who), "what": e.what, "where": e.where, "how": e.how,
                        "start": self.clock.iso(e.start_ms), "end": self.clock.iso(e.end_ms), "model": e.model}
                loop.call_soon_threadsafe(partial(self.link.publish, self.link.topics.events, dumps(body), qos=1))
            self.counts["windows"] += 1
            self.counts["events"] += len(r.events)

        try:
            results = await asyncio.to_thread(self.consolidator.run, until_ms=until, on_window=publish_window)
        except Exception as e:  # a full disk or a sick database: the windows stay pending, retried next tick
            from memory.db import is_full

            self.counts["consolidation_failed"] += 1
            full = is_full(e) or is_full(e.__cause__ or e)
            logger.warning("consolidation pass failed (%s: %s); windows stay pending", type(e).__name__, e)
            self.report("disk_full" if full else "internal", f"consolidation paused: {type(e).__name__}: {e}")
            return
        if any(r.status == "preempted" for r in results):
            self._kick.set()
