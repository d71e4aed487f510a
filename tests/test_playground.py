"""The playground at ``/`` in a real headless browser (Debian's chromium, driven by Playwright).

decisiond serves two fake models (keyword-count logits, one of them reads images) on a free
loopback port; the page asks questions of each type; what it draws (read from the DOM's ``data-``
attributes and bar widths) must equal the JSON answer the server gives httpx for the very body
the page sent, and the curl command and Python code it shows must get the same answers.

Without chromium the browser tests skip locally with the reason, and fail in CI (``CI=true``, or
``DECISIOND_REQUIRE_BROWSER=1`` as ``.ci/run`` sets), where ``.ci/run`` installs it.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from pydantic import SecretStr
from starlette.testclient import TestClient

import decisiond.client
from decisiond import cli
from decisiond.app import create_app
from decisiond.client import encode
from decisiond.config import Settings
from decisiond.inprocess import BackgroundServer
from decisiond.manifest import Manifest, Weights
from decisiond.playground import ASSETS, FILES
from decisiond.testing import browser

from .conftest import ROOT, fake_service

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


def _require_browser() -> None:
    reason = browser.missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true" or os.environ.get("DECISIOND_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}: CI must run the playground test (.ci/run installs chromium)")
    pytest.skip(reason)


def _serve(settings: Settings) -> Iterator[BackgroundServer]:
    server = BackgroundServer(create_app(settings, manifests=[TEXT, VISION])).start()
    try:
        deadline = time.monotonic() + 30
        while httpx.get(server.base_url + "/health").json()["status"] != "ok":
            assert time.monotonic() < deadline, "the fake models did not load"
            time.sleep(0.05)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    yield from _serve(Settings(model=["fake-text"], max_wait_ms=0))


@pytest.fixture(scope="module")
def auth_server() -> Iterator[BackgroundServer]:
    yield from _serve(Settings(model=["fake-text"], max_wait_ms=0, api_keys=SecretStr(KEY)))


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _require_browser()
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


def _open(page: Any, server: BackgroundServer, model: str | None = "fake-text") -> None:
    page.goto(server.base_url + "/")
    if model is not None:
        page.wait_for_selector(f'#model option[value="{model}"]', state="attached")
        page.select_option("#model", model)


def _fill(page: Any, state: str, questions: list[dict[str, Any]]) -> None:
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


def _ask(page: Any) -> tuple[str, int]:
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


def _drawn(page: Any) -> list[dict[str, Any]]:
    return page.evaluate(READ_DOM)


def _assert_drawn(drawn: list[dict[str, Any]], answers: dict[str, Any]) -> None:
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


def _post(server: BackgroundServer, body: str, key: str | None = None) -> httpx.Response:
    """What the server answers httpx for ``body``, the text the page posted."""
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
    return httpx.post(server.base_url + "/v1/systemone", content=body.encode(), headers=headers)


def _answers(server: BackgroundServer, body: str, key: str | None = None) -> dict[str, Any]:
    response = _post(server, body, key)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


# -- the browser tests ---------------------------------------------------------------------------

STATE = '{"ticket": "refund refund 2 shipping shipping shipping angry angry calm true", "1": "true false"}'
QUESTIONS: list[dict[str, Any]] = [
    {
        "type": "choice",
        "id": "team",
        "instructions": "Which team?",
        "rows": [["refund", "Money back"], ["2", None], ["shipping", "Parcels"]],
    },
    {"type": "noul", "id": "is urgent? ✓", "instructions": "Is it urgent?", "rows": ["true", "false"]},
    {"type": "noul", "id": "refund asked", "instructions": "Does it ask for a refund?"},
    {"type": "score", "id": "7", "instructions": "How angry?", "rows": ["calm", "annoyed", "angry"]},
]
#: The wire body those inputs describe (spec/wire.md §2); the state exactly as typed.
EXPECTED = {
    "model": "fake-text",
    "state": json.loads(STATE),
    "questions": {
        "team": {
            "type": "choice",
            "instructions": "Which team?",
            "criteria": {"refund": "Money back", "2": None, "shipping": "Parcels"},
        },
        "is urgent? ✓": {
            "type": "noul",
            "instructions": "Is it urgent?",
            "criteria": {"true": "true", "false": "false"},
        },
        "refund asked": {"type": "noul", "instructions": "Does it ask for a refund?"},
        "7": {"type": "score", "instructions": "How angry?", "criteria": ["calm", "annoyed", "angry"]},
    },
}


@pytest.mark.slow
def test_each_question_type_is_drawn_as_the_server_answers(page: Any, server: BackgroundServer) -> None:
    _open(page, server)
    _fill(page, STATE, QUESTIONS)
    sent, status = _ask(page)
    assert status == 200
    body = json.loads(sent)
    assert body == EXPECTED
    # order kept where a JavaScript object would move integer-like keys first
    assert list(body["state"]) == ["ticket", "1"]
    assert list(body["questions"]) == ["team", "is urgent? ✓", "refund asked", "7"]
    assert list(body["questions"]["team"]["criteria"]) == ["refund", "2", "shipping"]
    answer = _answers(server, sent)
    probabilities = answer["answers"]["team"]["probabilities"]
    assert len(set(probabilities.values())) == 3, "the inputs must give distinct bars, or the test proves little"
    _assert_drawn(_drawn(page), answer["answers"])
    assert page.get_attribute("#results", "data-input-tokens") == str(answer["usage"]["input_tokens"])
    assert page.is_hidden("#error")


def _run_curl(command: str, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any] | None:
    if shutil.which("curl") is None or shutil.which("bash") is None:
        return None
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=30, env={**os.environ, **(env or {})}
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _run_python(code: str, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(cwd)
    namespace: dict[str, Any] = {}
    exec(compile(code, "<playground python>", "exec"), namespace)  # the page's own code, shown to users
    body: dict[str, Any] = dict(namespace["response"].body)
    return body


@pytest.mark.slow
def test_the_curl_and_python_code_get_the_same_answers(
    page: Any, server: BackgroundServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _open(page, server)
    sent, _ = _ask(page)  # the example the page opens with: a choice, a noul with both sides, a score
    answers = _answers(server, sent)["answers"]
    _assert_drawn(_drawn(page), answers)
    curl = _run_curl(page.inner_text("#curl"), tmp_path)
    assert curl is None or curl["answers"] == answers
    assert _run_python(page.inner_text("#python"), tmp_path, monkeypatch)["answers"] == answers


def _png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.slow
def test_an_image_is_sent_as_a_data_url_to_a_model_that_reads_images(
    page: Any, server: BackgroundServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = tmp_path / "red dot's.png"
    image.write_bytes(_png())
    _open(page, server, "fake-text")
    assert page.is_hidden("#images-block"), "a text model offers no image input"
    page.select_option("#model", "fake-vision")
    assert page.is_visible("#images-block")
    page.set_input_files("#images", str(image))
    page.wait_for_selector("#image-list li")
    sent, status = _ask(page)
    assert status == 200
    body = json.loads(sent)
    assert body["model"] == "fake-vision"
    assert body["images"] == ["data:image/png;base64," + base64.b64encode(image.read_bytes()).decode()]
    answer = _answers(server, sent)
    without = _answers(server, json.dumps({k: v for k, v in body.items() if k != "images"}))
    assert answer["usage"]["input_tokens"] == without["usage"]["input_tokens"] + 1  # the fake counts an image as 1
    _assert_drawn(_drawn(page), answer["answers"])
    assert page.get_attribute("#results", "data-input-tokens") == str(answer["usage"]["input_tokens"])
    # the code reads the image from its file (the file name has a quote and a space)
    curl = _run_curl(page.inner_text("#curl"), tmp_path)
    assert curl is None or (curl["answers"], curl["usage"]) == (answer["answers"], answer["usage"])
    assert _run_python(page.inner_text("#python"), tmp_path, monkeypatch)["usage"] == answer["usage"]
    # a model that reads no images: the images are removed, not kept out of sight and left unsent
    page.select_option("#model", "fake-text")
    assert page.is_hidden("#images-block") and page.locator("#image-list li").count() == 0
    page.select_option("#model", "fake-vision")
    assert page.locator("#image-list li").count() == 0


def _error_text(page: Any) -> str:
    page.wait_for_selector("#error:not([hidden])")
    text: str = page.inner_text("#error")
    return text


@pytest.mark.slow
def test_refusals_are_shown_with_the_servers_message(page: Any, server: BackgroundServer) -> None:
    _open(page, server)
    _fill(page, "hello", [{"type": "noul", "id": "empty"}])
    sent, status = _ask(page)
    assert status == 400
    message = _post(server, sent).json()["detail"]["message"]
    assert f"400 api_usage_error: {message}" in _error_text(page)
    assert page.is_hidden("#results")

    _fill(page, "hello", [{"type": "choice", "id": "no options", "instructions": "Which?", "rows": []}])
    sent, status = _ask(page)
    assert status == 422
    detail = _post(server, sent).json()["detail"]
    text = _error_text(page)
    for problem in detail:
        assert f"{' → '.join(map(str, problem['loc']))}: {problem['msg']}" in text


@pytest.mark.slow
def test_repeated_ids_are_refused_in_the_page_before_anything_is_sent(page: Any, server: BackgroundServer) -> None:
    _open(page, server)
    posts: list[str] = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    _fill(
        page,
        "hello",
        [{"type": "noul", "id": "same", "instructions": "A?"}, {"type": "noul", "id": "same", "instructions": "B?"}],
    )
    page.click("#ask")
    assert 'two questions have the id "same"' in _error_text(page)
    _fill(page, "hello", [{"type": "choice", "id": "c", "instructions": "Which?", "rows": [["a", None], ["a", "x"]]}])
    page.click("#ask")
    assert 'names the option "a" twice' in _error_text(page)
    assert posts == []


@pytest.mark.slow
def test_with_auth_on_the_key_field_is_asked_for_and_sent(
    page: Any, auth_server: BackgroundServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _open(page, auth_server, model=None)
    assert "403" in _error_text(page) and "API key field" in _error_text(page)
    assert page.locator("#model option").count() == 0
    page.fill("#api-key", "not-the-key")
    page.dispatch_event("#api-key", "change")
    page.wait_for_function("() => document.querySelector('#error').innerText.includes('401')")
    page.fill("#api-key", KEY)
    page.dispatch_event("#api-key", "change")
    page.wait_for_selector('#model option[value="fake-text"]', state="attached")
    assert page.is_hidden("#error")
    sent, status = _ask(page)
    assert status == 200
    answers = _answers(auth_server, sent, KEY)["answers"]
    _assert_drawn(_drawn(page), answers)
    curl, python = page.inner_text("#curl"), page.inner_text("#python")
    assert KEY not in curl and KEY not in python, "the code reads the key from the environment, never shows it"
    assert "Authorization: Bearer $DECISIOND_API_KEY" in curl
    monkeypatch.setenv("DECISIOND_API_KEY", KEY)
    result = _run_curl(curl, tmp_path)
    assert result is None or result["answers"] == answers
    assert _run_python(python, tmp_path, monkeypatch)["answers"] == answers


# -- the request text, the curl command and the Python code, on generated inputs ------------------

#: Any character a form field can hold (no lone surrogates: the browser's inputs cannot carry them).
FIELD = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
#: Text that decisiond.client accepts (never blank).
SOLID = FIELD.filter(lambda text: text.strip() != "")
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | FIELD,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(FIELD, children, max_size=3),
    max_leaves=8,
)
JSON_STATES = st.builds(
    lambda value, indent: json.dumps(value, indent=indent, ensure_ascii=False),
    st.lists(JSON_VALUES, max_size=3) | st.dictionaries(FIELD, JSON_VALUES, max_size=3),
    st.none() | st.integers(0, 2),
)


def _questions(
    text: st.SearchStrategy[str], optional: st.SearchStrategy[str | None], *, one_sided: bool = True
) -> st.SearchStrategy[Any]:
    """Questions as the page reads its form: {id, type, instructions (None when blank), criteria}.
    ``one_sided``: a noul may describe one side only (the wire allows it; decisiond.client does not)."""
    sides = st.just([]) | st.tuples(text, text).map(lambda t: [["true", t[0]], ["false", t[1]]])
    if one_sided:
        sides |= st.tuples(st.sampled_from(["true", "false"]), text).map(lambda t: [list(t)])
    noul = st.builds(lambda criteria: {"type": "noul", "criteria": criteria}, sides)
    choice = st.builds(
        lambda options: {"type": "choice", "criteria": [list(option) for option in options]},
        st.lists(st.tuples(text, optional), min_size=1, max_size=4, unique_by=lambda option: option[0]),
    )
    score = st.builds(lambda levels: {"type": "score", "criteria": levels}, st.lists(text, min_size=2, max_size=4))
    return st.lists(
        st.tuples(text, optional, noul | choice | score).map(lambda t: {"id": t[0], "instructions": t[1], **t[2]}),
        min_size=1,
        max_size=4,
        unique_by=lambda question: question["id"],
    )


def _wire(model: str, state: dict[str, Any], questions: list[dict[str, Any]]) -> str:
    """The body the page must send, as order-keeping JSON text (spec/wire.md §2)."""
    body: dict[str, Any] = {"model": model} if model else {}
    body["state"] = json.loads(state["text"]) if state["json"] else state["text"]
    body["questions"] = {}
    for q in questions:
        wire: dict[str, Any] = {"type": q["type"]}
        if q["instructions"] is not None:
            wire["instructions"] = q["instructions"]
        if q["type"] == "score":
            wire["criteria"] = q["criteria"]
        elif q["criteria"] or q["type"] == "choice":
            wire["criteria"] = dict(q["criteria"])
        body["questions"][q["id"]] = wire
    return json.dumps(body)


@pytest.fixture(scope="module")
def code_page(chromium: Any, server: BackgroundServer) -> Iterator[Any]:
    tab = chromium.new_page()
    _open(tab, server)
    yield tab
    tab.close()


def _built(page: Any, request: dict[str, Any]) -> dict[str, str]:
    script = "(r) => ({body: bodyJson(r), curl: curlCommand(r), python: pythonCode(r)})"
    built: dict[str, str] = page.evaluate(script, {"images": [], "key": "", **request})
    return built


def _curl_body(command: str, cwd: Path) -> str:
    """The body the curl command sends, as bash hands it to curl (its last argument). Run in ``cwd``
    (a scratch folder): a badly quoted command could otherwise write files where it runs."""
    done = subprocess.run(
        ["bash", "-c", 'curl() { printf "%s" "${@: -1}"; }\n' + command], capture_output=True, timeout=10, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode("utf-8", "surrogatepass")


def _state(text: str) -> dict[str, Any]:
    """Whether the page sends ``text`` as JSON: it parses as a JSON object or array (then trimmed)."""
    trimmed = text.strip()
    if trimmed[:1] in ("{", "["):
        try:
            json.loads(trimmed)
            return {"json": True, "text": trimmed}
        except ValueError:
            pass
    return {"json": False, "text": text}


@pytest.mark.slow
@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(["fake-text", ""]), state=FIELD | JSON_STATES, questions=_questions(FIELD, st.none() | FIELD)
)
def test_the_body_and_the_curl_command_keep_every_character_and_order(
    code_page: Any, model: str, state: str, questions: list[dict[str, Any]]
) -> None:
    for q in questions:  # blank texts are left out, as the page reads its form
        q["instructions"] = q["instructions"] if q["instructions"] and q["instructions"].strip() else None
        if q["type"] == "choice":
            q["criteria"] = [[key, text if text and text.strip() else None] for key, text in q["criteria"]]
        if q["type"] == "noul":
            q["criteria"] = [side for side in q["criteria"] if side[1].strip()]
    request = {"model": model, "state": _state(state), "questions": questions}
    built = _built(code_page, request)
    expected = _wire(model, request["state"], questions)
    assert json.dumps(json.loads(built["body"])) == expected
    if shutil.which("bash"):
        with tempfile.TemporaryDirectory() as scratch:
            assert json.dumps(json.loads(_curl_body(built["curl"], Path(scratch)))) == expected


@pytest.mark.slow
@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=SOLID | JSON_STATES, questions=_questions(SOLID, st.none() | SOLID, one_sided=False))
def test_the_python_code_builds_the_same_request_with_the_client(
    code_page: Any, state: str, questions: list[dict[str, Any]]
) -> None:
    for q in questions:
        q["instructions"] = q["instructions"] or "Decide."
    request = {"model": "fake-text", "state": _state(state), "questions": questions}
    code = _built(code_page, request)["python"]
    sent: list[dict[str, Any]] = []

    class Recorder:  # stands in for DecisionClient: records the body the client would post
        def __init__(self, base_url: str, **options: Any) -> None:
            self.base_url = base_url

        def __enter__(self) -> Recorder:
            return self

        def __exit__(self, *_: object) -> None:
            return None

        def decide(self, model: str | None, request: Any, extra: Any = None) -> Any:
            sent.append(encode(model, request))
            return SimpleNamespace(answers={})

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decisiond.client, "DecisionClient", Recorder)
        exec(compile(code, "<playground python>", "exec"), {})
    assert [json.dumps(body) for body in sent] == [_wire("fake-text", request["state"], questions)]


# -- without a browser ---------------------------------------------------------------------------


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
