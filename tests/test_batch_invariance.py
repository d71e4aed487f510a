"""Batch invariance for every backend: an answer does not depend on what else is in its batch.

For each tiny model of ``decisiond.testing.tiny.TINY_MODELS`` (every backend registers one there),
a target request is answered alone, then again among 200 requests submitted at once (long and
short states, structured states, many options, every question type), which the engine gathers
into large micro-batches. Every probability must agree within 1e-5 (float32), every position
within what those probabilities allow (:func:`tests.tolerance.position_atol`) and every winner
exactly; for a model that answers ``box`` questions (the detector), box questions about one of the
request's images are mixed in, and every edge and box confidence must agree within 1e-5 too.
Another model's engine runs at the same time, as on a server holding several models.
"""

from __future__ import annotations

import random
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from decisiond.backends import Work
from decisiond.config import Settings
from decisiond.errors import MaxTokensExceeded
from decisiond.manifest import read_manifest
from decisiond.readout import Readout
from decisiond.render import Option, Question
from decisiond.service import ServedModel, load_model
from decisiond.testing.tiny import TINY_MODELS, tiny_manifest

from .tolerance import PROBABILITY_ATOL, position_atol

CONCURRENT = 200


def _image(seed: int) -> Any:
    from PIL import Image

    rng = random.Random(seed)
    return Image.new("RGB", (24 + seed % 9, 20 + seed % 7), tuple(rng.randrange(256) for _ in range(3)))


def _questions(rng: random.Random, boxes: int = 0) -> tuple[Question, ...]:
    n_options = rng.choice([2, 3, 10, 40])
    choice = Question(
        "choice",
        rng.choice(["Which team?", {"ask": "route", "to": ["team"]}]),
        tuple(Option(f"option {i}", rng.choice([None, f"about topic {i}"])) for i in range(n_options)),
    )
    noul = Question("noul", "Is it urgent?", (Option("false", None), Option("true", rng.choice([None, "says today"]))))
    score = Question("score", "How angry?", tuple(Option(str(i), f"level {i}") for i in range(rng.choice([2, 5, 10]))))
    picked = [q for q in (choice, noul, score) if rng.random() < 0.7] or [noul]
    if boxes and rng.random() < 0.6:
        picked.append(Question("box", rng.choice(["the parcel", "a red car", ""]), (), image=rng.randrange(boxes)))
    rng.shuffle(picked)
    return tuple(picked)


def _state(rng: random.Random) -> Any:
    kind = rng.choice(["short", "long", "object", "array"])
    if kind == "short":
        return f"charged twice for order {rng.randrange(10_000)}, refund please"
    if kind == "long":
        return " ".join(f"sentence {i} about an order that never arrived." for i in range(rng.randrange(20, 60)))
    if kind == "object":
        return {"ticket": "the app crashes", "tier": rng.choice(["free", "pro"]), "n": rng.randrange(100)}
    return ["first turn", {"role": "user", "text": "still broken"}]


def _works(count: int, reads_images: bool, seed: int, boxes: bool = False) -> list[Work]:
    rng = random.Random(seed)
    works = []
    for i in range(count):
        images = tuple(_image(seed + i + k) for k in range(rng.randrange(1, 3))) if reads_images else ()
        works.append(Work(_state(rng), _questions(rng, len(images) if boxes else 0), images))
    return works


def _answer(served: ServedModel, work: Work) -> Future[Readout]:
    return served.engine.submit(served.backend.prepare(work))


def _admitted(served: ServedModel, works: list[Work]) -> list[Work]:
    """The works the model admits (a model with a short question window refuses the longest)."""
    kept = []
    for work in works:
        try:
            served.backend.prepare(work)
        except MaxTokensExceeded:
            continue
        kept.append(work)
    return kept


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-invariance")


@pytest.mark.parametrize("kind", sorted(TINY_MODELS))
def test_alone_equals_among_200_concurrent_requests(kind: str, tiny_folder: Path) -> None:
    # No queue timeout that a busy 2-core machine could reach: this test is about answers, not latency.
    settings = Settings(device="cpu", dtype="float32", max_wait_ms=20, max_batch_tokens=4096, request_timeout_s=600)
    manifest = read_manifest(tiny_manifest(kind, tiny_folder))
    reads_images = "image" in manifest.modalities
    served = load_model(manifest, settings)
    boxes = "box" in served.backend.question_types
    other = load_model(read_manifest(tiny_manifest("bi_encoder", tiny_folder, name="other")), settings)
    try:
        targets = _admitted(served, _works(12, reads_images, seed=1, boxes=boxes))[:6]
        assert len(targets) == 6
        alone = [_answer(served, work).result(60) for work in targets]
        crowd = _admitted(served, _works(CONCURRENT - len(targets), reads_images, seed=2, boxes=boxes))
        assert len(crowd) > CONCURRENT / 2
        mixed = crowd[:]
        for i, work in enumerate(targets):
            mixed.insert(i * 31, work)
        futures = [_answer(served, work) for work in mixed]
        noise = [_answer(other, work) for work in _works(50, False, seed=3)]
        results = [f.result(120) for f in futures]
        for f in noise:
            f.result(120)
        assert served.engine.stats.mean_batch_size() > 1.5, "the crowd should have been batched"
        for i, expected in enumerate(alone):
            got = results[i * 31]
            assert got.winner == expected.winner
            for p, q, at, was in zip(
                got.probabilities, expected.probabilities, got.position, expected.position, strict=True
            ):
                assert max((abs(a - b) for a, b in zip(p, q, strict=True)), default=0.0) <= PROBABILITY_ATOL
                # a position Σ i·p_i of up to 40 options moves up to 39 times as much as a probability
                assert abs(at - was) <= position_atol(p, q), (at, was)
            assert [b is None for b in got.box] == [b is None for b in expected.box]
            for b, c in zip(got.box, expected.box, strict=True):
                assert b is None or b == pytest.approx(c, abs=1e-5)
            assert got.box_confidence == pytest.approx(expected.box_confidence, abs=1e-5)
        if boxes:
            located = sum(b is not None for r in results for b in r.box)
            assert located > 40, f"only {located} box questions among the {len(mixed)} requests"
    finally:
        served.engine.close()
        other.engine.close()
