"""Read a labelled set with a model, and measure the answers: accuracy, ECE, Brier, score MAE,
and the coherence relations (negation pairs, option merges, renames, reorders).

A labelled set is JSON lines, one item each: ``{"id", "state", "question": <wire question>,
"expected", "domain"?, "relation"?}`` with ``expected`` ``true``/``false`` for a noul, an option
key for a choice, a level index for a score (the format of ``eval/labelled.jsonl``, described in
``eval/labelled_source.py``). :func:`read_logits` runs the model in-process, one forward per state
(all of its questions together, as one request), and keeps each question's logits divided by the
backend's temperature: the quantity :class:`~decisiond.calibration.Calibration` acts on.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from pydantic import TypeAdapter, ValidationError

from .backends.base import Backend, Work
from .calibration import Calibration, brier, ece
from .render import Question, to_question
from .wire import Question as WireQuestion


@dataclass(frozen=True)
class Item:
    """One labelled example: a state, a question, the right answer's slot index."""

    id: str
    domain: str
    state: Any
    question: Question
    label: int
    relation: dict[str, Any] | None


#: The question types a labelled set holds (a box has no calibrated answer).
LABELLED_TYPES = ("noul", "choice", "score")


def read_items(path: Path) -> list[Item]:
    """Parse a labelled JSONL file; blank lines are skipped.

    Raises:
        OSError: the file cannot be read (missing, a folder, no permission).
        ValueError: the file is not UTF-8, or a line is not an item. The message is one line,
            ``FILE:LINE: problem``: not JSON, not an object, a missing field (``missing field
            'expected'``), an unknown question type (``unknown question type 'yesno' (noul, choice or
            score)``), an invalid question (pydantic's errors as ``loc: msg; loc: msg``), or an
            expected answer that is not one of the question's.
    """
    adapter: TypeAdapter[Any] = TypeAdapter(WireQuestion)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(_read_item(adapter, line, number))
        except ValueError as exc:
            raise ValueError(" ".join(f"{path}:{number}: {exc}".splitlines())) from exc
    return items


def _read_item(adapter: TypeAdapter[Any], line: str, number: int) -> Item:
    """One line of a labelled set as an :class:`Item`; ValueError with the problem (no location)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    for name in ("state", "question", "expected"):
        if name not in row:
            raise ValueError(f"missing field {name!r}")
    raw = row["question"]
    if not isinstance(raw, dict):
        raise ValueError("field 'question' is not an object")
    if "type" not in raw:
        raise ValueError("missing field 'question.type'")
    if raw["type"] not in LABELLED_TYPES:
        unknown = "unsupported" if raw["type"] == "box" else "unknown"
        raise ValueError(f"{unknown} question type {_short(raw['type'])} (noul, choice or score)")
    try:
        question = to_question(adapter.validate_python(raw))
    except ValidationError as exc:
        raise ValueError(f"invalid question: {_problems(exc)}") from exc
    label, answers = _label(question, row["expected"])
    if label is None:
        raise ValueError(f"expected {_short(row['expected'])} is not an answer of this question ({answers})")
    return Item(str(row.get("id", number)), row.get("domain", ""), row["state"], question, label, row.get("relation"))


def _label(question: Question, expected: Any) -> tuple[int | None, str]:
    """The slot index ``expected`` names (None: none), and the answers the question takes, in words."""
    if question.kind == "noul":
        return (1 if expected is True else 0 if expected is False else None), "true or false"
    if question.kind == "score":
        whole = isinstance(expected, int | float) and not isinstance(expected, bool) and float(expected).is_integer()
        index = int(expected) if whole else -1
        return (index if 0 <= index < question.size else None), f"a level index from 0 to {question.size - 1}"
    keys = [o.key for o in question.options]
    return (keys.index(expected) if expected in keys else None), _cut("one of " + ", ".join(map(repr, keys)))


def _problems(exc: ValidationError, limit: int = 3) -> str:
    """A question's ``ValidationError`` as ``loc: msg; loc: msg`` (the union's tag left out of the
    location; past ``limit`` problems, how many more)."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(['question', *map(str, e['loc'][1:])])}: {e['msg']}" for e in errors[:limit]]
    more = f" (and {len(errors) - limit} more)" if len(errors) > limit else ""
    return "; ".join(parts) + more


def _short(value: Any) -> str:
    """``repr(value)``, cut to 80 characters (an expected answer may be any JSON)."""
    return _cut(repr(value))


def _cut(text: str, width: int = 80) -> str:
    """``text``, its end replaced by an ellipsis past ``width`` characters."""
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Reading:
    """The model's base logits (divided by the backend temperature) for each item, and timing.

    ``complemented`` holds, per item, whether the backend answered it as the complement of its
    affirmative (``Backend.complements``; empty: none was): the noul offset then acts on its false side.
    """

    items: list[Item]
    logits: list[torch.Tensor]
    seconds: float
    warnings: int = 0
    complemented: list[bool] = field(default_factory=list)

    def flips(self) -> list[bool]:
        """``complemented``, or all False when the reading has none."""
        return self.complemented or [False] * len(self.items)


def read_logits(backend: Backend, items: Sequence[Item], *, progress: bool = True) -> Reading:
    """Run ``backend`` on ``items``, one request per distinct state (its questions together).

    Returns:
        Reading: one ``[n]`` float32 tensor per item, in item order.
    """
    groups: dict[str, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        groups[json.dumps(item.state, ensure_ascii=False, sort_keys=True)].append(index)
    out: list[torch.Tensor | None] = [None] * len(items)
    warnings = 0
    started = time.perf_counter()
    iterator: Any = groups.values()
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, total=len(groups), desc="states", unit="state")
    for indices in iterator:
        questions = tuple(items[i].question for i in indices)
        prepared = backend.prepare(Work(items[indices[0]].state, questions))
        warnings += bool(prepared.warnings)
        logits = backend.forward([prepared]).float()
        start = 0
        for i, question in zip(indices, questions, strict=True):
            out[i] = logits[start : start + question.size] / backend.temperature(question.kind)
            start += question.size
    seconds = time.perf_counter() - started
    complemented = [backend.complements(item.question) for item in items]
    return Reading(list(items), [x for x in out if x is not None], seconds, warnings, complemented)


def probabilities(reading: Reading, calibration: Calibration) -> list[torch.Tensor]:
    """Each item's distribution under ``calibration`` (as the server would answer)."""
    out = []
    for item, z, flip in zip(reading.items, reading.logits, reading.flips(), strict=True):
        t = calibration.temperature(item.question.kind)
        if item.question.kind == "noul":
            p_true = torch.sigmoid((z[1] - z[0]) / t + (-1 if flip else 1) * calibration.noul_offset)
            out.append(torch.stack([1 - p_true, p_true]))
        else:
            out.append(torch.softmax(z / t, dim=0))
    return out


@dataclass
class Metrics:
    """Figures of one question type (or all)."""

    n: int
    accuracy: float
    ece: float
    brier: float
    mae: float | None = None
    extra: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "accuracy": round(self.accuracy, 4),
            "ece": round(self.ece, 4),
            "brier": round(self.brier, 4),
        }
        if self.mae is not None:
            out["mae"] = round(self.mae, 4)
        return out


def metrics(items: Sequence[Item], probs: Sequence[torch.Tensor]) -> Metrics:
    """Accuracy (first maximum is the label), ECE of the winner's probability, Brier, and for
    scores the mean absolute error of Σ i·p_i against the label's index."""
    if not items:
        return Metrics(0, float("nan"), float("nan"), float("nan"))
    winners = torch.tensor([int(p.argmax()) for p in probs])
    labels = torch.tensor([i.label for i in items])
    correct = (winners == labels).float()
    confidence = torch.stack([p.max() for p in probs])
    mae = None
    if all(i.question.kind == "score" for i in items):
        positions = torch.stack([(p * torch.arange(p.numel())).sum() for p in probs])
        mae = float((positions - labels.float()).abs().mean())
    return Metrics(
        len(items), float(correct.mean()), ece(confidence, correct), brier(probs, [i.label for i in items]), mae
    )


def by_type(items: Sequence[Item], probs: Sequence[torch.Tensor]) -> dict[str, Metrics]:
    """:func:`metrics` of nouls, choices and scores separately."""
    out = {}
    for kind in ("noul", "choice", "score"):
        chosen = [(i, p) for i, p in zip(items, probs, strict=True) if i.question.kind == kind]
        out[kind] = metrics([i for i, _ in chosen], [p for _, p in chosen])
    return out


def relations(items: Sequence[Item], probs: Sequence[torch.Tensor]) -> dict[str, dict[str, float]]:
    """The coherence relations over the set.

    - ``negation``: mean |p_yes(X) + p_yes(not X) − 1|, and the share within 0.15.
    - ``merge``: mean |p(merged) − p(a) − p(b)|.
    - ``rename``/``reorder``: mean total-variation distance between the distributions (matched by key),
      and the share whose winner is the same option.
    """
    by_id = {item.id: (item, p) for item, p in zip(items, probs, strict=True)}
    gaps: dict[str, list[float]] = defaultdict(list)
    same: dict[str, list[float]] = defaultdict(list)
    for item, p in by_id.values():
        relation = item.relation
        if not relation or relation.get("role") in ("plain", None) or relation["group"] not in by_id:
            continue
        base, q = by_id[relation["group"]]
        kind = relation["kind"]
        base_of = {o.key: float(v) for o, v in zip(base.question.options, q, strict=True)}
        mine = {o.key: float(v) for o, v in zip(item.question.options, p, strict=True)}
        if kind == "negation":
            gaps[kind].append(abs(base_of["true"] + mine["true"] - 1.0))
        elif kind == "merge":
            for new, (a, b) in relation["merged"].items():
                gaps[kind].append(abs(mine[new] - base_of[a] - base_of[b]))
        elif kind in ("rename", "reorder"):
            mapping = relation.get("map") or {k: k for k in base_of}
            gaps[kind].append(0.5 * sum(abs(base_of[k] - mine[mapping[k]]) for k in base_of))
            base_winner = max(base_of, key=lambda k: base_of[k])
            same[kind].append(float(mapping[base_winner] == max(mine, key=lambda k: mine[k])))
    out: dict[str, dict[str, float]] = {}
    for kind, values in gaps.items():
        row = {"pairs": float(len(values)), "mean_gap": sum(values) / len(values)}
        if kind == "negation":
            row["within_0.15"] = sum(v <= 0.15 for v in values) / len(values)
        if same.get(kind):
            row["same_winner"] = sum(same[kind]) / len(same[kind])
        out[kind] = {k: round(v, 4) for k, v in row.items()}
    return out
