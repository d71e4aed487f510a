"""Calibration: temperatures and Platt's slope and offset recovered from synthetic labels; the
manifest's [calibration] table written and read back; the engine's use of it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from decisiond.calibrate_cli import fit, write_calibration
from decisiond.calibration import Calibration, brier, ece, fit_platt, fit_temperature
from decisiond.evaluate import Item
from decisiond.manifest import read_manifest
from decisiond.readout import read
from decisiond.render import Option, Question

#: With 6,000 draws the NLL minimum sits within a few per cent of the true value; 10 % leaves room
#: for the sampling noise of any seed.
TOLERANCE = 0.10


def synthetic(temperature: float, n: int = 6000, k: int = 4, seed: int = 0) -> tuple[list[torch.Tensor], list[int]]:
    """Logits, and labels drawn from softmax(logits / temperature): a model miscalibrated by ``temperature``."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, k, generator=generator) * 3.0
    labels = torch.multinomial(torch.softmax(logits / temperature, dim=1), 1, generator=generator).squeeze(1)
    return list(logits), labels.tolist()


@pytest.mark.parametrize("true_t", [0.4, 1.0, 2.5])
def test_fit_temperature_recovers_a_known_temperature(true_t: float) -> None:
    logits, labels = synthetic(true_t)
    assert abs(fit_temperature(logits, labels) / true_t - 1.0) < TOLERANCE


def test_fit_temperature_handles_mixed_option_counts() -> None:
    logits, labels = synthetic(2.0, k=5)
    short = [x[:3] for x in logits[:3000]]
    short_labels = [min(label, 2) for label in labels[:3000]]  # any labels: only the range matters here
    t = fit_temperature(short + logits[3000:], short_labels + labels[3000:])
    assert 0.01 <= t <= 100 and math.isfinite(t)


def test_fit_platt_recovers_slope_and_offset() -> None:
    generator = torch.Generator().manual_seed(1)
    margins = torch.randn(8000, generator=generator) * 2.0
    labels = torch.bernoulli(torch.sigmoid(0.5 * margins - 0.8), generator=generator)
    slope, offset = fit_platt(margins, labels)
    assert abs(slope - 0.5) < 0.5 * TOLERANCE and abs(offset + 0.8) < 0.8 * TOLERANCE


def test_calibration_lowers_ece_of_an_overconfident_model() -> None:
    logits, labels = synthetic(3.0)
    t = fit_temperature(logits, labels)

    def ece_at(temperature: float) -> float:
        p = torch.softmax(torch.stack(logits) / temperature, dim=1)
        winner = p.argmax(dim=1)
        return ece(p.max(dim=1).values, (winner == torch.tensor(labels)).float())

    assert ece_at(t) < ece_at(1.0) / 3


def test_ece_and_brier_of_known_cases() -> None:
    assert ece(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 1.0])) == 0.0
    assert ece(torch.tensor([0.9, 0.9]), torch.tensor([0.0, 0.0])) == pytest.approx(0.9)
    assert brier([torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5])], [0, 1]) == pytest.approx(0.25)


def test_fit_gives_per_type_values_and_the_noul_offset() -> None:
    generator = torch.Generator().manual_seed(2)
    items, logits = [], []
    noul = Question("noul", "x?", (Option("false", None), Option("true", None)))
    for i in range(3000):
        margin = float(torch.randn((), generator=generator) * 3)
        label = int(torch.bernoulli(torch.sigmoid(torch.tensor(margin / 2.0 + 0.5)), generator=generator))
        items.append(Item(str(i), "", "s", noul, label, None))
        logits.append(torch.tensor([0.0, margin]))
    calibration = fit(items, logits)
    assert abs(calibration.noul / 2.0 - 1) < TOLERANCE and abs(calibration.noul_offset - 0.5) < 0.1
    assert calibration.choice == 1.0 and calibration.score == 1.0  # no examples: identity
    kept = fit(items, logits, keep=Calibration(choice=0.3, score=1.7, noul=9.0))
    assert kept.choice == 0.3 and kept.score == 1.7  # no examples: the manifest's values stay
    assert kept.noul == calibration.noul and kept.noul_offset == calibration.noul_offset


def test_apply_folds_temperature_and_offset_into_the_readout() -> None:
    noul = Question("noul", "x?", (Option("false", None), Option("true", None)))
    choice = Question("choice", "y?", (Option("a", None), Option("b", None), Option("c", None)))
    logits = torch.tensor([0.0, 1.0, 2.0, 1.0, 0.0])
    calibration = Calibration(noul=2.0, choice=0.5, noul_offset=0.3)
    shifted, temps = calibration.apply(logits, [noul, choice], [1.0, 1.0])
    out = read(shifted, [2, 3], temps)
    assert out.probabilities[0][1] == pytest.approx(1 / (1 + math.exp(-(1.0 / 2.0 + 0.3))), abs=1e-6)
    assert out.probabilities[1] == pytest.approx(torch.softmax(torch.tensor([4.0, 2.0, 0.0]), 0).tolist(), abs=1e-6)
    same, same_t = Calibration().apply(logits, [noul, choice], [0.05, 0.05])
    assert torch.equal(same, logits) and same_t == [0.05, 0.05]


def test_a_complemented_noul_takes_the_offset_on_its_false_side() -> None:
    """A negated noul answered as the complement of its affirmative (its logits swapped) keeps summing to 1
    with its affirmative under an offset; read as an ordinary noul, the pair would not."""
    sides = (Option("false", None), Option("true", None))
    plain, negated = Question("noul", "Is it late?", sides), Question("noul", "Is it not late?", sides)
    logits = torch.tensor([0.0, 0.4, 0.4, 0.0])  # the affirmative's reading, then the same swapped
    calibration = Calibration(noul=0.5, noul_offset=-0.9)
    shifted, temps = calibration.apply(logits, [plain, negated], [1.0, 1.0], [False, True])
    yes = [p[1] for p in read(shifted, [2, 2], temps).probabilities]
    assert yes[0] + yes[1] == pytest.approx(1.0, abs=1e-6)
    assert yes[0] == pytest.approx(1 / (1 + math.exp(-(0.4 / 0.5 - 0.9))), abs=1e-6)
    naive, naive_t = calibration.apply(logits, [plain, negated], [1.0, 1.0])
    naive_yes = [p[1] for p in read(naive, [2, 2], naive_t).probabilities]
    assert abs(naive_yes[0] + naive_yes[1] - 1.0) > 0.3  # what the offset did to such pairs before


def test_fit_reads_a_complemented_noul_as_the_question_the_model_read() -> None:
    """Complemented nouls (logits and labels those of their affirmative, flipped) fit the same offset as
    their affirmatives alone."""
    generator = torch.Generator().manual_seed(3)
    noul = Question("noul", "x?", (Option("false", None), Option("true", None)))
    items, logits = [], []
    for i in range(3000):
        margin = float(torch.randn((), generator=generator) * 3)
        label = int(torch.bernoulli(torch.sigmoid(torch.tensor(margin / 2.0 - 0.7)), generator=generator))
        items.append(Item(str(i), "", "s", noul, label, None))
        logits.append(torch.tensor([0.0, margin]))
    alone = fit(items, logits)
    flipped = [Item(f"n{i.id}", "", "s", noul, 1 - i.label, None) for i in items]
    both = fit(items + flipped, logits + [z.flip(0) for z in logits], [False] * len(items) + [True] * len(items))
    assert both.noul == pytest.approx(alone.noul, rel=1e-3)
    assert both.noul_offset == pytest.approx(alone.noul_offset, abs=1e-3)
    assert abs(alone.noul_offset + 0.7) < 0.15


def test_write_calibration_replaces_the_table_and_reads_back(tmp_path: Path) -> None:
    manifest = tmp_path / "m.toml"
    manifest.write_text('name = "m"\nbackend = "bi_encoder"\n[weights]\npath = "."\n', encoding="utf-8")
    write_calibration(manifest, Calibration(noul=2.5, choice=0.8, score=3.0, noul_offset=-0.25))
    write_calibration(manifest, Calibration(noul=1.5, choice=0.9, score=2.0, noul_offset=0.1))
    read_back = read_manifest(manifest)
    assert read_back.calibration == Calibration(noul=1.5, choice=0.9, score=2.0, noul_offset=0.1)
    assert manifest.read_text(encoding="utf-8").count("[calibration]") == 1
    assert manifest.read_text(encoding="utf-8").count("# Fitted by") == 1
    assert read_back.weights.path == "."


def test_write_calibration_replaces_the_comment_block_above_the_table_and_nothing_else(tmp_path: Path) -> None:
    """Regression: only one ``# Fitted by`` line above ``[calibration]`` was removed, so a block of
    several comment lines was left orphaned above the appended table."""
    before = (
        "# A manifest's own header comment.\n"
        'name = "m"\n'
        'backend = "bi_encoder"\n'
        "# A comment on the weights.\n"
        "[weights]\n"
        'path = "."  # a trailing comment\n'
        "\n"
        "# An old fit, described on\n"
        "# three lines right above\n"
        "# the table.\n"
    )
    old = "[calibration]\nnoul = 0.5\n# a comment inside the table\nchoice = 0.3\n"
    after = "\n# The next table's own comment.\n[extra]\nkey = 1\n"
    manifest = tmp_path / "m.toml"
    manifest.write_text(before + old + after, encoding="utf-8")
    write_calibration(manifest, Calibration(noul=1.5, choice=0.9, score=2.0, noul_offset=0.1))
    kept = before.removesuffix("# An old fit, described on\n# three lines right above\n# the table.\n")
    new = (
        "# Fitted by `decisiond calibrate` (NLL on labelled examples).\n"
        "[calibration]\nnoul = 1.5\nchoice = 0.9\nscore = 2.0\nnoul_offset = 0.1\n"
    )
    assert manifest.read_text(encoding="utf-8") == kept + new + after


def test_write_calibration_on_the_shipped_quality_manifest(tmp_path: Path) -> None:
    shipped = (Path(__file__).resolve().parents[1] / "models" / "qwen2.5-1.5b.toml").read_text(encoding="utf-8")
    manifest = tmp_path / "qwen2.5-1.5b.toml"
    manifest.write_text(shipped, encoding="utf-8")
    write_calibration(manifest, Calibration(noul=0.5, choice=0.25, score=1.5, noul_offset=-0.2))
    text = manifest.read_text(encoding="utf-8")
    head = shipped[: shipped.index("# Fitted by NLL")]
    assert text == head + (
        "# Fitted by `decisiond calibrate` (NLL on labelled examples).\n"
        "[calibration]\nnoul = 0.5\nchoice = 0.25\nscore = 1.5\nnoul_offset = -0.2\n"
    )
    assert read_manifest(manifest).calibration == Calibration(noul=0.5, choice=0.25, score=1.5, noul_offset=-0.2)


def test_write_calibration_appends_a_table_to_a_manifest_without_one(tmp_path: Path) -> None:
    manifest = tmp_path / "m.toml"
    manifest.write_text('name = "m"\n# the weights\n[weights]\npath = "."\n\n\n', encoding="utf-8")
    write_calibration(manifest, Calibration(noul=2.0))
    assert manifest.read_text(encoding="utf-8") == (
        'name = "m"\n# the weights\n[weights]\npath = "."\n\n'
        "# Fitted by `decisiond calibrate` (NLL on labelled examples).\n"
        "[calibration]\nnoul = 2.0\nchoice = 1.0\nscore = 1.0\nnoul_offset = 0.0\n"
    )
