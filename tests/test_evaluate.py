"""The labelled-set reader and the coherence relations of scripts/eval.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from decisiond.calibration import Calibration
from decisiond.evaluate import Reading, by_type, probabilities, read_items, relations

DATA = Path(__file__).resolve().parents[1] / "eval" / "labelled.jsonl"


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_project_set_reads_and_covers_every_type_domain_and_relation() -> None:
    items = read_items(DATA)
    assert len(items) >= 300
    assert {i.question.kind for i in items} == {"noul", "choice", "score"}
    assert {i.domain for i in items} == {"support", "moderation", "security", "routing", "urgency", "sentiment"}
    kinds = {i.relation["kind"] for i in items if i.relation}
    assert kinds == {"negation", "merge", "rename", "reorder"}
    assert any(any(ord(c) > 0x2E80 for c in str(i.state)) for i in items), "no CJK state"


def test_a_bad_expected_answer_names_the_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "bad.jsonl",
        [
            {"state": "s", "question": {"type": "noul", "instructions": "x?"}, "expected": True},
            {"state": "s", "question": {"type": "choice", "criteria": {"a": None}}, "expected": "b"},
        ],
    )
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        read_items(path)


def _problem(tmp_path: Path, line: str) -> str:
    """The one-line error ``read_items`` gives for a file of one item line (after a good one)."""
    path = tmp_path / "set.jsonl"
    good = {"state": "s", "question": {"type": "noul", "instructions": "x?"}, "expected": True}
    path.write_text(json.dumps(good) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        read_items(path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{path}:2: "), message
    return message.removeprefix(f"{path}:2: ")


def test_an_unknown_question_type_is_one_line_naming_the_types(tmp_path: Path) -> None:
    """Regression: pydantic's multi-line union error, cut mid-word at 200 characters."""
    line = json.dumps({"state": "s", "question": {"type": "yesno", "instructions": "x?"}, "expected": True})
    assert _problem(tmp_path, line) == "unknown question type 'yesno' (noul, choice or score)"
    line = json.dumps({"state": "s", "question": {"type": "box", "instructions": "x"}, "expected": True})
    assert _problem(tmp_path, line) == "unsupported question type 'box' (noul, choice or score)"
    assert _problem(tmp_path, json.dumps({"state": "s", "question": {}, "expected": 1})) == (
        "missing field 'question.type'"
    )


@pytest.mark.parametrize("field", ["state", "question", "expected"])
def test_a_missing_field_is_named(tmp_path: Path, field: str) -> None:
    """Regression: a missing "expected" said ``not a labelled item ('expected')`` (a bare KeyError),
    a missing "state" raised the KeyError itself."""
    row = {"state": "s", "question": {"type": "noul", "instructions": "x?"}, "expected": True}
    del row[field]
    assert _problem(tmp_path, json.dumps(row)) == f"missing field {field!r}"


def test_an_invalid_question_is_loc_and_msg_on_one_line(tmp_path: Path) -> None:
    line = json.dumps({"state": "s", "question": {"type": "choice", "instructions": "x?"}, "expected": "a"})
    assert _problem(tmp_path, line) == "invalid question: question.criteria: Field required"
    line = json.dumps({"state": "s", "question": {"type": "score", "criteria": [1, "b"]}, "expected": 0})
    assert _problem(tmp_path, line).startswith("invalid question: question.criteria.0.str: Input should be a")


def test_the_other_problems_stay_clear(tmp_path: Path) -> None:
    assert _problem(tmp_path, '{"state": "s",').startswith("not JSON (Expecting")
    assert _problem(tmp_path, "[1, 2]") == "not a JSON object"
    choice = {"type": "choice", "criteria": {"a": None, "b": None}}
    assert _problem(tmp_path, json.dumps({"state": "s", "question": choice, "expected": "c"})) == (
        "expected 'c' is not an answer of this question (one of 'a', 'b')"
    )
    score = {"type": "score", "criteria": ["low", "high"]}
    for expected in ("x", 2, 0.5, True, None):
        assert _problem(tmp_path, json.dumps({"state": "s", "question": score, "expected": expected})) == (
            f"expected {expected!r} is not an answer of this question (a level index from 0 to 1)"
        )
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"state": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"latin1.jsonl: not UTF-8 text \(invalid continuation byte at byte 14\)"):
        read_items(path)


def test_relations_measure_negation_merge_rename_and_reorder(tmp_path: Path) -> None:
    noul = {"type": "noul", "instructions": "x?"}
    choice = {"type": "choice", "criteria": {"a": None, "b": None, "c": None}}
    rows = [
        {"id": "n", "state": "s", "question": noul, "expected": True,
         "relation": {"kind": "negation", "group": "n", "role": "plain"}},
        {"id": "nn", "state": "s", "question": noul, "expected": False,
         "relation": {"kind": "negation", "group": "n", "role": "negated"}},
        {"id": "c", "state": "s", "question": choice, "expected": "a"},
        {"id": "cm", "state": "s", "question": {"type": "choice", "criteria": {"ab": None, "c": None}},
         "expected": "ab", "relation": {"kind": "merge", "group": "c", "role": "merged", "merged": {"ab": ["a", "b"]}}},
        {"id": "co", "state": "s", "question": {"type": "choice", "criteria": {"c": None, "b": None, "a": None}},
         "expected": "a", "relation": {"kind": "reorder", "group": "c", "role": "reordered"}},
        {"id": "cr", "state": "s", "question": {"type": "choice", "criteria": {"x": None, "y": None, "z": None}},
         "expected": "x", "relation": {"kind": "rename", "group": "c", "role": "renamed",
                                       "map": {"a": "x", "b": "y", "c": "z"}}},
    ]  # fmt: skip
    items = read_items(write(tmp_path / "r.jsonl", rows))
    probs = [
        torch.tensor([0.3, 0.7]),  # p_yes 0.7
        torch.tensor([0.6, 0.4]),  # p_yes 0.4: the pair sums to 1.1
        torch.tensor([0.5, 0.3, 0.2]),
        torch.tensor([0.6, 0.4]),  # merged 0.6 against 0.8
        torch.tensor([0.2, 0.3, 0.5]),  # the same distribution reordered
        torch.tensor([0.2, 0.3, 0.5]),  # renamed, but a different distribution: x 0.2 against a 0.5
    ]
    out = relations(items, probs)
    assert out["negation"]["mean_gap"] == pytest.approx(0.1) and out["negation"]["within_0.15"] == 1.0
    assert out["merge"]["mean_gap"] == pytest.approx(0.2)
    assert out["reorder"] == {"pairs": 1.0, "mean_gap": 0.0, "same_winner": 1.0}
    assert out["rename"]["mean_gap"] == pytest.approx(0.3) and out["rename"]["same_winner"] == 0.0
    figures = by_type(items, probs)
    assert figures["noul"].n == 2 and figures["noul"].accuracy == 1.0  # 0.7 yes: right; 0.4 yes, expected no: right
    assert figures["choice"].accuracy == pytest.approx(3 / 4)


def test_probabilities_apply_the_calibration_as_the_server_does(tmp_path: Path) -> None:
    rows = [{"state": "s", "question": {"type": "noul", "instructions": "x?"}, "expected": True}]
    items = read_items(write(tmp_path / "p.jsonl", rows))
    reading = Reading(items, [torch.tensor([0.0, 2.0])], 0.0)
    (p,) = probabilities(reading, Calibration(noul=2.0, noul_offset=-1.0))
    assert float(p[1]) == pytest.approx(0.5)


def test_probabilities_take_a_complemented_nouls_offset_on_its_false_side(tmp_path: Path) -> None:
    rows = [{"state": "s", "question": {"type": "noul", "instructions": "x?"}, "expected": True}] * 2
    items = read_items(write(tmp_path / "p.jsonl", rows))
    reading = Reading(items, [torch.tensor([0.0, 0.6]), torch.tensor([0.6, 0.0])], 0.0, complemented=[False, True])
    plain, negated = probabilities(reading, Calibration(noul=2.0, noul_offset=-1.0))
    assert float(plain[1] + negated[1]) == pytest.approx(1.0, abs=1e-6)
