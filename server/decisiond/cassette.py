"""Cassettes: recorded exchanges with a decision service, one JSON object per line.

``decisiond record`` appends one line per exchange; ``decisiond serve --replay`` answers a
recorded request with its recorded response, byte for byte. A line looks like::

    {"key": "sq1-4f0c…", "route": "/v1/systemone", "request": {...}, "model": "jev-1",
     "time": "2026-05-01T12:00:00Z", "response": {"status": 200, "content_type": "application/json",
     "body": "{\\"model\\": \\"jev-1\\", ...}"}}

The response body is kept as the exact text the upstream sent, so replay is byte for byte. The
request is what the application sent; headers are never stored, so an API key never reaches a
cassette.

The *request key* (:func:`request_key`) identifies a request by what can change its answer. The
body is read through the server's own :class:`~decisiond.wire.DecisionRequest`, so it ignores
what the wire ignores: the order of the top-level and question fields, unknown fields, an absent
versus a null ``instructions``, ``model`` when it names the default (absent, ``jev-latest``,
``default``), and the order of the questions (each is answered independently, spec/wire.md §2). It
keeps what a model reads: the state exactly as sent (an object state's key order is kept, since the
model reads it as JSON text in that order; ``NaN`` and ``Infinity`` kept apart from ``null``), each
question's id, type, instructions and criteria (option order included), any other model name, and
the media. A request whose questions come in another order than recorded is answered in its own
order (:func:`answers_in_order`).

Only what replays faithfully is a valid entry (checked when recorded and at load): a status from
200 to 499 that carries a body (not 204, 205 or 304; never a 5xx, which says nothing lasting about
the request), a content type of visible ASCII (no CR/LF to split a header), and a ``Retry-After``
of digits when the upstream sent one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .wire import DecisionRequest

#: Model names that mean "the default model": they do not change which answer is recorded.
DEFAULT_MODEL_NAMES = frozenset({"jev-latest", "default"})
#: The key of the ``GET /v1/models`` exchange.
MODELS_KEY = "models"
SYSTEMONE_ROUTE = "/v1/systemone"
MODELS_ROUTE = "/v1/models"
#: Version prefix of request keys: a change of the canonical form changes the prefix. ``sq1-`` keys
#: (questions in request order) are recomputed on load.
KEY_PREFIX = "sq2-"


class CassetteError(Exception):
    """A cassette cannot be read: the message names the file and the line number."""


def canonical_request(request: DecisionRequest) -> dict[str, Any]:
    """The parts of a validated request that can change its answer, in a fixed field order (pure).

    Args:
        request (DecisionRequest): a schema-valid request.

    Returns:
        dict[str, Any]: ``model`` (None for the default names), ``state``, ``questions`` as a list of
        ``[id, question]`` pairs sorted by id, and the media fields.
    """
    body = request.model_dump(mode="python")  # python mode keeps NaN and Infinity, which json mode makes null
    model = body.pop("model")
    questions = [[question_id, body["questions"][question_id]] for question_id in sorted(request.questions)]
    return {
        "model": None if model is None or model in DEFAULT_MODEL_NAMES else model,
        "state": body["state"],
        "questions": questions,
        "media": {kind: body[kind] for kind in ("images", "assets", "audio", "video")},
    }


def request_key(body: bytes | str | Mapping[str, Any]) -> str:
    """The canonical key of a ``POST /v1/systemone`` body (see the module docstring).

    Args:
        body (bytes | str | Mapping[str, Any]): the raw JSON body, or it parsed.

    Returns:
        str: ``"sq1-"`` and 32 hex digits of the SHA-256 of the canonical form.

    Raises:
        ValueError: the body is not JSON or not a valid request (a ``pydantic.ValidationError``).

    Example:
        >>> request_key({"state": "hi", "questions": {"q": {"type": "noul", "instructions": "Greeting?"}}}) == \\
        ...     request_key('{"questions": {"q": {"instructions": "Greeting?", "type": "noul"}}, "state": "hi"}')
        True
    """
    return key_of(parse_request(body))


def parse_request(body: bytes | str | Mapping[str, Any]) -> DecisionRequest:
    """A raw or parsed ``POST /v1/systemone`` body, validated.

    Raises:
        ValueError: the body is not JSON or not a valid request (a ``pydantic.ValidationError``).
    """
    if isinstance(body, bytes | str):
        return DecisionRequest.model_validate_json(body)
    return DecisionRequest.model_validate(body)


def key_of(request: DecisionRequest) -> str:
    """The request key of a validated request (see :func:`request_key`)."""
    canonical = json.dumps(canonical_request(request), ensure_ascii=False, separators=(",", ":"), default=str)
    return KEY_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def answers_in_order(recorded: str, question_ids: list[str]) -> bytes:
    """A recorded 200 body with its answers in the order of ``question_ids`` (the replayed request's).

    The recorded text is returned byte for byte when its answers already come in that order (or it
    is not an answer body); otherwise it is re-serialised with the answers reordered.
    """
    try:
        body = json.loads(recorded)
    except ValueError:
        return recorded.encode("utf-8")
    answers = body.get("answers") if isinstance(body, dict) else None
    if not isinstance(answers, dict) or list(answers) == question_ids or set(answers) != set(question_ids):
        return recorded.encode("utf-8")
    body["answers"] = {question_id: answers[question_id] for question_id in question_ids}
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


#: Statuses that carry no body (RFC 9110 §6.4.1, §15.3.6): a replay could not send the recorded one.
BODYLESS_STATUSES = frozenset({204, 205, 304})
_HEADER_VALUE = re.compile(r"[\x20-\x7e]{1,200}")


class RecordedResponse(BaseModel):
    """The upstream's answer: status, content type, ``Retry-After`` (if sent) and the exact body text."""

    model_config = ConfigDict(extra="forbid")

    status: int = Field(ge=200, le=499, description="a 5xx or 1xx is never recorded")
    content_type: str = "application/json"
    retry_after: str | None = Field(default=None, pattern=r"^[0-9]{1,9}$")
    body: str

    @field_validator("status")
    @classmethod
    def _has_a_body(cls, value: int) -> int:
        if value in BODYLESS_STATUSES:
            raise ValueError(f"status {value} carries no body, so it cannot be replayed as recorded")
        return value

    @field_validator("content_type")
    @classmethod
    def _one_header_value(cls, value: str) -> str:
        if not _HEADER_VALUE.fullmatch(value):
            raise ValueError("must be 1 to 200 visible ASCII characters (no CR, LF or other controls)")
        return value

    def headers(self) -> dict[str, str]:
        """The headers a replay sends besides the content type and length."""
        return {"retry-after": self.retry_after} if self.retry_after is not None else {}


class Entry(BaseModel):
    """One line of a cassette."""

    model_config = ConfigDict(extra="ignore")

    key: str | None = Field(default=None, description="the request key; recomputed and checked on load")
    route: str = SYSTEMONE_ROUTE
    request: Any = None
    response: RecordedResponse
    model: str | None = Field(default=None, description="the model the upstream said answered")
    time: str | None = None


def _upstream_model(body: str) -> str | None:
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    model = parsed.get("model") if isinstance(parsed, dict) else None
    return model if isinstance(model, str) else None


def new_entry(
    route: str, request: Any, status: int, content_type: str, body: bytes, retry_after: str | None = None
) -> Entry:
    """An entry for one exchange, its key computed, timestamped now (UTC).

    Raises:
        ValueError: a ``/v1/systemone`` request that is not a valid request, a body that is not UTF-8,
            or a response that cannot be replayed as recorded (see :class:`RecordedResponse`).
    """
    text = body.decode("utf-8")
    key = MODELS_KEY if route == MODELS_ROUTE else request_key(request)
    return Entry(
        key=key,
        route=route,
        request=request,
        response=RecordedResponse(status=status, content_type=content_type, retry_after=retry_after, body=text),
        model=_upstream_model(text),
        time=dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    )


class CassetteWriter:
    """Appends entries to a cassette file, one line each, flushed at once (thread-safe).

    Args:
        path (Path): the cassette; created with its folder when missing, appended to otherwise.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)

    def append(self, entry: Entry) -> None:
        """Write one line."""
        line = json.dumps(entry.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def _read_line(path: Path, number: int, line: str) -> Entry:
    where = f"{path}:{number}"
    try:
        entry = Entry.model_validate_json(line)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())
        raise CassetteError(f"{where}: not a cassette entry ({problems})") from None
    if entry.route == MODELS_ROUTE:
        return entry.model_copy(update={"key": MODELS_KEY})
    if entry.route != SYSTEMONE_ROUTE:
        raise CassetteError(f"{where}: unknown route {entry.route!r} (expected {SYSTEMONE_ROUTE} or {MODELS_ROUTE})")
    try:
        key = request_key(entry.request)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise CassetteError(
            f"{where}: the recorded request is not a valid request ({'.'.join(map(str, first['loc']))}: {first['msg']})"
        ) from None
    if entry.key is not None and entry.key.startswith(KEY_PREFIX) and entry.key != key:
        raise CassetteError(
            f"{where}: the key {entry.key} does not match its request (key {key}); "
            "was the request edited? delete the key field or record it again"
        )
    return entry.model_copy(update={"key": key})


def read_cassette(path: Path) -> list[Entry]:
    """Every entry of one cassette, in file order; blank lines are allowed.

    Raises:
        CassetteError: the file is missing, or a line is not a valid entry (with its line number).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CassetteError(f"no cassette at {path}; record one with `decisiond record --cassette {path}`") from None
    except UnicodeDecodeError as exc:
        raise CassetteError(f"{path} is not UTF-8 text: {exc.reason}") from None
    return [_read_line(path, number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


@dataclass
class Library:
    """The entries of one or more cassettes, by key; a later recording of a key wins.

    Attributes:
        paths (tuple[Path, ...]): the cassettes, in the order given.
        entries (dict[str, Entry]): request key (or :data:`MODELS_KEY`) → entry.
    """

    paths: tuple[Path, ...]
    entries: dict[str, Entry]

    @classmethod
    def load(cls, paths: Iterable[Path]) -> Library:
        """Read every cassette.

        Raises:
            CassetteError: a cassette is missing or has a corrupt line.
        """
        ordered = tuple(paths)
        entries: dict[str, Entry] = {}
        for path in ordered:
            for entry in read_cassette(path):
                assert entry.key is not None
                entries[entry.key] = entry
        return cls(ordered, entries)

    def find(self, key: str) -> Entry | None:
        """The recorded entry for ``key``, or None."""
        return self.entries.get(key)

    def describe(self) -> str:
        """The cassettes, for messages."""
        return ", ".join(str(path) for path in self.paths)

    def upstream_models(self) -> list[str]:
        """The models the upstream said answered, in order of first appearance."""
        seen: dict[str, None] = {}
        for entry in self.entries.values():
            if entry.model and entry.route == SYSTEMONE_ROUTE:
                seen.setdefault(entry.model, None)
        return list(seen)
