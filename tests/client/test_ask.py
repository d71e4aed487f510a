"""``decisiond ask``: flags and request files, against a running server and a local model."""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Iterator

import pytest

from decisiond.ask import UsageError, questions_from_flags
from decisiond.cli import main
from decisiond.client import Choice, Noul, Score

E = math.e
TICKET = "I was charged twice for one order and I need the duplicate refunded today."


def test_flags_become_questions_in_order_with_ids() -> None:
    questions = questions_from_flags(
        [
            ("choice", ["Which team?", "billing=Payments, refunds", "technical"]),
            ("noul", ["Is it urgent?"]),
            ("id", ["anger"]),
            ("score", ["How angry?", "Calm", "Annoyed", "Furious"]),
            ("noul", ["Is it polite?", "Says please", "Is rude"]),
        ]
    )
    assert questions == {
        "choice": Choice("Which team?", {"billing": "Payments, refunds", "technical": None}),
        "noul": Noul.of("Is it urgent?"),
        "anger": Score.of("How angry?", "Calm", "Annoyed", "Furious"),
        "noul_2": Noul("Is it polite?", yes="Says please", no="Is rude"),
    }


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ([("choice", ["Which team?"])], "--choice needs instructions and at least one option"),
        ([("score", ["How angry?", "Calm"])], "--score needs instructions and at least two levels"),
        ([("noul", ["Is it?", "yes only"])], "--noul takes its instructions alone"),
        ([("noul", [" "])], "instructions must not be blank"),
        ([("id", ["a"]), ("noul", ["A?"]), ("id", ["a"]), ("noul", ["B?"])], "two questions have the id 'a'"),
        ([("noul", ["A?"]), ("id", ["late"])], "--id 'late' is not followed by a question"),
        ([("choice", ["Which?", "a", "a"])], "names an option twice"),
    ],
)
def test_bad_question_flags_are_refused_in_words(asked: list[tuple[str, list[str]]], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        questions_from_flags(asked)


def test_bad_flags_exit_2_with_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "--state", "hi"]) == 2
    assert "ask at least one question" in capsys.readouterr().err
    assert main(["ask", "--noul", "Is it?"]) == 2
    assert "give the state" in capsys.readouterr().err
    assert main(["ask", "--state", "hi", "--noul", "Is it?", "--request", "-"]) == 2
    assert "either by flags or by --request" in capsys.readouterr().err
    assert main(["ask", "--state", "hi", "--state-json", "--noul", "Is it?"]) == 2
    assert "the state is not JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        main(["ask", "--state", "a", "--state-file", "b", "--noul", "Is it?"])
    assert caught.value.code == 2


@pytest.fixture
def stdin(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stdin", buffer)
    yield buffer


def test_ask_a_running_server_prints_bars(loopback_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "ask",
            "--url",
            loopback_url,
            "--state",
            "billing billing true furious",
            "--id",
            "team",
            "--choice",
            "Which team?",
            "billing",
            "technical",
            "--noul",
            "Is it?",
            "--score",
            "How angry?",
            "calm",
            "annoyed",
            "furious",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "team  (choice) Which team?"
    p = E**2 / (E**2 + 1)
    assert lines[1] == f"  billing    {'█' * 26}{'░' * 4}  {p:.4f}  <"
    assert lines[2] == f"  technical  {'█' * 4}{'░' * 26}  {1 - p:.4f}"
    assert lines[3].startswith("  -> billing  (confidence 0.76")
    assert f"  yes  {'█' * 22}{'░' * 8}  {E / (E + 1):.4f}  <" in lines
    assert f"  -> {(1 + 2 * E) / (2 + E):.2f} on 0..2, nearest 1 annoyed  (confidence" in out
    assert lines[-1].startswith("model fake-1 · ")


def test_ask_a_running_server_for_json_with_a_request_on_stdin(
    loopback_url: str, stdin: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin.write(
        json.dumps(
            {
                "state": "technical",
                "questions": {
                    "team": {
                        "type": "choice",
                        "instructions": "Which team?",
                        "criteria": {"billing": None, "technical": None},
                    }
                },
            }
        )
    )
    stdin.seek(0)
    assert main(["ask", "--url", loopback_url, "--request", "-", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["model"] == "fake-1"
    assert body["answers"]["team"]["choice"] == "technical"


def test_a_server_refusal_exits_1_with_its_message(loopback_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ask", "--url", loopback_url, "--model", "nope", "--state", "hi", "--noul", "Is it?"])
    assert code == 1
    assert "HTTP 400 api_usage_error: unknown model 'nope'" in capsys.readouterr().err


def test_an_unknown_local_model_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "--model", "no-such-model", "--state", "hi", "--noul", "Is it?"]) == 2
    assert "no model named 'no-such-model'" in capsys.readouterr().err


@pytest.mark.slow
def test_ask_the_local_default_model(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "ask",
            "--model",
            "minilm-l6",
            "--state",
            TICKET,
            "--choice",
            "Which team should handle this ticket?",
            "billing=Payments, invoicing, refunds",
            "technical=Bugs, outages, integrations",
            "other=None of the above",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "choice  (choice) Which team should handle this ticket?"
    assert lines[1].startswith("  billing ") and lines[1].endswith("<")
    assert lines[4].startswith("  -> billing  (confidence ")
    assert lines[-1].startswith("model minilm-l6 · ") and lines[-1].endswith(" input tokens")
