"""What a supervisor looks at, built from the running daemon's parts: the web page with its HTTP
API, and Home Assistant discovery. `jobs` gives (task name, coroutine) pairs for the daemon's
TaskGroup; both read the memory through one read connection of their own (`browse`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path

from daemon.asking import Asking
from daemon.ha import Discovery
from daemon.settings import Settings
from daemon.watch import Watch
from memory.browse import Browse
from memory.clock import HouseClock


@dataclass(frozen=True)
class Supervised:
    """What the page and Home Assistant read of the running daemon."""

    settings: Settings
    db: Path | str
    clock: HouseClock
    link: object  # streams.link.Link: connected, cfg, last_error, connects, publish
    watch: Watch
    stats: Callable[[], dict]
    info: Callable[[], dict]
    closed_until: Callable[[int], int]
    report: Callable[..., None]


def jobs(d: Supervised, asking: Asking, browse: Browse) -> list[tuple[str, Coroutine]]:
    s = d.settings
    out: list[tuple[str, Coroutine]] = []
    if s.web.enabled:
        from daemon.web.api import Api  # aiohttp: only when the page is served
        from daemon.web.server import WebServer

        def mqtt() -> dict:
            return {"connected": d.link.connected.is_set(), "host": f"{d.link.cfg.host}:{d.link.cfg.port}",
                    "last_error": d.link.last_error}

        api = Api(asking, browse, d.clock, d.watch, stats=d.stats, info=d.info, mqtt=mqtt,
                  closed_until=d.closed_until, report=d.report)
        out.append(("web", WebServer(s.web, api).run()))
    # always: turned off, it removes the configs it published before (and then ends)
    ha = Discovery(s.ha, root=s.mqtt.root, client_id=s.mqtt.client_id, version=d.info()["version"],
                   publish=d.link.publish, connects=lambda: d.link.connects, connected=d.link.connected,
                   summary=browse.summary, until=lambda: d.closed_until(int(time.time() * 1000)),
                   online=d.watch.online, marker=Path(f"{d.db}.ha-discovery"), period_s=s.daemon.stats_every_s)
    out.append(("home-assistant", ha.run()))
    return out
