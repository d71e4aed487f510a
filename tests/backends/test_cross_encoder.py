"""The cross_encoder backend on tiny random BERT classifiers: an NLI head and a one-output reranker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from transformers import AutoTokenizer

from decisiond.app import create_app
from decisiond.backends import Work
from decisiond.backends.cross_encoder import CrossEncoderBackend, PairTemplate, score_index
from decisiond.config import Settings
from decisiond.errors import MaxTokensExceeded
from decisiond.manifest import read_manifest
from decisiond.render import to_questions
from decisiond.service import Service, load_model
from decisiond.testing.tiny import minilm_path, tiny_manifest
from decisiond.wire import DecisionRequest
from tests.tolerance import assert_logits_close

LONG_STATE = " ".join(f"Order {i} was charged twice and the customer wants a refund today." for i in range(30))
QUESTIONS: dict[str, Any] = {
    "team": {
        "type": "choice",
        "instructions": "Which team?",
        "criteria": {"billing": "Refunds", "tech": None, "other": "None"},
    },
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "criteria": {"true": "Says today or now"}},
    "mood": {"type": "score", "instructions": "How angry?", "criteria": ["Calm", "Annoyed", "Furious"]},
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """Both tiny cross-encoders behind one service (the NLI model is the default)."""
    folder = tmp_path_factory.mktemp("cross")
    settings = Settings(max_wait_ms=0)
    nli = read_manifest(tiny_manifest("cross_encoder", folder, name="nli"))
    reranker = read_manifest(tiny_manifest("cross_encoder_reranker", folder, name="reranker"))
    served = Service([load_model(nli, settings), load_model(reranker, settings)], settings)
    yield served
    served.close()


@pytest.fixture
async def client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(service.settings, service=service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        yield http


def _work(state: Any, questions: dict[str, Any]) -> Work:
    return Work(state, to_questions(DecisionRequest.model_validate({"state": state, "questions": questions})))


def _logits(backend: CrossEncoderBackend, *works: Work) -> torch.Tensor:
    return backend.forward([backend.prepare(work) for work in works])


@pytest.mark.parametrize("model", ["nli", "reranker"])
async def test_all_three_question_types_answer_with_valid_distributions(client: httpx.AsyncClient, model: str) -> None:
    response = await client.post("/v1/systemone", json={"model": model, "state": LONG_STATE, "questions": QUESTIONS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == model and list(body["answers"]) == list(QUESTIONS)
    answers = body["answers"]
    for key in ("team", "mood"):
        probabilities = list(answers[key]["probabilities"].values())
        assert all(0 <= p <= 1 for p in probabilities) and abs(sum(probabilities) - 1) < 1e-3
        assert max(probabilities) - min(probabilities) > 1e-3  # the random model does tell slots apart
    assert answers["team"]["choice"] in {"billing", "tech", "other"}
    assert 0 <= answers["urgent"]["noul"] <= 1
    assert 0 <= answers["mood"]["score"] <= 2
    assert body["usage"]["input_tokens"] > 64  # the long state is read whole, in several windows


def test_an_answer_does_not_depend_on_the_other_questions_or_requests(service: Service) -> None:
    backend = service.default.backend
    assert isinstance(backend, CrossEncoderBackend)
    alone = _logits(backend, _work(LONG_STATE, {"mood": QUESTIONS["mood"]}))
    together = _logits(backend, _work(LONG_STATE, QUESTIONS))
    other = _work("Another state entirely.", {"x": {"type": "noul", "instructions": "A long hypothesis " * 5}})
    in_batch = _logits(backend, other, _work(LONG_STATE, QUESTIONS))
    assert_logits_close(together[-3:], alone)
    assert_logits_close(in_batch[2:], together)


def test_long_states_are_windowed_and_pooled_by_max(service: Service) -> None:
    backend = service.default.backend
    assert isinstance(backend, CrossEncoderBackend)
    prepared = backend.prepare(_work(LONG_STATE, {"urgent": QUESTIONS["urgent"]}))
    windows = prepared.features.slot_pairs
    assert len(windows) == 2 and all(len(w) > 1 for w in windows)  # both noul sides see several windows
    scores = backend.score_pairs(prepared.features.pairs)
    expected = torch.stack([scores[w].max() for w in windows])
    assert_logits_close(backend.forward([prepared]), expected.cpu())
    backend.pooling = "mean"
    try:
        assert_logits_close(backend.forward([prepared]), torch.stack([scores[w].mean() for w in windows]).cpu())
    finally:
        backend.pooling = "max"


def test_a_hypothesis_that_fills_the_window_is_refused(service: Service) -> None:
    with pytest.raises(MaxTokensExceeded, match="window of 64 tokens"):
        service.default.backend.prepare(_work("short", {"q": {"type": "noul", "instructions": "word " * 80}}))


def test_the_pair_template_is_read_from_the_tokenizer() -> None:
    template = PairTemplate.learn(AutoTokenizer.from_pretrained(minilm_path()))
    assert template.build([7, 8], [9]) == ([101, 7, 8, 102, 9, 102], [0, 0, 0, 0, 1, 1])


def test_the_entailment_class_is_found_in_id2label() -> None:
    assert score_index({0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"}, None) == 1
    assert score_index({0: "entailment", 1: "not_entailment"}, None) == 0
    assert score_index({0: "LABEL_0"}, None) == 0  # a one-output reranker
    assert score_index({0: "no", 1: "yes"}, "yes") == 1
    with pytest.raises(ValueError, match="no entailment class"):
        score_index({0: "LABEL_0", 1: "LABEL_1"}, None)
    with pytest.raises(ValueError, match="'maybe' is not among"):
        score_index({0: "no", 1: "yes"}, "maybe")


def test_unknown_manifest_keys_are_refused(tmp_path: Path) -> None:
    manifest = read_manifest(tiny_manifest("cross_encoder", tmp_path, pooling="max", colour="blue"))
    with pytest.raises(ValueError, match="unknown cross_encoder keys"):
        load_model(manifest, Settings())
