"""Shutdown: every request held is answered, and the process exits 0, whatever the timing.

On SIGTERM the server drains (new requests get 503, ``/health`` says ``stopping``) and gives the
requests it holds ``--shutdown-timeout-s`` to finish. :class:`Drain` marks that deadline;
:class:`HeldRequestsMiddleware` then answers each request still without a response with 503
``overloaded_error`` and ``Retry-After`` in JSON (never uvicorn's plain-text 500 of a cancelled
task), so uvicorn's own graceful timeout, set a little later, finds nothing left to cancel. The
engines are then closed with what is left of the time, and a model thread still inside a forward
pass (or a model still loading) is not waited for: :func:`exit_now` ends the process with its exit
code instead of letting the interpreter tear down under a running torch thread (which aborts,
exit 134). A SIGTERM during start-up, before uvicorn handles signals, exits 0 too
(:func:`exit_on_sigterm`, and :mod:`decisiond.entry` before the imports).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
import weakref

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import Unavailable
from .handlers import error_response

log = logging.getLogger("decisiond.shutdown")

#: Seconds uvicorn's own graceful timeout waits past ``--shutdown-timeout-s``, for the 503s to go out.
UVICORN_MARGIN_S = 5.0
#: Threads whose work a shutdown does not wait for past its deadline.
WORKER_PREFIXES = ("decisiond-model-", "decisiond-loader")


class Drain:
    """The shutdown deadline: set ``timeout_s`` after :meth:`begin`.

    Args:
        timeout_s (float): ``--shutdown-timeout-s``.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.deadline: float | None = None
        # One event per event loop: an asyncio.Event is bound to the loop that first waits on it, and
        # an app can be driven from several loops (Starlette's TestClient starts one per request).
        self._events: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = weakref.WeakKeyDictionary()

    def passed(self) -> asyncio.Event:
        """The running loop's event, set once the deadline has passed."""
        loop = asyncio.get_running_loop()
        event = self._events.get(loop)
        if event is None:
            event = self._events[loop] = asyncio.Event()
            if self.deadline is not None:
                loop.call_later(max(0.0, self.deadline - time.monotonic()), event.set)
        return event

    def begin(self) -> None:
        """Start the countdown (from a signal handler on the event loop's thread, or from the loop)."""
        if self.deadline is not None:
            return
        self.deadline = time.monotonic() + self.timeout_s
        for loop, event in list(self._events.items()):
            if not loop.is_closed():
                loop.call_soon_threadsafe(loop.call_later, self.timeout_s, event.set)

    def remaining_s(self) -> float:
        """Seconds left before the deadline (``timeout_s`` when no shutdown has begun)."""
        return self.timeout_s if self.deadline is None else max(0.0, self.deadline - time.monotonic())


class HeldRequestsMiddleware:
    """Answer 503 with ``Retry-After`` for every request still unanswered when the drain deadline
    passes (see the module docstring).

    Args:
        app (ASGIApp): the app inside.
        drain (Drain): the deadline.
    """

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        work = asyncio.ensure_future(self.app(scope, receive, tracking_send))
        deadline = asyncio.ensure_future(self.drain.passed().wait())
        try:
            await asyncio.wait({work, deadline}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            deadline.cancel()
        if work.done():
            work.result()  # re-raise the app's own fault for the outer handler
            return
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await work
        if not started:
            refusal = Unavailable("the server shut down before this request was answered; retry", retry_after_s=5)
            await error_response(refusal)(scope, receive, send)


def exit_on_sigterm() -> None:
    """Until uvicorn takes over the signals: a SIGTERM exits 0 at once (nothing is served yet)."""

    from .entry import _leave

    signal.signal(signal.SIGTERM, _leave)


def workers_alive() -> list[str]:
    """Names of model and loader threads still running."""
    return [t.name for t in threading.enumerate() if t.is_alive() and t.name.startswith(WORKER_PREFIXES)]


def exit_now(code: int) -> None:
    """End the process with ``code`` when a model or loader thread is still running (a torch thread
    torn down by the interpreter aborts the process); otherwise return and let it exit normally."""
    busy = workers_alive()
    if not busy:
        return
    log.warning("exiting without waiting for %s", ", ".join(busy))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
