"""The ingress side of a model that runs in Ray Serve replicas: a :class:`~decisiond.service.Service`
whose :meth:`~decisiond.service.Service.run` sends the checked request to the model's deployment.

Everything before that seam (the wire's limits, resolving ``model``, refusing media the model
cannot read) and everything around it (routes, validation, errors, auth, body limits, metrics,
request ids) is the single-process app's own code, unchanged: the ingress is ``create_app`` given a
:class:`RayService`. A replica answers with a :class:`Refusal` instead of raising a
:class:`~decisiond.errors.DecisionError`, so the ingress answers the same status, body and headers
(``Retry-After`` included) as one process would.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backends import BackendInfo, backend_class
from ..config import Settings
from ..engine import EngineStats
from ..errors import DecisionError, InternalError, Overloaded
from ..manifest import Manifest
from ..service import Decision, ServedModel, Service, deadline_of, past_deadline, until_answered
from ..wire import DecisionRequest

log = logging.getLogger("decisiond.ray")

#: Seconds a client is told to wait when Ray refuses (back-pressure) or a replica is gone.
RETRY_AFTER_S = 1
#: How often a request waiting on a replica checks whether its client is still there (seconds).


@dataclass(frozen=True)
class Refusal:
    """A replica's :class:`~decisiond.errors.DecisionError`, as plain data that pickles whatever
    the error class's constructor looks like."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]

    @classmethod
    def of(cls, exc: DecisionError) -> Refusal:
        """The status, body and headers ``exc`` is answered with."""
        return cls(exc.status, exc.body(), dict(exc.headers))

    def error(self) -> RelayedError:
        """The error to raise at the ingress (answered by the app's one error handler)."""
        return RelayedError(self)


class RelayedError(DecisionError):
    """A refusal made by a replica, answered at the ingress exactly as the replica made it."""

    def __init__(self, refusal: Refusal) -> None:
        detail = refusal.body.get("detail")
        super().__init__(str(detail.get("message", "")) if isinstance(detail, dict) else "", headers=refusal.headers)
        self.status = refusal.status
        self.refusal = refusal

    def body(self) -> Any:
        return self.refusal.body


@dataclass
class RemoteBackend:
    """What the ingress knows of a model's backend: its manifest's modalities, and the
    :class:`BackendInfo` a replica reported (``None`` until one has answered)."""

    manifest: Manifest
    reported: BackendInfo | None = None

    @property
    def modalities(self) -> frozenset[str]:
        """What media the model reads (the manifest's, as the backend's)."""
        return frozenset(self.manifest.modalities)

    @property
    def family(self) -> str:
        """The backend's name."""
        return self.manifest.backend

    @property
    def question_types(self) -> frozenset[str]:
        """The question types the model answers: its backend class's (the ingress loads no model)."""
        return backend_class(self.manifest.backend).question_types

    def info(self) -> BackendInfo:
        """A replica's report, or the manifest's fields before any replica has answered."""
        if self.reported is not None:
            return self.reported
        dtype = str(self.manifest.dtype or "auto")
        return BackendInfo(
            self.manifest.backend, "ray", dtype, 0, tuple(self.modalities), tuple(sorted(self.question_types))
        )

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Caches live in the replicas; the ingress holds none."""
        return {}

    def close(self) -> None:
        """Nothing to release: Ray owns the replicas."""


@dataclass
class RemoteEngine:
    """The ingress's view of a model's engines: Ray health-checks and replaces the replicas, so the
    ingress never reports a model as dead; batch statistics live in each replica."""

    stats: EngineStats = field(default_factory=EngineStats)
    error: BaseException | None = None
    alive: bool = True
    closing: bool = False

    def queue_depth(self) -> int:
        """Requests queue in Ray and in the replicas, not at the ingress."""
        return 0

    def close(self, timeout_s: float = 10.0) -> None:
        """Nothing to stop: Ray owns the replicas."""


def remote_model(manifest: Manifest) -> ServedModel:
    """A :class:`ServedModel` whose backend and engine live in Ray replicas."""
    return ServedModel(manifest, RemoteBackend(manifest), RemoteEngine())  # type: ignore[arg-type]


def _ray_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """Ray's exceptions for "refused, try again" and "the replica went away"."""
    from ray import exceptions as rex
    from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

    gone = (rex.RayActorError, rex.ActorUnavailableError, rex.WorkerCrashedError, rex.ObjectLostError)
    return (BackPressureError, DeploymentUnavailableError), gone


class RayService(Service):
    """A :class:`Service` whose models run in Ray Serve deployments.

    Args:
        models (Sequence[ServedModel]): from :func:`remote_model`, the first the default.
        settings (Settings): the ingress's limits (the same as the replicas').
        handles (dict[str, Any]): a ``DeploymentHandle`` per model name (``serve.handle``).
    """

    def __init__(self, models: Sequence[ServedModel], settings: Settings, handles: dict[str, Any]) -> None:
        super().__init__(models, settings)
        self.handles = handles

    async def run(
        self,
        request: DecisionRequest,
        served: ServedModel,
        started: float,
        client_gone: Callable[[], Awaitable[Any]] | None = None,
        arrived: float | None = None,
    ) -> Decision:
        """Send the checked request to a replica of ``served`` and answer what it answers, within the
        request timeout counted from ``arrived`` (as :meth:`decisiond.service.Service.run`).

        Raises:
            RelayedError: the replica refused the request (its status, body and headers).
            Overloaded: Ray refused it (every replica full: back-pressure), the replica stopped
                while it held the request, or the request timeout passed (``Retry-After``; the
                request was not answered).
            ClientGone: the client left; the replica's work is cancelled.
            InternalError: any other failure in Ray (logged).
        """
        refused, gone = _ray_errors()
        response = self.handles[served.name].decide.remote(request)
        deadline = deadline_of(arrived, self.settings.request_timeout_s)
        try:
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    outcome = await until_answered(response, client_gone, response.cancel)
            except TimeoutError:
                response.cancel()
                raise past_deadline(self.settings.request_timeout_s, RETRY_AFTER_S) from None
        except refused:
            busy = f"every replica of {served.name} is busy or starting; retry shortly"
            raise Overloaded(busy, retry_after_s=RETRY_AFTER_S) from None
        except gone as exc:
            log.warning("a replica of %s stopped while it held a request: %s", served.name, type(exc).__name__)
            raise Overloaded(f"a replica of {served.name} stopped; retry", retry_after_s=RETRY_AFTER_S) from None
        except DecisionError:
            raise
        except Exception as exc:
            log.error("Ray failed a request to %s: %s", served.name, type(exc).__name__, exc_info=exc)
            raise InternalError("internal server error") from None
        if isinstance(outcome, Refusal):
            raise outcome.error()
        decision: Decision = outcome
        decision.timings_ms["total"] = (time.perf_counter() - started) * 1000.0
        decision.body["x_latency_ms"] = round(decision.timings_ms["total"], 2)
        return decision
