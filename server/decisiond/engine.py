"""The dynamic batcher: a bounded queue of prepared requests and one model thread.

Request handlers call :meth:`Engine.submit`, which admits a request or refuses it at once (queue
full: 529, stopping: 503, both ``overloaded_error``) and returns a :class:`Ticket` (a
:class:`concurrent.futures.Future`). The
model thread blocks for the first waiting request, gathers more for up to ``max_wait_ms`` (0: take
what is queued) within a token budget of ``max_batch_tokens``, drops what was cancelled or waited
past ``request_timeout_s``, runs the backend once for the micro-batch, runs the readout for every
question of the batch at once, and resolves each future with its own slice. Before the forward
pass the backend completes the micro-batch (:meth:`~decisiond.backends.base.Backend.complete`:
one tokeniser call for every request's texts); a request it refuses (over a token limit) fails
alone with that error. A failed batch fails
its requests only; the thread lives on (Kev's ``Server``, LitServe's batching loop).

Faults: a batch that runs out of device memory is split in halves and each half retried, down to
single requests; only a request that does not fit alone fails (503 ``overloaded_error``). A request
that waited past ``request_timeout_s`` is dropped uncomputed (529). Any
other error fails that batch's requests with 500 ``internal_error`` (details in the log only). If
the model thread itself dies, every waiting request is failed at once and :attr:`Engine.error`
says why; ``/health`` and the CLI watch :attr:`Engine.alive`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from .backends.base import Backend, Logits, Prepared
from .errors import InternalError, Overloaded, Unavailable
from .memory import TRIM_INTERVAL_S, release_free_memory
from .readout import Readout, combine, read, read_boxes
from .render import Question

log = logging.getLogger("decisiond.engine")


class Ticket(Future[Readout]):
    """The future of one submitted request, with where its time went once it is resolved.

    Attributes:
        queue_ms (float): from :meth:`Engine.submit` to the start of its batch (ms).
        model_ms (float): its batch's forward and readout, retries after an out-of-memory split
            included (ms).
        batch_size (int): requests in the batch that answered it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.queue_ms = 0.0
        self.model_ms = 0.0
        self.batch_size = 0


@dataclass
class _Job:
    prepared: Prepared
    future: Ticket
    deadline: float  # time.monotonic() seconds
    submitted: float = field(default_factory=time.monotonic)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is a device running out of memory (``torch.OutOfMemoryError`` on CUDA, or a
    backend's ``RuntimeError`` saying so, as MPS and some CUDA kernels raise)."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def _release_device_memory() -> None:
    """Return cached blocks to the device after an out-of-memory error, so that a retry can fit."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def read_output(backend: Backend, questions: Sequence[Question], output: torch.Tensor | Logits) -> Readout:
    """The readout of a forward pass: slot questions by :func:`~decisiond.readout.read`, box questions
    by :func:`~decisiond.readout.read_boxes`, each with the backend's temperature for its kind (slot
    questions also through the backend's :class:`~decisiond.calibration.Calibration`).

    Args:
        backend (Backend): the backend that gave ``output`` (for its temperatures).
        questions (Sequence[Question]): every question of the batch, in order.
        output (torch.Tensor | Logits): what :meth:`Backend.forward` returned.

    Raises:
        RuntimeError: not one logit per slot, or no candidates for some box question.
    """
    logits = output if isinstance(output, torch.Tensor) else output.slots
    slots = [q for q in questions if q.kind != "box"]
    expected = sum(q.size for q in slots)
    if logits.numel() != expected:
        raise RuntimeError(f"the backend gave {logits.numel()} logits for {expected} slots")
    # the manifest's calibration (decisiond calibrate) scales each type's temperature and shifts nouls
    calibration = backend.calibration
    complemented = [backend.complements(q) for q in slots] if calibration.noul_offset else None
    logits, temperatures = calibration.apply(logits, slots, [backend.temperature(q.kind) for q in slots], complemented)
    readout = read(logits, [q.size for q in slots], temperatures)
    if len(slots) == len(questions):
        return readout
    boxes = [q for q in questions if q.kind == "box"]
    if isinstance(output, torch.Tensor) or len(output.boxes.sizes) != len(boxes):
        raise RuntimeError(f"the backend gave no candidates for some of the {len(boxes)} box questions")
    located = read_boxes(output.boxes, [backend.temperature(q.kind) for q in boxes])
    return combine([q.kind == "box" for q in questions], readout, located)


@dataclass
class EngineStats:
    """Counters for ``/health`` and ``/metrics``."""

    batches: int = 0
    requests: int = 0
    expired: int = 0
    failed: int = 0
    out_of_memory: int = 0
    batch_sizes: deque[int] = field(default_factory=lambda: deque(maxlen=1000))
    size_counts: Counter[int] = field(default_factory=Counter)  # batch size → batches, since start

    def mean_batch_size(self) -> float:
        """Mean requests per batch over the last 1,000 batches."""
        return sum(self.batch_sizes) / len(self.batch_sizes) if self.batch_sizes else 0.0


class Engine:
    """One model thread serving one backend.

    Args:
        backend (Backend): the loaded model.
        max_batch_tokens (int, optional): token budget of a micro-batch (a larger single request
            still runs, alone). Defaults to 16384.
        max_wait_ms (float, optional): gathering window after the first request (ms). Defaults to 2.
        max_queue (int, optional): requests waiting before new ones are refused. Defaults to 256.
        request_timeout_s (float, optional): longest wait in the queue. Defaults to 30.

    Example:
        >>> engine = Engine(backend).start()
        >>> ticket = engine.submit(backend.prepare(work))
        >>> readout = ticket.result()  # ticket.queue_ms, ticket.model_ms
        >>> engine.close()
    """

    def __init__(
        self,
        backend: Backend,
        *,
        max_batch_tokens: int = 16384,
        max_wait_ms: float = 2.0,
        max_queue: int = 256,
        request_timeout_s: float = 30.0,
    ) -> None:
        if max_batch_tokens < 1 or max_queue < 1 or max_wait_ms < 0 or request_timeout_s <= 0:
            raise ValueError(
                f"bad engine limits: max_batch_tokens={max_batch_tokens}, max_queue={max_queue}, "
                f"max_wait_ms={max_wait_ms}, request_timeout_s={request_timeout_s}"
            )
        self.backend = backend
        self.max_batch_tokens = max_batch_tokens
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.request_timeout_s = request_timeout_s
        self.stats = EngineStats()
        self._last_trim = time.monotonic()
        self._pending: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=f"decisiond-model-{backend.family}", daemon=True)
        self.error: BaseException | None = None
        self._running: list[_Job] = []
        self._batch_started = 0.0

    # ---------------------------------------------------------------- request side

    def start(self) -> Engine:
        """Start the model thread; returns self."""
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        """Whether the model thread is running."""
        return self._thread.is_alive()

    def queue_depth(self) -> int:
        """Requests waiting for the model thread."""
        return len(self._pending)

    @property
    def closing(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closing

    def submit(self, prepared: Prepared, deadline: float | None = None) -> Ticket:
        """Queue one prepared request.

        Args:
            prepared (Prepared): from the backend's ``prepare``.
            deadline (float, optional): ``time.monotonic()`` seconds after which the request is dropped
                from the queue with 503. Defaults to now plus ``request_timeout_s``.

        Returns:
            Ticket: resolved with the request's :class:`~decisiond.readout.Readout`, or failed with
            :class:`Overloaded` (529, waited too long), :class:`Unavailable` (503, stopping or out of
            memory) or :class:`InternalError` (500).

        Raises:
            Overloaded: the queue is full (529).
            Unavailable: the engine is stopping (503).
            InternalError: the model thread has died.
        """
        future = Ticket()
        with self._cond:
            if self.error is not None:
                raise InternalError("the model thread has stopped; the server must be restarted")
            if self._closing or not self._thread.is_alive():
                raise Unavailable("the server is shutting down", retry_after_s=5)
            if len(self._pending) >= self.max_queue:
                raise Overloaded(f"the queue is full ({self.max_queue} requests waiting); retry shortly")
            if deadline is None:
                deadline = time.monotonic() + self.request_timeout_s
            self._pending.append(_Job(prepared, future, deadline))
            self._cond.notify()
        return future

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop taking work, let the thread finish what is queued within ``timeout_s``, then fail
        whatever is still waiting with 503."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        with self._cond:
            while self._pending:
                job = self._pending.popleft()
                if not job.future.done():
                    job.future.set_exception(Unavailable("the server is shutting down", retry_after_s=5))

    # ---------------------------------------------------------------- model thread

    def _run(self) -> None:
        try:
            while True:
                batch = self._next_batch()
                if batch is None:
                    return
                if batch:
                    self._run_batch(batch)
                    self._maybe_trim()
        except BaseException as exc:  # the thread must never die silently, nor leave callers waiting
            self.error = exc
            log.critical("the model thread died: %s", type(exc).__name__, exc_info=True)
            with self._cond:
                orphans = [*self._running, *self._pending]
                self._pending.clear()
            for job in orphans:
                if not job.future.done():
                    job.future.set_exception(InternalError("the model thread has stopped; see the server log"))
            raise

    def _maybe_trim(self) -> None:
        """Give freed memory back at most once per ``TRIM_INTERVAL_S`` (see :mod:`decisiond.memory`)."""
        now = time.monotonic()
        if now - self._last_trim >= TRIM_INTERVAL_S:
            self._last_trim = now
            release_free_memory()

    def _next_batch(self) -> list[_Job] | None:
        """Block for work; gather within the window and the budget. None once closed and drained.

        The window is waited only under load, and only until as many requests wait as the last batch
        held (the clients that are cycling): a lone client is never delayed, while concurrent
        clients' requests merge into fuller micro-batches instead of alternating half-batches.
        """
        with self._cond:
            while not self._pending:
                if self._closing:
                    return None
                self._cond.wait()
            last = self.stats.batch_sizes[-1] if self.stats.batch_sizes else 1
            if self.max_wait_s > 0 and last > 1 and not self._closing:
                gather_until = time.monotonic() + self.max_wait_s
                while (
                    len(self._pending) < last
                    and self._queued_cost() < self.max_batch_tokens
                    and (left := gather_until - time.monotonic()) > 0
                ):
                    self._cond.wait(left)
            return self._take()

    def _queued_cost(self) -> int:
        return sum(job.prepared.cost for job in self._pending)

    def _take(self) -> list[_Job]:
        """Pop jobs up to the token budget (at least one live job), dropping dead ones."""
        batch: list[_Job] = []
        cost = 0
        now = time.monotonic()
        while self._pending:
            job = self._pending[0]
            if batch and cost + job.prepared.cost > self.max_batch_tokens:
                break
            self._pending.popleft()
            if now > job.deadline:
                self.stats.expired += 1
                if job.future.set_running_or_notify_cancel():
                    job.future.set_exception(
                        Overloaded(f"the request waited over {self.request_timeout_s:g} s in the queue; retry later")
                    )
                continue
            if not job.future.set_running_or_notify_cancel():
                continue  # the client went away: its work is not computed for nobody
            batch.append(job)
            cost += job.prepared.cost
        return batch

    def _run_batch(self, batch: list[_Job]) -> None:
        """Run one batch and resolve its futures; split it in halves on out-of-memory."""
        self._running = batch
        self._batch_started = time.monotonic()
        for job in batch:
            job.future.queue_ms = (self._batch_started - job.submitted) * 1000.0
        live = self._complete(batch)
        if live:
            self._run_part(live)
        self._running = []

    def _complete(self, batch: list[_Job]) -> list[_Job]:
        """The backend's model-thread stage for the whole batch; fail the requests it refuses."""
        try:
            refused = self.backend.complete([job.prepared for job in batch])
        except Exception as exc:
            self._fail(batch, exc, out_of_memory=False)
            return []
        live = []
        for job, error in zip(batch, refused, strict=True):
            if error is None:
                live.append(job)
            else:
                self._stamp(job, len(batch))
                job.future.set_exception(error)
        return live

    def _stamp(self, job: _Job, batch_size: int) -> None:
        """Record the model time of ``job`` before its future is resolved (the caller reads it then)."""
        job.future.model_ms = (time.monotonic() - self._batch_started) * 1000.0
        job.future.batch_size = batch_size

    def _run_part(self, batch: list[_Job]) -> None:
        try:
            readout = self._compute(batch)
        except Exception as exc:
            out_of_memory = is_out_of_memory(exc)
            self._fail(batch, exc, out_of_memory)
            exc.__traceback__ = None  # do not pin the batch's tensors through the traceback frames
            del exc
            if not out_of_memory:
                return
            _release_device_memory()
            if len(batch) > 1:  # retry the halves outside the except block: the failed frames are gone
                half = len(batch) // 2
                self._run_part(batch[:half])
                self._run_part(batch[half:])
            return
        self.stats.batches += 1
        self.stats.requests += len(batch)
        self.stats.batch_sizes.append(len(batch))
        self.stats.size_counts[len(batch)] += 1
        start = 0
        for job in batch:
            stop = start + len(job.prepared.work.questions)
            self._stamp(job, len(batch))
            job.future.set_result(readout.slice(start, stop))
            start = stop

    def _compute(self, batch: list[_Job]) -> Readout:
        """Forward and readout for ``batch``."""
        questions = [q for job in batch for q in job.prepared.work.questions]
        return read_output(self.backend, questions, self.backend.forward([job.prepared for job in batch]))

    def _fail(self, batch: list[_Job], exc: Exception, out_of_memory: bool) -> None:
        """Log a failed batch; fail its requests unless it will be split and retried."""
        if out_of_memory:
            self.stats.out_of_memory += 1
            log.warning(
                "out of memory on a batch of %d requests; %s",
                len(batch),
                "retrying it in halves" if len(batch) > 1 else "refusing the request",
            )
            if len(batch) > 1:
                return
        else:
            log.error("a batch of %d requests failed: %s", len(batch), type(exc).__name__, exc_info=exc)
        self.stats.failed += len(batch)
        for job in batch:
            self._stamp(job, len(batch))
            job.future.set_exception(
                Unavailable(
                    "the request does not fit in the model's memory even alone; send a shorter state or fewer "
                    "questions, or retry when the server is less busy",
                    retry_after_s=5,
                )
                if out_of_memory
                else InternalError("the model failed on this batch; see the server log")
            )
