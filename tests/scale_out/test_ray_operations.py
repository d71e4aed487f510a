"""Serving through Ray: replicas, a replica killed under load, back-pressure, auth, conformance.

The fake backend (keyword counts, an optional ``delay_ms`` per batch) stands in for a model where
what is tested is Ray's side: it loads at once, so replicas come and go in seconds.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from decisiond.config import Settings
from decisiond.manifest import Manifest, Weights, find_manifest
from decisiond.testing.requests import TRIAGE

from .conftest import REPLICA, RayServe, post, wait_for

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")
from ray import serve  # noqa: E402

from decisiond.ray import build  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KEY = "ray-test-key-5b1d"
MARKER = "SECRET-RAY-MARKER-90ce"
NOUL = {"type": "noul", "instructions": "Does the customer ask for money back?"}


def fake(name: str, delay_ms: float = 0.0) -> Manifest:
    """A fake-backend manifest (no weights are read); each batch takes ``delay_ms``."""
    return Manifest(name=name, backend="fake", weights=Weights(path="."), delay_ms=delay_ms)


def replica_names(app: str, deployment: str) -> list[str]:
    """The actor names of the replicas Ray runs now for ``deployment`` of ``app``."""
    actors = ray.util.list_named_actors(all_namespaces=True)
    prefix = f"SERVE_REPLICA::{app}#{deployment}#"
    return sorted(a["name"] for a in actors if a["name"].startswith(prefix))


def running(app: str, deployment: str) -> int:
    """Replicas of ``deployment`` that Serve reports RUNNING."""
    states = serve.status().applications[app].deployments[deployment].replica_states
    return int(states.get("RUNNING", 0))


async def flood(url: str, count: int, kill: Any = None) -> list[tuple[str, httpx.Response | BaseException]]:
    """``count`` requests at once, each with its own ``x-request-id``; ``kill()`` runs once they are in flight."""
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=count)) as client:

        async def one(request_id: str) -> httpx.Response:
            body = {"state": f"refund {request_id}", "questions": {"refund": NOUL}}
            return await client.post(f"{url}/v1/systemone", json=body, headers={"x-request-id": request_id})

        ids = [uuid.uuid4().hex for _ in range(count)]
        tasks = [asyncio.create_task(one(i)) for i in ids]
        if kill is not None:
            await asyncio.sleep(0.5)
            await asyncio.to_thread(kill)
        results = await asyncio.gather(*tasks, return_exceptions=True)
    return list(zip(ids, results, strict=True))


def assert_one_response_each(results: list[tuple[str, httpx.Response | BaseException]]) -> dict[int, int]:
    """Every request got exactly one HTTP response, for itself: 200, or 503/529 with ``Retry-After``.
    Returns the count of each status."""
    counts: dict[int, int] = {}
    for request_id, response in results:
        assert isinstance(response, httpx.Response), f"{request_id}: no response ({response!r})"
        assert response.headers.get_list("x-request-id") == [request_id]
        counts[response.status_code] = counts.get(response.status_code, 0) + 1
        if response.status_code == 200:
            assert response.json()["answers"]["refund"]["type"] == "noul"
        else:
            assert response.status_code in (503, 529), response.text
            assert int(response.headers["retry-after"]) >= 1
    return counts


def test_two_replicas_of_one_model_and_two_models_at_once(ray_serve: RayServe, deployed: Any) -> None:
    settings = Settings(max_wait_ms=2)
    url = deployed(build(settings, [fake("fake-a"), fake("fake-b")], num_replicas=2, actor_options=REPLICA), "two")
    assert running("two", "fake-a") == 2 and running("two", "fake-b") == 2
    for model in ("fake-a", "fake-b", None):
        body = {"state": "refund me", "questions": {"refund": NOUL}, **({"model": model} if model else {})}
        response = post(url, body)
        assert response.status_code == 200, response.text
        assert response.json()["model"] == (model or "fake-a")  # no model: the first one served
    unknown = post(url, {"state": "x", "questions": {"refund": NOUL}, "model": "fake-c"})
    assert unknown.status_code == 400 and "fake-a" in unknown.json()["detail"]["message"]
    assert [m["name"] for m in httpx.get(f"{url}/v1/models").json()["models"]] == ["fake-a", "fake-b"]


def test_a_replica_killed_under_load_is_replaced_and_every_request_gets_one_response(
    ray_serve: RayServe, deployed: Any
) -> None:
    settings = Settings(max_wait_ms=2, max_queue=8)  # 8 may wait in Ray beyond the replicas' 2 x 32
    url = deployed(build(settings, [fake("slow", delay_ms=40)], num_replicas=2, actor_options=REPLICA), "kill")
    before = replica_names("kill", "slow")
    assert len(before) == 2

    def kill() -> None:
        ray.kill(ray.get_actor(before[0], namespace="serve"), no_restart=True)

    counts = assert_one_response_each(asyncio.run(flood(url, 120, kill)))
    assert counts.get(200, 0) > 0, counts
    replaced = lambda: running("kill", "slow") == 2 and before[0] not in replica_names("kill", "slow")  # noqa: E731
    wait_for(replaced, 90, "a new replica")

    def all_answered() -> bool:  # the ingress's router may still try the dead replica once (503, Retry-After)
        return assert_one_response_each(asyncio.run(flood(url, 20))) == {200: 20}

    wait_for(all_answered, 30, "every request answered by the new replicas")


def test_back_pressure_answers_overloaded_with_retry_after(ray_serve: RayServe, deployed: Any) -> None:
    """Ray refuses what it cannot place (503 with Retry-After, from the ingress); the replica's engine
    never refuses what Ray let in: its queue follows max_ongoing_requests (32), not the 2 of --max-queue,
    which is how many may wait in Ray. (Ray counts a request as queued until a replica is picked for it,
    so fewer than 32 + 2 get in when 60 arrive at once.)"""
    settings = Settings(max_wait_ms=2, max_queue=2)
    app = build(settings, [fake("busy", delay_ms=1000)], actor_options=REPLICA)
    url = deployed(app, "busy")
    results = asyncio.run(flood(url, 60))
    counts = assert_one_response_each(results)
    assert 3 < counts.get(200, 0) < 60, counts  # an engine queue of 2: 1 running + 2 queued
    refused = [r for _, r in results if isinstance(r, httpx.Response) and r.status_code != 200]
    refusals = {r.json()["detail"]["message"] for r in refused}
    assert refusals == {"every replica of busy is busy or starting; retry shortly"}


def test_auth_holds_through_ray_and_no_marker_reaches_a_response_or_a_log(ray_serve: RayServe, deployed: Any) -> None:
    settings = Settings(max_wait_ms=2, api_keys=SecretStr(KEY))
    url = deployed(build(settings, [fake("locked")], actor_options=REPLICA), "locked")
    body = {"state": MARKER, "questions": {"q": {"type": "noul", "instructions": MARKER, "criteria": {"true": MARKER}}}}
    missing = post(url, body)
    wrong = post(url, body, headers={"Authorization": f"Bearer {MARKER}"})
    right = post(url, body, headers={"Authorization": f"Bearer {KEY}"})
    models = httpx.get(f"{url}/v1/models")
    assert (missing.status_code, wrong.status_code, right.status_code, models.status_code) == (403, 401, 200, 403)
    assert httpx.get(f"{url}/health").json() == {"status": "ok"}
    for response in (missing, wrong, right):
        assert MARKER not in response.text and KEY not in response.text
    assert MARKER not in ray_serve.log_text()
    assert KEY not in ray_serve.log_text()


def test_jevcompat_must_and_should_through_the_ray_ingress(ray_serve: RayServe, deployed: Any) -> None:
    settings = Settings(models_dir=ROOT / "models", api_keys=SecretStr(KEY))
    url = deployed(build(settings, [find_manifest("minilm-l6", ROOT / "models")], actor_options=REPLICA), "jev")
    assert post(url, TRIAGE, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    jevcompat = str(Path(sys.executable).parent / "jevcompat")
    done = subprocess.run([jevcompat, "test", url, "--key", KEY], capture_output=True, text=True, timeout=600)
    # with a key the two auth SHOULDs run as well (13 + 2); the summary counts every requirement run
    assert "MUST 32/32, SHOULD 15/15" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]


def test_decisiond_serve_with_a_ray_address_deploys_to_the_running_cluster(ray_serve: RayServe, tmp_path: Path) -> None:
    manifest = tmp_path / "cli-fake.toml"
    manifest.write_text('name = "cli-fake"\nbackend = "fake"\n\n[weights]\npath = "."\n', encoding="utf-8")
    address = ray.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, "-m", "decisiond.cli", "serve", "--ray-address", address, "--model", str(manifest)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    try:
        assert done.returncode == 0, done.stderr[-3000:]
        assert [m["name"] for m in httpx.get(f"{ray_serve.url}/v1/models").json()["models"]] == ["cli-fake"]
        answered = post(ray_serve.url, {"state": "refund", "questions": {"refund": NOUL}})
        assert answered.status_code == 200 and answered.json()["model"] == "cli-fake"
    finally:
        ray_serve.delete("decisiond")
