"""Admission: who may send, how fast, and how often the daemon complains about it.

An agent topic passes the gate when its agent is on the allow-list (if one is configured), within
its rate (a token bucket per agent over all its streams) and within the rate of all agents
together (so that thousands of invented agent ids cannot take the box either). Error reports go
through a throttle of their own, per code and agent and per code alone, so a flood of bad input
cannot turn into a flood on `errors`; `Reports` is the one way every part of the daemon says
what went wrong (a log line, the web page's latest errors, a message on `errors`). Every table
here is bounded: idle keys are forgotten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from daemon.watch import Watch
from streams.messages import error_payload

logger = logging.getLogger(__name__)


@dataclass
class Bucket:
    tokens: float
    last: float


class RateLimit:
    """Token buckets by key: `rate` per second sustained, `burst` at once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic, max_keys: int = 10_000):
        self.rate, self.burst, self.clock, self.max_keys = rate, burst, clock, max_keys
        self.buckets: dict[object, Bucket] = {}

    def take(self, key: object) -> bool:
        now = self.clock()
        b = self.buckets.get(key)
        if b is None:
            if len(self.buckets) >= self.max_keys:  # many keys (junk agent ids): forget the idle ones
                self.buckets = {k: v for k, v in self.buckets.items() if now - v.last < self.burst / self.rate}
                while len(self.buckets) >= self.max_keys:  # none idle yet: the longest quiet go first
                    del self.buckets[min(self.buckets, key=lambda k: self.buckets[k].last)]
            b = self.buckets[key] = Bucket(float(self.burst), now)
        b.tokens = min(self.burst, b.tokens + (now - b.last) * self.rate)
        b.last = now
        if b.tokens >= 1:
            b.tokens -= 1
            return True
        return False


class Gate:
    """(code, message) for an agent that may not send now, else None."""

    def __init__(self, allow: Iterable[str], rate: float, burst: int, clock: Callable[[], float] = time.monotonic, *,
                 total_rate: float = float("inf"), total_burst: int = 1, max_agents: int = 10_000):
        self.allow = frozenset(allow)
        self.limit = RateLimit(rate, burst, clock, max_keys=max_agents)
        self.total = RateLimit(total_rate, total_burst, clock, max_keys=1) if total_rate != float("inf") else None
        self.counts = {"not_allowed": 0, "rate_limited": 0} | ({"total_limited": 0} if self.total else {})

    def check(self, agent: str) -> tuple[str, str] | None:
        if self.allow and agent not in self.allow:
            self.counts["not_allowed"] += 1
            return "not_allowed", f"agent {agent!r} is not on the allow-list (daemon.allow_agents)"
        if not self.limit.take(agent):
            self.counts["rate_limited"] += 1
            return "rate_limited", (f"agent {agent!r} sends faster than {self.limit.rate:g} messages/s "
                                    f"(burst {self.limit.burst}): message dropped")
        if self.total is not None and not self.total.take(None):
            self.counts["total_limited"] += 1
            return "rate_limited", (f"all agents together send faster than {self.total.rate:g} messages/s "
                                    f"(daemon.rate_total): message of {agent!r} dropped")
        return None


class ReportThrottle:
    """At most `burst` reports at once and `rate` per second per (code, agent), and `code_rate` per
    second per code whatever the agent; says how many it held back."""

    def __init__(self, rate: float = 2.0, burst: int = 20, clock: Callable[[], float] = time.monotonic, *,
                 code_rate: float = 10.0, code_burst: int = 50, max_keys: int = 10_000):
        self.limit = RateLimit(rate, burst, clock, max_keys=max_keys)
        self.by_code = RateLimit(code_rate, code_burst, clock, max_keys=1000)
        self.held: dict[str, int] = {}  # per code: bounded by the codes there are, not by agents

    def admit(self, code: str, agent: str | None) -> int | None:
        """None: hold this report back; else the number held back (of this code) since the last one."""
        if not (self.limit.take((code, agent)) and self.by_code.take(code)):
            if code in self.held or len(self.held) < 1000:
                self.held[code] = self.held.get(code, 0) + 1
            return None
        return self.held.pop(code, 0)


class Reports:
    """Coded errors of every part, through the throttle: logged, kept for the web page, published
    on `errors` (QoS 0). `link` is anything with `topics` and `publish`."""

    def __init__(self, link, throttle: ReportThrottle, watch: Watch):
        self.link, self.throttle, self.watch = link, throttle, watch
        self.counts = {"errors_sent": 0, "errors_held": 0}

    def report(self, code: str, message: str, **where) -> None:
        held = self.throttle.admit(code, where.get("agent"))
        if held is None:  # a flood of the same complaint: counted, said later
            self.counts["errors_held"] += 1
            return
        if held:
            message += f" ({held} more like this held back)"
        logger.warning("%s: %s (%s)", code, message, {k: v for k, v in where.items() if v})
        self.counts["errors_sent"] += 1
        self.watch.error(code, message, where)
        self.link.publish(self.link.topics.errors, error_payload(code, message, **where), qos=0)
