"""What a supervisor looks at, built from the running daemon's parts: the web page with its HTTP
API, and Home Assistant discovery. `jobs` gives (task name, coroutine) pairs for the daemon's
TaskGroup; both read the memory through one read connection of their own."""

from __future__ import annotations

import time
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING

from daemon import wiring
from daemon.asking import Asking
from daemon.ha import Discovery
from memory.browse import Browse

if TYPE_CHECKING:
    from daemon.app import Daemon


def jobs(d: Daemon, asking: Asking) -> list[tuple[str, Coroutine]]:
    s = d.settings
    browse = Browse(wiring.open_store(s, d.db), s.frames.dir)
    out: list[tuple[str, Coroutine]] = []
    if s.web.enabled:
        from daemon.web.api import Api  # aiohttp: only when the page is served
        from daemon.web.server import WebServer

        def mqtt() -> dict:
            return {"connected": d.link.connected.is_set(), "host": f"{d.link.cfg.host}:{d.link.cfg.port}",
                    "last_error": d.link.last_error}

        api = Api(asking, browse, d.clock, d.watch, stats=d.stats, info=d.info, mqtt=mqtt,
                  closed_until=d.ingestor.closed_until, report=d.report)
        out.append(("web", WebServer(s.web, api).run()))
    # always: turned off, it removes the configs it published before (and then ends)
    ha = Discovery(s.ha, root=s.mqtt.root, client_id=s.mqtt.client_id, version=d.info()["version"],
                   publish=d.link.publish, connects=lambda: d.link.connects, connected=d.link.connected,
                   summary=browse.summary, until=lambda: d.ingestor.closed_until(int(time.time() * 1000)), online=d.watch.online,
                   marker=Path(f"{d.db}.ha-discovery"), period_s=s.daemon.stats_every_s)
    out.append(("home-assistant", ha.run()))
    return out
