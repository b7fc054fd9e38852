"""Who may send, how fast, and how often the daemon complains about it.

An agent topic passes the gate when its agent is on the allow-list (if one is configured) and
within its rate: a token bucket per agent over all its streams. Error reports go through a
throttle of their own, so a flood of bad input cannot turn into a flood on `errors`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass


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
            b = self.buckets[key] = Bucket(float(self.burst), now)
        b.tokens = min(self.burst, b.tokens + (now - b.last) * self.rate)
        b.last = now
        if b.tokens >= 1:
            b.tokens -= 1
            return True
        return False


class Gate:
    """(code, message) for an agent that may not send now, else None."""

    def __init__(self, allow: Iterable[str], rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.allow = frozenset(allow)
        self.limit = RateLimit(rate, burst, clock)
        self.counts = {"not_allowed": 0, "rate_limited": 0}

    def check(self, agent: str) -> tuple[str, str] | None:
        if self.allow and agent not in self.allow:
            self.counts["not_allowed"] += 1
            return "not_allowed", f"agent {agent!r} is not on the allow-list (daemon.allow_agents)"
        if not self.limit.take(agent):
            self.counts["rate_limited"] += 1
            return "rate_limited", (f"agent {agent!r} sends faster than {self.limit.rate:g} messages/s "
                                    f"(burst {self.limit.burst}): message dropped")
        return None


class ReportThrottle:
    """At most `burst` reports at once and `rate` per second per (code, agent); says how many it held back."""

    def __init__(self, rate: float = 2.0, burst: int = 20, clock: Callable[[], float] = time.monotonic):
        self.limit = RateLimit(rate, burst, clock)
        self.held: dict[tuple[str, str | None], int] = {}

    def admit(self, code: str, agent: str | None) -> int | None:
        """None: hold this report back; else the number held back since the last one that went out."""
        key = (code, agent)
        if not self.limit.take(key):
            self.held[key] = self.held.get(key, 0) + 1
            return None
        return self.held.pop(key, 0)
