"""The backend contract: a batch of requests' slots in, one logit per slot out.

A backend knows how to load and run one model family; it knows nothing of the queue or the wire
(TGI's split of model code from the batching loop). Work is staged (LitServe, infinity):
:meth:`Backend.prepare` runs on a request thread (tokenise, check token limits, count usage) and
:meth:`Backend.forward` runs on the engine's model thread over a micro-batch of prepared requests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from ..errors import MaxTokensExceeded
from ..render import Kind, Question


@dataclass(frozen=True)
class Work:
    """What one request asks of a backend.

    Attributes:
        state (Any): the state as sent (str, dict or list).
        questions (tuple[Question, ...]): the questions in request order.
        images (tuple[Any, ...]): decoded RGB ``PIL.Image`` objects, for models that read images.
        question_ids (tuple[str, ...]): the caller's ids, in question order (empty when unknown).
            Model backends must never read them (an id is the caller's handle: renaming it never
            changes an answer, spec/wire.md §2); only the ``scripted`` backend does, because a
            script addresses questions by the ids the application's code uses.
    """

    state: Any
    questions: tuple[Question, ...]
    images: tuple[Any, ...] = ()
    question_ids: tuple[str, ...] = ()

    @property
    def num_slots(self) -> int:
        """Slots of all questions together."""
        return sum(q.size for q in self.questions)


@dataclass
class Prepared:
    """One request after the CPU stage, ready for the model thread.

    Attributes:
        work (Work): the request's work.
        input_tokens (int): tokens the model reads for this request (``usage.input_tokens``).
        cost (int): tokens this request adds to a micro-batch (the ``max_batch_tokens`` budget).
        features (Any): whatever the backend's ``forward`` needs (token ids, pixel values, …).
    """

    work: Work
    input_tokens: int
    cost: int
    features: Any = None


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
    caches: dict[str, dict[str, int]] = field(default_factory=dict)


class Backend(ABC):
    """One loaded model that turns slots into logits.

    Subclasses set :attr:`family` and implement :meth:`prepare` and :meth:`forward`. Logits are
    raw: the per-question temperature from :meth:`temperature` is applied by the readout.
    """

    family: ClassVar[str] = "abstract"
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

    def temperature(self, kind: Kind) -> float:
        """The temperature of questions of ``kind`` (> 0). Defaults to the manifest's scalar."""
        return self._temperature

    @abstractmethod
    def prepare(self, work: Work) -> Prepared:
        """CPU stage for one request: tokenise, count tokens, check :attr:`limits`.

        Raises:
            MaxTokensExceeded: the request is over a token budget.
            ApiUsageError: the request asks something this backend cannot read.
        """

    @abstractmethod
    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        """Model stage for a micro-batch, on the model thread.

        Args:
            batch (Sequence[Prepared]): requests from :meth:`prepare`, in any mix.

        Returns:
            torch.Tensor: ``[N]`` float32 logits, N the slots of all requests: request after
            request, question after question, slot after slot.
        """

    def info(self) -> BackendInfo:
        """Device, dtype, limits and cache counters for ``/health``."""
        return BackendInfo(
            backend=self.family,
            device=str(self.device),
            dtype=str(self.dtype).removeprefix("torch."),
            max_tokens=self.limits.max_total_tokens,
            modalities=tuple(sorted(self.modalities)),
            caches=self.cache_stats(),
        )

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Per-cache counters (entries, bytes, hits, misses). None by default."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend holds (nothing by default)."""
