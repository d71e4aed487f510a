"""Cassettes: the request key ignores what cannot change an answer and keeps what can; corrupt
lines are reported with their line number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decisiond.cassette import CassetteError, CassetteWriter, Library, new_entry, read_cassette, request_key

BASE = {
    "model": "jev-latest",
    "state": {"ticket": "I was charged twice", "channel": "email"},
    "questions": {
        "department": {
            "type": "choice",
            "instructions": "Which team?",
            "criteria": {"billing": None, "technical": "Bugs"},
        },
        "urgent": {"type": "noul", "instructions": "Is it urgent?"},
        "anger": {"type": "score", "instructions": "How angry?", "criteria": ["Calm", "Angry"]},
    },
}


def _variant(**changes: object) -> dict[str, object]:
    body = json.loads(json.dumps(BASE))
    body.update(changes)
    return body


def test_key_ignores_field_order_unknown_fields_and_default_model_names() -> None:
    reordered = {
        "questions": {
            "department": {
                "criteria": {"billing": None, "technical": "Bugs"},
                "x_hint": 1,
                "type": "choice",
                "instructions": "Which team?",
            },
            "urgent": {"instructions": "Is it urgent?", "type": "noul", "criteria": None},
            "anger": {"criteria": ["Calm", "Angry"], "type": "score", "instructions": "How angry?"},
        },
        "x_trace": "abc",
        "state": {"ticket": "I was charged twice", "channel": "email"},
    }
    key = request_key(BASE)
    assert request_key(reordered) == key
    assert request_key(json.dumps(reordered).encode()) == key
    assert request_key(_variant(model="default")) == key
    assert request_key({k: v for k, v in BASE.items() if k != "model"}) == key
    assert key.startswith("sq2-") and len(key) == 4 + 32


@pytest.mark.parametrize(
    "change",
    [
        {"state": {"channel": "email", "ticket": "I was charged twice"}},  # the model reads the state's key order
        {"state": "I was charged twice"},
        {"model": "jev-large"},
        {"images": ["data:image/png;base64,AAAA"]},
        {"questions": {"urgent": {"type": "noul", "instructions": "Is it urgent?"}}},
    ],
)
def test_key_changes_with_what_a_model_reads(change: dict[str, object]) -> None:
    assert request_key(_variant(**change)) != request_key(BASE)


def test_key_ignores_question_order_but_changes_with_ids_options_and_instructions() -> None:
    """Questions are answered independently, so their order cannot change an answer (spec/wire.md §2);
    a request asked in another order than recorded must find its recording."""
    questions = BASE["questions"]
    assert isinstance(questions, dict)
    swapped = dict(reversed(list(questions.items())))
    assert request_key(_variant(questions=swapped)) == request_key(BASE)
    renamed = {("team" if k == "department" else k): v for k, v in questions.items()}
    options = json.loads(json.dumps(questions))
    options["department"]["criteria"] = {"technical": "Bugs", "billing": None}
    worded = json.loads(json.dumps(questions))
    worded["urgent"]["instructions"] = "Is it very urgent?"
    keys = {request_key(_variant(questions=q)) for q in (questions, renamed, options, worded)}
    assert len(keys) == 4


def test_key_refuses_an_invalid_request() -> None:
    with pytest.raises(ValueError):
        request_key(b"{not json")
    with pytest.raises(ValueError):
        request_key({"state": 3, "questions": {}})


def _write(path: Path, *entries: object, raw: str = "") -> None:
    lines = [json.dumps(e) for e in entries]
    path.write_text("\n".join(lines) + "\n" + raw, encoding="utf-8")


def _entry(body: dict[str, object], text: str = '{"model": "m"}') -> dict[str, object]:
    return new_entry("/v1/systemone", body, 200, "application/json", text.encode()).model_dump(mode="json")


def test_a_corrupt_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _write(path, _entry(BASE), _entry(_variant(state="two")), raw="{truncated\n")
    with pytest.raises(CassetteError, match=r"c\.jsonl:3: not a cassette entry"):
        read_cassette(path)


def test_an_edited_request_no_longer_matching_its_key_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    edited = _entry(BASE)
    edited["request"] = _variant(state="edited by hand")
    _write(path, _entry(_variant(state="fine")), edited)
    with pytest.raises(CassetteError, match=r"c\.jsonl:2: the key .* does not match its request"):
        read_cassette(path)


def test_an_invalid_recorded_request_and_a_missing_file_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    bad = _entry(BASE)
    bad["request"] = {"state": None, "questions": {}}
    bad.pop("key")
    _write(path, bad)
    with pytest.raises(CassetteError, match=r"c\.jsonl:1: the recorded request is not a valid request"):
        read_cassette(path)
    with pytest.raises(CassetteError, match="no cassette at"):
        read_cassette(tmp_path / "missing.jsonl")


def test_library_later_recordings_win_and_blank_lines_are_allowed(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(first, _entry(BASE, '{"model": "old"}'))
    writer = CassetteWriter(second)
    writer.append(new_entry("/v1/systemone", BASE, 200, "application/json", b'{"model": "new"}'))
    second.write_text(second.read_text() + "\n\n", encoding="utf-8")
    library = Library.load([first, second])
    found = library.find(request_key(BASE))
    assert found is not None and found.response.body == '{"model": "new"}' and found.model == "new"
    assert library.upstream_models() == ["new"]
    assert library.find(request_key(_variant(state="other"))) is None
