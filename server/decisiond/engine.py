"""The dynamic batcher: a bounded queue of prepared requests and one model thread.

Request handlers call :meth:`Engine.submit`, which admits a request or refuses it at once (queue
full, stopping: 503 ``overloaded_error``) and returns a :class:`concurrent.futures.Future`. The
model thread blocks for the first waiting request, gathers more for up to ``max_wait_ms`` (0: take
what is queued) within a token budget of ``max_batch_tokens``, drops what was cancelled or waited
past ``request_timeout_s``, runs the backend once for the micro-batch, runs the readout for every
question of the batch at once, and resolves each future with its own slice. A failed batch fails
its requests only; the thread lives on (Kev's ``Server``, LitServe's batching loop).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field

from .backends.base import Backend, Prepared
from .errors import InternalError, Overloaded
from .readout import Readout, read

log = logging.getLogger("decisiond.engine")


@dataclass
class _Job:
    prepared: Prepared
    future: Future[Readout]
    deadline: float  # time.monotonic() seconds


@dataclass
class EngineStats:
    """Counters for ``/health`` and ``/metrics``."""

    batches: int = 0
    requests: int = 0
    expired: int = 0
    failed: int = 0
    batch_sizes: deque[int] = field(default_factory=lambda: deque(maxlen=1000))

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
        >>> readout = engine.submit(backend.prepare(work)).result()
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
        self._pending: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=f"decisiond-model-{backend.family}", daemon=True)
        self.error: BaseException | None = None

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

    def submit(self, prepared: Prepared) -> Future[Readout]:
        """Queue one prepared request.

        Raises:
            Overloaded: the queue is full, or the engine is stopping or its thread has died.
        """
        future: Future[Readout] = Future()
        with self._cond:
            if self._closing or not self._thread.is_alive():
                raise Overloaded("the server is shutting down", retry_after_s=5)
            if len(self._pending) >= self.max_queue:
                raise Overloaded(f"the queue is full ({self.max_queue} requests waiting); retry shortly")
            self._pending.append(_Job(prepared, future, time.monotonic() + self.request_timeout_s))
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
                    job.future.set_exception(Overloaded("the server is shutting down", retry_after_s=5))

    # ---------------------------------------------------------------- model thread

    def _run(self) -> None:
        try:
            while True:
                batch = self._next_batch()
                if batch is None:
                    return
                if batch:
                    self._run_batch(batch)
        except BaseException as exc:  # the thread must never die silently
            self.error = exc
            log.critical("the model thread died: %s", type(exc).__name__, exc_info=True)
            raise

    def _next_batch(self) -> list[_Job] | None:
        """Block for work; gather within the window and the budget. None once closed and drained."""
        with self._cond:
            while not self._pending:
                if self._closing:
                    return None
                self._cond.wait()
            if self.max_wait_s > 0 and not self._closing:
                gather_until = time.monotonic() + self.max_wait_s
                while self._queued_cost() < self.max_batch_tokens and (left := gather_until - time.monotonic()) > 0:
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
        questions = [q for job in batch for q in job.prepared.work.questions]
        try:
            logits = self.backend.forward([job.prepared for job in batch])
            expected = sum(job.prepared.work.num_slots for job in batch)
            if logits.numel() != expected:
                raise RuntimeError(f"the backend gave {logits.numel()} logits for {expected} slots")
            readout = read(logits, [q.size for q in questions], [self.backend.temperature(q.kind) for q in questions])
        except Exception as exc:
            self.stats.failed += len(batch)
            log.error("a batch of %d requests failed: %s", len(batch), type(exc).__name__, exc_info=True)
            for job in batch:
                job.future.set_exception(InternalError("the model failed on this batch; see the server log"))
            exc.__traceback__ = None  # do not pin the batch's tensors through the traceback frames
            return
        self.stats.batches += 1
        self.stats.requests += len(batch)
        self.stats.batch_sizes.append(len(batch))
        start = 0
        for job in batch:
            stop = start + len(job.prepared.work.questions)
            job.future.set_result(readout.slice(start, stop))
            start = stop
