"""Domain exceptions, each carrying its HTTP status and the wire's ``error_type``.

Raised anywhere (wire checks, rendering, admission, the engine) and mapped to one JSON body,
``{"detail": {"error_type": ..., "message": ...}}``, by a single handler in ``app``
(spec/wire.md §5). A message names what is wrong (a question id, an option, a limit) and never
quotes the state or a key.
"""

from __future__ import annotations


class DecisionError(Exception):
    """Base of every refusal the server answers with a JSON error body.

    Args:
        message (str): plain words naming what is wrong.
        headers (dict[str, str], optional): extra response headers. Defaults to none.
    """

    status: int = 500
    error_type: str = "internal_error"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}

    def body(self) -> dict[str, dict[str, str]]:
        """The wire body of this error."""
        return {"detail": {"error_type": self.error_type, "message": self.message}}


class ApiUsageError(DecisionError):
    """400: a semantic limit (empty id, too many options, unknown model, unreadable media, …)."""

    status = 400
    error_type = "api_usage_error"


class LimitError(DecisionError):
    """422 in FastAPI's validation shape: a count over a wire limit (options per choice, levels per
    score). jevcompat (the judge of conformance, spec/wire.md §7) requires out-of-range counts to be
    refused as validation failures, so these are 422 rather than the 400 of the spec's table.

    Args:
        loc (list[str]): where in the body, e.g. ``["body", "questions", "team", "criteria"]``.
        message (str): plain words with the limit.
    """

    status = 422
    error_type = "validation_error"

    def __init__(self, loc: list[str], message: str) -> None:
        super().__init__(message)
        self.loc = loc

    def body(self) -> dict[str, list[dict[str, object]]]:  # type: ignore[override]
        return {"detail": [{"loc": self.loc, "msg": self.message, "type": "too_long"}]}


class MaxTokensExceeded(DecisionError):
    """400: the state and questions are over the model's token budget."""

    status = 400
    error_type = "max_tokens_exceeded"


class RequestTooLarge(DecisionError):
    """413: the body is larger than the configured limit."""

    status = 413
    error_type = "request_too_large"


class UnsupportedEncoding(DecisionError):
    """415: a ``Content-Encoding`` other than zstd, gzip, deflate or identity (spec/wire.md §5)."""

    status = 415
    error_type = "api_usage_error"


class RequestTimeout(DecisionError):
    """408: the client took longer than allowed to send its request (RFC 9110 §15.5.9)."""

    status = 408
    error_type = "request_timeout"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"Connection": "close"})  # the rest of the body is not read


class AuthenticationError(DecisionError):
    """401 (wrong key) or 403 (missing key) when keys are configured."""

    error_type = "authentication_error"

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class Overloaded(DecisionError):
    """529 with ``Retry-After``: the queue is full, or a request waited past the request timeout.

    529 is what the hosted service answers when overloaded (spec/wire.md §5, §8); several clients
    back off only on 429 and 529, and the official SDKs retry it with ``Retry-After``.
    """

    status = 529
    error_type = "overloaded_error"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})


class Unavailable(Overloaded):
    """503 with ``Retry-After`` (same ``overloaded_error`` body): the server is loading, stopping, or a
    request does not fit in device memory even alone."""

    status = 503


class ClientGone(DecisionError):
    """499 (nginx's "client closed request"): nobody is left to answer; logged, never sent."""

    status = 499
    error_type = "client_closed_request"


class NotFound(DecisionError):
    """404: the thing asked for is not here (a replay miss, for example)."""

    status = 404
    error_type = "not_found_error"


class InternalError(DecisionError):
    """500: a real server fault. The message is generic; the details go to the log only."""

    status = 500
    error_type = "internal_error"
