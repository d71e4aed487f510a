"""``decisiond record``: a recording proxy in front of a real decision service.

The proxy serves ``POST /v1/systemone`` and ``GET /v1/models`` on a local port, forwards each
request to the upstream with httpx, returns the upstream's answer unchanged (status, content type
and body bytes) and appends the exchange to a cassette (:mod:`decisiond.cassette`). The API key
(from ``--api-key-env``, else the caller's own ``Authorization`` header) is sent upstream only:
headers are never written to the cassette.

The body goes upstream exactly as the client sent it (compressed, multipart); the cassette holds
the JSON body it stands for (:func:`decisiond.body.decode_body`), which is what replay reads. A
request the wire would refuse (not JSON, not a valid request, nested past Python's parser) is still
forwarded and its answer passed on, but not recorded: replay answers such requests with the local
server's own validation error. Nor is anything recorded that a replay could not give back
faithfully: an upstream 5xx (it says nothing lasting about the request), a body with ``NaN`` or
``Infinity`` (a cassette line is JSON).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from . import compression, uploads
from .body import decode_body
from .cassette import MODELS_ROUTE, SYSTEMONE_ROUTE, CassetteWriter, new_entry
from .config import Settings
from .errors import DecisionError

log = logging.getLogger("decisiond.record")

#: The server's default ceilings, used when decoding a body to record it.
_MAX_BODY_BYTES: int = Settings.model_fields["max_body_bytes"].default
_MAX_PARTS: int = Settings.model_fields["max_images"].default + 1
#: Request headers passed on to the upstream (besides the key); everything else stays here. The
#: official SDKs' own headers go too: the upstream may read them (``TypeSafe-Danger-Zone-Images``).
FORWARDED_HEADERS = (
    "content-type",
    "content-encoding",
    "accept",
    "user-agent",
    "x-request-id",
    "x-typesafe-sdk",
    "x-typesafe-runtime",
    "x-typesafe-retry-count",
    "typesafe-danger-zone-images",
)
#: Response headers passed back to the caller besides the content type: the request id the
#: official SDKs read, and ``Retry-After``, which they wait before retrying a 529 or 503.
RETURNED_HEADERS = ("x-request-id", "x-typesafe-request-id", "retry-after")


def _upstream_error(url: str, exc: Exception) -> JSONResponse:
    message = f"the upstream {url} did not answer ({type(exc).__name__}); nothing was recorded"
    return JSONResponse({"detail": {"error_type": "upstream_error", "message": message}}, status_code=502)


def create_record_app(
    upstream: str,
    cassette: Path,
    *,
    api_key: str | None = None,
    timeout_s: float = 60.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """Build the recording proxy.

    Args:
        upstream (str): base URL of the real service, e.g. ``https://api.example.com``.
        cassette (Path): the cassette to append to (created when missing).
        api_key (str, optional): sent upstream as ``Authorization: Bearer``. Defaults to passing on
            the caller's ``Authorization`` header, if any.
        timeout_s (float, optional): upstream timeout in seconds. Defaults to 60.
        transport (httpx.AsyncBaseTransport, optional): for tests. Defaults to the network.

    Returns:
        FastAPI: routes ``POST /v1/systemone``, ``GET /v1/models``, ``GET /health``.
    """
    base = upstream.rstrip("/")
    writer = CassetteWriter(cassette)
    holder: dict[str, httpx.AsyncClient] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=timeout_s, transport=transport) as client:
            holder["client"] = client
            yield

    app = FastAPI(title="decisiond record", summary=f"recording proxy to {base}", lifespan=lifespan)

    async def forward(request: Request, route: str, method: str, body: bytes | None) -> Response:
        url = base + route
        try:
            headers = outgoing_headers(request.headers, api_key)
            answer = await holder["client"].request(method, url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("upstream %s failed: %s", url, type(exc).__name__)
            return _upstream_error(url, exc)
        content_type = answer.headers.get("content-type", "application/json")
        record(writer, route, body, answer, request.headers)
        returned = {name: answer.headers[name] for name in RETURNED_HEADERS if name in answer.headers}
        return Response(answer.content, status_code=answer.status_code, media_type=content_type, headers=returned)

    @app.post(SYSTEMONE_ROUTE)
    async def decide(request: Request) -> Response:
        """Forward one decision to the upstream and record it."""
        return await forward(request, SYSTEMONE_ROUTE, "POST", await request.body())

    @app.get(MODELS_ROUTE)
    async def models(request: Request) -> Response:
        """Forward the model list and record it."""
        return await forward(request, MODELS_ROUTE, "GET", None)

    @app.get("/health")
    async def health() -> dict[str, str]:
        """The proxy is up (the upstream is not contacted)."""
        return {"status": "ok", "mode": "record", "upstream": base, "cassette": str(cassette)}

    return app


def outgoing_headers(incoming: Mapping[str, str], api_key: str | None) -> dict[str, str]:
    """The headers sent upstream: :data:`FORWARDED_HEADERS`, and the key (configured, else the caller's)."""
    headers = {name: incoming[name] for name in FORWARDED_HEADERS if name in incoming}
    if api_key is not None:
        headers["authorization"] = f"Bearer {api_key}"
    elif "authorization" in incoming:
        headers["authorization"] = incoming["authorization"]
    return headers


def record(
    writer: CassetteWriter, route: str, body: bytes | None, answer: httpx.Response, incoming: Mapping[str, str]
) -> None:
    """Append one exchange to the cassette; log and skip what cannot be keyed (never the headers),
    and a 5xx: an overload or a fault is transient, and a cassette would replay it for ever."""
    if answer.status_code >= 500:
        log.warning("not recorded: %s %d is a transient upstream failure", route, answer.status_code)
        return
    content_type = answer.headers.get("content-type", "application/json")
    try:
        if body is not None:
            body = _as_json(body, incoming)
        parsed = None if body is None else json.loads(body, parse_constant=_refuse_constant)
        retry_after = answer.headers.get("retry-after")
        entry = new_entry(route, parsed, answer.status_code, content_type, answer.content, retry_after)
    except (ValueError, RecursionError, DecisionError) as exc:  # RecursionError: nested past Python's parser
        log.warning(
            "not recorded: %s %d is not a valid request or answer (%s)", route, answer.status_code, type(exc).__name__
        )
        return
    writer.append(entry)
    log.info("recorded %s %s → %d (%s)", route, entry.key, answer.status_code, entry.model or "no model")


def _as_json(body: bytes, incoming: Mapping[str, str]) -> bytes:
    """The JSON body a compressed or multipart request stands for, as the server reads it.

    Raises:
        DecisionError: the body cannot be decoded (an unknown encoding, a bomb, a malformed upload).
    """
    content_type = incoming.get("content-type", "")
    multipart = content_type if uploads.is_multipart(content_type) else None
    applied = compression.encodings(incoming.get("content-encoding"))
    if not applied and multipart is None:
        return body
    return decode_body(body, applied, multipart, max_bytes=_MAX_BODY_BYTES, max_parts=_MAX_PARTS)


def _refuse_constant(name: str) -> float:
    """``json.loads``' hook for ``NaN`` and ``Infinity``: a cassette line could not store them."""
    raise ValueError(f"the body holds {name}, which a cassette cannot store")
