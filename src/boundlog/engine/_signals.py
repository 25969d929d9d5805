"""``reopen_signal``: one handler per signal, shared by every log that asks for it.

The first log to ask for a signal installs boundlog's handler, which remembers the
handler it replaced and calls it after asking each of its logs to reopen.  Later logs
join that handler rather than stack one of their own on top of it: a handler per log,
each calling the one before, would make a chain one frame deeper per log ever created,
until the signal raised RecursionError.  Logs may close in any order;
the last one to leave puts back the handler that was there before the first, unless
someone installed another handler since (a server's own, which must stay), or the last
close ran outside the main thread (where Python cannot install handlers): then the
handler stays, calling only the one it replaced, and the next log for that signal
joins it again.

``drain_on_sigterm`` uses the same handler for SIGTERM where it still has its default
action (waitress, http.server, a plain script): the logs are drained, then the process
dies of SIGTERM as it would have.  A handler a server installed, before or after, is
never replaced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from .._options import signal_name


class _Handler:
    """boundlog's handler for one signal: what is installed with ``signal.signal``."""

    def __init__(self, number: int, previous: Any) -> None:
        self.number = number
        # What signal.getsignal returned: a function, SIG_DFL, SIG_IGN, or None for a
        # handler not installed from Python, which cannot be put back.
        self.previous = previous
        # Replaced whole, never changed in place: the handler reads it without a lock,
        # because it runs between two bytecodes of the main thread, which may hold
        # the lock at that moment.
        self.callbacks: tuple[Callable[[], object], ...] = ()

    def __call__(self, number: int, frame: FrameType | None) -> None:
        callbacks = self.callbacks
        for callback in callbacks:
            callback()
        if callable(self.previous):
            self.previous(number, frame)
        elif self.previous is signal.SIG_DFL and not callbacks:
            # Every log left, but the handler stayed (someone installed another since,
            # and put ours back: uvicorn does, then raises the signal it caught again).
            # Doing nothing would swallow the signal: act as the default action would.
            signal.signal(number, signal.SIG_DFL)
            signal.raise_signal(number)


class SignalShare:
    """One log's share of a signal's handler: installed, checked, and given back.

    ``reopen_signal`` asks for one, and so does the SIGTERM drain (``drain_on_sigterm``).
    """

    def __init__(self, number: int, callback: Callable[[], object]) -> None:
        self.number = number
        # Runs in a signal handler: it must not block or take a lock.
        self._callback = callback
        self._handler: _Handler | None = None

    def install(self) -> None:
        """Call the callback on each delivery of the signal; from the main thread only."""
        with _lock:
            installed = signal.getsignal(self.number)
            if isinstance(installed, _Handler):
                handler = installed
            else:
                handler = _Handler(self.number, installed)
                signal.signal(self.number, handler)
            handler.callbacks = (*handler.callbacks, self._callback)
            self._handler = handler

    def lost(self) -> str | None:
        """The signal's name once another handler replaced boundlog's; None before that."""
        if signal.getsignal(self.number) is self._handler:
            return None
        return signal_name(self.number)

    def cancel(self) -> None:
        """Stop calling the callback; the last to leave puts the old handler back."""
        with _lock:
            handler, self._handler = self._handler, None
            if handler is None:
                return
            handler.callbacks = tuple(c for c in handler.callbacks if c is not self._callback)
            previous = handler.previous
            if (
                not handler.callbacks
                and previous is not None
                and threading.current_thread() is threading.main_thread()
                and signal.getsignal(self.number) is handler
            ):
                signal.signal(self.number, previous)


def drain_on_sigterm(callback: Callable[[], object]) -> SignalShare | None:
    """Call ``callback`` on SIGTERM if SIGTERM still has its default action; else None.

    The callback must end the process itself (``terminate_after``).  Python installs
    handlers only from the main thread: a log built elsewhere does without (its records
    are drained anyway when a log of the main thread asked for it).
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    installed = signal.getsignal(signal.SIGTERM)
    if isinstance(installed, _Handler):
        installed = installed.previous
    if installed is not signal.SIG_DFL:
        # A server's own handler (uvicorn, gunicorn, ...) or SIG_IGN: theirs to keep.
        return None
    share = SignalShare(signal.SIGTERM, callback)
    share.install()
    return share


def terminate_after(drain: Callable[[], object]) -> None:
    """From the SIGTERM handler: ``drain`` on a thread, then die of SIGTERM.

    Draining here, between two bytecodes of the main thread, could wait for a lock
    that the main thread holds: a thread drains instead, while the main thread goes on.
    SIGTERM gets its default action back first, so that the thread's own SIGTERM
    ends the process with the status the default action gives (and a second SIGTERM
    from outside ends it at once, as it would have).  A non-daemon thread: an
    interpreter that reaches its exit meanwhile (uvicorn.run returning after it
    re-raised the SIGTERM it caught) waits for it.
    """
    global _terminating
    if _terminating:
        return
    _terminating = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def drain_then_die() -> None:
        try:
            drain()
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    # RuntimeError: the interpreter is exiting, and its exit handlers drain the logs
    # already; SIGTERM's default action is back for a second one.
    with contextlib.suppress(RuntimeError):
        threading.Thread(target=drain_then_die, name="boundlog-sigterm").start()


# Set once the SIGTERM drain has started: logs share one drain.
_terminating = False

# Guards the handlers' callbacks against two closes in two threads at once.
_lock = threading.Lock()


def _fresh_lock_in_child() -> None:
    # A thread of the parent may have held it at fork, and will never release it here.
    global _lock, _terminating
    _lock = threading.Lock()
    _terminating = False


os.register_at_fork(after_in_child=_fresh_lock_in_child)
