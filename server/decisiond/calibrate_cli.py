"""``decisiond calibrate --model M --data labelled.jsonl``: fit the manifest's ``[calibration]``.

The model reads every labelled item in-process (:mod:`decisiond.evaluate`); per question type a
temperature is fitted by minimising the NLL of the labels (choices and scores), and Platt's slope
and offset for nouls (:mod:`decisiond.calibration`). The fit is written to the manifest's
``[calibration]`` table, and ECE, Brier and accuracy before and after are printed, with a
reliability diagram (``--plot``, needs matplotlib: ``pip install 'decisiond[bench]'``).

A set with no examples is refused (exit 2, the manifest untouched); a question type with fewer than
:data:`MIN_EXAMPLES` examples is still fitted, with a warning that its fit is unreliable. Every
error is one line.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .calibration import Calibration, fit_platt, fit_temperature
from .cli_parser import describe_settings_error
from .manifest import Manifest, ManifestError, find_manifest

if TYPE_CHECKING:
    import torch

    from .config import Settings

log = logging.getLogger("decisiond.calibrate")

#: Below this many examples of a question type, its fit is printed with a warning (still fitted).
MIN_EXAMPLES = 30
#: A ``[calibration]`` header line, and any table header (``[x]``, ``[[x]]``), in a manifest.
_CALIBRATION = re.compile(r"^\s*\[\s*calibration\s*\]\s*(#.*)?$")
_TABLE = re.compile(r"^\s*\[")


def add_calibrate_parser(sub: Any) -> None:
    """The ``calibrate`` subcommand's flags."""
    parser = sub.add_parser(
        "calibrate",
        help="fit a model's per-type temperatures on labelled examples and write them to its manifest",
        description="Read labelled examples (JSON lines: state, question, expected) with a model, fit one "
        "temperature per question type (and the noul offset) by minimising the negative log-likelihood, print "
        "ECE, Brier and accuracy before and after, and write the fit to the manifest's [calibration] table.",
    )
    parser.add_argument("--model", required=True, help="model name, alias or manifest path")
    parser.add_argument("--data", required=True, type=Path, help="labelled JSON lines (see eval/labelled.jsonl)")
    parser.add_argument("--models-dir", type=Path, default=Path("models"), help="folder of manifests")
    parser.add_argument("--cache-dir", type=Path, default=None, help="user cache folder (converted weights)")
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="model dtype")
    parser.add_argument("--plot", type=Path, default=None, help="write a reliability diagram PNG here")
    parser.add_argument("--dry-run", action="store_true", help="print the fit, leave the manifest unchanged")


def fit(
    items: list[Any],
    logits: list[torch.Tensor],
    complemented: list[bool] | None = None,
    keep: Calibration | None = None,
) -> Calibration:
    """A :class:`Calibration` fitted on base logits (see :func:`decisiond.evaluate.read_logits`).

    A noul the backend answered as a complement (``complemented``, per item) is fitted as the question
    the model read: its margin and label both flipped, so the offset stays the model's and the pair
    "Is X?"/"Is X not?" still sums to 1 (:meth:`Calibration.apply`). Types without examples keep their
    values in ``keep`` (the manifest's, for ``decisiond calibrate``; default the identity).
    """
    import torch  # lazily: the CLI must not import torch before its thread policy

    values: dict[str, float] = (keep or Calibration()).model_dump()
    for kind in ("choice", "score"):
        chosen = [(z, i.label) for i, z in zip(items, logits, strict=True) if i.question.kind == kind]
        if chosen:
            values[kind] = fit_temperature([z for z, _ in chosen], [label for _, label in chosen])
    flips = complemented or [False] * len(items)
    nouls = [
        (-z if flip else z, 1 - i.label if flip else i.label)
        for i, z, flip in zip(items, logits, flips, strict=True)
        if i.question.kind == "noul"
    ]
    if nouls:
        margins = torch.stack([z[1] - z[0] for z, _ in nouls])
        slope, offset = fit_platt(margins, torch.tensor([label for _, label in nouls]))
        values["noul"], values["noul_offset"] = 1.0 / slope, offset
    return Calibration(**values)


def write_calibration(path: Path, calibration: Calibration) -> None:
    """Replace (or append) the ``[calibration]`` table of the manifest file at ``path``.

    The table goes back where it was, with the contiguous ``#`` comment block directly above its
    header (which described the old fit) replaced by one ``# Fitted by`` line; the comments and
    blank lines directly above the next table stay with that table, and nothing else in the file
    changes. Without a ``[calibration]`` table, the comment and the table are appended.
    """
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    table = "".join(f"{k} = {round(v, 4)}\n" for k, v in calibration.model_dump().items())
    block = "# Fitted by `decisiond calibrate` (NLL on labelled examples).\n[calibration]\n" + table
    header = next((i for i, line in enumerate(lines) if _CALIBRATION.match(line)), None)
    if header is None:
        text = "".join(lines).rstrip("\n")
        path.write_text(text + "\n\n" + block if text else block, encoding="utf-8")
        return
    start = header
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    end = header + 1
    while end < len(lines) and not _TABLE.match(lines[end]):
        end += 1
    if end < len(lines):  # the comments and blank lines above the next table are that table's
        while end > header + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1
    path.write_text("".join(lines[:start]) + block + "".join(lines[end:]), encoding="utf-8")


def reliability_plot(path: Path, before: tuple[Any, Any], after: tuple[Any, Any], title: str) -> bool:
    """A reliability diagram (accuracy against confidence in 10 bins) before and after; False and a
    message when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("the reliability diagram needs matplotlib: pip install 'decisiond[bench]'", file=sys.stderr)  # noqa: T201
        return False
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
    for (confidence, correct), name in ((before, "before"), (after, "after")):
        index = (confidence * 10).long().clamp(max=9)
        xs, ys = [], []
        for b in range(10):
            mask = index == b
            if mask.any():
                xs.append(float(confidence[mask].mean()))
                ys.append(float(correct[mask].mean()))
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("confidence of the winner")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def report(
    name: str, seconds: float, items: list[Any], before: list[Any], after: list[Any], fitted: Calibration
) -> str:
    """The before/after table ``decisiond calibrate`` prints."""
    from .evaluate import by_type

    lines = [
        f"{name}: {len(items)} examples read in {seconds:.1f} s",
        f"{'type':<8}{'n':>5}  {'acc before':>10} {'after':>6}  {'ECE before':>10} {'after':>6}  "
        f"{'Brier before':>12} {'after':>6}",
    ]
    old, new = by_type(items, before), by_type(items, after)
    for kind in ("noul", "choice", "score"):
        a, b = old[kind], new[kind]
        if a.n:
            lines.append(
                f"{kind:<8}{a.n:>5}  {a.accuracy:>10.3f} {b.accuracy:>6.3f}  {a.ece:>10.3f} {b.ece:>6.3f}  "
                f"{a.brier:>12.3f} {b.brier:>6.3f}"
            )
    lines.append("fitted: " + ", ".join(f"{k} = {v:.4g}" for k, v in fitted.model_dump().items()))
    return "\n".join(lines)


def _confidence(probs: list[torch.Tensor], items: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
    import torch  # lazily: the CLI must not import torch before its thread policy

    confidence = torch.stack([p.max() for p in probs])
    correct = torch.tensor([float(int(p.argmax()) == i.label) for p, i in zip(probs, items, strict=True)])
    return confidence, correct


def few_examples(items: list[Any], minimum: int = MIN_EXAMPLES) -> dict[str, int]:
    """The question types with some but fewer than ``minimum`` examples in ``items``, with their
    counts (``{"score": 7}``), in the order noul, choice, score."""
    counts = {kind: sum(i.question.kind == kind for i in items) for kind in ("noul", "choice", "score")}
    return {kind: n for kind, n in counts.items() if 0 < n < minimum}


def _settings(args: argparse.Namespace) -> Settings:
    """The :class:`~decisiond.config.Settings` of ``--cache-dir`` and ``--dtype`` (and the
    environment); ValueError with one line naming the flag and variable when one is out of range."""
    from .config import Settings

    try:
        return Settings(**({"cache_dir": args.cache_dir} if args.cache_dir else {}), dtype=args.dtype)
    except ValidationError as exc:
        raise ValueError(describe_settings_error(exc)) from exc


def _one_line(exc: BaseException) -> str:
    """An error as one line: a pydantic ``ValidationError`` as ``loc: msg; loc: msg``, any other's
    text with its line breaks made spaces."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False)
        text = "; ".join(f"{'.'.join(map(str, e['loc'])) or exc.title}: {e['msg']}" for e in errors)
    else:
        text = str(exc)
    return " ".join(text.splitlines())


def run_calibrate(args: argparse.Namespace) -> int:
    """``decisiond calibrate``. Returns 0, or 2 with the reason in one line (no manifest file, data
    that is missing, malformed or holds no examples, a setting out of range, no weights); the
    manifest is then left as it was."""
    from .evaluate import probabilities, read_items, read_logits
    from .service import load_backend

    logging.basicConfig(level="INFO", format="%(levelname)s %(name)s: %(message)s")
    try:
        manifest: Manifest = find_manifest(args.model, args.models_dir)
        if manifest.source is None and not args.dry_run:
            raise ManifestError(f"{manifest.name} has no manifest file to write to; pass a .toml path as --model")
        items = read_items(args.data)
        if not items:
            raise ValueError(f"{args.data} holds no labelled examples: nothing to fit, the manifest is left as it was")
        for kind, n in few_examples(items).items():
            log.warning("the %s fit on %d examples is unreliable (fewer than %d); label more", kind, n, MIN_EXAMPLES)
        backend = load_backend(manifest, _settings(args))
    except (ManifestError, ValueError, OSError) as exc:
        log.error("%s", _one_line(exc))
        return 2
    reading = read_logits(backend, items)
    before = probabilities(reading, manifest.calibration)
    fitted = fit(items, reading.logits, reading.complemented, keep=manifest.calibration)
    after = probabilities(reading, fitted)
    print(report(manifest.name, reading.seconds, items, before, after, fitted))  # noqa: T201
    if args.plot:
        reliability_plot(args.plot, _confidence(before, items), _confidence(after, items), manifest.name)
    if not args.dry_run and manifest.source is not None:
        write_calibration(manifest.source, fitted)
        print(f"written to {manifest.source} [calibration]")  # noqa: T201
    return 0
