"""The two Ray Serve deployments of a decisiond application.

:class:`ModelReplica`: one per model; each replica loads its model once and runs its own
:class:`~decisiond.engine.Engine`, so dynamic batching (and batch invariance) hold inside a replica.
Its engine's queue holds as many requests as Ray lets into the replica (``max_ongoing_requests``),
so the engine never refuses what Ray admitted; the overflow waits in Ray (``max_queued_requests``)
and beyond that Ray refuses it, which the ingress answers as overloaded with ``Retry-After``.

:class:`Ingress`: the HTTP side, ``create_app`` over a :class:`~decisiond.ray.remote.RayService`
(``@serve.ingress`` with the app built in the replica, ``__serve_build_asgi_app__``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI
from ray import serve
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..backends import BackendInfo
from ..config import Settings
from ..errors import DecisionError
from ..logs import configure
from ..manifest import Manifest
from ..service import Decision, Service, load_model
from ..wire import DecisionRequest
from .remote import RayService, Refusal, remote_model

log = logging.getLogger("decisiond.ray")

REQUEST_ID = b"x-request-id"


def replica_queue(settings: Settings) -> Settings:
    """``settings`` with ``max_queue`` set to this replica's ``max_ongoing_requests`` (when it runs
    in a Ray Serve replica), so the engine queues every request Ray lets in."""
    try:
        config = serve.get_replica_context()._deployment_config
    except Exception:  # not in a replica (a unit test calling the class directly)
        return settings
    return settings.model_copy(update={"max_queue": max(1, int(config.max_ongoing_requests))})


@serve.deployment(ray_actor_options={"num_cpus": 1})
class ModelReplica:
    """One replica of one model: its backend, its engine, and :meth:`decide`.

    Args:
        manifest (Manifest): the model.
        settings (Settings): device, dtype, batching and limits (the same as ``decisiond serve``'s).
    """

    def __init__(self, manifest: Manifest, settings: Settings) -> None:
        configure(settings.log_level, settings.log_format)
        self.settings = replica_queue(settings)
        self.served = load_model(manifest, self.settings)
        self.service = Service([self.served], self.settings)

    async def decide(self, request: DecisionRequest) -> Decision | Refusal:
        """Run a request the ingress has checked (:meth:`Service.run`); a refusal comes back as data.

        Returns:
            Decision | Refusal: the decision, or the status, body and headers of the refusal.
        """
        try:
            return await self.service.run(request, self.served, time.perf_counter())
        except DecisionError as exc:
            return Refusal.of(exc)

    def info(self) -> BackendInfo:
        """The backend's device, dtype, limits and caches (for ``/v1/models`` and ``/health``)."""
        return self.served.backend.info()

    def check_health(self) -> None:
        """Ray's health check: a replica whose model thread died is replaced.

        Raises:
            RuntimeError: the engine has stopped.
        """
        engine = self.served.engine
        if engine.error is not None or not (engine.alive or engine.closing):
            raise RuntimeError(f"the model thread of {self.served.name} has stopped")

    def __del__(self) -> None:
        service = getattr(self, "service", None)
        if service is not None:
            service.close(self.settings.shutdown_timeout_s)


@serve.deployment(max_ongoing_requests=1024, ray_actor_options={"num_cpus": 0})
@serve.ingress()
class Ingress:
    """The wire (``/v1/systemone``, ``/v1/models``, ``/health``, ``/metrics``, the playground): the
    single-process app, whose models are the model deployments.

    Args:
        models (dict[str, Any]): a ``DeploymentHandle`` per model name, the default first.
        manifests (list[Manifest]): the models, in the same order.
        settings (Settings): limits, keys, the playground.
    """

    async def __init__(self, models: dict[str, Any], manifests: list[Manifest], settings: Settings) -> None:
        configure(settings.log_level, settings.log_format)
        self.settings = settings
        served = [remote_model(manifest) for manifest in manifests]
        for model in served:  # each model's device and dtype, as its replicas loaded it
            model.backend.reported = await models[model.name].info.remote()  # type: ignore[attr-defined]
        self.service = RayService(served, settings, models)

    def __serve_build_asgi_app__(self) -> FastAPI:
        """The single-process app (``create_app``) over this ingress's :class:`RayService`."""
        from ..app import create_app

        app = create_app(self.settings, service=self.service)
        app.add_middleware(DropEchoedRequestId)
        return app


class DropEchoedRequestId:
    """Ray's HTTP proxy adds ``x-request-id`` (the one it passed in) to every response; the app adds
    the same id. This outermost layer drops the app's copy when it equals the id Ray passed in, so a
    response carries the header once, as it does from ``decisiond serve``.

    Args:
        app (ASGIApp): the app inside.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(REQUEST_ID)

        async def send_once(message: Message) -> None:
            if message["type"] == "http.response.start" and sent is not None:
                message["headers"] = [(k, v) for k, v in message.get("headers", []) if (k, v) != (REQUEST_ID, sent)]
            await send(message)

        await self.app(scope, receive, send_once)
