"""The served models and the path of one decision: wire request → answers.

:class:`Service` holds every loaded model (its manifest, backend and engine), resolves a request's
``model`` (absent, ``jev-latest``, ``default``, a name or an alias), applies the wire's limits,
refuses media the model cannot read, renders the questions, prepares the work on the calling
thread, waits for the engine, and maps the readout to answers. The HTTP app, ``decisiond ask``
and the pytest plugin all decide through it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from .answers import to_answers
from .backends import Backend, Prepared, TokenLimits, Work, backend_class
from .config import Settings
from .devices import resolve_device, resolve_dtype
from .engine import Engine
from .errors import ApiUsageError, ClientGone
from .manifest import Manifest
from .media import MediaLimits, decode_all
from .readout import Readout
from .render import to_questions
from .wire import DecisionRequest, check_limits

log = logging.getLogger("decisiond.service")

#: Names that always mean the default model (the first one served).
DEFAULT_NAMES = ("jev-latest", "default")


@dataclass
class ServedModel:
    """One loaded model: its manifest, backend and engine."""

    manifest: Manifest
    backend: Backend
    engine: Engine
    load_seconds: float = 0.0

    @property
    def name(self) -> str:
        """The concrete name the response carries."""
        return self.manifest.name

    def card(self) -> dict[str, Any]:
        """The ``/v1/models`` entry."""
        info = self.backend.info()
        return {
            "name": self.manifest.name,
            "description": self.manifest.description,
            "release_date": self.manifest.release_date,
            "aliases": self.manifest.aliases,
            "backend": info.backend,
            "device": info.device,
            "dtype": info.dtype,
            "max_tokens": info.max_tokens,
            "modalities": list(info.modalities),
        }


@dataclass
class Decision:
    """A decided request: the body of the 200 response and what the logs and headers need.

    Attributes:
        timings_ms (dict[str, float]): ``prepare`` (validation, rendering, tokenising), ``queue``
            (waiting for the model thread), ``model`` (its batch's forward and readout) and
            ``total`` (all of :meth:`Service.decide`), in ms.
    """

    body: dict[str, Any]
    model: str
    input_tokens: int
    timings_ms: dict[str, float] = field(default_factory=dict)


def token_limits(settings: Settings, manifest: Manifest) -> TokenLimits:
    """The manifest's budgets where it sets them, else the server's."""
    return TokenLimits(
        max_state_tokens=manifest.limits.max_state_tokens or settings.max_state_tokens,
        max_total_tokens=manifest.limits.max_total_tokens or settings.max_total_tokens,
    )


def load_model(manifest: Manifest, settings: Settings) -> ServedModel:
    """Load one manifest's backend on its device and dtype and start its engine.

    Raises:
        ManifestError: the weights are not on this machine.
        ValueError: an impossible device, dtype or manifest setting.
    """
    started = time.perf_counter()
    device = resolve_device(settings.device if settings.device != "auto" else (manifest.device or "auto"))
    dtype = resolve_dtype(settings.dtype if settings.dtype != "auto" else (manifest.dtype or "auto"), device)
    log.info("loading %s (%s) on %s in %s", manifest.name, manifest.backend, device, str(dtype).removeprefix("torch."))
    cls = backend_class(manifest.backend)
    backend = cls.from_manifest(  # type: ignore[attr-defined]
        manifest,
        device=device,
        dtype=dtype,
        limits=token_limits(settings, manifest),
        settings=settings,
    )
    seconds = time.perf_counter() - started
    log.info("loaded %s in %.1f s", manifest.name, seconds)
    return ServedModel(manifest, backend, start_engine(backend, settings), seconds)


def start_engine(backend: Backend, settings: Settings) -> Engine:
    """An engine for ``backend`` with the server's batching settings, started."""
    return Engine(
        backend,
        max_batch_tokens=settings.max_batch_tokens,
        max_wait_ms=settings.max_wait_ms,
        max_queue=settings.max_queue,
        request_timeout_s=settings.request_timeout_s,
    ).start()


#: How often a waiting request checks whether its client is still there (seconds).
DISCONNECT_POLL_S = 0.05


async def wait_for_readout(future: Future[Readout], is_disconnected: Callable[[], Awaitable[bool]] | None) -> Readout:
    """Await the engine's answer; cancel the queued work if the client goes away first.

    Raises:
        ClientGone: the client disconnected before the model ran the request.
    """
    wrapped = asyncio.wrap_future(future)
    if is_disconnected is None:
        return await wrapped
    while True:
        done, _ = await asyncio.wait({wrapped}, timeout=DISCONNECT_POLL_S)
        if done:
            return wrapped.result()
        if await is_disconnected():
            future.cancel()  # a no-op once the model thread has taken it; then the answer is dropped
            raise ClientGone("the client disconnected while the request was queued")


class Service:
    """Every served model, and :meth:`decide`.

    Args:
        models (Sequence[ServedModel]): at least one; the first is the default.
        settings (Settings): limits.
    """

    def __init__(self, models: Sequence[ServedModel], settings: Settings) -> None:
        if not models:
            raise ValueError("a service needs at least one model")
        self.models = list(models)
        self.settings = settings
        self._by_name: dict[str, ServedModel] = {}
        for served in self.models:
            for name in served.manifest.names():
                self._by_name.setdefault(name, served)

    @property
    def default(self) -> ServedModel:
        """The first model."""
        return self.models[0]

    def resolve(self, name: str | None) -> ServedModel:
        """The model a request names.

        Raises:
            ApiUsageError: no served model has that name or alias.
        """
        if name is None or name in DEFAULT_NAMES:
            return self.default
        served = self._by_name.get(name)
        if served is None:
            known = "; ".join(
                f"{m.name}" + (f" (also {', '.join(m.manifest.aliases)})" if m.manifest.aliases else "")
                for m in self.models
            )
            raise ApiUsageError(
                f"unknown model {name[:100]!r}; this server serves {known}; no model, jev-latest or default "
                f"means {self.default.name}"
            )
        return served

    def check_media(self, request: DecisionRequest, served: ServedModel) -> None:
        """Refuse media the model cannot read, before any inference (spec §2).

        Raises:
            ApiUsageError: naming the kind of media and the model.
        """
        for kind in request.media_kinds():
            if kind not in served.backend.modalities:
                raise ApiUsageError(
                    f"this request carries {kind} media, but the model {served.name} reads only "
                    f"{', '.join(sorted(served.backend.modalities))}; send it to a model that reads {kind}"
                )

    def media_limits(self) -> MediaLimits:
        """The server's image limits."""
        s = self.settings
        return MediaLimits(s.max_images, s.max_image_bytes, s.max_image_pixels)

    def _prepare(self, request: DecisionRequest, served: ServedModel) -> Prepared:
        """The request-thread stage: decode images (only for a model that reads them), render,
        and let the backend prepare. Runs in the thread pool, never on the event loop.

        Raises:
            ApiUsageError: an image is refused (see :mod:`decisiond.media`).
            MaxTokensExceeded: over a token budget.
        """
        images: tuple[Any, ...] = ()
        if "image" in served.backend.modalities:
            images = decode_all(request.images, request.assets, self.media_limits())
        work = Work(request.state, to_questions(request), images, question_ids=tuple(request.questions))
        return served.backend.prepare(work)

    async def decide(
        self, request: DecisionRequest, *, is_disconnected: Callable[[], Awaitable[bool]] | None = None
    ) -> Decision:
        """Answer one validated request.

        Args:
            request (DecisionRequest): schema-valid.
            is_disconnected (Callable, optional): polled while the request waits for the model; once it
                says the client is gone, the queued work is cancelled so it is never computed.

        Raises:
            ApiUsageError: a semantic limit, an unknown model, unreadable media (400).
            MaxTokensExceeded: over a token budget (400).
            Overloaded: queue full, waited too long, stopping, or out of device memory (503).
            InternalError: the model failed, or its thread has died (500).
        """
        started = time.perf_counter()
        check_limits(
            request,
            max_questions=self.settings.max_questions,
            max_options=self.settings.max_options,
            max_levels=self.settings.max_levels,
            max_depth=self.settings.max_json_depth,
        )
        served = self.resolve(request.model)
        self.check_media(request, served)
        return await self.run(request, served, started, is_disconnected)

    async def run(
        self,
        request: DecisionRequest,
        served: ServedModel,
        started: float,
        is_disconnected: Callable[[], Awaitable[bool]] | None = None,
    ) -> Decision:
        """Decide a request already checked by :meth:`decide` on ``served``'s engine: render, prepare,
        queue, read out. The one seam where the model runs: a subclass (``decisiond.ray``'s ingress)
        sends the checked request to another process instead, and that process calls this.

        Args:
            started (float): ``time.perf_counter()`` when the request arrived (for the timings).

        Raises:
            MaxTokensExceeded, ApiUsageError, Overloaded, InternalError: as :meth:`decide`.
        """
        prepared = await run_in_threadpool(self._prepare, request, served)
        work = prepared.work
        queued = time.perf_counter()
        ticket = served.engine.submit(prepared)
        readout = await wait_for_readout(ticket, is_disconnected)
        done = time.perf_counter()
        body = {
            "model": served.name,
            "answers": to_answers(list(request.questions), work.questions, readout),
            "usage": {"input_tokens": prepared.input_tokens, "output_tokens": 0},
            "x_latency_ms": round((done - started) * 1000.0, 2),
        }
        timings = {
            "prepare": (queued - started) * 1000.0,
            "queue": ticket.queue_ms,
            "model": ticket.model_ms,
            "total": (done - started) * 1000.0,
        }
        return Decision(body, served.name, prepared.input_tokens, timings)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop every engine."""
        for served in self.models:
            served.engine.close(timeout_s)
            served.backend.close()
