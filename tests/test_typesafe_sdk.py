"""The official ``typesafe-sdk``, pointed at decisiond with its ``base_url`` setting, in the three
offline modes: recording through ``decisiond record``, replaying the cassette, scripted answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from typesafe_sdk import Choice, Image, Noul, RetryPolicy, TypeSafeClient, TypeSafeNotFoundError

from decisiond.app import create_app
from decisiond.backends.scripted import scripted_manifest
from decisiond.config import Settings
from decisiond.inprocess import BackgroundServer
from decisiond.pytest_plugin import ServerSpec, start_server
from decisiond.record import create_record_app

from .conftest import fake_service
from .fake_upstream import UPSTREAM_MODEL, upstream_app

STATE = "I was charged twice and need the refund today."
#: A 1x1 PNG.
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
    "53de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)
QUESTIONS = {
    "team": Choice(instructions="Which team?", criteria={"billing": None, "technical": None}),
    "urgent": Noul(instructions="Is it urgent?"),
}


def _sdk(base_url: str) -> TypeSafeClient:
    # decisiond needs no key; the SDK insists on one, so any placeholder will do
    return TypeSafeClient(
        api_key="offline-test", base_url=base_url, retry=RetryPolicy(max_retries=0), compression=False
    )


def test_the_sdk_records_and_then_replays_the_same_answers(tmp_path: Path) -> None:
    cassette = tmp_path / "sdk.jsonl"
    seen: list[dict[str, str]] = []
    with (
        BackgroundServer(upstream_app(seen)) as upstream,
        BackgroundServer(create_record_app(upstream.base_url, cassette)) as proxy,
    ):
        with _sdk(proxy.base_url) as sdk:
            recorded = sdk.system_one(STATE, QUESTIONS)
            recorded_models = [m.name for m in sdk.models.list().models]
    assert recorded.model == UPSTREAM_MODEL and recorded.choices["team"].choice == "technical"
    assert "offline-test" not in cassette.read_text(encoding="utf-8")
    assert seen[0]["authorization"] == "Bearer offline-test"  # passed on upstream only

    app = create_app(Settings(replay=[cassette]))
    with BackgroundServer(app) as replay, _sdk(replay.base_url) as sdk:
        replayed = sdk.system_one(STATE, QUESTIONS)
        replayed_models = [m.name for m in sdk.models.list().models]
        with pytest.raises(TypeSafeNotFoundError):
            sdk.system_one("An unrecorded ticket.", QUESTIONS)
    assert replayed.model == recorded.model
    assert replayed.choices["team"].probabilities == recorded.choices["team"].probabilities
    assert replayed.nouls["urgent"].noul == recorded.nouls["urgent"].noul == 0.8125
    assert replayed_models == recorded_models == [UPSTREAM_MODEL]


def test_compressed_and_multipart_requests_are_recorded_and_replayed(tmp_path: Path) -> None:
    """Regression: the recording proxy skipped every encoded body, so the SDK's default (zstd from 1 KiB)
    recorded nothing. The upstream gets the body as sent; the cassette holds the JSON it stands for."""
    cassette = tmp_path / "sdk.jsonl"
    settings = Settings(max_wait_ms=0)
    long_state = STATE + " More details follow about the order and the charge." * 30
    photo = Image(_PNG)
    defaults = {"api_key": "offline-test", "retry": RetryPolicy(max_retries=0)}  # compression: the SDK's default
    with (
        BackgroundServer(create_app(settings, service=fake_service(settings, read_images=True))) as upstream,
        BackgroundServer(create_record_app(upstream.base_url, cassette)) as proxy,
        TypeSafeClient(base_url=proxy.base_url, **defaults) as sdk,  # type: ignore[arg-type]
    ):
        recorded = [
            sdk.system_one(long_state, QUESTIONS),
            sdk.system_one("A photo: <p>", QUESTIONS, assets={"<p>": photo}),
        ]
    assert len(cassette.read_text(encoding="utf-8").splitlines()) == 2
    with (
        BackgroundServer(create_app(Settings(replay=[cassette]))) as replay,
        TypeSafeClient(base_url=replay.base_url, **defaults) as sdk,  # type: ignore[arg-type]
    ):
        replayed = [
            sdk.system_one(long_state, QUESTIONS),
            sdk.system_one("A photo: <p>", QUESTIONS, assets={"<p>": photo}),
        ]
    assert [r.answers for r in replayed] == [r.answers for r in recorded]
    assert replayed[1].usage == recorded[1].usage


def test_the_sdk_reads_scripted_answers(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        'model = "jev-scripted"\n[[rules]]\nquestion = "team"\nanswer = "billing"\n'
        '[[rules]]\nquestion = "urgent"\nstate = "today"\nyes = 0.9\n',
        encoding="utf-8",
    )
    assert scripted_manifest(rules).name == "jev-scripted"
    server = start_server(ServerSpec(scripted=rules))
    try:
        with _sdk(server.base_url) as sdk:
            answer = sdk.system_one(STATE, QUESTIONS)
    finally:
        server.close()
    assert answer.model == "jev-scripted"
    assert answer.choices["team"].choice == "billing" and answer.choices["team"].confidence == 1.0
    assert answer.nouls["urgent"].noul == 0.9
