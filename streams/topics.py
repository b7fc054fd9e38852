"""The topic tree under the root (default `chorus/v1`), built and parsed in one place."""

from __future__ import annotations

from dataclasses import dataclass

from streams.errors import StreamError
from streams.messages import AGENT_NAME

AGENT_KINDS = ("caption", "audio", "frame", "status")


class TopicError(StreamError):
    code = "bad_topic"


@dataclass(frozen=True)
class Topics:
    root: str = "chorus/v1"

    def agent(self, agent: str, kind: str) -> str:
        return f"{self.root}/agents/{agent}/{kind}"

    @property
    def query(self) -> str:
        return f"{self.root}/query"

    def answer(self, qid: str) -> str:
        return f"{self.root}/answer/{qid}"

    @property
    def events(self) -> str:
        return f"{self.root}/events"

    @property
    def status(self) -> str:
        return f"{self.root}/status"

    @property
    def status_info(self) -> str:
        return f"{self.root}/status/info"

    @property
    def stats(self) -> str:
        return f"{self.root}/stats"

    @property
    def errors(self) -> str:
        return f"{self.root}/errors"

    def subscriptions(self) -> list[tuple[str, int]]:
        """(filter, QoS) the daemon listens to. Questions at QoS 0: a QoS 1 caption is acknowledged
        only once stored, and while a full disk holds a window of them unacknowledged the broker sends
        no further QoS 1 message; a question must not wait behind them. (A question sent while the
        daemon is away is not kept for it: the asker gets no answer and asks again.)"""
        return [
            (f"{self.root}/agents/+/caption", 1), (f"{self.root}/agents/+/audio", 0),
            (f"{self.root}/agents/+/frame", 0), (f"{self.root}/agents/+/status", 1), (self.query, 0),
        ]

    def parse(self, topic: str) -> tuple[str, str | None]:
        """('caption', agent) for an agent topic, ('query', None) for the query topic."""
        if topic == self.query:
            return "query", None
        prefix = f"{self.root}/agents/"
        if topic.startswith(prefix):
            parts = topic[len(prefix):].split("/")
            if len(parts) == 2 and parts[1] in AGENT_KINDS:
                if not AGENT_NAME.match(parts[0]):
                    raise TopicError(f"agent id {parts[0]!r} is not 1-64 of A-Z a-z 0-9 _ . -", where=topic)
                return parts[1], parts[0]
        raise TopicError("not a chorus topic", where=topic)
