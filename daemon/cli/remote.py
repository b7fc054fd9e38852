"""Short MQTT exchanges of the command line with a running daemon: is it online, its retained
status, a question asked and its answer awaited."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable


async def daemon_online(host: str, port: int, root: str, wait_s: float = 1.5, conn: dict | None = None) -> bool:
    """True when the broker answers and the daemon's retained status says `online`."""
    import aiomqtt

    try:
        async with aiomqtt.Client(host, port, protocol=aiomqtt.ProtocolVersion.V311, timeout=2, **(conn or {})) as c:
            await c.subscribe(f"{root}/status", qos=1)

            async def first():
                async for m in c.messages:
                    return bytes(m.payload) == b"online"

            return await asyncio.wait_for(first(), wait_s)
    except (aiomqtt.MqttError, TimeoutError, OSError):
        return False


# what the daemon's `working` chunks say, as the chat shows them while it waits
STAGES = {"sent": "waiting for the daemon...", "retrieval": "searching...", "answering": "answering..."}


def say_stage(stage: str, detail: dict | None = None) -> None:
    """One progress line on stderr ("searching...", "answering... (8 excerpts)")."""
    n = (detail or {}).get("units")
    print(f"   {STAGES.get(stage, stage)}" + (f" ({n} excerpts)" if n else ""), file=sys.stderr, flush=True)


async def ask_over_mqtt(host: str, port: int, root: str, question: str, options: list[str], asker: str | None,
                        timeout_s: float = 600, conn: dict | None = None,
                        progress: Callable[[str, dict], None] | None = None, as_of: str | None = None) -> dict:
    """The daemon's answer; with `progress`, the question is asked in stream mode and each stage
    the daemon reaches (`progress(stage, chunk)`: sent, retrieval, answering) is told as it comes."""
    import aiomqtt

    qid = uuid.uuid4().hex[:12]
    reply = f"{root}/answer/{qid}"
    async with aiomqtt.Client(host, port, protocol=aiomqtt.ProtocolVersion.V311, **(conn or {})) as c:
        await c.subscribe(reply, qos=1)
        body = {"id": qid, "question": question, "options": options, "asker": asker, "reply_to": reply,
                "stream": progress is not None}
        if as_of is not None:
            body["as_of"] = as_of
        await c.publish(f"{root}/query", json.dumps(body), qos=1)
        if progress:
            progress("sent", {})

        async def wait():
            async for m in c.messages:
                if str(m.topic) != reply:  # some brokers replay an earlier session's subscriptions
                    continue
                try:
                    d = json.loads(bytes(m.payload))
                except ValueError:
                    continue
                if d.get("status") in ("ok", "error"):
                    return d
                if progress and d.get("status") == "working":
                    progress(d.get("stage", "working"), d)

        return await asyncio.wait_for(wait(), timeout_s)


async def daemon_status(host: str, port: int, root: str, wait_s: float = 1.5,
                        conn: dict | None = None) -> dict | None:
    """The daemon's retained `status` and `status/info`, or None when no broker answers."""
    import aiomqtt

    found: dict = {}
    try:
        async with aiomqtt.Client(host, port, protocol=aiomqtt.ProtocolVersion.V311, timeout=2, **(conn or {})) as c:
            await c.subscribe(f"{root}/status", qos=1)
            await c.subscribe(f"{root}/status/info", qos=1)

            async def read():
                async for m in c.messages:
                    key = "info" if str(m.topic).endswith("/info") else "status"
                    raw = bytes(m.payload).decode(errors="replace")
                    found[key] = json.loads(raw) if key == "info" else raw
                    if len(found) == 2:
                        return

            try:
                await asyncio.wait_for(read(), wait_s)
            except TimeoutError:
                pass
    except (aiomqtt.MqttError, OSError):
        return None
    return found
