"""Fixtures and helpers of the playground's browser tests: the served fake models, Chromium, driving the page.

decisiond serves two fake models (keyword-count logits; ``fake-vision`` reads images) on a free
loopback port. Without chromium the browser tests skip locally with the reason, and fail in CI
(``CI=true``, or ``DECISIOND_REQUIRE_BROWSER=1`` as ``.ci/run`` sets), where ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from decisiond.app import create_app
from decisiond.config import Settings
from decisiond.inprocess import BackgroundServer
from decisiond.manifest import Manifest, Weights
from decisiond.playground import FILES
from decisiond.testing import browser

KEY = "playground-test-key"
TEXT = Manifest(name="fake-text", backend="fake", weights=Weights(path="."), description="keyword counts")
VISION = Manifest(
    name="fake-vision",
    backend="fake",
    weights=Weights(path="."),
    description="reads images",
    modalities=["text", "image"],
)
#: The only paths the page may request: its own files and the two public routes.
ALLOWED_PATHS = {"/", *(f"/playground/{name}" for name in FILES), "/v1/models", "/v1/systemone"}


def require_browser() -> None:
    """Skip when chromium or Playwright is missing here; fail instead in CI, which must run these tests."""
    reason = browser.missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true" or os.environ.get("DECISIOND_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}: CI must run the playground test (.ci/run installs chromium)")
    pytest.skip(reason)


def serve(settings: Settings) -> Iterator[BackgroundServer]:
    """decisiond on both fake models, on a free loopback port, once they are loaded."""
    server = BackgroundServer(create_app(settings, manifests=[TEXT, VISION])).start()
    try:
        deadline = time.monotonic() + 30
        while httpx.get(server.base_url + "/health").json()["status"] != "ok":
            assert time.monotonic() < deadline, "the fake models did not load"
            time.sleep(0.05)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def server() -> Iterator[BackgroundServer]:
    yield from serve(Settings(model=["fake-text"], max_wait_ms=0))


@pytest.fixture(scope="package")
def auth_server() -> Iterator[BackgroundServer]:
    yield from serve(Settings(model=["fake-text"], max_wait_ms=0, api_keys=SecretStr(KEY)))


@pytest.fixture(scope="package")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    require_browser()
    with browser.chromium(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A new tab; at the end, no script error happened and nothing but the allowed paths was requested."""
    tab = chromium.new_page()
    errors: list[str] = []
    paths: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("request", lambda request: paths.append(httpx.URL(request.url).path))
    yield tab
    tab.close()
    assert errors == []
    assert set(paths) <= ALLOWED_PATHS


# -- driving the page ----------------------------------------------------------------------------


def open_page(page: Any, server: BackgroundServer, model: str | None = "fake-text") -> None:
    page.goto(server.base_url + "/")
    if model is not None:
        page.wait_for_selector(f'#model option[value="{model}"]', state="attached")
        page.select_option("#model", model)


def fill(page: Any, state: str, questions: list[dict[str, Any]]) -> None:
    """Replace the example with ``state`` and ``questions`` ({type, id, instructions, rows}) through the UI."""
    while page.locator(".remove-question").count():
        page.locator(".remove-question").first.click()
    page.fill("#state", state)
    for question in questions:
        page.click(f'[data-add="{question["type"]}"]')
        fieldset = page.locator("#questions .question").last
        fieldset.locator(".qid").fill(question["id"])
        fieldset.locator(".instructions").fill(question.get("instructions", ""))
        rows = question.get("rows", [])
        if question["type"] == "noul":
            fieldset.locator(".true").fill(rows[0] if rows else "")
            fieldset.locator(".false").fill(rows[1] if rows else "")
            continue
        while fieldset.locator(".criterion").count() > len(rows):
            fieldset.locator(".criterion button").last.click()
        while fieldset.locator(".criterion").count() < len(rows):
            fieldset.locator(".add-row").click()
        for i, row in enumerate(rows):
            if question["type"] == "choice":
                fieldset.locator(".key").nth(i).fill(row[0])
                fieldset.locator(".description").nth(i).fill(row[1] or "")
            else:
                fieldset.locator(".level").nth(i).fill(row)


def ask(page: Any) -> tuple[str, int]:
    """Click Ask; the body text the page posted and the status it got, once the page has drawn it."""
    with page.expect_response(lambda r: r.url.endswith("/v1/systemone")) as answer:
        page.click("#ask")
    page.wait_for_function("() => !document.querySelector('#ask').disabled")
    return answer.value.request.post_data, answer.value.status


READ_DOM = """() => [...document.querySelectorAll('#answers .answer')].map((s) => ({
  id: s.dataset.questionId, type: s.dataset.type, noul: s.dataset.noul, winner: s.dataset.winner,
  confidence: s.dataset.confidence, score: s.dataset.score,
  bars: [...s.querySelectorAll('.bar[data-key]')].map((b) => [b.dataset.key, b.dataset.probability,
    b.querySelector('.bar-fill').style.width]),
}))"""


def drawn(page: Any) -> list[dict[str, Any]]:
    return page.evaluate(READ_DOM)


def assert_drawn(drawn: list[dict[str, Any]], answers: dict[str, Any]) -> None:
    """The page drew every answer of the server's JSON, in order, with its numbers and bar lengths."""
    assert [d["id"] for d in drawn] == list(answers)
    for d in drawn:
        answer = answers[d["id"]]
        assert d["type"] == answer["type"]
        bars = [(key, float(p)) for key, p, _ in d["bars"]]
        for _, p, width in d["bars"]:  # each bar is as long as its probability
            assert float(width.removesuffix("%")) == pytest.approx(float(p) * 100, abs=1e-9)
        if answer["type"] == "noul":
            assert float(d["noul"]) == answer["noul"]
            assert bars == [("true", answer["noul"])]
            continue
        assert float(d["confidence"]) == answer["confidence"]
        assert bars == list(answer["probabilities"].items())
        if answer["type"] == "choice":
            assert d["winner"] == answer["choice"]
        else:
            assert float(d["score"]) == answer["score"]


def post(server: BackgroundServer, body: str, key: str | None = None) -> httpx.Response:
    """What the server answers httpx for ``body``, the text the page posted."""
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
    return httpx.post(server.base_url + "/v1/systemone", content=body.encode(), headers=headers)


def answers_of(server: BackgroundServer, body: str, key: str | None = None) -> dict[str, Any]:
    response = post(server, body, key)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer
