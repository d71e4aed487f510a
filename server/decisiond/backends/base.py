"""The backend contract: a batch of requests' slots in, one logit per slot out.

A backend knows how to load and run one model family; it knows nothing of the queue or the wire
(TGI's split of model code from the batching loop). Work is staged (LitServe, infinity):
:meth:`Backend.prepare` runs on a request thread (tokenise, check token limits, count usage) and
:meth:`Backend.forward` runs on the engine's model thread over a micro-batch of prepared requests.
A backend whose ``prepare`` only renders (:attr:`Backend.light_prepare`) tokenises in
:meth:`Backend.complete` instead, on the model thread, one call for the whole micro-batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from ..calibration import Calibration
from ..errors import MaxTokensExceeded
from ..readout import BoxCandidates
from ..render import Kind, Question


@dataclass(frozen=True)
class Work:
    """What one request asks of a backend.

    Attributes:
        state (Any): the state as sent (str, dict or list).
        questions (tuple[Question, ...]): the questions in request order.
        images (tuple[Any, ...]): decoded RGB ``PIL.Image`` objects, for models that read images.
        image_names (tuple[str | None, ...]): per image, its asset placeholder (None for an image
            of the ``images`` array), so that a backend can take placeholders out of the text it reads.
        question_ids (tuple[str, ...]): the caller's ids, in question order (empty when unknown).
            Model backends must never read them (an id is the caller's handle: renaming it never
            changes an answer, spec/wire.md §2); only the ``scripted`` backend does, because a
            script addresses questions by the ids the application's code uses.
    """

    state: Any
    questions: tuple[Question, ...]
    images: tuple[Any, ...] = ()
    question_ids: tuple[str, ...] = ()
    image_names: tuple[str | None, ...] = ()

    @property
    def num_slots(self) -> int:
        """Slots of all questions together."""
        return sum(q.size for q in self.questions)


@dataclass(frozen=True)
class Logits:
    """What :meth:`Backend.forward` gives for a batch with ``box`` questions.

    Attributes:
        slots (torch.Tensor): ``[N]`` one logit per slot of the other questions (a box has none).
        boxes (BoxCandidates): the candidates of every box question, in question order.
    """

    slots: torch.Tensor
    boxes: BoxCandidates


@dataclass
class Prepared:
    """One request after the CPU stage, ready for the model thread.

    Attributes:
        work (Work): the request's work.
        input_tokens (int): tokens the model reads for this request (``usage.input_tokens``).
        cost (int): tokens this request adds to a micro-batch (the ``max_batch_tokens`` budget).
        features (Any): whatever the backend's ``forward`` needs (token ids, pixel values, …).
        extra (dict[str, Any]): top-level ``x_`` fields the response carries (spec/wire.md §3),
            e.g. what was cut to fit a window; empty for most requests.
        warnings (tuple[str, ...]): notes for the caller about how the request was read (the
            response's ``x_warnings``), e.g. a state the model cannot read.
    """

    work: Work
    input_tokens: int
    cost: int
    features: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TokenLimits:
    """Per-request token budgets (400 ``max_tokens_exceeded`` above them).

    Attributes:
        max_state_tokens (int): tokens of the state, all windows together.
        max_total_tokens (int): tokens of the state and every slot together.
    """

    max_state_tokens: int = 32768
    max_total_tokens: int = 65536

    def check(self, state_tokens: int, total_tokens: int) -> None:
        """Raise :class:`MaxTokensExceeded` naming the budget and the fix when one is exceeded."""
        if state_tokens > self.max_state_tokens:
            raise MaxTokensExceeded(
                f"the state is {state_tokens} tokens; this server reads at most {self.max_state_tokens} "
                "(shorten the state or raise --max-state-tokens)"
            )
        if total_tokens > self.max_total_tokens:
            raise MaxTokensExceeded(
                f"the state and questions are {total_tokens} tokens; this server reads at most "
                f"{self.max_total_tokens} per request (ask fewer questions or raise --max-total-tokens)"
            )


@dataclass
class BackendInfo:
    """What ``/health`` and ``/v1/models`` show of a loaded backend."""

    backend: str
    device: str
    dtype: str
    max_tokens: int
    modalities: tuple[str, ...]
    question_types: tuple[str, ...] = ("choice", "noul", "score")
    caches: dict[str, dict[str, int]] = field(default_factory=dict)


class Backend(ABC):
    """One loaded model that turns slots into logits.

    Subclasses set :attr:`family` and implement :meth:`prepare` and :meth:`forward`. Logits are
    raw: the per-question temperature from :meth:`temperature` is applied by the readout.

    :attr:`question_types` names the question types the backend answers; the service refuses any
    other type with 400 before the backend sees the request (a ``box`` on a model that cannot
    locate things, spec/wire.md §8). A backend that answers ``box`` adds it there.
    """

    family: ClassVar[str] = "abstract"
    #: The question types this backend answers (``noul``, ``choice``, ``score``, ``box``).
    question_types: ClassVar[frozenset[str]] = frozenset({"noul", "choice", "score"})
    #: True when :meth:`prepare` only renders text (microseconds, no tokeniser): the service then
    #: calls it on the event loop instead of hopping to a thread, and the tokenising, the exact
    #: token counts and the token-limit checks happen in :meth:`complete` on the model thread.
    light_prepare: ClassVar[bool] = False
    #: The side, in pixels, of the images the model reads (images are decoded no larger than needed
    #: for it, :mod:`decisiond.media`); None: full size.
    image_side: int | None = None

    def __init__(
        self,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        temperature: float = 1.0,
        limits: TokenLimits | None = None,
        modalities: frozenset[str] = frozenset({"text"}),
    ) -> None:
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        self.device = torch.device(device)
        self.dtype = dtype
        self._temperature = float(temperature)
        self.limits = limits or TokenLimits()
        self.modalities = modalities
        #: The manifest's ``[calibration]`` (set by the loader); applied by the engine before the readout.
        self.calibration = Calibration()

    def temperature(self, kind: Kind) -> float:
        """The temperature of questions of ``kind`` (> 0). Defaults to the manifest's scalar."""
        return self._temperature

    def complements(self, question: Question) -> bool:
        """Whether this backend answers ``question`` as the complement of its affirmative: a negated
        noul ("Is it not late?") read as "Is it late?", its two logits swapped.

        The calibration's noul offset belongs to the question the model read, so for such a noul it is
        applied to the other side (:meth:`~decisiond.calibration.Calibration.apply`): a question and its
        negation then still sum to 1 after calibration. False by default (every question read as asked).
        """
        return False

    @abstractmethod
    def prepare(self, work: Work) -> Prepared:
        """CPU stage for one request: tokenise, count tokens, check :attr:`limits`.

        Raises:
            MaxTokensExceeded: the request is over a token budget.
            ApiUsageError: the request asks something this backend cannot read.
        """

    def complete(self, batch: Sequence[Prepared]) -> list[Exception | None]:
        """Model-thread stage before :meth:`forward`, over a whole micro-batch at once: tokenise
        what :meth:`prepare` left undone, set each request's ``input_tokens`` and ``cost``, check
        the token limits. Requests already completed are left as they are.

        Returns:
            list[Exception | None]: per request, in order, None or the error that refuses it alone
            (:class:`~decisiond.errors.MaxTokensExceeded`); the engine fails those requests and
            runs the rest. The default has nothing to do.
        """
        return [None] * len(batch)

    @abstractmethod
    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor | Logits:
        """Model stage for a micro-batch, on the model thread.

        Args:
            batch (Sequence[Prepared]): requests from :meth:`prepare`, in any mix.

        Returns:
            torch.Tensor | Logits: ``[N]`` float32 logits, N the slots of all requests: request
            after request, question after question, slot after slot; a backend that answers
            ``box`` returns :class:`Logits`, those slot logits with the box questions' candidates.
        """

    def info(self) -> BackendInfo:
        """Device, dtype, limits and cache counters for ``/health``."""
        return BackendInfo(
            backend=self.family,
            device=str(self.device),
            dtype=str(self.dtype).removeprefix("torch."),
            max_tokens=self.limits.max_total_tokens,
            modalities=tuple(sorted(self.modalities)),
            question_types=tuple(sorted(self.question_types)),
            caches=self.cache_stats(),
        )

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Per-cache counters (entries, bytes, hits, misses). None by default."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend holds (nothing by default)."""
