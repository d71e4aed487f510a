"""What the client raises. Every error is a :class:`DecisionClientError`; none quotes a state or a key.

- :class:`DecodeError`: a body that is not an answer to what was asked (names the question id and
  the field).
- :class:`DecisionAPIError`: the server refused the request (any status that is not retried, or
  one still failing after the retries), with its status and ``detail``.
- :class:`DecisionConnectionError`: no response at all (connection refused, timeout, broken
  stream) after the retries.
- :class:`NoAnswerError`: an answer was read from a response whose call answered nothing.
"""

from __future__ import annotations

from typing import Any


class DecisionClientError(Exception):
    """Base of every error the client raises."""


class DecodeError(DecisionClientError, ValueError):
    """A response body that does not answer what was asked.

    Args:
        message (str): what is missing or wrong, in plain words.
        question_id (str, optional): the question whose answer is at fault; None for the body.
        field (str): the field at fault (``answers``, ``choice``, ``probabilities.billing``...).
    """

    def __init__(self, message: str, *, question_id: str | None = None, field: str) -> None:
        where = f"question {question_id!r}, field {field!r}" if question_id is not None else f"field {field!r}"
        super().__init__(f"not an answer ({where}): {message}")
        self.question_id = question_id
        self.field = field


class DecisionAPIError(DecisionClientError):
    """The server answered with an error status.

    Attributes:
        status (int): the HTTP status.
        detail (Any): the body's ``detail`` as sent (an object with ``error_type`` and ``message``,
            or FastAPI's list of validation errors), or None when the body had none.
        error_type (str | None): ``detail.error_type`` when present (``api_usage_error``, ...).
        message (str): the server's message in plain words.
        request_id (str | None): the ``x-request-id`` header, to quote when reporting a problem.
        retry_after_s (float | None): the ``Retry-After`` the server sent, in seconds.
    """

    def __init__(
        self,
        status: int,
        detail: Any,
        *,
        request_id: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        self.status = status
        self.detail = detail
        self.error_type = detail.get("error_type") if isinstance(detail, dict) else None
        self.message = _message(status, detail)
        self.request_id = request_id
        self.retry_after_s = retry_after_s
        kind = f" {self.error_type}" if self.error_type else ""
        super().__init__(f"HTTP {status}{kind}: {self.message}")


def _message(status: int, detail: Any) -> str:
    """The server's words: ``detail.message``, FastAPI's ``loc: msg`` list, or a string detail."""
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        return str(detail["message"])
    if isinstance(detail, list) and detail:
        parts = []
        for item in detail[:5]:
            if isinstance(item, dict):
                loc = ".".join(str(part) for part in item.get("loc", []))
                parts.append(f"{loc}: {item.get('msg', '')}".strip(": "))
        if parts:
            return "; ".join(parts)
    if isinstance(detail, str) and detail:
        return detail[:500]
    return f"the server answered {status} without a detail"


class DecisionConnectionError(DecisionClientError):
    """No response: the connection failed or timed out on every attempt. ``__cause__`` is httpx's error."""


class NoAnswerError(DecisionClientError):
    """An answer was read from a response whose call answered nothing; the message is its reason."""
