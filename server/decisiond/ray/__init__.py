"""decisiond on Ray Serve: one deployment per model behind an ingress that serves the same wire.

``serve run decisiond.ray:app model=minilm-l6 models_dir=models`` (or a Serve config file, see
``deploy/serve.yaml``) builds the application from the same manifests and :class:`Settings` as
``decisiond serve``: the arguments are Settings' fields (``DECISIOND_*`` environment variables too),
plus ``num_replicas``, ``num_cpus`` and ``num_gpus`` for every model at once. Each model's
deployment is named after the model, so a Serve config sets its replicas, autoscaling, CPUs and
GPUs under ``deployments: - name: <model>``; the ingress deployment is ``decisiond``.
``decisiond serve --ray-address ADDR`` deploys the same application to a running cluster
(:func:`deploy`).

Ray is an optional dependency (``pip install 'decisiond[ray]'``); nothing else imports this package.
"""

from __future__ import annotations

import logging
from typing import Any

from ray import serve
from ray.serve import Application

from ..config import Settings
from ..manifest import Manifest
from .deployments import Ingress, ModelReplica

log = logging.getLogger("decisiond.ray")

#: The ingress deployment's name (the models' deployments are named after the models).
INGRESS = "decisiond"
#: Requests one model replica holds at once (Ray's ``max_ongoing_requests``; its engine batches them).
MAX_ONGOING_REQUESTS = 32
#: Arguments of :func:`app_builder` that are not Settings' fields.
EXTRA_ARGS = ("num_replicas", "num_cpus", "num_gpus")


def build(
    settings: Settings,
    manifests: list[Manifest],
    *,
    num_replicas: int | None = None,
    actor_options: dict[str, Any] | None = None,
) -> Application:
    """The Ray Serve application serving ``manifests`` (the first is the default model).

    Each model deployment holds :data:`MAX_ONGOING_REQUESTS` requests per replica and lets
    ``settings.max_queue`` more wait in Ray before it refuses (503 with ``Retry-After`` at the
    ingress); a Serve config overrides both per model.

    Args:
        settings (Settings): as for ``decisiond serve``.
        manifests (list[Manifest]): at least one, with distinct names.
        num_replicas (int, optional): replicas of every model. Defaults to Ray's (1), or the config's.
        actor_options (dict, optional): ``ray_actor_options`` of every model's replicas (``num_cpus``,
            ``num_gpus``, fractions allowed). Defaults to one CPU per replica, or the config's.

    Raises:
        ValueError: no manifests, or two with the same name.
    """
    names = [m.name for m in manifests]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"a Ray application needs one or more models with distinct names, got {names}")
    extra: dict[str, Any] = {} if num_replicas is None else {"num_replicas": num_replicas}
    if actor_options:
        extra["ray_actor_options"] = actor_options
    models = {
        m.name: ModelReplica.options(  # type: ignore[attr-defined]
            name=m.name, max_ongoing_requests=MAX_ONGOING_REQUESTS, max_queued_requests=settings.max_queue, **extra
        ).bind(m, settings)
        for m in manifests
    }
    return Ingress.options(name=INGRESS).bind(models, manifests, settings)  # type: ignore[attr-defined,no-any-return]


def settings_from_args(args: dict[str, Any]) -> tuple[Settings, dict[str, Any]]:
    """Settings (over the environment's) and the keyword arguments of :func:`build`
    (``num_replicas``, ``actor_options``) from an application's arguments.

    Raises:
        ValueError: an argument that is neither a Settings field nor ``num_replicas`` (never ignored),
            or a bad value (pydantic's message names the field).
    """
    unknown = sorted(set(args) - set(Settings.model_fields) - set(EXTRA_ARGS))
    if unknown:
        raise ValueError(f"unknown decisiond.ray arguments {unknown}; they are Settings fields or {EXTRA_ARGS}")
    given = {k: v for k, v in args.items() if k not in EXTRA_ARGS}
    options: dict[str, Any] = {}
    if args.get("num_replicas") is not None:
        options["num_replicas"] = int(args["num_replicas"])
    actor = {k: float(args[k]) for k in ("num_cpus", "num_gpus") if args.get(k) is not None}
    if actor:
        options["actor_options"] = actor
    return Settings(**given), options


def app_builder(args: dict[str, Any]) -> Application:
    """Ray Serve's application builder (``serve run decisiond.ray:app key=value ...``).

    Args:
        args (dict[str, Any]): Settings fields (``model``: names or manifest paths, comma-separated;
            ``models_dir``; limits; ``api_keys_file``; ...), ``num_replicas``, ``num_cpus`` and ``num_gpus``
            (each model's replicas; a Serve config's ``deployments`` override them per model).

    Raises:
        ValueError: an unknown argument or a bad value.
        ManifestError: a model's manifest or weights are not here.
    """
    from ..cli import _resolve_manifests

    settings, options = settings_from_args(args)
    manifests = _resolve_manifests(settings)
    if not manifests:
        raise ValueError("strict replay serves no model: run it with `decisiond serve`, not on Ray")
    return build(settings, manifests, **options)


#: ``serve run decisiond.ray:app``: Ray calls the builder with the command line's ``key=value`` pairs.
app = app_builder


def deploy(settings: Settings, address: str) -> int:
    """``decisiond serve --ray-address ADDR``: deploy the application to a running Ray cluster under
    the name ``decisiond`` at route ``/``, wait until it is ready, and return (it keeps running in
    the cluster; ``serve delete decisiond`` removes it). Returns the process exit code.
    """
    import ray

    from ..cli import _resolve_manifests

    manifests = _resolve_manifests(settings)
    ray.init(address=address, logging_level=logging.WARNING)
    serve.run(build(settings, manifests), name=INGRESS, route_prefix="/")
    log.info("deployed %s to the Ray cluster at %s", ", ".join(m.name for m in manifests), address)
    return 0


__all__ = ["Ingress", "ModelReplica", "app", "app_builder", "build", "deploy", "settings_from_args"]
