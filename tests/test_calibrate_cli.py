"""`decisiond calibrate` end to end on the default model and a slice of the project's set, and what
it says (one line, exit 2, the manifest untouched) about data it cannot fit on."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
from pathlib import Path

import pytest

from decisiond import cli
from decisiond.calibrate_cli import few_examples
from decisiond.calibration import Calibration
from decisiond.evaluate import Item
from decisiond.manifest import read_manifest
from decisiond.render import Option, Question

ROOT = Path(__file__).resolve().parents[1]
NOUL = {"state": "s", "question": {"type": "noul", "instructions": "x?"}, "expected": True}


def _manifest(tmp_path: Path) -> Path:
    manifest = tmp_path / "minilm-l6.toml"
    shutil.copyfile(ROOT / "models" / "minilm-l6.toml", manifest)
    return manifest


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.slow
def test_calibrate_writes_the_fit_to_the_manifest_and_reports_before_and_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    manifest = tmp_path / "minilm-l6.toml"
    shutil.copyfile(ROOT / "models" / "minilm-l6.toml", manifest)
    data = tmp_path / "slice.jsonl"
    data.write_text("".join((ROOT / "eval" / "labelled.jsonl").read_text(encoding="utf-8").splitlines(True)[:48]))
    plot = tmp_path / "reliability.png"
    status = cli.main(["calibrate", "--model", str(manifest), "--data", str(data), "--plot", str(plot)])
    out = capsys.readouterr()
    assert status == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.endswith("calibrate")]
    assert warnings == [  # 25 nouls, 16 choices and 7 scores in the slice: each is fitted, with a warning
        f"the {kind} fit on {n} examples is unreliable (fewer than 30); label more"
        for kind, n in (("noul", 25), ("choice", 16), ("score", 7))
    ]
    assert "ECE before" in out.out and "noul" in out.out and "choice" in out.out
    fitted = read_manifest(manifest).calibration
    assert fitted != Calibration() and fitted.noul > 0
    assert read_manifest(manifest).temperature == 0.05  # the rest of the manifest is kept
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "pip install 'decisiond[bench]'" in out.err and not plot.exists()


def test_calibrate_refuses_a_missing_data_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    manifest = _manifest(tmp_path)
    assert cli.main(["calibrate", "--model", str(manifest), "--data", str(tmp_path / "none.jsonl")]) == 2
    assert _errors(caplog) == [f"[Errno 2] No such file or directory: '{tmp_path / 'none.jsonl'}'"]


@pytest.mark.parametrize("text", ["", "\n  \n"])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_calibrate_refuses_a_set_without_examples_and_leaves_the_manifest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, dry_run: list[str]
) -> None:
    """Regression: an empty set fitted the identity and wrote 1/1/1/0 over the manifest's fit."""
    manifest = _manifest(tmp_path)
    shipped = manifest.read_bytes()
    data = tmp_path / "empty.jsonl"
    data.write_text(text, encoding="utf-8")
    assert cli.main(["calibrate", "--model", str(manifest), "--data", str(data), *dry_run]) == 2
    assert _errors(caplog) == [f"{data} holds no labelled examples: nothing to fit, the manifest is left as it was"]
    assert manifest.read_bytes() == shipped


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({**NOUL, "question": {"type": "yesno"}}, "unknown question type 'yesno' (noul, choice or score)"),
        ({k: v for k, v in NOUL.items() if k != "expected"}, "missing field 'expected'"),
    ],
)
def test_calibrate_says_what_is_wrong_with_the_data_once_on_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, row: dict[str, object], problem: str
) -> None:
    """Regression: pydantic's multi-line text cut mid-word, a bare KeyError, and every message
    prefixed twice (``ERROR decisiond.calibrate: decisiond calibrate: ...``)."""
    manifest = _manifest(tmp_path)
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps(NOUL) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    assert cli.main(["calibrate", "--model", str(manifest), "--data", str(data)]) == 2
    assert _errors(caplog) == [f"{data}:2: {problem}"]


def test_calibrate_says_a_setting_out_of_range_on_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DECISIOND_PORT", "99999")
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(NOUL) + "\n", encoding="utf-8")
    assert cli.main(["calibrate", "--model", str(_manifest(tmp_path)), "--data", str(data), "--dry-run"]) == 2
    assert _errors(caplog) == ["--port (DECISIOND_PORT): Input should be less than or equal to 65535"]


def test_few_examples_names_the_types_under_the_minimum() -> None:
    noul = Question("noul", "x?", (Option("false", None), Option("true", None)))
    choice = Question("choice", "x?", (Option("a", None), Option("b", None)))
    items = [Item(str(i), "", "s", noul, 1, None) for i in range(30)]
    items += [Item(f"c{i}", "", "s", choice, 0, None) for i in range(29)]
    assert few_examples(items) == {"choice": 29}  # 30 nouls are enough; no score is no fit, no warning
    assert few_examples(items, minimum=31) == {"noul": 30, "choice": 29}
    assert few_examples([]) == {}
