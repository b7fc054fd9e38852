"""Typed errors of the models package."""


class ModelError(Exception):
    """A model that cannot be loaded or used."""


class ModelNotInstalled(ModelError):
    """A bundled model whose package is not installed; the message says how to install it."""


class ModelTimeout(ModelError):
    """A generation stopped by its time limit before it finished."""
