"""Answers through Ray equal single-process answers, for every tiny backend, several models at once.

Each group of tiny models (``decisiond.testing.tiny.TINY_MODELS``) is served by one Ray application,
one deployment per model, and each model is also loaded here in one process. Generated requests
(states of any Unicode and nested JSON, choice questions of 2 to 12 options) are sent to the model
they name through Ray's HTTP proxy and answered here by :meth:`Service.decide`; the status, the
model, every winner and every probability must agree. The wire rounds to 4 decimals, so two
probabilities that agree within 1e-5 before rounding differ by at most one rounding step (1e-4)
after it; a replica runs torch with Ray's thread count, so sums may be ordered differently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decisiond.config import Settings
from decisiond.errors import DecisionError
from decisiond.manifest import read_manifest
from decisiond.service import Service, load_model
from decisiond.testing.tiny import TINY_MODELS, tiny_manifest
from decisiond.wire import DecisionRequest

from .conftest import REPLICA, RayServe, post

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")

#: One rounding step of the wire's 4 decimals: the most two values within 1e-5 can differ once rounded.
STEP = 1e-4 + 1e-9
KINDS = sorted(TINY_MODELS)
#: Three applications of three models each (about 3 GiB of replicas at a time, not 9).
GROUPS = [KINDS[i : i + 3] for i in range(0, len(KINDS), 3)]

json_leaves = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=20)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
states = st.text(min_size=1, max_size=200) | st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=4)


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A request with a choice of 2 to 12 options, a noul and a score about a generated state."""
    n = draw(st.integers(2, 12))
    label = st.text(min_size=1, max_size=12).map(str.strip).filter(bool)
    labels = draw(st.lists(label, min_size=n, max_size=n, unique=True))
    return {
        "state": draw(states),
        "questions": {
            "pick": {"type": "choice", "instructions": "Which one fits?", "criteria": {k: None for k in labels}},
            "yes": {"type": "noul", "instructions": "Is the customer upset?"},
            "level": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "mid", "high"]},
        },
    }


def assert_same(through_ray: Any, here: Any, where: str = "") -> None:
    """Equal JSON, numbers within one rounding step of the wire."""
    if isinstance(here, float) or isinstance(through_ray, float):
        assert abs(float(through_ray) - float(here)) <= STEP, f"{where}: {through_ray} != {here}"
    elif isinstance(here, dict):
        assert list(through_ray) == list(here), where
        for key in here:
            assert_same(through_ray[key], here[key], f"{where}/{key}")
    else:
        assert through_ray == here, where


def assert_same_answers(through_ray: dict[str, Any], here: dict[str, Any]) -> None:
    """Same answers; a choice's winner may differ only where its top two are within a rounding step."""
    for qid, answer in here.items():
        other = through_ray[qid]
        if answer["type"] == "choice" and other["choice"] != answer["choice"]:
            top = sorted(answer["probabilities"].values())[-2:]
            assert top[1] - top[0] <= STEP, f"{qid}: winner {other['choice']!r} != {answer['choice']!r}"
            other = {**other, "choice": answer["choice"]}
        assert_same(other, answer, qid)


def local_answer(service: Service, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Status and body of ``body`` decided in this process."""
    try:
        request = DecisionRequest.model_validate(body)
        decision = asyncio.run(service.decide(request))
    except DecisionError as exc:
        return exc.status, exc.body()  # type: ignore[return-value]
    return 200, decision.body


@pytest.fixture(scope="module", params=GROUPS, ids=["+".join(g) for g in GROUPS])
def group(
    request: pytest.FixtureRequest, ray_serve: RayServe, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Service]]:
    """One Ray application serving a group of tiny models, and the same models in one local service."""
    from decisiond.ray import build

    folder: Path = tmp_path_factory.mktemp("tiny-ray")
    manifests = [read_manifest(tiny_manifest(kind, folder)) for kind in request.param]
    settings_ = Settings(models_dir=folder, max_wait_ms=2)
    local = Service([load_model(m, settings_) for m in manifests], settings_)
    name = "answers-" + str(GROUPS.index(request.param))
    url = ray_serve.deploy(build(settings_, manifests, actor_options=REPLICA), name)
    try:
        yield url, local
    finally:
        ray_serve.delete(name)
        local.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies(), pick=st.integers(0, 2))
def test_ray_answers_equal_single_process_answers(group: tuple[str, Service], body: dict[str, Any], pick: int) -> None:
    url, local = group
    served = local.models[pick % len(local.models)]
    body = {**body, "model": served.name}
    status, expected = local_answer(local, body)
    response = post(url, body)
    assert response.status_code == status, response.text
    got = response.json()
    if status != 200:
        assert got == expected
        return
    assert got["model"] == served.name  # routed to the deployment of the model it names
    assert got["usage"] == expected["usage"]
    assert_same_answers(got["answers"], expected["answers"])


def test_every_model_of_the_group_is_listed_with_its_replicas_device(group: tuple[str, Service]) -> None:
    url, local = group
    import httpx

    cards = httpx.get(f"{url}/v1/models", timeout=30).json()["models"]
    assert cards == [served.card() for served in local.models]
