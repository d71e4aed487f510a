"""Logging: a JSON formatter, a text formatter, and the one access line per request.

Records are written as readable text lines on a terminal and as one JSON object per line
elsewhere (a pipe, a file, Docker, systemd): ``--log-format auto``, the default; ``json`` or
``text`` chooses. The access line (logger ``decisiond.access``) carries only the request id,
method, route, model, questions, tokens, status and milliseconds: never the state, the
instructions, the criteria or a key, since none of them is ever passed to it. Probes and scrapes
(``/health``, ``/ready``, ``/metrics``) are logged at debug level, so polls do not fill the log.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

#: The logger of the per-request access lines.
ACCESS = logging.getLogger("decisiond.access")

#: The fields an access line may carry, in order.
ACCESS_FIELDS = ("id", "method", "route", "model", "questions", "tokens", "status", "ms")

#: Routes polled by probes and scrapers: their access lines are written at debug level.
POLLED_ROUTES = frozenset({"/health", "/ready", "/metrics"})

#: The log formats; ``auto`` is ``text`` on a terminal and ``json`` elsewhere.
FORMATS = ("auto", "json", "text")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``msg``, the record's ``fields``
    (access lines) and ``error`` (the exception type, with the traceback under ``traceback``)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """One readable line per record: ``12:00:01 INFO decisiond: ready on http://127.0.0.1:8000``;
    an access line reads ``POST /v1/systemone 200 12.3 ms model=minilm-l6 questions=3 tokens=122
    id=...``; a traceback follows its record as Python prints it."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        """The line of ``record``; an access record's fields as words."""
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            record.message = access_text(fields)
        return super().formatMessage(record)


def access_text(fields: dict[str, Any]) -> str:
    """An access line's fields as text.

    Example:
        >>> access_text({"id": "a1", "method": "GET", "route": "/health", "status": 200, "ms": 0.4})
        'GET /health 200 0.4 ms id=a1'
    """
    head = f"{fields.get('method', '')} {fields.get('route', '')} {fields.get('status', '')}"
    if "ms" in fields:
        head += f" {fields['ms']} ms"
    rest = [f"{name}={fields[name]}" for name in ("model", "questions", "tokens", "id") if fields.get(name) is not None]
    return " ".join([head, *rest])


def resolve_format(fmt: str, stream: TextIO | None = None) -> str:
    """``json`` or ``text``: ``auto`` is ``text`` when ``stream`` (default stderr) is a terminal.

    Raises:
        ValueError: an unknown format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt != "auto":
        return fmt
    stream = stream or sys.stderr
    return "text" if getattr(stream, "isatty", lambda: False)() else "json"


def configure(level: str = "info", fmt: str = "auto") -> None:
    """Send every log record to stderr at ``level`` in ``fmt`` (``auto``, ``json`` or ``text``).

    Raises:
        ValueError: an unknown level or format.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if resolve_format(fmt) == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    if fmt == "json":
        quiet_progress_bars()


def quiet_progress_bars() -> None:
    """Turn off the tqdm progress bars transformers and huggingface_hub draw while loading weights:
    in a JSON log every line must be one JSON object."""
    from .config import quiet_progress_env

    quiet_progress_env()  # before tqdm is imported: bars drawn outside transformers' switch
    import huggingface_hub.utils
    import transformers.utils.logging

    transformers.utils.logging.disable_progress_bar()
    huggingface_hub.utils.disable_progress_bars()


def access(**fields: Any) -> None:
    """Write one access line. Only the names of :data:`ACCESS_FIELDS` are kept.

    Example:
        >>> access(id="abc", route="/v1/systemone", status=200, ms=3.2, state="never written")
    """
    kept = {name: fields[name] for name in ACCESS_FIELDS if name in fields}
    level = logging.DEBUG if kept.get("route") in POLLED_ROUTES else logging.INFO
    ACCESS.log(level, "request", extra={"fields": kept})
