"""Daemon settings: one small model per section, loaded from TOML, secrets, env and kwargs.

Sources, highest priority first: keyword overrides, ``CHORUS__SECTION__FIELD`` environment
variables, systemd credentials (``$CREDENTIALS_DIRECTORY/section__field``), then the TOML file.
``check_config`` turns every failure into one readable line per problem for ``chorus config check``.
"""

from __future__ import annotations

import logging
import os
import tomllib
from contextvars import ContextVar
from datetime import date
from pathlib import Path
from typing import Any, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    NestedSecretsSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from assistant.config import AnswerSettings, ConsolidationSettings, SearchSettings
from daemon.ha import HaSettings
from daemon.web.config import WebSettings
from memory.frames import FrameSettings
from models.config import LlmSettings, SpeechSettings, VisionSettings

logger = logging.getLogger(__name__)

ENV_PREFIX = "CHORUS__"
DEFAULT_CONFIG = Path("/etc/chorus/chorus.toml")
_toml_path: ContextVar[Path | None] = ContextVar("chorus_toml_path", default=None)


class ConfigError(Exception):
    """The configuration cannot be loaded; ``problems`` holds one readable line per problem."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class HouseSettings(BaseModel):
    """Where and when the recorded days happen."""

    model_config = ConfigDict(extra="forbid")

    day1: date = Field(date(2025, 1, 1), description="Calendar date of DAY1 in the recordings.")
    timezone: str = Field("UTC", description="IANA time zone name of the house, e.g. 'Europe/Berlin'.")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
        return value


class StoreSettings(BaseModel):
    """Where the memory lives."""

    model_config = ConfigDict(extra="forbid")

    path: Path = Field(Path("var/chorus.sqlite"), description="The SQLite database file.")
    reserve_mb: float = Field(64.0, ge=0, description="Free disk space the store never uses: at the reserve "
                              "ingestion pauses with `disk_full` and resumes when space returns.")


class RetrievalSettings(SearchSettings):
    """How much memory is handed to the answerer, and for whom, and how it is found."""

    model_config = ConfigDict(extra="forbid")

    budget: int = Field(15, ge=1, le=200, description="Fine units handed to the answerer per question.")
    asker: str = Field("A1_JAKE", description="Default agent asking; 'I' in questions means this agent.")


class MqttSettings(BaseModel):
    """The broker link; no host means a broker on this machine (one already listening on
    localhost, else the embedded one: `daemon.embedded_broker`)."""

    model_config = ConfigDict(extra="forbid")

    host: str | None = Field(None, description="Broker host name; None: a broker on localhost.")
    port: int = Field(1883, ge=1, le=65535, description="Broker TCP port.")
    username: str | None = Field(None, description="Broker user name, if the broker wants one.")
    password: SecretStr | None = Field(None, description="Broker password; best given as a credential.")
    client_id: str = Field("chorus", description="MQTT client id.")
    root: str = Field("chorus/v1", description="Topic prefix under which all chorus topics live.")
    tls: bool = Field(False, description="TLS to the broker, verified against the system's CAs or tls_ca.")
    tls_ca: Path | None = Field(None, description="CA certificate (PEM) that signed the broker's; implies tls.")
    tls_cert: Path | None = Field(None, description="Client certificate (PEM), for brokers that want one.")
    tls_key: Path | None = Field(None, description="Private key of tls_cert (PEM).")
    receive_max: int = Field(1000, ge=1, le=65535,
                             description="QoS 1 messages taken but not yet stored (MQTT 5); the broker keeps the rest.")


class DaemonSettings(BaseModel):
    """The running daemon: timing of windows and jobs, queue bounds."""

    model_config = ConfigDict(extra="forbid")

    consolidate_every_s: float = Field(600.0, gt=0, description="Consolidation job period (UTC-aligned).")
    grace_s: float = Field(60.0, ge=0, description="Late data allowed before a window closes on the watermark.")
    silence_s: float = Field(120.0, gt=0, description="Streams silent this long: windows close on the wall clock.")
    stats_every_s: float = Field(60.0, gt=0, description="Period of the stats message.")
    index_every_s: float = Field(10.0, gt=0, description="Period of the background embedding of new units.")
    caption_queue: int = Field(20000, ge=10, description="Captions waiting to be stored before drops.")
    query_queue: int = Field(100, ge=1, description="Questions waiting before drops.")
    embedded_broker: bool = Field(True, description="With no mqtt.host and no broker on localhost:1883, start one.")
    max_caption_bytes: int = Field(16384, ge=256, description="Larger caption payloads are rejected.")
    allow_agents: list[str] = Field(default_factory=list,
                                    description="Agent ids accepted on agents/{agent}/...; empty: every valid id.")
    rate_per_agent: float = Field(100.0, gt=0, description="Messages per second one agent may send (all kinds).")
    rate_burst: int = Field(5000, ge=1, description="Messages one agent may send at once before the rate applies.")
    rate_total: float = Field(2000.0, gt=0, description="Messages per second all agents together may send.")
    rate_total_burst: int = Field(20000, ge=1, description="Messages all agents may send at once before rate_total applies.")
    caption_queue_mb: float = Field(64.0, gt=0, description="Caption payloads waiting to be stored, in MB, before drops.")
    max_late_h: float = Field(48.0, gt=0, description="A caption this far behind the newest data gets too_late "
                                                      "(old recordings go through `chorus import`).")
    segment_max_observations: int = Field(300, ge=10, description="Observations one agent's 30-second segment may "
                                                                  "hold; more get segment_full.")
    segment_max_kb: int = Field(64, ge=8, description="Text one agent's 30-second segment may hold, in kB.")
    agent_idle_s: float = Field(3600.0, gt=0, description="State kept per agent (rate, audio, last frame) is "
                                                          "forgotten after this long without a message.")
    durable_ack: bool = Field(True, description="A caption is acknowledged only once its commit is on disk "
                                                "(synchronous=FULL): no acknowledged caption is lost to a power cut.")
    max_agents: int = Field(10000, ge=10, description="Agents with live state at once; the longest idle go first.")


class Settings(BaseSettings):
    """All daemon settings; build with ``load_settings`` so the TOML file and checks apply."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        # Chosen at load time from $CREDENTIALS_DIRECTORY in settings_customise_sources.
        secrets_dir=None,
        secrets_prefix="",
        secrets_nested_delimiter="__",
    )

    house: HouseSettings = Field(default_factory=HouseSettings, description="House and calendar.")
    store: StoreSettings = Field(default_factory=StoreSettings, description="Memory store.")
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings, description="Retrieval.")
    mqtt: MqttSettings = Field(default_factory=MqttSettings, description="MQTT broker link.")
    daemon: DaemonSettings = Field(default_factory=DaemonSettings, description="The running daemon.")
    llm: LlmSettings = Field(default_factory=LlmSettings, description="Local LLM.")
    consolidation: ConsolidationSettings = Field(
        default_factory=ConsolidationSettings, description="Shared-memory events."
    )
    answer: AnswerSettings = Field(default_factory=AnswerSettings, description="Question answering.")
    speech: SpeechSettings = Field(default_factory=SpeechSettings, description="Speech to transcripts.")
    frames: FrameSettings = Field(default_factory=FrameSettings, description="Camera frames on disk.")
    vision: VisionSettings = Field(default_factory=VisionSettings, description="Optional vision models.")
    web: WebSettings = Field(default_factory=WebSettings, description="The web page and HTTP API.")
    ha: HaSettings = Field(default_factory=HaSettings, description="Home Assistant MQTT discovery.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The plain secrets source cannot nest; the nested one maps mqtt__password to mqtt.password.
        secrets = NestedSecretsSettingsSource(
            file_secret_settings,
            secrets_dir=os.environ.get("CREDENTIALS_DIRECTORY") or None,
            secrets_dir_missing="error",
        )
        toml = TomlConfigSettingsSource(settings_cls, toml_file=_toml_path.get())
        return init_settings, env_settings, secrets, toml


def _fields() -> dict[str, Any]:
    """Every ``section.field`` name with its FieldInfo."""
    return {
        f"{section}.{name}": field
        for section, info in Settings.model_fields.items()
        for name, field in info.annotation.model_fields.items()  # type: ignore[union-attr]
    }


def known_settings() -> list[str]:
    """Every valid ``section.field`` name."""
    return list(_fields())


def _secret_settings() -> set[str]:
    return {
        n for n, f in _fields().items() if f.annotation is SecretStr or SecretStr in get_args(f.annotation)
    }


def _check_env() -> None:
    known = set(known_settings())
    problems = []
    for var in sorted(os.environ):
        name = ".".join(var[len(ENV_PREFIX) :].lower().split("__"))
        if var.upper().startswith(ENV_PREFIX) and name not in known:
            problems.append(f"{var}: unknown setting {name}")
    if problems:
        valid = ", ".join(ENV_PREFIX + name.replace(".", "__").upper() for name in sorted(known))
        raise ConfigError([f"{line}; valid: {valid}" for line in problems])


def _readable(exc: ValidationError) -> list[str]:
    secret = _secret_settings()
    lines = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "settings"
        if err["type"] == "extra_forbidden":
            lines.append(f"{loc}: unknown setting")
        elif loc in secret:
            lines.append(f"{loc}: {err['msg']}")
        else:
            lines.append(f"{loc}: {err['msg']} (got {err['input']!r})")
    return lines


def _resolve(path: str | Path | None) -> Path | None:
    if path is None:
        path = os.environ.get("CHORUS_CONFIG") or None
        if path is None:
            return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    return path


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Load settings; ``path`` None means $CHORUS_CONFIG, else /etc/chorus/chorus.toml if present.

    ``overrides`` are init kwargs (e.g. ``mqtt={"port": 1884}``), merged over every other source.
    Raises ConfigError for every problem, with readable lines in ``.problems``.
    """
    toml = _resolve(path)
    _check_env()
    logger.debug("loading settings from %s", toml or "defaults")
    token = _toml_path.set(toml)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_readable(exc)) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{toml}: TOML syntax error: {exc}") from exc
    except SettingsError as exc:
        raise ConfigError(str(exc)) from exc
    finally:
        _toml_path.reset(token)


def check_config(path: str | Path | None = None) -> tuple[Settings | None, list[str]]:
    """Load and report: ``(settings, [])`` when fine, ``(None, [one line per problem])`` when not."""
    try:
        return load_settings(path), []
    except ConfigError as exc:
        return None, exc.problems


def redacted(settings: Settings) -> dict[str, Any]:
    """JSON-ready dump of ``settings`` in which every secret that is set reads "***"."""
    dump = settings.model_dump(mode="json")
    for name in _secret_settings():
        section, field = name.split(".")
        if dump[section][field] is not None:
            dump[section][field] = "***"
    return dump
