"""The playground at ``/`` in a real headless browser (Debian's chromium, driven by Playwright).

The page asks questions of each type of two fake models; what it draws (read from the DOM's
``data-`` attributes and bar widths) must equal the JSON answer the server gives httpx for the very
body the page sent, and the curl command and Python code it shows must get the same answers.
See ``conftest.py`` here for the server, the browser and when the tests skip.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from decisiond.inprocess import BackgroundServer

from .conftest import KEY, answers_of, ask, assert_drawn, drawn, fill, open_page, post

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
    open_page(page, server)
    fill(page, STATE, QUESTIONS)
    sent, status = ask(page)
    assert status == 200
    body = json.loads(sent)
    assert body == EXPECTED
    # order kept where a JavaScript object would move integer-like keys first
    assert list(body["state"]) == ["ticket", "1"]
    assert list(body["questions"]) == ["team", "is urgent? ✓", "refund asked", "7"]
    assert list(body["questions"]["team"]["criteria"]) == ["refund", "2", "shipping"]
    answer = answers_of(server, sent)
    probabilities = answer["answers"]["team"]["probabilities"]
    assert len(set(probabilities.values())) == 3, "the inputs must give distinct bars, or the test proves little"
    assert_drawn(drawn(page), answer["answers"])
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
    open_page(page, server)
    sent, _ = ask(page)  # the example the page opens with: a choice, a noul with both sides, a score
    answers = answers_of(server, sent)["answers"]
    assert_drawn(drawn(page), answers)
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
    open_page(page, server, "fake-text")
    assert page.is_hidden("#images-block"), "a text model offers no image input"
    page.select_option("#model", "fake-vision")
    assert page.is_visible("#images-block")
    page.set_input_files("#images", str(image))
    page.wait_for_selector("#image-list li")
    sent, status = ask(page)
    assert status == 200
    body = json.loads(sent)
    assert body["model"] == "fake-vision"
    assert body["images"] == ["data:image/png;base64," + base64.b64encode(image.read_bytes()).decode()]
    answer = answers_of(server, sent)
    without = answers_of(server, json.dumps({k: v for k, v in body.items() if k != "images"}))
    assert answer["usage"]["input_tokens"] == without["usage"]["input_tokens"] + 1  # the fake counts an image as 1
    assert_drawn(drawn(page), answer["answers"])
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
    open_page(page, server)
    fill(page, "hello", [{"type": "noul", "id": "empty"}])
    sent, status = ask(page)
    assert status == 400
    message = post(server, sent).json()["detail"]["message"]
    assert f"400 api_usage_error: {message}" in _error_text(page)
    assert page.is_hidden("#results")

    fill(page, "hello", [{"type": "choice", "id": "no options", "instructions": "Which?", "rows": []}])
    sent, status = ask(page)
    assert status == 422
    detail = post(server, sent).json()["detail"]
    text = _error_text(page)
    for problem in detail:
        assert f"{' → '.join(map(str, problem['loc']))}: {problem['msg']}" in text


@pytest.mark.slow
def test_repeated_ids_are_refused_in_the_page_before_anything_is_sent(page: Any, server: BackgroundServer) -> None:
    open_page(page, server)
    posts: list[str] = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    fill(
        page,
        "hello",
        [{"type": "noul", "id": "same", "instructions": "A?"}, {"type": "noul", "id": "same", "instructions": "B?"}],
    )
    page.click("#ask")
    assert 'two questions have the id "same"' in _error_text(page)
    fill(page, "hello", [{"type": "choice", "id": "c", "instructions": "Which?", "rows": [["a", None], ["a", "x"]]}])
    page.click("#ask")
    assert 'names the option "a" twice' in _error_text(page)
    assert posts == []


@pytest.mark.slow
def test_with_auth_on_the_key_field_is_asked_for_and_sent(
    page: Any, auth_server: BackgroundServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_page(page, auth_server, model=None)
    assert "403" in _error_text(page) and "API key field" in _error_text(page)
    assert page.locator("#model option").count() == 0
    page.fill("#api-key", "not-the-key")
    page.dispatch_event("#api-key", "change")
    page.wait_for_function("() => document.querySelector('#error').innerText.includes('401')")
    page.fill("#api-key", KEY)
    page.dispatch_event("#api-key", "change")
    page.wait_for_selector('#model option[value="fake-text"]', state="attached")
    assert page.is_hidden("#error")
    sent, status = ask(page)
    assert status == 200
    answers = answers_of(auth_server, sent, KEY)["answers"]
    assert_drawn(drawn(page), answers)
    curl, python = page.inner_text("#curl"), page.inner_text("#python")
    assert KEY not in curl and KEY not in python, "the code reads the key from the environment, never shows it"
    assert "Authorization: Bearer $DECISIOND_API_KEY" in curl
    monkeypatch.setenv("DECISIOND_API_KEY", KEY)
    result = _run_curl(curl, tmp_path)
    assert result is None or result["answers"] == answers
    assert _run_python(python, tmp_path, monkeypatch)["answers"] == answers
