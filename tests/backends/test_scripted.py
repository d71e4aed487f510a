"""The scripted backend: rules give exact probabilities through the shared readout and wire."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from decisiond.app import create_app
from decisiond.backends.scripted import RulesError, read_rules, scripted_manifest
from decisiond.config import Settings

RULES = """
model = "jev-scripted"

[default]
mode = "uniform"

[[rules]]
question = "department"
state = "(?i)charged|refund"
probabilities = {billing = 0.88, technical = 0.12, other = 0.0}

[[rules]]
instructions = "Which team should handle this?"
answer = "technical"

[[rules]]
question = "urgent"
state = "today"
yes = 0.85

[[rules]]
question = "anger"
probabilities = {"Concerned" = 0.95, "2" = 0.05}
"""
DEPARTMENT = {
    "type": "choice",
    "instructions": "Which team should handle this?",
    "criteria": {"billing": None, "technical": None, "other": None},
}
QUESTIONS = {
    "department": DEPARTMENT,
    "urgent": {"type": "noul", "instructions": "Is it urgent?"},
    "anger": {"type": "score", "instructions": "How angry?", "criteria": ["Calm", "Concerned", "Furious"]},
}


async def _decide(rules: Path, body: dict[str, object]) -> httpx.Response:
    settings = Settings(scripted=rules, max_wait_ms=0)
    app = create_app(settings, manifests=[scripted_manifest(rules)])
    async with LifespanManager(app) as manager:
        for _ in range(200):
            if app.state.runtime.status == "ok":
                break
            await asyncio.sleep(0.01)
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.post("/v1/systemone", json=body)


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(RULES, encoding="utf-8")
    return path


async def test_rules_give_exact_probabilities_and_the_formulas_follow(rules: Path) -> None:
    answer = await _decide(rules, {"state": "I was charged twice, fix it today", "questions": QUESTIONS})
    assert answer.status_code == 200
    body = answer.json()
    assert body["model"] == "jev-scripted"
    department = body["answers"]["department"]
    assert department == {
        "type": "choice",
        "choice": "billing",
        "probabilities": {"billing": 0.88, "technical": 0.12, "other": 0.0},
        "confidence": 0.82,  # spec §4 check value
    }
    assert body["answers"]["urgent"] == {"type": "noul", "noul": 0.85}
    anger = body["answers"]["anger"]
    assert anger["probabilities"] == {"0": 0.0, "1": 0.95, "2": 0.05}
    assert anger["score"] == 1.05 and anger["confidence"] == 0.925  # spec §4 check values


async def test_unmatched_state_falls_to_later_rules_and_the_uniform_default(rules: Path) -> None:
    answer = await _decide(
        rules,
        {
            "state": "The app crashes",
            "questions": {"team": DEPARTMENT, **{k: v for k, v in QUESTIONS.items() if k != "department"}},
        },
    )
    body = answer.json()["answers"]
    assert body["team"]["choice"] == "technical" and body["team"]["confidence"] == 1.0  # matched by instructions
    assert body["urgent"]["noul"] == 0.5  # no "today": the uniform default


async def test_fixed_and_refusing_defaults(tmp_path: Path) -> None:
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text("default:\n  mode: fixed\n  probabilities: {other: 0.7}\n", encoding="utf-8")
    body = (await _decide(fixed, {"state": "x", "questions": {"department": DEPARTMENT}})).json()
    assert body["answers"]["department"]["probabilities"] == {"billing": 0.15, "technical": 0.15, "other": 0.7}
    refuse = tmp_path / "refuse.toml"
    refuse.write_text('[default]\nmode = "refuse"\n', encoding="utf-8")
    answer = await _decide(refuse, {"state": "secret state", "questions": {"department": DEPARTMENT}})
    assert answer.status_code == 404 and "'department'" in answer.json()["detail"]["message"]
    assert "secret state" not in answer.text


async def test_a_rule_naming_a_missing_option_is_a_400_naming_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text('[[rules]]\nquestion = "department"\nprobabilities = {sales = 1.0}\n', encoding="utf-8")
    answer = await _decide(path, {"state": "x", "questions": {"department": DEPARTMENT}})
    assert answer.status_code == 400
    assert "rule 1 of r.toml" in answer.json()["detail"]["message"] and "'sales'" in answer.json()["detail"]["message"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[[rules]]\nquestion = "q"\n', "exactly one of yes, probabilities or answer"),
        ("[[rules]]\nyes = 0.5\n", "at least one of question"),
        ('[[rules]]\nquestion = "q"\nprobabilities = {a = 0.8, b = 0.3}\n', "more than 1"),
        ('[[rules]]\nquestion = "q"\nstate = "(unclosed"\nyes = 0.2\n', "not a regular expression"),
        ('[[rules]]\nquestion = "q"\nyes = 1.5\n', "rule 1 yes"),
        ("[[rules]\n", "not valid TOML"),
    ],
)
def test_bad_rules_files_are_refused_naming_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RulesError, match=problem):
        read_rules(path)
