"""The playground's code.js on generated inputs: the JSON text it posts, the curl command and the
decisiond.client code it shows keep every character and the order of every key (in headless
Chromium; see ``conftest.py`` here)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import decisiond.client
from decisiond.client import encode
from decisiond.inprocess import BackgroundServer

from .conftest import open_page

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
    open_page(tab, server)
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
