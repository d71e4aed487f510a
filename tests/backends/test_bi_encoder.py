"""The default model for real: all-MiniLM-L6-v2 from its PyPI package, offline."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from decisiond.backends.base import Work
from decisiond.backends.bi_encoder import BiEncoderBackend
from decisiond.render import Option, Question
from decisiond.service import Service
from tests.tolerance import MINILM_REDUCTION, PROBABILITY_ATOL, WIRE_STEP, logit_atol

pytestmark = pytest.mark.slow

TICKET = "I was charged twice for one order and I need the duplicate refunded today."
DEPARTMENT = {
    "type": "choice",
    "instructions": "Which team should handle this ticket?",
    "criteria": {
        "billing": "Payments, invoicing, refunds",
        "technical": "Bugs, outages, integrations",
        "other": "None of the above",
    },
}
URGENT = {
    "type": "noul",
    "instructions": "Does the ticket communicate time pressure?",
    "criteria": {"true": "Names a deadline, or says now or today"},
}
FRUSTRATION = {
    "type": "score",
    "instructions": "How frustrated is the customer?",
    "criteria": ["Calm", "Concerned but civil", "Very angry"],
}


async def ask(client: httpx.AsyncClient, questions: dict[str, Any], state: Any = TICKET) -> dict[str, Any]:
    resp = await client.post("/v1/systemone", json={"state": state, "questions": questions})
    assert resp.status_code == 200, resp.text
    return resp.json()


def close(a: dict[str, Any], b: dict[str, Any], tol: float = WIRE_STEP + PROBABILITY_ATOL) -> bool:
    """Whether two wire answers agree: numbers within one 4-decimal rounding step and float32 noise."""
    if a.keys() != b.keys():
        return False
    for key, value in a.items():
        other = b[key]
        if isinstance(value, dict):
            if not close(value, other, tol):
                return False
        elif isinstance(value, float):
            if abs(value - other) > tol:
                return False
        elif value != other:
            return False
    return True


async def test_the_triage_ticket_goes_to_billing(minilm_client: httpx.AsyncClient) -> None:
    data = await ask(minilm_client, {"department": DEPARTMENT, "is_urgent": URGENT, "frustration": FRUSTRATION})
    assert data["model"] == "minilm-l6"
    department = data["answers"]["department"]
    assert department["choice"] == "billing"
    assert department["probabilities"]["billing"] > 0.5
    assert 0 <= data["answers"]["is_urgent"]["noul"] <= 1
    assert 0 <= data["answers"]["frustration"]["score"] <= 2
    assert data["usage"]["input_tokens"] > 20


async def test_other_questions_never_change_an_answer(minilm_client: httpx.AsyncClient) -> None:
    alone = (await ask(minilm_client, {"d": DEPARTMENT}))["answers"]["d"]
    variants = [
        {"renamed id": DEPARTMENT},
        {"u": URGENT, "f": FRUSTRATION, "d": DEPARTMENT},
        {"d": DEPARTMENT, "u": URGENT},
        {"f": FRUSTRATION, "x": {**DEPARTMENT, "criteria": {"a": None, "b": None}}, "d": DEPARTMENT},
    ]
    for questions in variants:
        answers = (await ask(minilm_client, questions))["answers"]
        key = "renamed id" if "renamed id" in questions else "d"
        assert close(answers[key], alone), questions


async def test_a_long_state_is_read_in_windows_not_cut(minilm_client: httpx.AsyncClient) -> None:
    filler = "The weather was unremarkable and the meeting ran long. " * 60  # ~700 tokens
    head = await ask(minilm_client, {"d": DEPARTMENT}, state=filler + TICKET)
    short = await ask(minilm_client, {"d": DEPARTMENT}, state=filler)
    assert head["usage"]["input_tokens"] > 700
    # the ticket at the end, past the first window, still moves the answer toward billing
    assert head["answers"]["d"]["probabilities"]["billing"] > short["answers"]["d"]["probabilities"]["billing"]


def test_state_encoded_once_and_slot_texts_cached(minilm_service: Service) -> None:
    backend = minilm_service.default.backend
    assert isinstance(backend, BiEncoderBackend)
    seen: list[int] = []
    original = backend.encode

    def counting(sequences: Any) -> Any:
        seen.append(len(sequences))
        return original(sequences)

    backend.encode = counting  # type: ignore[method-assign]
    try:
        questions = tuple(
            Question("choice", f"Question number {i}?", (Option("yes", None), Option("no", None))) for i in range(5)
        )
        state = "A one-window state about nothing in particular, unique text 93721."
        backend.forward([backend.prepare(Work(state, questions))])
        assert seen == [1 + 10]  # one state window + ten distinct slot texts, in one pass
        backend.forward([backend.prepare(Work(state + " again", questions))])
        assert seen[-1] == 1  # slot texts now come from the cache: only the state is encoded
        assert backend.cache_stats()["slot_embeddings"]["hits"] >= 10
    finally:
        del backend.encode


def test_batched_equals_alone(minilm_service: Service) -> None:
    backend = minilm_service.default.backend
    q = (Question("choice", "Team?", (Option("billing", "money"), Option("tech", "bugs"))),)
    states = [TICKET, "The app crashes when I upload a photo.", "word " * 400]
    alone = [backend.forward([backend.prepare(Work(s, q))]) for s in states]
    together = backend.forward([backend.prepare(Work(s, q)) for s in states])
    for i, logits in enumerate(alone):
        assert together[2 * i : 2 * i + 2].tolist() == pytest.approx(
            logits.tolist(), abs=logit_atol(logits, MINILM_REDUCTION)
        )


async def test_a_noul_and_its_negation_sum_to_one(minilm_client: httpx.AsyncClient) -> None:
    """Regression: MiniLM ignores "not", so a noul and its negation both answered about 0.5."""
    questions = {
        "plain": {"type": "noul", "instructions": "Is the customer asking for a refund?"},
        "negated": {"type": "noul", "instructions": "Is the customer not asking for a refund?"},
    }
    answers = (await ask(minilm_client, questions))["answers"]
    assert answers["plain"]["noul"] + answers["negated"]["noul"] == pytest.approx(1.0, abs=2e-4)


def test_a_noul_and_its_negation_sum_to_one_under_a_calibration_offset(minilm_service: Service) -> None:
    """What `decisiond calibrate` writes (an offset) keeps a statement noul and its negation summing to 1:
    the offset goes to the side of the statement the model read."""
    from decisiond.calibration import Calibration
    from decisiond.engine import read_output

    backend = minilm_service.default.backend
    sides = (Option("false", None), Option("true", None))
    one_sided = (Option("false", None), Option("true", "The customer wants money back"))
    questions = (
        Question("noul", "Is the customer asking for a refund?", sides),
        Question("noul", "Is the customer not asking for a refund?", sides),
        Question("noul", "Does the ticket want a refund?", one_sided),
        Question("noul", "Does the ticket not want a refund?", one_sided),
    )
    assert [backend.complements(q) for q in questions] == [False, True, False, True]
    logits = backend.forward([backend.prepare(Work(TICKET, questions))])
    saved, backend.calibration = backend.calibration, Calibration(noul=0.7, noul_offset=-1.2)
    try:
        yes = [p[1] for p in read_output(backend, questions, logits).probabilities]
    finally:
        backend.calibration = saved
    assert yes[0] + yes[1] == pytest.approx(1.0, abs=1e-5)
    assert yes[2] + yes[3] == pytest.approx(1.0, abs=1e-5)


async def test_a_one_sided_noul_and_its_negation_sum_to_one(minilm_client: httpx.AsyncClient) -> None:
    negated = {**URGENT, "instructions": "Does the ticket not communicate time pressure?"}
    answers = (await ask(minilm_client, {"plain": URGENT, "negated": negated}))["answers"]
    assert answers["plain"]["noul"] > 0.5
    assert answers["plain"]["noul"] + answers["negated"]["noul"] == pytest.approx(1.0, abs=2e-4)


async def test_a_criteria_less_noul_tells_a_destructive_command_from_a_harmless_one(
    minilm_client: httpx.AsyncClient,
) -> None:
    """Regression: without criteria every noul answered between 0.44 and 0.58 whatever the state."""
    question = {"q": {"type": "noul", "instructions": "Does this shell command delete files?"}}
    destructive = (await ask(minilm_client, question, state="rm -rf ~/projects"))["answers"]["q"]["noul"]
    harmless = await ask(minilm_client, question, state="Thanks, the meeting on Tuesday works for me.")
    assert destructive > 0.5 > harmless["answers"]["q"]["noul"]


async def test_a_state_in_an_unreadable_script_gets_uniform_answers_and_a_warning(
    minilm_client: httpx.AsyncClient,
) -> None:
    """Regression: a Chinese state tokenised to unknown tokens and every option tied on a confident-looking
    tie-break; it must answer uniformly and say why (an x_ field, spec/wire.md)."""
    data = await ask(
        minilm_client,
        {"d": DEPARTMENT, "u": URGENT, "f": FRUSTRATION},
        state="我被重复扣款了两次，请尽快退还多收的费用。",
    )
    for key in ("d", "f"):  # uniform: each a third, rounded so that the three sum to exactly 1 (wire.md §3)
        probabilities = data["answers"][key]["probabilities"]
        assert all(abs(p - 1 / 3) <= 1e-4 for p in probabilities.values()), probabilities
        assert round(sum(probabilities.values()), 4) == 1.0
    assert data["answers"]["u"]["noul"] == 0.5
    assert len(data["x_warnings"]) == 1 and "unknown" in data["x_warnings"][0]
    assert "x_warnings" not in await ask(minilm_client, {"d": DEPARTMENT})
