"""The embedded default broker: amqtt in process (MQTT 3.1.1) when none is configured or listening."""

from __future__ import annotations

import asyncio
import logging
import socket

logger = logging.getLogger(__name__)


def listening(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    def __init__(self, host: str = "127.0.0.1", port: int = 1883):
        self.host, self.port = host, port
        self._broker = None

    async def start(self) -> None:
        from amqtt.broker import Broker  # only when the embedded broker is wanted

        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self.port}"}},
            "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
        }
        self._broker = Broker(config)
        await self._broker.start()
        logger.warning("no MQTT broker configured or listening: started an embedded broker (amqtt, MQTT 3.1.1) "
                       "on %s:%d; point mqtt.host at mosquitto in production", self.host, self.port)

    async def stop(self) -> None:
        if self._broker is not None:
            await asyncio.wait_for(self._broker.shutdown(), timeout=5)
