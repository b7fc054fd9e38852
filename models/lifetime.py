"""Native models freed while the interpreter is whole.

llama-cpp-python frees a model, context and sampler in finalisers. Left to interpreter shutdown,
a finaliser can run after the bindings it calls are gone and prints `TypeError: 'NoneType' object
is not callable` from `_internals.py` (free_model, free_sampler). Each object that holds a
`Llama` registers here when it loads; one atexit hook closes them all first, in every process
(the daemon, each CLI command, the tests).
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref

logger = logging.getLogger(__name__)
_live: weakref.WeakSet = weakref.WeakSet()
_lock = threading.Lock()
_hooked = False


def close_at_exit(obj) -> None:
    """`obj.close()` runs at interpreter exit unless `obj` is gone by then."""
    global _hooked
    with _lock:
        _live.add(obj)
        if not _hooked:  # after logging's own hook, so it runs before logging shuts down
            atexit.register(close_all)
            _hooked = True


def close_all() -> None:
    with _lock:
        objs = list(_live)
    for obj in objs:
        try:
            obj.close()
        except Exception:  # a model that fails to free must not hide the exit status
            logger.exception("could not free %r at exit", obj)


def free_llama(llama) -> None:
    """Frees a `llama_cpp.Llama` now: its model, context and batch (`close()`), and the sampler of
    its last generation, which `close()` leaves to a finaliser."""
    sampler = getattr(llama, "_sampler", None)
    if sampler is not None:
        sampler.close()
        llama._sampler = None
    llama.close()
