"""Stopping a handler that did not stop by itself when told to."""

from __future__ import annotations

import ctypes


class AttemptStopped(BaseException):
    """Raised inside a handler's thread that did not stop by itself after being told to.

    A BaseException, so a handler's `except Exception` does not swallow it.
    """


def raise_in_thread(thread_id: int) -> bool:
    """Asks the interpreter to raise AttemptStopped in another thread at its next bytecode.

    Python threads cannot be killed; this is the documented CPython way to interrupt one.
    A handler blocked inside a C call is interrupted only when that call returns.
    """
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                                      ctypes.py_object(AttemptStopped))
    return int(done) == 1
