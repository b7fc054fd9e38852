"""Typed wire messages with explicit to/from bytes. Times are UTC epoch milliseconds."""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from streams.errors import SchemaViolation, StreamError
from streams.wire import I64, id_in, parse_json

AGENT_NAME = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TEXT = 8192
MAX_SPAN_MS = 86_400_000  # one caption or transcript line covers at most a day


class WireModel(BaseModel):
    """A message read from the wire: a validation error becomes a `SchemaViolation` with a code."""

    @classmethod
    def from_bytes(cls, data: bytes | str, *, where: str | None = None):
        """The message, or a StreamError with its code and (when the payload had one) its `id`;
        the payload is parsed once, on the error path too."""
        value = parse_json(data, where=where)
        try:
            return cls.model_validate(value)
        except ValidationError as e:
            raise SchemaViolation(first_error(e), where=where, id=id_in(value)) from None
        except (RecursionError, OverflowError, MemoryError) as e:
            raise SchemaViolation(f"unreadable message ({type(e).__name__})", where=where, id=id_in(value)) from None


class CaptionMessage(WireModel):
    """`agents/{agent}/caption`: one caption or transcript line of one agent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200, description="unique per agent; a resend is a no-op")
    ts: int = Field(ge=0, le=I64, description="start, UTC epoch ms")
    end_ts: int | None = Field(default=None, ge=0, le=I64, description="end, UTC epoch ms (default: ts)")
    kind: Literal["caption", "transcript"] = "caption"
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    speaker: str | None = Field(default=None, max_length=100)
    lang: str | None = Field(default=None, max_length=16)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("text is blank")
        return v

    @model_validator(mode="after")
    def _ordered(self) -> CaptionMessage:
        if self.end_ts is not None and self.end_ts < self.ts:
            raise ValueError("end_ts is before ts")
        if self.end_ts is not None and self.end_ts - self.ts > MAX_SPAN_MS:
            raise ValueError("end_ts is more than a day after ts")
        return self

    @property
    def end(self) -> int:
        return self.ts if self.end_ts is None else self.end_ts

    def to_bytes(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()


class AgentCaption(BaseModel):
    """A caption together with the agent that sent it: what readers of recordings yield."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str
    msg: CaptionMessage

    @field_validator("agent")
    @classmethod
    def _agent_name(cls, v: str) -> str:
        if not AGENT_NAME.match(v):
            raise ValueError(f"agent name {v!r} must be 1-64 of A-Z a-z 0-9 _ . - (no / + # .. or spaces)")
        return v


def first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "message"
    return f"{loc}: {err.get('msg', 'invalid')}"


def dumps(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class QueryMessage(WireModel):
    """`query`: a question to the shared memory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    question: str = Field(min_length=1, max_length=2000)
    options: list[str] = Field(default_factory=list, max_length=4)
    as_of: str | int | None = Field(default=None, description="time the answer is for (default: now)")
    asker: str | None = Field(default=None, max_length=64)
    agents: list[str] | None = Field(default=None, max_length=64)
    reply_to: str | None = Field(default=None, max_length=256)
    stream: bool = False


def error_payload(code: str, message: str, *, topic: str | None = None, agent: str | None = None,
                  id: str | None = None) -> bytes:
    """`errors`: what went wrong with which input."""
    return dumps({k: v for k, v in
                  {"code": code, "message": message, "topic": topic, "agent": agent, "id": id}.items() if v})


class TooLarge(StreamError):
    code = "too_large"


AUDIO_RATE = 16000
MAX_HEADER = 1024
_DECIMAL = re.compile(r"^[0-9]{1,19}$")


class MediaHeader(WireModel):
    """The metadata of one `audio` chunk or `frame`: MQTT v5 user properties, or (3.1.1) a JSON
    header line before the raw bytes. `ts` is the capture time of the first sample / the frame."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ts: int = Field(ge=0, le=I64, description="capture time, UTC epoch ms")
    seq: int = Field(ge=0, le=I64, description="per-agent sequence number")
    id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    rate: int = Field(default=AUDIO_RATE, ge=0, le=I64, description="audio sample rate; only 16000 is accepted")

    def user_properties(self) -> list[tuple[str, str]]:
        """The MQTT v5 user properties that carry this header."""
        props = [("ts", str(self.ts)), ("seq", str(self.seq))]
        return props + ([("id", self.id)] if self.id else []) + ([("rate", str(self.rate))]
                                                               if self.rate != AUDIO_RATE else [])

    def with_bytes(self, data: bytes) -> bytes:
        """The MQTT 3.1.1 payload: the JSON header, one newline, the raw bytes."""
        return self.model_dump_json(exclude_none=True, exclude_defaults=True,
                                    include={"ts", "seq", "id", "rate"}).encode() + b"\n" + data


def split_media(payload: bytes, user: dict[str, str] | None = None, *, where: str | None = None,
                max_bytes: int | None = None) -> tuple[MediaHeader, bytes]:
    """(header, raw bytes) of an audio chunk or frame, from v5 user properties when they carry
    `ts`, else from the JSON header line that starts the payload."""
    if max_bytes is not None and len(payload) > max_bytes:
        raise TooLarge(f"{len(payload)} bytes (limit {max_bytes})", where=where)
    if user and "ts" in user:
        fields: dict = {}
        for key in ("ts", "seq", "rate"):
            if key in user:
                if not _DECIMAL.match(user[key]):
                    raise SchemaViolation(f"user property {key}: {user[key][:40]!r} is not a decimal number",
                                          where=where)
                fields[key] = int(user[key])
        if "id" in user:
            fields["id"] = user["id"]
        try:
            return MediaHeader.model_validate(fields), payload
        except ValidationError as e:
            raise SchemaViolation(first_error(e), where=where) from None
    cut = payload.find(b"\n", 0, MAX_HEADER + 1)
    if not payload.startswith(b"{") or cut < 0:
        raise SchemaViolation("no header: MQTT v5 user properties ts/seq, or a JSON header line then the bytes",
                              where=where)
    return MediaHeader.from_bytes(payload[:cut], where=where), payload[cut + 1:]
