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
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from anyio import to_thread

from .answers import to_answers
from .backends import Backend, Prepared, TokenLimits, Work, backend_class
from .box_images import with_box_images
from .config import Settings
from .devices import resolve_device, resolve_dtype
from .engine import Engine, Ticket
from .errors import ApiUsageError, ClientGone, Overloaded
from .limits import check_text_chars
from .manifest import Manifest
from .media import DecodeGate, MediaLimits, check_placeholders, decode_all, image_names, strings_of
from .model_names import name_table
from .readout import Readout
from .render import to_questions
from .wire import DecisionRequest, check_request_limits

log = logging.getLogger("decisiond.service")

T = TypeVar("T")


@dataclass
class ServedModel:
    """One loaded model: its manifest, backend and engine."""

    manifest: Manifest
    backend: Backend
    engine: Engine
    load_seconds: float = 0.0
    #: Every other id that names this model (manifest aliases, --alias, hosted Jev ids); set by Service.
    ids: list[str] = field(default_factory=list)

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
            "aliases": self.ids or self.manifest.aliases,
            "backend": info.backend,
            "device": info.device,
            "dtype": info.dtype,
            "max_tokens": info.max_tokens,
            "modalities": list(info.modalities),
            "question_types": list(info.question_types),
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


def load_backend(manifest: Manifest, settings: Settings) -> Backend:
    """Load one manifest's backend on its device and dtype, its calibration set (no engine).

    Raises:
        ManifestError: the weights are not on this machine.
        ValueError: an impossible device, dtype or manifest setting.
    """
    device = resolve_device(settings.device if settings.device != "auto" else (manifest.device or "auto"))
    dtype = resolve_dtype(
        settings.dtype if settings.dtype != "auto" else (manifest.dtype or "auto"), device, backend=manifest.backend
    )
    log.info("loading %s (%s) on %s in %s", manifest.name, manifest.backend, device, str(dtype).removeprefix("torch."))
    cls = backend_class(manifest.backend)
    backend: Backend = cls.from_manifest(  # type: ignore[attr-defined]
        manifest,
        device=device,
        dtype=dtype,
        limits=token_limits(settings, manifest),
        settings=settings,
    )
    backend.calibration = manifest.calibration
    return backend


def load_model(manifest: Manifest, settings: Settings) -> ServedModel:
    """Load one manifest's backend (:func:`load_backend`) and start its engine.

    Raises:
        ManifestError: the weights are not on this machine.
        ValueError: an impossible device, dtype or manifest setting.
    """
    started = time.perf_counter()
    backend = load_backend(manifest, settings)
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


async def until_answered(
    answer: Awaitable[T], client_gone: Callable[[], Awaitable[Any]] | None, cancel: Callable[[], object]
) -> T:
    """Await ``answer``; if the client goes away first, ``cancel`` the work behind it.

    Args:
        answer (Awaitable): the engine's ticket (wrapped) or a Ray replica's response.
        client_gone (Callable, optional): a coroutine function that returns once the client has
            gone (the app's waits for the ASGI ``http.disconnect`` message). It runs beside the
            wait, as one task: nothing is polled.
        cancel (Callable): drops the work (a no-op once it runs; its answer is then dropped).

    Raises:
        ClientGone: the client disconnected before the request was answered.
    """
    task = asyncio.ensure_future(answer)
    if client_gone is None:
        return await task
    watcher = asyncio.ensure_future(client_gone())
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task.done() or watcher.cancelled() or watcher.exception() is not None:
        return await task  # answered, or the watch itself failed: the answer still comes
    cancel()
    task.cancel()
    raise ClientGone("the client disconnected before the request was answered")


async def wait_for_readout(future: Future[Readout], client_gone: Callable[[], Awaitable[Any]] | None) -> Readout:
    """Await the engine's answer; cancel the queued work if the client goes away first
    (:func:`until_answered`)."""
    return await until_answered(asyncio.wrap_future(future), client_gone, future.cancel)


def deadline_of(arrived: float | None, timeout_s: float) -> float:
    """The ``time.monotonic()`` second by which a request must be answered: ``timeout_s`` after it
    arrived (now, when unknown), whatever it waits on."""
    return (time.monotonic() if arrived is None else arrived) + timeout_s


def past_deadline(timeout_s: float, retry_after_s: int | None = None) -> Overloaded:
    """The 529 for a request not answered within ``timeout_s`` of its arrival."""
    message = f"the request waited over {timeout_s:g} s since it arrived; retry later"
    return Overloaded(message) if retry_after_s is None else Overloaded(message, retry_after_s=retry_after_s)


#: A text state up to this many characters is rendered on the event loop for a backend whose
#: ``prepare`` only renders (a few microseconds: less than the hop to a thread); longer or
#: structured states, and images, are prepared on a thread.
INLINE_STATE_CHARS = 20_000


class Service:
    """Every served model, and :meth:`decide`.

    Args:
        models (Sequence[ServedModel]): at least one; the first is the default.
        settings (Settings): limits, ``aliases`` and ``strict_models`` (see :mod:`decisiond.model_names`).

    Raises:
        ValueError: no model, or an ``--alias`` that names no served model.
    """

    def __init__(self, models: Sequence[ServedModel], settings: Settings) -> None:
        if not models:
            raise ValueError("a service needs at least one model")
        self.models = list(models)
        self.settings = settings
        table = name_table([m.manifest.names() for m in self.models], settings.aliases, strict=settings.strict_models)
        self._by_name: dict[str, ServedModel] = {name: self.models[index] for name, index in table.items()}
        self.decodes = DecodeGate(settings.max_decodes)  # images decoded at once, across requests
        for served in self.models:
            served.ids = [name for name, m in self._by_name.items() if m is served and name != served.name]

    @property
    def default(self) -> ServedModel:
        """The first model."""
        return self.models[0]

    def resolve(self, name: str | None) -> ServedModel:
        """The model a request names: absent means the default; otherwise any id of
        :mod:`decisiond.model_names`.

        Raises:
            ApiUsageError: no served model answers that id.
        """
        if name is None:
            return self.default
        served = self._by_name.get(name)
        if served is None:
            known = "; ".join(
                f"{m.name}" + (f" (also {', '.join(m.manifest.aliases)})" if m.manifest.aliases else "")
                for m in self.models
            )
            hosted = "" if self.settings.strict_models else " and the hosted Jev ids"
            raise ApiUsageError(
                f"unknown model {name[:100]!r}; this server serves {known}; no model, jev-latest, default{hosted} "
                f"mean {self.default.name}; GET /v1/models lists every id"
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

    def check_question_types(self, request: DecisionRequest, served: ServedModel) -> None:
        """Refuse a question of a type the model does not answer, before any inference (a ``box`` on
        a model that cannot locate things: 400, as the hosted Jev 1.13 answers; spec/wire.md §8).

        Raises:
            ApiUsageError: naming the question id, its type and the model.
        """
        answered = served.backend.question_types
        for question_id, question in request.questions.items():
            if question.type not in answered:
                shown = question_id if len(question_id) <= 80 else question_id[:77] + "..."
                raise ApiUsageError(
                    f"question {shown!r} is a {question.type} question, but the model {served.name} answers only "
                    f"{', '.join(sorted(answered))} questions; send it to a model that answers {question.type}"
                )

    def media_limits(self) -> MediaLimits:
        """The server's image limits."""
        s = self.settings
        return MediaLimits(s.max_images, s.max_image_bytes, s.max_image_pixels, s.max_request_pixels)

    def _prepare(self, request: DecisionRequest, served: ServedModel) -> Prepared:
        """The request-thread stage: decode images (only for a model that reads them), render,
        and let the backend prepare. Runs in the thread pool, or on the event loop when
        :meth:`_inline` says it is only rendering.

        Raises:
            ApiUsageError: the text is over ``max_text_chars``; an image is refused or an asset's
                placeholder is referenced by no text (see :mod:`decisiond.media`); or a box question
                is not about exactly one image (see :mod:`decisiond.box_images`).
            MaxTokensExceeded: over a token budget.
        """
        names = image_names(request.images, request.assets)
        questions = with_box_images(list(request.questions), to_questions(request), names)
        text = Work(request.state, questions, question_ids=tuple(request.questions), image_names=names)
        check_text_chars(text, self.settings.max_text_chars)  # before any tokenising or decoding
        images: tuple[Any, ...] = ()
        if "image" in served.backend.modalities:
            side = served.backend.image_side
            images = decode_all(request.images, request.assets, self.media_limits(), self.decodes, side=side)
            texts = strings_of([request.state, [q.model_dump(exclude={"type"}) for q in request.questions.values()]])
            check_placeholders(request.assets, texts)  # an image no text refers to would be read nowhere
        return served.backend.prepare(replace(text, images=images))

    @staticmethod
    def _inline(request: DecisionRequest, served: ServedModel) -> bool:
        """Whether preparing ``request`` is cheap enough for the event loop (see :data:`INLINE_STATE_CHARS`)."""
        backend = served.backend
        return (
            backend.light_prepare
            and "image" not in backend.modalities
            and isinstance(request.state, str)
            and len(request.state) <= INLINE_STATE_CHARS
        )

    async def decide(
        self,
        request: DecisionRequest,
        *,
        client_gone: Callable[[], Awaitable[Any]] | None = None,
        arrived: float | None = None,
    ) -> Decision:
        """Answer one validated request.

        Args:
            request (DecisionRequest): schema-valid.
            client_gone (Callable, optional): a coroutine function returning once the client has gone;
                then the queued work is cancelled so it is never computed (see :func:`wait_for_readout`).
            arrived (float, optional): when the request arrived (``time.monotonic()`` seconds); the
                ``request_timeout_s`` deadline runs from then, whatever the request waits on (the
                thread pool, tokenising, the queue, the model). Defaults to now.

        Raises:
            ApiUsageError: a semantic limit, an unknown model, a question type the model does not
                answer, unreadable media (400).
            MaxTokensExceeded: over a token budget (400; for a ``light_prepare`` backend, found on
                the model thread and raised from the ticket).
            Overloaded: queue full, or past its deadline (529).
            Unavailable: stopping, or out of device memory (503).
            InternalError: the model failed, or its thread has died (500).
        """
        started = time.perf_counter()
        check_request_limits(request, self.settings)
        served = self.resolve(request.model)
        self.check_question_types(request, served)
        self.check_media(request, served)
        return await self.run(request, served, started, client_gone, arrived)

    async def run(
        self,
        request: DecisionRequest,
        served: ServedModel,
        started: float,
        client_gone: Callable[[], Awaitable[Any]] | None = None,
        arrived: float | None = None,
    ) -> Decision:
        """Decide a request already checked by :meth:`decide` on ``served``'s engine: render, prepare,
        queue, read out. The one seam where the model runs: a subclass (``decisiond.ray``'s ingress)
        sends the checked request to another process instead, and that process calls this.

        Args:
            started (float): ``time.perf_counter()`` when the request arrived (for the timings).
            client_gone, arrived: as :meth:`decide`.

        Raises:
            MaxTokensExceeded, ApiUsageError, Overloaded, Unavailable, InternalError: as :meth:`decide`.
        """
        deadline = deadline_of(arrived, self.settings.request_timeout_s)
        ticket: Future[Readout] | None = None
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                if self._inline(request, served):
                    prepared = self._prepare(request, served)
                else:
                    # abandoned at the deadline: the thread finishes on its own and its result is dropped
                    prepared = await to_thread.run_sync(self._prepare, request, served, abandon_on_cancel=True)
                queued = time.perf_counter()
                ticket = served.engine.submit(prepared, deadline=deadline)
                readout = await wait_for_readout(ticket, client_gone)
        except TimeoutError:
            if ticket is not None:
                ticket.cancel()  # a no-op once the model thread runs it; its answer is then dropped
            raise past_deadline(self.settings.request_timeout_s) from None
        assert isinstance(ticket, Ticket)
        work = prepared.work
        done = time.perf_counter()
        body = {
            "model": served.name,
            "answers": to_answers(list(request.questions), work.questions, readout),
            "usage": {"input_tokens": prepared.input_tokens, "output_tokens": 0},
            "x_latency_ms": round((done - started) * 1000.0, 2),
            **{k: v for k, v in prepared.extra.items() if k.startswith("x_")},
        }
        if prepared.warnings:
            body["x_warnings"] = list(prepared.warnings)
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
