"""Replay of recordings as live agents: each caption published on its agent's topic (QoS 1) at its
recorded time, compressed by `speed`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator

import aiomqtt

from streams.messages import AgentCaption
from streams.topics import Topics

logger = logging.getLogger(__name__)


def in_time_order(hours: Iterable[list[AgentCaption]]) -> Iterator[AgentCaption]:
    """Merge the captions of each hour (all agents, all streams) into one time-ordered stream."""
    for batch in hours:
        yield from sorted(batch, key=lambda c: (c.msg.ts, c.agent, c.msg.id))


async def replay(
    captions: Iterable[AgentCaption], *, host: str, port: int, topics: Topics, speed: float = 1.0,
    username: str | None = None, password: str | None = None, limit: int | None = None,
    progress: Callable[[int], None] | None = None, client_id: str | None = None, tls_context=None,
) -> int:
    """Publish; returns how many captions went out."""
    sent = 0
    t0_wall, t0_rec = time.monotonic(), None
    async with aiomqtt.Client(host, port, username=username, password=password, identifier=client_id,
                              protocol=aiomqtt.ProtocolVersion.V311, tls_context=tls_context) as client:
        for c in captions:
            if limit is not None and sent >= limit:
                break
            if t0_rec is None:
                t0_rec = c.msg.ts
            due = t0_wall + (c.msg.ts - t0_rec) / 1000 / speed
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await client.publish(topics.agent(c.agent, "caption"), c.msg.to_bytes(), qos=1)
            sent += 1
            if progress and sent % 500 == 0:
                progress(sent)
    return sent
