"""Home Assistant MQTT discovery: one Chorus device with sensors and a `text` entity for asking.

Retained configs under `{prefix}/{component}/{node}/{object}/config` follow HA's conventions:
a unique_id per entity, one device block, availability on Chorus's `status` topic (its last
will). The counts come from a retained state message (`{root}/ha/state`). The text entity turns
what is typed into a `query` (its command template makes the JSON, id `ha`), so its answer lands
on `{root}/answer/ha`, the state of the answer sensors. Turned off, the configs published before
(remembered in a small file beside the database) are removed by empty retained messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from streams.messages import dumps

logger = logging.getLogger(__name__)


class HaSettings(BaseModel):
    """Home Assistant MQTT discovery."""

    model_config = ConfigDict(extra="forbid")

    discovery: bool = Field(False, description="Publish retained discovery configs under `prefix`; turned off, "
                                               "those published before are removed.")
    prefix: str = Field("homeassistant", pattern=r"^[A-Za-z0-9_/-]{1,64}$",
                        description="HA's discovery prefix.")
    name: str = Field("Chorus", min_length=1, max_length=64, description="The device's name in HA.")


class Discovery:
    def __init__(self, settings: HaSettings, *, root: str, client_id: str, version: str,
                 publish: Callable[..., bool], connects: Callable[[], int], connected: asyncio.Event,
                 summary: Callable[[int], dict], until: Callable[[], int], online: Callable[[], list[str]],
                 marker: Path, period_s: float):
        """`summary(until_ms)` runs in a worker thread (it reads the memory); the other callables on the loop."""
        self.settings, self.root, self.version = settings, root, version
        self.node = re.sub(r"[^A-Za-z0-9_-]", "_", client_id) or "chorus"
        self.publish, self.connects, self.connected = publish, connects, connected
        self.summary, self.until, self.online = summary, until, online
        self.marker, self.period_s = marker, period_s

    @property
    def state_topic(self) -> str:
        return f"{self.root}/ha/state"

    @property
    def answer_topic(self) -> str:
        return f"{self.root}/answer/ha"

    def configs(self) -> dict[str, dict]:
        """config topic -> config, for every entity."""
        uid = f"chorus_{self.node}"
        device = {"identifiers": [uid], "name": self.settings.name, "manufacturer": "Chorus",
                  "model": "shared memory of camera-wearing agents", "sw_version": self.version}
        common = {"device": device, "origin": {"name": "Chorus", "sw_version": self.version},
                  "availability": [{"topic": f"{self.root}/status", "payload_available": "online",
                                    "payload_not_available": "offline"}]}
        state = {"state_topic": self.state_topic}
        answer = {"state_topic": self.answer_topic}
        entities = {
            # the daemon's own online state: not subject to availability, or it could never say offline
            ("binary_sensor", "online"): {"name": "Online", "state_topic": f"{self.root}/status",
                                          "payload_on": "online", "payload_off": "offline",
                                          "device_class": "connectivity", "entity_category": "diagnostic"},
            ("sensor", "captions"): state | {"name": "Captions stored", "value_template": "{{ value_json.captions }}",
                                             "state_class": "total_increasing", "unit_of_measurement": "captions",
                                             "icon": "mdi:text-box-multiple"},
            ("sensor", "windows_pending"): state | {"name": "Windows pending",
                                                    "value_template": "{{ value_json.windows_pending }}",
                                                    "state_class": "measurement", "unit_of_measurement": "windows",
                                                    "icon": "mdi:timer-sand"},
            ("sensor", "agents_online"): state | {"name": "Agents online",
                                                  "value_template": "{{ value_json.agents_online }}",
                                                  "json_attributes_topic": self.state_topic,
                                                  "json_attributes_template": "{{ {'agents': value_json.agents} | tojson }}",
                                                  "state_class": "measurement", "unit_of_measurement": "agents",
                                                  "icon": "mdi:account-group"},
            ("sensor", "last_answer"): answer | {
                "name": "Last answer", "icon": "mdi:comment-question",
                "value_template": "{{ (value_json.answer if value_json.status == 'ok' else 'error: ' ~ value_json.error)[:250] }}",
                "json_attributes_topic": self.answer_topic,
                "json_attributes_template": "{{ {'question': value_json.question, 'choice': value_json.choice, "
                                            "'as_of': value_json.as_of, 'evidence': (value_json.evidence or [])[:5] | "
                                            "map(attribute='text') | map('truncate', 200) | list} | tojson }}"},
            ("sensor", "last_answer_time"): answer | {"name": "Last answer time", "device_class": "timestamp",
                                                      "value_template": "{{ value_json.as_of | default('') }}",
                                                      "icon": "mdi:clock-outline"},
            ("text", "ask"): {"name": "Ask", "command_topic": f"{self.root}/query", "mode": "text", "min": 1,
                              "max": 255, "icon": "mdi:chat-question",
                              "command_template": '{"id": "ha", "question": {{ value | tojson }}}'},
        }
        return {f"{self.settings.prefix}/{comp}/{self.node}/{obj}/config":
                common | cfg | {"unique_id": f"{uid}_{obj}"}
                for (comp, obj), cfg in entities.items()}

    def state(self, summary: dict) -> dict:
        """The retained state the sensors read: from the memory's summary (read off the loop) and the
        agents' statuses (read on it)."""
        online = self.online()
        return {"captions": summary["observations"], "windows_pending": summary["windows_pending"],
                "events": summary["events"], "agents_online": len(online), "agents": online}

    def announce(self) -> None:
        """Publish the configs (on) or clear those published before (off), retained."""
        before = self._published()
        if self.settings.discovery:
            configs = self.configs()
            for topic in before - set(configs):  # an entity of an older version: gone
                self.publish(topic, b"", qos=1, retain=True)
            for topic, cfg in configs.items():
                self.publish(topic, dumps(cfg), qos=1, retain=True)
            self.marker.write_text(json.dumps(sorted(configs)))
            logger.info("Home Assistant discovery: %d entities under %s/", len(configs), self.settings.prefix)
        elif before:
            for topic in before:
                self.publish(topic, b"", qos=1, retain=True)
            self.publish(self.state_topic, b"", qos=1, retain=True)
            self.marker.unlink(missing_ok=True)
            logger.info("Home Assistant discovery off: %d entities removed", len(before))

    def _published(self) -> set[str]:
        try:
            return set(json.loads(self.marker.read_text()))
        except (OSError, ValueError):
            return set()

    async def run(self) -> None:
        """Announce on every (re)connect (a broker without persistence forgets retained configs);
        while on, publish the state every period."""
        seen = None
        while True:
            await self.connected.wait()
            if self.connects() != seen:
                seen = self.connects()
                self.announce()
            if not self.settings.discovery:
                return
            self.publish(self.state_topic, dumps(self.state(await asyncio.to_thread(self.summary, self.until()))), qos=1,
                         retain=True)
            await asyncio.sleep(self.period_s)
