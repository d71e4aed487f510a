"""The playground's serving, without a browser: the page and its files, ``--no-playground``, the
environment switch, and the package data that puts the page in a wheel."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from decisiond import cli
from decisiond.app import create_app
from decisiond.config import Settings
from decisiond.playground import ASSETS, FILES

from ..conftest import ROOT, fake_service


def _app(argv: list[str]) -> Iterator[tuple[Settings, TestClient]]:
    settings = cli._settings(cli.build_parser().parse_args(["serve", *argv]))
    service = fake_service(settings)
    try:
        yield settings, TestClient(create_app(settings, service=service))
    finally:
        service.close()


def test_the_page_and_its_files_are_served_with_a_strict_content_security_policy() -> None:
    for settings, client in _app([]):
        assert settings.playground is True
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        for name in FILES:
            assert f'"playground/{name}"' in page.text
            served = client.get(f"/playground/{name}")
            assert served.status_code == 200 and served.content == (ASSETS / name).read_bytes()
        assert client.get("/playground/__init__.py").status_code == 404
        assert "/" not in client.get("/openapi.json").json()["paths"]


def test_no_playground_makes_the_root_a_json_404_like_any_unknown_route() -> None:
    for settings, client in _app(["--no-playground"]):
        assert settings.playground is False
        for path in ("/", "/playground/app.js"):
            response = client.get(path)
            assert response.status_code == 404
            assert response.json()["detail"]["error_type"] == "not_found_error"
        assert client.get("/health").status_code == 200


def test_the_environment_turns_the_playground_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISIOND_PLAYGROUND", "false")
    assert Settings().playground is False


def test_every_file_of_the_page_is_package_data_and_nothing_is_fetched_from_elsewhere() -> None:
    """A wheel holds the page (setuptools package-data), and the page names no outside URL (no CDN)."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = patterns["decisiond.playground"]
    files = [p for p in ASSETS.iterdir() if p.is_file() and p.suffix != ".py"]
    assert {p.name for p in files} == {"index.html", *FILES}
    for path in files:
        assert any(path.match(pattern) for pattern in shipped), path.name
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", path.read_text(encoding="utf-8")), path.name
