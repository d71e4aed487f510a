"""HTTP clients of any System One server: :class:`DecisionClient` and :class:`AsyncDecisionClient`.

Both post :func:`~decisiond.client.codec.encode`'s body to ``base_url + path`` and
:func:`~decisiond.client.codec.decode` the answer. Connection failures, timeouts, 429 and 5xx
are retried (twice by default) after an exponential backoff, or after the server's
``Retry-After`` when it sent one (capped); any other status is raised at once as
:class:`~decisiond.client.errors.DecisionAPIError` with the status and the server's ``detail``.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from .codec import PATH, DecisionResponse, decode, encode
from .errors import DecisionAPIError, DecisionClientError, DecisionConnectionError, DecodeError
from .vocabulary import DecisionRequest

T = TypeVar("T", bound=BaseModel)

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
MODELS_PATH = "/v1/models"
USER_AGENT = "decisiond-client/0.1.0"
#: Fields the client builds itself; ``extra`` never replaces them.
BUILT_FIELDS = frozenset({"model", "state", "questions"})
_UNSET: Any = object()
#: Seconds a request may take when the client makes its own httpx client.
DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ModelInfo:
    """One entry of a server's model listing.

    Attributes:
        name (str): the model id to pass to ``decide``.
        description (str | None): what the server says of it.
        release_date (str | None): ``YYYY-MM-DD`` when given.
        aliases (tuple[str, ...]): other ids that reach it (decisiond lists them).
        raw (Mapping[str, Any]): the entry as sent (backend, device, modalities, ...).
    """

    name: str
    description: str | None = None
    release_date: str | None = None
    aliases: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


def join_url(base_url: str, path: str) -> str:
    """``base_url`` with ``path`` appended; ``"/"`` or ``""`` is the base URL itself."""
    if path in ("", "/"):
        return base_url
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _read_models(body: Any) -> list[ModelInfo]:
    entries = body.get("models", body.get("data")) if isinstance(body, Mapping) else None
    if not isinstance(entries, list):
        raise DecodeError("the model listing has no models array", field="models")
    models = []
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name", entry.get("id")), str):
            raise DecodeError("a model entry has no name", field="models")
        aliases = entry.get("aliases")
        models.append(
            ModelInfo(
                name=str(entry.get("name", entry.get("id"))),
                description=entry.get("description") if isinstance(entry.get("description"), str) else None,
                release_date=entry.get("release_date") if isinstance(entry.get("release_date"), str) else None,
                aliases=tuple(a for a in aliases if isinstance(a, str)) if isinstance(aliases, list) else (),
                raw=dict(entry),
            )
        )
    return models


class _Base:
    """What the sync and async clients share: URLs, headers, the body, and the retry policy."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        path: str = PATH,
        models_path: str = MODELS_PATH,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = _UNSET,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_retry_after_s: float = 30.0,
        http_client: object | None = None,
    ) -> None:
        if http_client is None and timeout is _UNSET:  # our own client: a bounded wait by default
            timeout = DEFAULT_TIMEOUT_S
        self._owns_client = http_client is None
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self.base_url = base_url
        self.url = join_url(base_url, path)
        self.models_url = join_url(base_url, models_path)
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_retry_after_s = max_retry_after_s
        self._timeout = timeout
        self._headers = {"user-agent": USER_AGENT, "accept": "application/json", **dict(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}({self.base_url!r})"

    def body(self, model: str | None, request: DecisionRequest, extra: Mapping[str, Any] | None) -> dict[str, Any]:
        """The request body: :func:`encode`'s, with ``extra``'s fields added where the client built none."""
        body = encode(model, request)
        for key, value in (extra or {}).items():
            if key not in BUILT_FIELDS:
                body.setdefault(key, value)
        return body

    def _request_kwargs(self) -> dict[str, Any]:
        return {} if self._timeout is _UNSET else {"timeout": self._timeout}

    def retry_delay(self, attempt: int, outcome: httpx.Response | Exception) -> float | None:
        """Seconds to wait before retrying after ``attempt`` (0-based), or None to stop.

        Retried: httpx transport errors (connection, timeout, protocol), 429 and 5xx. The wait is
        the server's ``Retry-After`` capped at ``max_retry_after_s``, else ``backoff_s · 2^attempt``.
        """
        if attempt >= self.max_retries:
            return None
        if isinstance(outcome, httpx.Response):
            if outcome.status_code != 429 and outcome.status_code < 500:
                return None
            told = retry_after_seconds(outcome.headers.get("retry-after"))
            if told is not None:
                return min(told, self.max_retry_after_s)
        elif not isinstance(outcome, httpx.TransportError):
            return None
        return float(self.backoff_s * 2**attempt)

    @staticmethod
    def raise_for(response: httpx.Response) -> None:
        """Raise :class:`DecisionAPIError` for any status other than 2xx."""
        if response.is_success:
            return
        try:
            parsed = response.json()
            detail = parsed.get("detail") if isinstance(parsed, dict) else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            detail = response.text[:500] or None
        raise DecisionAPIError(
            response.status_code,
            detail,
            request_id=response.headers.get("x-request-id"),
            retry_after_s=retry_after_seconds(response.headers.get("retry-after")),
        )

    @classmethod
    def read_json(cls, response: httpx.Response) -> Any:
        """The JSON of a successful response. Raises :class:`DecisionAPIError` or :class:`DecodeError`."""
        cls.raise_for(response)
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DecodeError("the body is not JSON", field="body") from exc


def _connection_error(url: str, exc: Exception, attempts: int) -> DecisionConnectionError:
    return DecisionConnectionError(f"no response from {url} after {attempts} attempt(s): {type(exc).__name__}: {exc}")


class DecisionClient(_Base):
    """A synchronous client of a System One server.

    Args:
        base_url (str, optional): the server's root. Defaults to ``http://127.0.0.1:8000``.
        path (str, optional): the decision path under it; ``"/"`` posts to ``base_url`` itself.
            Defaults to ``/v1/systemone``.
        models_path (str, optional): the model listing's path. Defaults to ``/v1/models``.
        api_key (str, optional): sent as ``Authorization: Bearer``. Defaults to none.
        headers (Mapping[str, str], optional): extra headers on every request.
        timeout (float | httpx.Timeout | None, optional): seconds per attempt. Defaults to 30 s,
            or the timeout of ``http_client`` when one is given.
        http_client (httpx.Client, optional): a client of yours (proxies, TLS, transport); it is
            not closed by :meth:`close`. Defaults to a new one.
        max_retries (int, optional): retries after the first attempt. Defaults to 2.
        backoff_s (float, optional): first backoff; doubles per retry. Defaults to 0.5.
        max_retry_after_s (float, optional): cap on a server's ``Retry-After``. Defaults to 30.

    Example:
        >>> with DecisionClient("http://127.0.0.1:8000") as client:  # doctest: +SKIP
        ...     response = client.decide(None, DecisionRequest("I was charged twice",
        ...                              {"team": Choice.of("Which team?", "billing", "technical")}))
        ...     response.choice("team").choice
        'billing'
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        http_client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        **options: Any,
    ) -> None:
        super().__init__(base_url, http_client=http_client, **options)
        self._http = http_client or httpx.Client()
        self._sleep = sleep

    def __enter__(self) -> DecisionClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client if this object made it."""
        if self._owns_client:
            self._http.close()

    def _send(self, method: str, url: str, body: Any = None) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self._http.request(method, url, json=body, headers=self._headers, **self._request_kwargs())
                outcome: httpx.Response | Exception = response
            except httpx.TransportError as exc:
                outcome = exc
            delay = self.retry_delay(attempt, outcome)
            if delay is None:
                if isinstance(outcome, Exception):
                    raise _connection_error(url, outcome, attempt + 1) from outcome
                return outcome
            if isinstance(outcome, httpx.Response):
                outcome.close()
            self._sleep(delay)
            attempt += 1

    def decide(
        self, model: str | None, request: DecisionRequest, extra: Mapping[str, Any] | None = None
    ) -> DecisionResponse:
        """Ask ``request`` of ``model`` and read the answers.

        Args:
            model (str | None): the server's model id; None lets the server pick its default.
            request (DecisionRequest): the state and questions.
            extra (Mapping[str, Any], optional): fields merged into the body (a gateway's
                ``session_id``, decisiond's ``images``); never replaces model, state or questions.

        Returns:
            DecisionResponse: an answer per question, in the order asked.

        Raises:
            DecisionAPIError: a refusal (4xx at once; 429/5xx after the retries).
            DecisionConnectionError: no response after the retries.
            DecodeError: a 200 body that does not answer what was asked.
        """
        response = self._send("POST", self.url, self.body(model, request, extra))
        return decode(self.read_json(response), request)

    def decide_as(self, model: str | None, output: type[T], state: Any, *, extra: Mapping[str, Any] | None = None) -> T:
        """Ask the questions a typed decision declares and return an instance of it.

        See :mod:`decisiond.client.typed`. Raises what :meth:`decide` raises, and ValueError for a
        ``output`` whose fields are not decision fields.
        """
        from .typed import read_typed, request_for

        request = request_for(output, state)
        return read_typed(output, self.decide(model, request, extra))

    def models(self) -> list[ModelInfo]:
        """The server's model listing (``GET models_path``).

        Raises:
            DecisionAPIError, DecisionConnectionError, DecodeError: as :meth:`decide`.
        """
        return _read_models(self.read_json(self._send("GET", self.models_url)))


class AsyncDecisionClient(_Base):
    """The asyncio twin of :class:`DecisionClient`: the same arguments (``http_client`` is an
    ``httpx.AsyncClient``), the same methods as coroutines, the same retries and errors."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        http_client: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        **options: Any,
    ) -> None:
        super().__init__(base_url, http_client=http_client, **options)
        self._http = http_client or httpx.AsyncClient()
        self._sleep = sleep

    async def __aenter__(self) -> AsyncDecisionClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this object made it."""
        if self._owns_client:
            await self._http.aclose()

    async def _send(self, method: str, url: str, body: Any = None) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method, url, json=body, headers=self._headers, **self._request_kwargs()
                )
                outcome: httpx.Response | Exception = response
            except httpx.TransportError as exc:
                outcome = exc
            delay = self.retry_delay(attempt, outcome)
            if delay is None:
                if isinstance(outcome, Exception):
                    raise _connection_error(url, outcome, attempt + 1) from outcome
                return outcome
            if isinstance(outcome, httpx.Response):
                await outcome.aclose()
            await self._sleep(delay)
            attempt += 1

    async def decide(
        self, model: str | None, request: DecisionRequest, extra: Mapping[str, Any] | None = None
    ) -> DecisionResponse:
        """See :meth:`DecisionClient.decide`."""
        response = await self._send("POST", self.url, self.body(model, request, extra))
        return decode(self.read_json(response), request)

    async def decide_many(
        self,
        model: str | None,
        requests: Sequence[DecisionRequest],
        *,
        concurrency: int = 8,
        extra: Mapping[str, Any] | None = None,
    ) -> list[DecisionResponse]:
        """Ask many requests, at most ``concurrency`` at a time; never raises for one request.

        Returns:
            list[DecisionResponse]: one per request, in order. A request the server refused, or that
            got no response or an unreadable one, is a :meth:`DecisionResponse.failed` response whose
            ``reason`` is the error's message: reading an answer from it raises that reason.
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        gate = asyncio.Semaphore(concurrency)

        async def one(request: DecisionRequest) -> DecisionResponse:
            async with gate:
                try:
                    return await self.decide(model, request, extra)
                except DecisionClientError as exc:
                    return DecisionResponse.failed(str(exc))

        return list(await asyncio.gather(*(one(request) for request in requests)))

    async def decide_as(
        self, model: str | None, output: type[T], state: Any, *, extra: Mapping[str, Any] | None = None
    ) -> T:
        """See :meth:`DecisionClient.decide_as`."""
        from .typed import read_typed, request_for

        request = request_for(output, state)
        return read_typed(output, await self.decide(model, request, extra))

    async def models(self) -> list[ModelInfo]:
        """See :meth:`DecisionClient.models`."""
        return _read_models(self.read_json(await self._send("GET", self.models_url)))
