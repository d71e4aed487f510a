"""Cheap bounds applied before expensive work: the body's size and the time to send it (before it
is parsed), and the characters of a request's text (before any tokenising).

:class:`BodyLimitMiddleware` refuses a body over ``--max-body-bytes`` with 413, declared or
streamed; :class:`BodyTimeoutMiddleware` answers 408 when the body has not all arrived within
``--body-timeout-s`` of the app's first read (a client sending a byte at a time holds nothing long).
Both raise their error from ``receive``, which FastAPI, the replay middleware and the app's error
handler turn into the JSON error.

A request's text is bounded in characters, counted on the rendered strings a model reads (the state
as text, each question's instructions, option keys and descriptions), before a tokenizer sees it:
tokenising a 10 MB state only to refuse it for its tokens costs seconds of CPU. The bound is a
setting (``--max-text-chars``) rather than derived from the token budgets, because how many
characters a token covers depends on the tokenizer (a WordPiece ``[UNK]`` covers up to 100).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiUsageError, RequestTimeout, RequestTooLarge
from .handlers import error_response
from .render import to_text

if TYPE_CHECKING:
    from .backends.base import Work


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with 413 ``request_too_large``, declared or streamed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = RequestTooLarge(f"the request body is larger than the limit of {self.max_bytes} bytes")
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(too_large)(scope, receive, send)
            return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise too_large
            return message

        await self.app(scope, counting_receive, send)


class BodyTimeoutMiddleware:
    """Answer 408 ``request_timeout`` when the body is not all received within ``timeout_s`` of the
    app's first read of it (``--body-timeout-s``).

    Args:
        app (ASGIApp): the app inside.
        timeout_s (float): seconds for the whole body.
    """

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline: float | None = None
        complete = False

        async def timed_receive() -> Message:
            nonlocal deadline, complete
            if complete:  # after the body: disconnect polling, never timed
                return await receive()
            loop = asyncio.get_running_loop()
            deadline = deadline if deadline is not None else loop.time() + self.timeout_s
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise RequestTimeout(f"the request body did not arrive within {self.timeout_s:g} s") from None
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed_receive, send)


def text_chars(work: Work) -> int:
    """Characters of every text of ``work`` a model reads: the state, instructions, option keys and
    descriptions (pure; one pass over the strings)."""
    total = len(to_text(work.state))
    for question in work.questions:
        total += len(to_text(question.instructions))
        total += sum(len(option.key) + len(to_text(option.description)) for option in question.options)
    return total


def check_text_chars(work: Work, max_chars: int) -> None:
    """Refuse ``work`` when its text is over ``max_chars`` characters, before any tokenising.

    Raises:
        ApiUsageError: naming the count, the limit and the flag.
    """
    chars = text_chars(work)
    if chars > max_chars:
        raise ApiUsageError(
            f"the state and questions are {chars} characters; this server reads at most {max_chars} characters "
            "(shorten the state or raise --max-text-chars)"
        )
