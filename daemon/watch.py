"""What the daemon has seen of the others, for the web page and Home Assistant: each agent's
retained status (`online` / `offline`, its last will) and the latest coded errors it reported."""

from __future__ import annotations

import time
from collections import deque


class Watch:
    def __init__(self, keep_errors: int = 50, max_agents: int = 1000):
        self.agents: dict[str, dict] = {}
        self.max_agents = max_agents  # statuses of made-up agents cannot grow it without bound
        self.errors: deque[dict] = deque(maxlen=keep_errors)

    def agent(self, agent: str, payload: bytes) -> None:
        """An `agents/{agent}/status` message; an empty one (a cleared retained status) forgets it."""
        text = payload.decode("utf-8", "replace").strip()[:32]
        if not text:
            self.agents.pop(agent, None)
            return
        if agent in self.agents or len(self.agents) < self.max_agents:
            self.agents[agent] = {"status": text, "since": time.time()}

    def online(self) -> list[str]:
        return sorted(a for a, v in self.agents.items() if v["status"] == "online")

    def error(self, code: str, message: str, where: dict) -> None:
        self.errors.append({"time": time.time(), "code": code, "message": message[:500]}
                           | {k: v for k, v in where.items() if v})

    def latest_errors(self, n: int = 20) -> list[dict]:
        return list(self.errors)[-n:][::-1]
