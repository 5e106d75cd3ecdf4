"""Short steps that Ctrl-C and SIGTERM must not cut in half: the final renames of a run or of an unpack."""

from __future__ import annotations

import signal
from contextlib import contextmanager

__all__ = ["signals_held"]


@contextmanager
def signals_held():
    """Ctrl-C and SIGTERM wait until the block is done. One that came meanwhile is dropped: the step it would have
    stopped has finished, and the command then ends as finished, not as interrupted."""
    if not hasattr(signal, "pthread_sigmask"):  # not POSIX: nothing to hold them with
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        while signal.sigtimedwait(held, 0) is not None:
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
