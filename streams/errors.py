"""Typed errors of the wire that a caller can act on; each carries a stable code."""


class StreamError(ValueError):
    """A message or recording that cannot be read. `code` goes out on the errors topic."""

    code = "bad_input"

    def __init__(self, message: str, *, where: str | None = None, id: str | None = None):
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.id = id  # the message's own id, when it had a readable one


class SchemaViolation(StreamError):
    code = "bad_schema"


class RecordingError(StreamError):
    code = "bad_recording"


class EncodingError(StreamError):
    code = "bad_encoding"
