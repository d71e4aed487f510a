"""Logging: a JSON formatter, and the one access line per request.

Every record can be written as one JSON object per line (``--log-format json``, the default).
The access line (logger ``decisiond.access``) carries only the request id, method, route, model,
questions, tokens, status and milliseconds: never the state, the instructions, the criteria or a
key, since none of them is ever passed to it.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

#: The logger of the per-request access lines.
ACCESS = logging.getLogger("decisiond.access")

#: The fields an access line may carry, in order.
ACCESS_FIELDS = ("id", "method", "route", "model", "questions", "tokens", "status", "ms")


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


def configure(level: str = "info", fmt: str = "json") -> None:
    """Send every log record to stderr at ``level`` in ``fmt`` (``json`` or ``text``).

    Raises:
        ValueError: an unknown level or format.
    """
    if fmt not in ("json", "text"):
        raise ValueError(f"log format must be json or text, got {fmt!r}")
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        text = "%(asctime)s %(levelname)s %(name)s: %(message)s %(fields)s"
        handler.setFormatter(logging.Formatter(text, defaults={"fields": ""}))
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
    ACCESS.info("request", extra={"fields": kept})
