"""Bearer auth (spec/wire.md §6): keys from settings, 403 missing, 401 wrong, /health without detail."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from decisiond.auth import AuthMiddleware, matches

from .reliability_support import VALID, served_app, settings

KEY = "sk-test-0123456789"


def test_keys_come_from_the_variable_and_the_file_without_blanks_or_comments(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text("# operators\nfile-key-1\n\n  file-key-2  \n#commented-out\n", encoding="utf-8")
    configured = settings(api_keys=" env-a, ,env-b ", api_keys_file=keys_file)
    assert configured.keys() == ("env-a", "env-b", "file-key-1", "file-key-2")
    assert settings().keys() == ()


def test_keys_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISIOND_API_KEYS", "key-alpha,key-beta")
    assert settings().keys() == ("key-alpha", "key-beta")
    assert "key-alpha" not in repr(settings())  # a SecretStr: settings can be logged without the keys


def test_an_unreadable_keys_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="missing-file"):
        settings(api_keys_file=tmp_path / "missing-file").keys()


def test_matches_compares_against_every_key() -> None:
    assert matches("b", [b"a", b"b", b"c"])
    assert not matches("", [b"a"])
    assert not matches("ä", [b"a"])
    with pytest.raises(ValueError):
        AuthMiddleware(None, [])  # type: ignore[arg-type]


def _calls(headers: dict[str, str]) -> dict[str, int]:
    async def run() -> dict[str, int]:
        async with served_app(settings(api_keys=KEY)) as (_, client):
            return {
                "decide": (await client.post("/v1/systemone", json=VALID, headers=headers)).status_code,
                "models": (await client.get("/v1/models", headers=headers)).status_code,
                "metrics": (await client.get("/metrics", headers=headers)).status_code,
                "health": (await client.get("/health", headers=headers)).status_code,
            }

    return asyncio.run(run())


def test_a_missing_key_is_403_a_wrong_key_401_and_the_right_key_passes() -> None:
    assert _calls({}) == {"decide": 403, "models": 403, "metrics": 403, "health": 200}
    assert _calls({"authorization": "Bearer wrong"}) == {"decide": 401, "models": 401, "metrics": 401, "health": 200}
    assert _calls({"authorization": f"Basic {KEY}"}) == {"decide": 401, "models": 401, "metrics": 401, "health": 200}
    assert _calls({"authorization": f"Bearer {KEY}"}) == {"decide": 200, "models": 200, "metrics": 200, "health": 200}
    assert _calls({"authorization": f"bearer  {KEY} "})["decide"] == 200


def test_refusals_carry_the_authentication_error_body_and_no_key() -> None:
    async def run() -> None:
        async with served_app(settings(api_keys=KEY)) as (_, client):
            missing = await client.post("/v1/systemone", json=VALID)
            wrong = await client.post("/v1/systemone", json=VALID, headers={"authorization": "Bearer guess-xyz"})
            for response in (missing, wrong):
                assert response.json()["detail"]["error_type"] == "authentication_error"
                assert "guess-xyz" not in response.text and KEY not in response.text
                assert response.headers["x-request-id"]

    asyncio.run(run())


def test_health_shows_only_the_status_when_keys_are_on() -> None:
    async def run() -> tuple[dict[str, object], dict[str, object]]:
        async with served_app(settings(api_keys=KEY)) as (_, client):
            locked = (await client.get("/health")).json()
        async with served_app() as (_, client):
            open_ = (await client.get("/health")).json()
        return locked, open_

    locked, open_ = asyncio.run(run())
    assert locked == {"status": "ok"}
    assert open_["status"] == "ok" and open_["model"] == "fake-model" and "models" in open_


def test_without_keys_an_authorization_header_is_ignored() -> None:
    async def run() -> int:
        async with served_app() as (_, client):
            response = await client.post("/v1/systemone", json=VALID, headers={"authorization": "Bearer anything"})
            return response.status_code

    assert asyncio.run(run()) == 200


def test_the_openapi_schema_declares_the_bearer_scheme_only_with_keys() -> None:
    async def run() -> tuple[dict[str, object], dict[str, object]]:
        async with served_app(settings(api_keys=KEY)) as (_, client):
            locked = (await client.get("/openapi.json")).json()
        async with served_app() as (_, client):
            open_ = (await client.get("/openapi.json")).json()
        return locked, open_

    locked, open_ = asyncio.run(run())
    assert "HTTPBearer" in locked["components"]["securitySchemes"]
    assert "securitySchemes" not in open_.get("components", {})
