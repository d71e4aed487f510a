#!/usr/bin/env python
"""Run every backend on a CUDA device and on the CPU with the same tiny models and inputs.

For each tiny model of ``decisiond.testing.tiny.TINY_MODELS`` (a backend adds its model there
and is checked here with no change to this script), the same requests are prepared once and run
through ``backend.forward`` and the readout on the CPU in float32 and on the device in the checked
dtype (bfloat16 by default). The script prints a table of the largest probability difference
and the speed-up of the device over the CPU (median of ``--repeats`` forward passes of the whole
batch), then answers one request end to end through ``Service.decide`` on the device. It exits 1
when a difference reaches ``--tolerance`` (1e-2) or a backend fails; on a machine without CUDA it
says so and exits 0.

With the ``test`` extra installed (``wev-ai``, ``strands-decider``), it then runs the pointer-head
parity set (``decisiond.testing.parity.REQUESTS``) on checkpoints written by upstream's own code
(``decisiond.testing.upstream``): upstream scores them on the CPU in float32, decisiond on the device
in the checked dtype, and the table shows the largest probability difference per checkpoint
(``--no-parity`` skips it).

    python scripts/gpu_check.py                       # on a CUDA machine
    python scripts/gpu_check.py --device cpu --dtype bfloat16   # a dry run of the script on a CPU
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from decisiond.backends import Backend, Logits, Work, backend_class
from decisiond.box_images import with_box_images
from decisiond.config import Settings
from decisiond.engine import read_output
from decisiond.errors import MaxTokensExceeded
from decisiond.manifest import read_manifest
from decisiond.media import MediaLimits, decode_all, image_names
from decisiond.render import to_questions
from decisiond.service import Service, load_model
from decisiond.testing.tiny import TINY_MODELS, tiny_manifest
from decisiond.wire import DecisionRequest

LONG_STATE = " ".join(
    f"Ticket {i}: the customer was charged twice for order {1000 + i} and wants a refund today." for i in range(40)
)
QUESTIONS: dict[str, Any] = {
    "department": {
        "type": "choice",
        "instructions": "Which team should handle this ticket?",
        "criteria": {"billing": "Payments, invoicing, refunds", "technical": None, "other": "None of the above"},
    },
    "is_urgent": {"type": "noul", "instructions": "Does the ticket communicate time pressure?"},
    "frustration": {
        "type": "score",
        "instructions": "How frustrated is the customer?",
        "criteria": ["Calm", "Concerned but civil", "Annoyed", "Very angry"],
    },
}
STATES: list[Any] = [
    "I was charged twice for one order and I need the duplicate refunded today.",
    {"order": 1234, "message": "The app crashes when I open the settings page."},
    LONG_STATE,
    "Thanks, all good now.",
]


def png_data_url(seed: int, size: tuple[int, int] = (48, 40)) -> str:
    """A seeded random-noise PNG as a base64 data URL."""
    from PIL import Image

    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (size[1], size[0], 3), generator=generator, dtype=torch.uint8).numpy()
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


#: Asked of a model that answers box questions too (about the first of the request's two images).
BOX_QUESTIONS: dict[str, Any] = {**QUESTIONS, "where": {"type": "box", "instructions": "<first> the parcel"}}


def as_asset(data_url: str) -> dict[str, str]:
    """A data URL as a JSON asset (so that a question can name the image by its placeholder)."""
    return {"type": "image", "format": "png", "data_base64": data_url.split(",", 1)[1]}


def requests_for(reads_images: bool, copies: int, boxes: bool = False) -> list[dict[str, Any]]:
    """The checked requests: every state with all three questions (and a box question where the
    model answers one), ``copies`` times over."""
    bodies = []
    for copy in range(copies):
        for i, state in enumerate(STATES):
            body: dict[str, Any] = {"state": state, "questions": BOX_QUESTIONS if boxes else QUESTIONS}
            if reads_images:
                body["assets"] = {
                    "<first>": as_asset(png_data_url(100 * copy + i)),
                    "<second>": as_asset(png_data_url(100 * copy + i + 50, size=(40, 56))),
                }
            bodies.append(body)
    return bodies


def works_for(bodies: Sequence[dict[str, Any]], reads_images: bool) -> list[Work]:
    """Wire bodies → backend work, images decoded as the service does."""
    works = []
    for body in bodies:
        request = DecisionRequest.model_validate(body)
        images = decode_all(request.images, request.assets, MediaLimits()) if reads_images else ()
        names = image_names(request.images, request.assets)
        questions = with_box_images(list(request.questions), to_questions(request), names)
        works.append(Work(request.state, questions, images, image_names=names))
    return works


def admitted(backend: Backend, works: Sequence[Work]) -> list[Work]:
    """The works ``backend`` accepts (a model with a short window refuses the long state with 400)."""
    kept = []
    for work in works:
        try:
            backend.prepare(work)
        except MaxTokensExceeded:
            continue
        kept.append(work)
    return kept


@dataclass
class Run:
    """Probabilities of every question of the batch (a box question: its edges and confidence) and
    the median forward time."""

    probabilities: list[list[float]]
    median_ms: float


def run_backend(backend: Backend, works: Sequence[Work], repeats: int) -> Run:
    """Prepare once, forward ``repeats`` times (after one warm-up), read out once."""
    prepared = [backend.prepare(work) for work in works]
    questions = [q for work in works for q in work.questions]
    backend.forward(prepared)  # warm-up: kernels, caches
    times = []
    output: torch.Tensor | Logits = torch.empty(0)
    for _ in range(repeats):
        if backend.device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        output = backend.forward(prepared)
        if backend.device.type == "cuda":
            torch.cuda.synchronize()  # a box question's candidates stay on the device
        times.append((time.perf_counter() - started) * 1000.0)
    readout = read_output(backend, questions, output)
    numbers = [
        [*p, *(box or []), *([] if confidence is None else [confidence])]
        for p, box, confidence in zip(readout.probabilities, readout.box, readout.box_confidence, strict=True)
    ]
    return Run(numbers, statistics.median(times))


def largest_difference(a: list[list[float]], b: list[list[float]]) -> float:
    """max |a - b| over every probability (and box edge and confidence)."""
    return max(abs(x - y) for qa, qb in zip(a, b, strict=True) for x, y in zip(qa, qb, strict=True))


def check_model(kind: str, folder: Path, args: argparse.Namespace) -> tuple[list[str], bool]:
    """One row of the table for the tiny model ``kind``; whether it passed."""
    manifest = read_manifest(tiny_manifest(kind, folder))
    reads_images = "image" in manifest.modalities
    boxes = "box" in backend_class(manifest.backend).question_types
    works = works_for(requests_for(reads_images, args.copies, boxes), reads_images)
    cpu = Settings(device="cpu", dtype="float32", cache_entries=0)
    dev = Settings(device=args.device, dtype=args.dtype, cache_entries=0)
    on_cpu = load_model(manifest, cpu)
    on_dev = load_model(manifest, dev)
    works = admitted(on_cpu.backend, works)
    try:
        reference = run_backend(on_cpu.backend, works, args.repeats)
        checked = run_backend(on_dev.backend, works, args.repeats)
        body = requests_for(reads_images, 1, boxes)[0]
        service = Service([on_dev], dev)
        answer = asyncio.run(service.decide(DecisionRequest.model_validate(body))).body["answers"]
        if list(answer) != list(body["questions"]):
            raise RuntimeError(f"the service answered {list(answer)}")
    finally:
        on_cpu.engine.close()
        on_dev.engine.close()
    diff = largest_difference(reference.probabilities, checked.probabilities)
    ok = diff < args.tolerance
    slots = sum(work.num_slots for work in works)
    row = [
        kind,
        manifest.backend,
        str(slots),
        f"{diff:.2e}",
        f"{reference.median_ms:.2f}",
        f"{checked.median_ms:.2f}",
        f"{reference.median_ms / checked.median_ms:.1f}x",
        "ok" if ok else "FAIL",
    ]
    return row, ok


def parity_checkpoints(root: Path) -> dict[str, Path]:
    """The upstream-written checkpoints of the parity check (as the test suite builds them)."""
    from decisiond.testing import upstream

    bases = {kind: upstream.build_base(root / f"base-{kind}", kind, seed=i) for i, kind in enumerate(upstream.KINDS)}
    run = upstream.build_wev_run(root / "wev-run", bases["qwen3"], keep_layers=1, seed=5, temperature=1.7)
    return {
        "kev_qwen3": upstream.build_wev_run(root / "kev-qwen3", bases["qwen3"], seed=1, temperature=2.35),
        "kev_qwen3_5": upstream.build_wev_run(root / "kev-qwen3_5", bases["qwen3_5"], seed=2, temperature=2.41),
        "kev_full": upstream.build_kev_full(root / "kev-full", bases["qwen3"], seed=3),
        "kev_special_embeddings": upstream.build_kev_special_embeddings(root / "kev-special", bases["qwen3"], seed=11),
        "wev_run_keep_layers": run,
        "wev_export": upstream.export_wev(run, root / "wev-export"),
        "strands_qwen3": upstream.build_strands(root / "strands-qwen3", bases["qwen3"], seed=6),
        "strands_qwen3_5": upstream.build_strands(root / "strands-qwen3_5", bases["qwen3_5"], seed=7),
        "strands_sliding": upstream.build_strands(root / "strands-sliding", bases["sliding"], seed=8),
    }


def check_parity(args: argparse.Namespace) -> tuple[list[list[str]], list[str]]:
    """Rows of the parity table (checkpoint, requests, max |dp| against upstream) and the failures."""
    from decisiond.manifest import checkpoint_manifest
    from decisiond.testing import upstream
    from decisiond.testing.parity import REQUESTS, max_difference, probabilities

    tolerance = args.parity_tolerance or (1e-4 if args.dtype == "float32" else 5e-2)
    rows = [["checkpoint", "requests", f"max |dp| {args.device} {args.dtype} vs upstream cpu fp32", ""]]
    failed = []
    with tempfile.TemporaryDirectory(prefix="decisiond-parity-") as tmp:
        for name, folder in parity_checkpoints(Path(tmp)).items():
            try:
                scorer = upstream.strands_scorer(folder) if name.startswith("strands") else upstream.wev_scorer(folder)
                manifest = checkpoint_manifest(folder)
                assert manifest is not None
                served = load_model(manifest, Settings(device=args.device, dtype=args.dtype, cache_entries=0))
                try:
                    diff = max(max_difference(probabilities(served.backend, r), scorer(r)) for r in REQUESTS)
                finally:
                    served.engine.close()
                ok = diff < tolerance
                rows.append(
                    [name, str(len(REQUESTS)), f"{diff:.2e}", "ok" if ok else f"FAIL (tolerance {tolerance:g})"]
                )
            except Exception as exc:  # report every checkpoint, then fail
                ok = False
                rows.append([name, "-", "-", f"ERROR {type(exc).__name__}: {exc}"])
            if not ok:
                failed.append(name)
    return rows, failed


def print_table(rows: list[list[str]]) -> None:
    """Left-aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())  # noqa: T201


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; the exit status says whether every backend passed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="the device checked against the CPU (default cuda)")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--tolerance", type=float, default=1e-2, help="largest allowed probability difference")
    parser.add_argument("--repeats", type=int, default=20, help="timed forward passes per device")
    parser.add_argument("--copies", type=int, default=8, help="copies of the request set in the batch")
    parser.add_argument("--models", nargs="*", default=list(TINY_MODELS), help=f"of {', '.join(TINY_MODELS)}")
    parser.add_argument("--no-parity", dest="parity", action="store_false", help="skip the upstream parity set")
    parser.add_argument(
        "--parity-tolerance",
        type=float,
        default=None,
        help="largest allowed difference from upstream (default 1e-4 in float32, 5e-2 in half precision: "
        "the tiny random models amplify bf16 rounding to about 1.5e-2)",
    )
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device on this machine: nothing to check (run this script on a GPU machine)")  # noqa: T201
        return 0
    if args.device.startswith("cuda"):
        print(f"device: {torch.cuda.get_device_name(0)}, dtype {args.dtype}, torch {torch.__version__}")  # noqa: T201
    rows = [["model", "backend", "slots", "max |dp|", "cpu fp32 ms", f"{args.device} {args.dtype} ms", "speed-up", ""]]
    failed = []
    with tempfile.TemporaryDirectory(prefix="decisiond-gpu-check-") as tmp:
        for kind in args.models:
            try:
                row, ok = check_model(kind, Path(tmp), args)
            except Exception as exc:  # report every backend, then fail
                row, ok = (
                    [kind, TINY_MODELS[kind].backend, "-", "-", "-", "-", "-", f"ERROR {type(exc).__name__}: {exc}"],
                    False,
                )
            rows.append(row)
            if not ok:
                failed.append(kind)
    print_table(rows)
    if args.parity:
        try:
            import strands_decider  # noqa: F401
            import wev  # noqa: F401
        except ImportError:
            print("parity set skipped: install the test extra (wev-ai, strands-decider)")  # noqa: T201
        else:
            parity_rows, parity_failed = check_parity(args)
            print_table(parity_rows)
            failed += parity_failed
    if failed:
        print(f"FAILED: {', '.join(failed)} (tolerance {args.tolerance:g})")  # noqa: T201
        return 1
    print(f"all {len(args.models)} backends (and the parity set, when run) agree within {args.tolerance:g}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
