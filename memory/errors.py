"""Typed errors of the memory package that a caller can act on."""


class MemoryError_(Exception):
    """Base class of the memory package's errors."""


class TimeFormatError(MemoryError_, ValueError):
    """A time string that none of the accepted formats matches."""


class RecordError(MemoryError_, ValueError):
    """An observation that cannot be stored (bad kind, empty text, end before start...)."""


class SchemaError(MemoryError_):
    """A database file whose schema this version cannot use (newer, or unknown migrations)."""


class StorageFull(MemoryError_):
    """The disk (or the free-space reserve of the store) is full: nothing was written; retry later."""
