"""The pytest plugin: marker and parameter parsing, the built-in default manifest, and the
``decisiond`` fixture used from a sample test module in a subprocess, as an application would."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from decisiond.cassette import CassetteWriter, new_entry
from decisiond.pytest_plugin import ServerSpec, default_manifest, spec_from

from .conftest import MODELS

SAMPLE = """
import pytest

TEAM = {"type": "choice", "criteria": {"billing": None, "technical": None}}
RULES_BODY = {"state": "refund please", "questions": {"team": TEAM}}


@pytest.mark.decisiond(scripted="rules.toml")
def test_scripted(decisiond):
    answer = decisiond.http.post("/v1/systemone", json=RULES_BODY).json()
    assert answer["model"] == "sample-scripted"
    assert answer["answers"]["team"]["probabilities"] == {"billing": 0.75, "technical": 0.25}
    assert decisiond.base_url.startswith("http://127.0.0.1:")
    from decisiond.client import Choice, DecisionRequest

    request = DecisionRequest("refund please", {"team": Choice.of("Which?", "billing", "technical")})
    typed = decisiond.client.decide(None, request)
    assert typed.choice("team").choice == "billing" and typed.model == "sample-scripted"


@pytest.mark.decisiond(replay="cassette.jsonl")
def test_replayed(decisiond):
    answer = decisiond.http.post("/v1/systemone", json=RULES_BODY)
    assert answer.content == b'{"model":"recorded"}'
    assert decisiond.http.post("/v1/systemone", json={**RULES_BODY, "state": "other"}).status_code == 404


@pytest.mark.parametrize("decisiond", [{"scripted": "rules.toml"}], indirect=True)
def test_parameter_and_shared_server(decisiond, request):
    pool = request.getfixturevalue("decisiond_pool")
    assert len(pool.servers) in (1, 2) and decisiond in pool.servers.values()
"""


def test_spec_from_resolves_paths_next_to_the_test_then_the_rootdir(tmp_path: Path) -> None:
    here, root = tmp_path / "tests", tmp_path
    here.mkdir()
    (here / "a.jsonl").write_text("")
    (root / "rules.toml").write_text("")
    spec = spec_from({"replay": "a.jsonl", "scripted": "rules.toml", "replay_mode": "fallback"}, [here, root])
    assert spec == ServerSpec(replay=(here / "a.jsonl",), replay_mode="fallback", scripted=root / "rules.toml")
    assert spec_from({"replay": ["a.jsonl", "a.jsonl"]}, [here, root]).replay == (here / "a.jsonl",) * 2
    with pytest.raises(pytest.UsageError, match="takes model, replay, replay_mode, scripted"):
        spec_from({"cassette": "a.jsonl"}, [here])
    with pytest.raises(pytest.UsageError, match="replay_mode"):
        spec_from({"replay_mode": "loose"}, [here])


def test_the_built_in_default_matches_the_shipped_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no models/ folder here, as in an application's checkout
    built_in = default_manifest(None)
    shipped = tomllib.loads((MODELS / "minilm-l6.toml").read_text(encoding="utf-8"))
    for field in ("name", "aliases", "backend", "temperature", "window", "overlap", "release_date", "description"):
        assert getattr(built_in, field) == shipped[field], field
    assert built_in.weights.model_dump(exclude_none=True) == shipped["weights"]


@pytest.mark.slow
def test_the_fixture_serves_an_application_test_module(tmp_path: Path) -> None:
    (tmp_path / "rules.toml").write_text(
        'model = "sample-scripted"\n[[rules]]\nquestion = "team"\nprobabilities = {billing = 0.75}\n', encoding="utf-8"
    )
    body = {
        "state": "refund please",
        "questions": {"team": {"type": "choice", "criteria": {"billing": None, "technical": None}}},
    }
    CassetteWriter(tmp_path / "cassette.jsonl").append(
        new_entry("/v1/systemone", body, 200, "application/json", b'{"model":"recorded"}')
    )
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(SAMPLE), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--strict-markers", str(tmp_path / "test_sample.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
