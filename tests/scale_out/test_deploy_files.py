"""deploy/serve.yaml and deploy/rayservice.yaml are valid, agree, and fit the application decisiond.ray builds.

The Serve config is checked with Ray's own schema (``ServeDeploySchema``); kubectl needs a cluster
to validate a custom resource, so the RayService is checked against the KubeRay ``ray.io/v1`` fields
it uses (a JSON schema of that part of the CRD, closed so a misspelt field fails), and for what
KubeRay cannot check: every resource a model's replicas ask for is offered by a worker group.
No Ray instance is started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from decisiond.config import Settings
from decisiond.manifest import Manifest, Weights

pytestmark = pytest.mark.ray
pytest.importorskip("ray")
jsonschema = pytest.importorskip("jsonschema")
from ray.serve._private.build_app import build_app  # noqa: E402
from ray.serve.schema import ServeDeploySchema  # noqa: E402

from decisiond.ray import INGRESS, build, settings_from_args  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
POD_TEMPLATE = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "required": ["containers"],
            "properties": {
                "containers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "object", "required": ["name", "image"]},
                }
            },
        }
    },
}
WORKER_GROUP = {
    "type": "object",
    "required": ["groupName", "rayStartParams", "template"],
    "additionalProperties": False,
    "properties": {
        "groupName": {"type": "string"},
        "replicas": {"type": "integer", "minimum": 0},
        "minReplicas": {"type": "integer", "minimum": 0},
        "maxReplicas": {"type": "integer", "minimum": 0},
        "rayStartParams": STRINGS,
        "template": POD_TEMPLATE,
    },
}
#: The part of KubeRay's RayService CRD (ray.io/v1) that deploy/rayservice.yaml uses.
RAYSERVICE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayService"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["serveConfigV2", "rayClusterConfig"],
            "additionalProperties": False,
            "properties": {
                "serveConfigV2": {"type": "string"},
                "rayClusterConfig": {
                    "type": "object",
                    "required": ["headGroupSpec"],
                    "additionalProperties": False,
                    "properties": {
                        "rayVersion": {"type": "string"},
                        "enableInTreeAutoscaling": {"type": "boolean"},
                        "headGroupSpec": {
                            "type": "object",
                            "required": ["rayStartParams", "template"],
                            "additionalProperties": False,
                            "properties": {"rayStartParams": STRINGS, "template": POD_TEMPLATE},
                        },
                        "workerGroupSpecs": {"type": "array", "items": WORKER_GROUP},
                    },
                },
            },
        },
    },
}


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / name).read_text(encoding="utf-8"))
    return loaded


def test_the_serve_config_is_valid_for_ray() -> None:
    config = ServeDeploySchema.model_validate(load("serve.yaml"))
    assert [app.import_path for app in config.applications] == ["decisiond.ray:app"]


def test_the_rayservice_has_the_kuberay_fields_and_says_what_the_serve_config_says() -> None:
    service = load("rayservice.yaml")
    jsonschema.validate(service, RAYSERVICE)
    serve_config = yaml.safe_load(service["spec"]["serveConfigV2"])
    ServeDeploySchema.model_validate(serve_config)
    assert serve_config["applications"] == load("serve.yaml")["applications"]
    assert service["spec"]["rayClusterConfig"]["rayVersion"] == __import__("ray").__version__


def test_every_resource_a_replica_asks_for_is_offered_by_a_worker_group() -> None:
    service = load("rayservice.yaml")
    groups = service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    gpus = {g["groupName"]: float(g["rayStartParams"].get("num-gpus", 0)) for g in groups}
    custom = {g["groupName"]: yaml.safe_load(g["rayStartParams"].get("resources", '"{}"')) for g in groups}
    offered = {name: yaml.safe_load(text) for name, text in custom.items()}  # a JSON object inside quotes
    for deployment in yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]["deployments"]:
        options = deployment.get("ray_actor_options", {})
        if options.get("num_gpus", 0) > 0:
            assert max(gpus.values()) >= options["num_gpus"], deployment["name"]
        for resource in options.get("resources", {}):
            assert any(resource in r for r in offered.values()), (deployment["name"], resource)


def test_the_configs_deployments_are_the_ones_the_builder_makes() -> None:
    """Ray refuses a config naming a deployment the application does not have: the names in
    serve.yaml must be the ingress and the models its args name."""
    app_config = load("serve.yaml")["applications"][0]
    settings, options = settings_from_args({**app_config["args"], "api_keys_file": None})
    manifests = [Manifest(name=name, backend="fake", weights=Weights(path=".")) for name in settings.model]
    built = build_app(build(settings, manifests, **options), name="decisiond")
    names = sorted(d.name for d in built.deployments)
    assert names == sorted(d["name"] for d in app_config["deployments"])
    assert INGRESS in names


def test_the_builder_refuses_an_unknown_argument_and_reads_the_replica_options() -> None:
    with pytest.raises(ValueError, match="num_replica"):
        settings_from_args({"num_replica": 2})
    settings, options = settings_from_args(
        {"model": "a,b", "num_replicas": "2", "num_gpus": "0.5", "api_keys": "k", "max_queue": "9"}
    )
    assert settings.model == ["a", "b"] and settings.max_queue == 9 and settings.api_keys == SecretStr("k")
    assert options == {"num_replicas": 2, "actor_options": {"num_gpus": 0.5}}


def test_a_model_deployment_queues_what_ray_lets_in() -> None:
    """Each model's engine queue is its replicas' max_ongoing_requests; max_queue waits in Ray."""
    manifests = [Manifest(name="m", backend="fake", weights=Weights(path="."))]
    built = build_app(build(Settings(max_queue=7), manifests), name="x")
    model = next(d for d in built.deployments if d.name == "m")
    assert model._deployment_config.max_queued_requests == 7
    assert model._deployment_config.max_ongoing_requests >= 1
