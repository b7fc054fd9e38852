"""Live speech benchmark (not a test): K agents talk at once, in real time, over MQTT v5 to a
running daemon; does recognition keep up? Reports transcripts stored, speech dropped from the
backlog, the largest backlog seen in `stats`, and the lag from the end of a spoken line to its
transcript being in memory.

    .venv/bin/python tests/bench_speech_live.py --agents 6 --seconds 60 [--threads 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiomqtt  # noqa: E402
import sqlean  # noqa: E402
from paho.mqtt.packettypes import PacketTypes  # noqa: E402
from paho.mqtt.properties import Properties  # noqa: E402

from streams.messages import MediaHeader  # noqa: E402
from tests.bench_perception import MORE  # noqa: E402
from tests.media_util import SENTENCES, conversation  # noqa: E402
from tests.mqtt_util import Mosquitto, daemon_env, start_daemon  # noqa: E402


async def talk(port: int, agent: str, pcm, seconds: float, offset: int) -> None:
    """One agent: 100 ms chunks at real-time pace, capture time = now."""
    step = 1600
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V5) as c:
        t0, seq = time.time(), 0
        while seq * 0.1 < seconds:
            i = ((seq + offset) * step) % (len(pcm) - step)
            props = Properties(PacketTypes.PUBLISH)
            props.UserProperty = MediaHeader(ts=int((t0 + seq * 0.1) * 1000), seq=seq).user_properties()
            await c.publish(f"chorus/v1/agents/{agent}/audio", pcm[i:i + step].tobytes(), qos=0, properties=props)
            seq += 1
            await asyncio.sleep(max(0.0, t0 + seq * 0.1 - time.time()))


async def watch(port: int, stats: list, stop: asyncio.Event) -> None:
    async with aiomqtt.Client("127.0.0.1", port) as c:
        await c.subscribe("chorus/v1/stats")
        async for m in c.messages:
            stats.append(json.loads(bytes(m.payload)).get("speech") or {})
            if stop.is_set():
                return


async def scenario(port: int, agents: int, seconds: float) -> list[dict]:
    pcm = conversation(SENTENCES + MORE, gap_s=1.5)
    stats: list[dict] = []
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch(port, stats, stop))
    await asyncio.gather(*(talk(port, f"agent{k}", pcm, seconds, offset=k * 37) for k in range(agents)))
    deadline = time.time() + 300
    while time.time() < deadline and not (stats and stats[-1].get("backlog_s") == 0 and len(stats) > 2):
        await asyncio.sleep(1)
    drained_at = time.time()
    stop.set()
    await asyncio.sleep(2.5)
    watcher.cancel()
    return stats, drained_at


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    broker = Mosquitto(tmp)
    db = tmp / "live.sqlite"
    env = daemon_env(broker.port, CHORUS__SPEECH__THREADS=str(a.threads), CHORUS__SPEECH__WORKERS=str(a.workers),
                     CHORUS__DAEMON__CONSOLIDATE_EVERY_S="600", CHORUS__DAEMON__SILENCE_S="600",
                     CHORUS__DAEMON__GRACE_S="60")
    proc = start_daemon(db, env, tmp / "daemon.log")
    try:
        while "ready" not in (tmp / "daemon.log").read_text():
            time.sleep(0.5)
        t0 = time.time()
        stats, drained_at = asyncio.run(scenario(broker.port, a.agents, a.seconds))
        c = sqlean.connect(str(db))
        rows = c.execute("SELECT recorded_ms - end_ms FROM observations WHERE kind = 'transcript'").fetchall()
        lags = sorted(r[0] / 1000 for r in rows)
        last = stats[-1] if stats else {}
        print(json.dumps({
            "agents": a.agents, "seconds": a.seconds, "threads": a.threads, "workers": a.workers,
            "transcripts": len(rows), "utterances": last.get("utterances"),
            "backlog_dropped": last.get("backlog_dropped"), "max_backlog_s": max((s.get("backlog_s") or 0) for s in stats),
            "speech_s": last.get("speech_s"), "rtf": last.get("rtf"),
            "lag_p50_s": round(statistics.median(lags), 2) if lags else None,
            "lag_p95_s": round(lags[int(len(lags) * 0.95)], 2) if lags else None,
            "drained_after_s": round(drained_at - t0 - a.seconds, 1),
        }, indent=1))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
