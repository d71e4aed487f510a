"""Model ids (spec/wire.md §8): the hosted Jev ids answered by the default model, unknown ids refused,
--alias and --strict-models, and /v1/models listing every id of each model."""

from __future__ import annotations

import httpx
import pytest
from asgi_lifespan import LifespanManager

from decisiond.app import create_app
from decisiond.backends.fake import FakeBackend
from decisiond.cli import build_parser, main
from decisiond.config import Settings
from decisiond.model_names import DEFAULT_NAMES, HOSTED_JEV_IDS, name_table, parse_alias
from decisiond.service import ServedModel, Service, start_engine

from .conftest import fake_manifest

NOUL = {"type": "noul", "instructions": "Refund?"}
#: What client READMEs pin (issue 12), each of which must reach the default model.
PINNED = ["jev-1.13.0", "jev-1.13", "jev-1.14.0", "jev-preview", "typesafe/jev-1.13", "~typesafe/jev-latest"]


def _service(settings: Settings) -> Service:
    models = []
    for manifest in (fake_manifest("fake-1"), fake_manifest("fake-2", aliases=["second"])):
        backend = FakeBackend()
        models.append(ServedModel(manifest, backend, start_engine(backend, settings)))
    return Service(models, settings)


async def _post_models(settings: Settings, names: list[str | None]) -> list[httpx.Response]:
    service = _service(settings)
    app = create_app(settings, service=service)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            out = []
            for name in names:
                body = {"state": "x", "questions": {"q": NOUL}, **({"model": name} if name else {})}
                out.append(await client.post("/v1/systemone", json=body))
            out.append(await client.get("/v1/models"))
            return out


async def test_every_hosted_id_is_answered_by_the_default_model_which_the_response_names() -> None:
    *answers, models = await _post_models(Settings(max_wait_ms=0), [*HOSTED_JEV_IDS, None])
    for name, resp in zip([*HOSTED_JEV_IDS, None], answers, strict=True):
        assert resp.status_code == 200, (name, resp.text)
        assert resp.json()["model"] == "fake-1", name
    cards = {card["name"]: card for card in models.json()["models"]}
    assert set(HOSTED_JEV_IDS) | set(DEFAULT_NAMES) <= set(cards["fake-1"]["aliases"])
    assert cards["fake-2"]["aliases"] == ["second"]
    assert set(PINNED) <= set(HOSTED_JEV_IDS)


@pytest.mark.parametrize("name", ["jev-0.0-does-not-exist", "jev-1.12", "typesafe/jev-9", "JEV-LATEST", "jev-1.13 "])
async def test_an_id_no_server_has_is_still_400(name: str) -> None:
    (resp, _) = await _post_models(Settings(max_wait_ms=0), [name])
    assert resp.status_code == 400
    assert resp.json()["detail"]["error_type"] == "api_usage_error"
    assert "unknown model" in resp.json()["detail"]["message"]


async def test_strict_models_turns_the_hosted_ids_off_but_keeps_jev_latest_and_aliases() -> None:
    settings = Settings(max_wait_ms=0, strict_models=True, aliases=["judge=second"])
    pinned, latest, judge, models = await _post_models(settings, ["jev-1.13", "jev-latest", "judge"])
    assert pinned.status_code == 400
    assert latest.json()["model"] == "fake-1"
    assert judge.json()["model"] == "fake-2"
    cards = {card["name"]: card for card in models.json()["models"]}
    assert "jev-1.13" not in cards["fake-1"]["aliases"] and "judge" in cards["fake-2"]["aliases"]


def test_an_alias_may_take_a_hosted_id_for_another_model_but_not_a_served_name() -> None:
    models = [["fake-1"], ["fake-2", "second"]]
    table = name_table(models, ["jev-1.14=fake-2"])
    assert table["jev-1.14"] == 1 and table["jev-1.13"] == 0
    with pytest.raises(ValueError, match="no served model"):
        name_table(models, ["judge=nothing"])
    with pytest.raises(ValueError, match="already names another"):
        name_table(models, ["second=fake-1"])
    with pytest.raises(ValueError, match="NAME=MODEL"):
        parse_alias("judge")


def test_the_cli_reads_repeated_aliases_and_strict_models() -> None:
    args = build_parser().parse_args(["serve", "--alias", "a=fake-1", "--alias", "b = fake-1", "--strict-models"])
    assert args.aliases == ["a=fake-1", "b = fake-1"] and args.strict_models is True
    assert build_parser().parse_args(["serve"]).strict_models is None  # unset: the environment decides


def test_serve_refuses_an_alias_to_a_model_it_does_not_serve(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--alias", "judge=no-such-model", "--port", "0"]) == 2
    assert "no served model is named 'no-such-model'" in capsys.readouterr().err
    assert main(["serve", "--alias", "judge", "--port", "0"]) == 2
