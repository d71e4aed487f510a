"""`decisiond calibrate` end to end on the default model and a slice of the project's set."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from decisiond import cli
from decisiond.calibration import Calibration
from decisiond.manifest import read_manifest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_calibrate_writes_the_fit_to_the_manifest_and_reports_before_and_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "minilm-l6.toml"
    shutil.copyfile(ROOT / "models" / "minilm-l6.toml", manifest)
    data = tmp_path / "slice.jsonl"
    data.write_text("".join((ROOT / "eval" / "labelled.jsonl").read_text(encoding="utf-8").splitlines(True)[:48]))
    plot = tmp_path / "reliability.png"
    status = cli.main(["calibrate", "--model", str(manifest), "--data", str(data), "--plot", str(plot)])
    out = capsys.readouterr()
    assert status == 0
    assert "ECE before" in out.out and "noul" in out.out and "choice" in out.out
    fitted = read_manifest(manifest).calibration
    assert fitted != Calibration() and fitted.noul > 0
    assert read_manifest(manifest).temperature == 0.05  # the rest of the manifest is kept
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "pip install 'decisiond[bench]'" in out.err and not plot.exists()


def test_calibrate_refuses_a_missing_data_file(tmp_path: Path) -> None:
    manifest = tmp_path / "minilm-l6.toml"
    shutil.copyfile(ROOT / "models" / "minilm-l6.toml", manifest)
    assert cli.main(["calibrate", "--model", str(manifest), "--data", str(tmp_path / "none.jsonl")]) == 2
