"""Measure models on a labelled set: accuracy, ECE, Brier and score MAE per question type, and the
coherence relations (negation pairs, option merges, renames, reorders).

    python scripts/eval.py --model minilm-l6 --model smollm2-135m --data eval/labelled.jsonl --out docs/quality.jsonl

Each model reads every item in-process (one forward per state, its questions together, as one
request to the server would be read). Figures are given three ways: uncalibrated (the identity
calibration), as served (the manifest's ``[calibration]``), and calibrated out of sample: fitted by
two-fold cross-validation over states (fit on the even-numbered states, measure on the odd ones, and
the other way round). ``--logits FILE`` saves every item's logits (torch.save) for later analysis.
``--every K`` reads only every K-th state (a bounded, still stratified run on a slow machine; the
output records it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

import torch  # noqa: E402

from decisiond.calibrate_cli import fit  # noqa: E402
from decisiond.calibration import Calibration  # noqa: E402
from decisiond.config import Settings  # noqa: E402
from decisiond.evaluate import Reading, by_type, probabilities, read_items, read_logits, relations  # noqa: E402
from decisiond.manifest import find_manifest  # noqa: E402
from decisiond.service import load_backend  # noqa: E402


def _state_key(item: object) -> str:
    return json.dumps(item.state, ensure_ascii=False, sort_keys=True)  # type: ignore[attr-defined]


def cross_validated(reading: Reading) -> list[torch.Tensor]:
    """Each item's distribution under a calibration fitted on the other half of the states."""
    order = list(dict.fromkeys(_state_key(i) for i in reading.items))
    fold = {key: n % 2 for n, key in enumerate(order)}
    out: list[torch.Tensor | None] = [None] * len(reading.items)
    for held in (0, 1):
        train = [k for k, i in enumerate(reading.items) if fold[_state_key(i)] != held]
        test = [k for k, i in enumerate(reading.items) if fold[_state_key(i)] == held]
        flips = reading.flips()
        calibration = fit(
            [reading.items[k] for k in train], [reading.logits[k] for k in train], [flips[k] for k in train]
        )
        sub = Reading(
            [reading.items[k] for k in test],
            [reading.logits[k] for k in test],
            0.0,
            complemented=[flips[k] for k in test],
        )
        for k, p in zip(test, probabilities(sub, calibration), strict=True):
            out[k] = p
    return [p for p in out if p is not None]


def evaluate(name: str, args: argparse.Namespace) -> dict[str, object]:
    """Load one model, read the set, and gather its figures."""
    manifest = find_manifest(name, args.models_dir)
    settings = Settings(dtype=args.dtype, **({"cache_dir": args.cache_dir} if args.cache_dir else {}))
    started = time.perf_counter()
    backend = load_backend(manifest, settings)
    load_s = time.perf_counter() - started
    items = read_items(args.data)
    if args.types:
        items = [i for i in items if i.question.kind in args.types.split(",")]
    if args.every > 1:
        keep = set(list(dict.fromkeys(_state_key(i) for i in items))[args.start :: args.every])
        items = [i for i in items if _state_key(i) in keep]
    reading = read_logits(backend, items)
    if args.logits:  # FILE, or FILE-MODEL when several models are read
        path = args.logits if len(args.model) == 1 else args.logits.with_stem(f"{args.logits.stem}-{manifest.name}")
        torch.save({"ids": [i.id for i in items], "logits": reading.logits, "complemented": reading.flips()}, path)
    uncalibrated = probabilities(reading, Calibration())
    as_served = probabilities(reading, manifest.calibration)
    calibrated = cross_validated(reading)
    return {
        "model": manifest.name,
        "backend": manifest.backend,
        "dtype": str(backend.dtype).removeprefix("torch."),
        "items": len(items),
        "every_kth_state": args.every,
        "first_state": args.start,
        "types": args.types or "all",
        "states": len({_state_key(i) for i in items}),
        "load_s": round(load_s, 1),
        "read_s": round(reading.seconds, 1),
        "ms_per_question": round(1000 * reading.seconds / max(1, len(items)), 1),
        "unreadable_states": reading.warnings,
        "uncalibrated": {k: m.as_dict() for k, m in by_type(items, uncalibrated).items()},
        "as_served": {k: m.as_dict() for k, m in by_type(items, as_served).items()},
        "calibrated_cv": {k: m.as_dict() for k, m in by_type(items, calibrated).items()},
        "relations": relations(items, as_served),
        "calibration_fit_all": fit(items, reading.logits, reading.complemented).model_dump(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, help="model name or manifest (repeatable)")
    parser.add_argument(
        "--data", type=Path, default=Path("eval/labelled.jsonl"), help="labelled JSON lines (default %(default)s)"
    )
    parser.add_argument(
        "--models-dir", type=Path, default=Path("models"), help="folder of model manifests (default %(default)s)"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="user cache (default $DECISIOND_CACHE_DIR or ~/.cache/decisiond)"
    )
    parser.add_argument("--dtype", default="auto", help="as decisiond serve --dtype (default auto)")
    parser.add_argument("--every", type=int, default=1, help="read only every K-th state (1: all)")
    parser.add_argument("--start", type=int, default=0, help="with --every: the first state read (0-based)")
    parser.add_argument("--types", default="", help="only these question types, comma-separated (default all)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, default=None, help="append the figures (JSON lines) here")
    parser.add_argument(
        "--logits",
        type=Path,
        default=None,
        help="save each item's id and logits here (torch.save; FILE-MODEL with several models)",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    machine = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    for name in args.model:
        result = {**evaluate(name, args), "machine": machine, "data": str(args.data)}
        print(json.dumps(result, indent=1))  # noqa: T201
        if args.out:
            with args.out.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
