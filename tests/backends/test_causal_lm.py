"""The causal_lm backend on a tiny random Llama, through the HTTP app and directly.

Every comparison is in float32 on the CPU: the prefix-cache path against a no-cache path and a
plain full forward, answers alone against answers next to other questions and requests, and the
HTTP answers against transformers' ``pipeline("decision")`` on the same model and request.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import string
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from asgi_lifespan import LifespanManager
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

from decisiond.app import create_app
from decisiond.backends.base import Work
from decisiond.backends.causal_lm import CausalLMBackend, CausalLMOptions
from decisiond.backends.causal_lm.labels import choose_labels
from decisiond.backends.causal_lm.prompts import cyclic_shifts
from decisiond.config import Settings
from decisiond.manifest import Manifest, read_manifest
from decisiond.render import Option, Question
from decisiond.service import load_model
from decisiond.testing.requests import TRIAGE
from decisiond.testing.tiny_causal_lm import build_tiny_causal_lm, write_tiny_causal_lm_manifest
from tests.tolerance import PROBABILITY_ATOL, TINY_REDUCTION, WIRE_STEP, assert_logits_close, logit_atol

NOUL = Question("noul", "Is a refund asked for?", (Option("false", None), Option("true", "Money back")))
CHOICE = Question(
    "choice", "Which team?", (Option("billing", "Payments"), Option("technical", None), Option("x", None))
)
SCORE = Question("score", "How angry?", (Option("0", "Calm"), Option("1", "Civil"), Option("2", {"a": "Very"})))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-llama"))


def _manifest(folder: Path, model: Path, **options: object) -> Manifest:
    return read_manifest(write_tiny_causal_lm_manifest(folder, model, **options))


def _backend(model: Path, **options: Any) -> CausalLMBackend:
    return CausalLMBackend(
        AutoModelForCausalLM.from_pretrained(model),
        AutoTokenizer.from_pretrained(model),
        options=CausalLMOptions(**options),
    )


def _serve(
    manifest: Manifest, calls: list[tuple[str, str, dict[str, Any] | None]], **settings: Any
) -> list[httpx.Response]:
    """Start the app on ``manifest``, wait for the model, make ``calls`` (method, path, json) in order."""

    async def run() -> list[httpx.Response]:
        # float32 unless asked: `--dtype auto` is bf16 for a causal LM on a CPU with AVX512-BF16 or AMX, and
        # these tests compare with pipeline("decision") in float32
        app = create_app(Settings(**{"dtype": "float32", **settings}), manifests=[manifest])
        async with LifespanManager(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                for _ in range(600):
                    if (await client.get("/health")).json()["status"] != "loading":
                        break
                    await asyncio.sleep(0.05)
                return [await client.request(method, path, json=body) for method, path, body in calls]

    return asyncio.run(run())


def _check_answer(answer: dict[str, Any], kind: str, size: int) -> None:
    assert answer["type"] == kind
    if kind == "noul":
        assert 0.0 <= answer["noul"] <= 1.0
        return
    probabilities = list(answer["probabilities"].values())
    assert len(probabilities) == size
    assert all(0.0 <= p <= 1.0 for p in probabilities)
    assert sum(probabilities) == pytest.approx(1.0, abs=1e-3)


def test_http_answers_all_three_question_types_and_shows_the_prefix_cache(tiny: Path, tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, tiny)
    calls = [("POST", "/v1/systemone", TRIAGE), ("POST", "/v1/systemone", TRIAGE), ("GET", "/health", None)]
    first, second, health = _serve(manifest, calls)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["model"] == "tiny-llama"
    assert list(body["answers"]) == ["department", "is_urgent", "frustration"]
    _check_answer(body["answers"]["department"], "choice", 3)
    _check_answer(body["answers"]["is_urgent"], "noul", 2)
    _check_answer(body["answers"]["frustration"], "score", 3)
    assert body["answers"]["frustration"]["legend"] == {"0": "Calm", "1": "Concerned but civil", "2": "Very angry"}
    assert second.json()["answers"] == body["answers"]
    cache = health.json()["models"][0]["caches"]["prefix_kv"]
    assert cache["entries"] == 1 and cache["misses"] == 1 and cache["hits"] == 1


def test_http_answers_as_pipeline_decision_does(tiny: Path, tmp_path: Path) -> None:
    """Same model, same request: decisiond's probabilities equal the pipeline's within one
    4-decimal rounding step and float32 noise."""
    (response,) = _serve(_manifest(tmp_path, tiny), [("POST", "/v1/systemone", TRIAGE)])
    expected = pipeline("decision", model=str(tiny))(TRIAGE)
    answers = response.json()["answers"]
    assert answers["is_urgent"]["noul"] == pytest.approx(
        expected["is_urgent"]["noul"], abs=WIRE_STEP + PROBABILITY_ATOL
    )
    for name in ("department", "frustration"):
        for key, probability in expected[name]["probabilities"].items():
            assert answers[name]["probabilities"][key] == pytest.approx(probability, abs=WIRE_STEP + PROBABILITY_ATOL)
    assert answers["department"]["choice"] == expected["department"]["choice"]
    assert answers["frustration"]["score"] == pytest.approx(expected["frustration"]["score"], abs=1e-3)


def test_http_reads_a_choice_of_255_options(tiny: Path, tmp_path: Path) -> None:
    criteria = {f"option {i}": (f"described {i}" if i % 3 else None) for i in range(255)}
    request = {"state": "pick one", "questions": {"many": {"type": "choice", "criteria": criteria}}}
    (response,) = _serve(_manifest(tmp_path, tiny), [("POST", "/v1/systemone", request)])
    assert response.status_code == 200, response.text
    answer = response.json()["answers"]["many"]
    _check_answer(answer, "choice", 255)
    assert list(answer["probabilities"]) == list(criteria)
    assert len(set(answer["probabilities"].values())) > 10  # 255 distinct label logits, not a constant


def test_labels_past_z_are_distinct_single_tokens_chosen_deterministically(tiny: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    labels = choose_labels(tokenizer)
    assert labels == choose_labels(AutoTokenizer.from_pretrained(tiny))
    assert len(labels) == 255
    assert labels[:26] == list(string.ascii_uppercase)
    assert labels[26:52] == list(string.ascii_lowercase)
    assert labels[52:54] == ["AA", "AB"]
    assert "IA" not in labels  # not a single token of this tokenizer: skipped
    ids = tokenizer(labels, add_special_tokens=False)["input_ids"]
    assert all(len(i) == 1 for i in ids)
    assert len({i[0] for i in ids}) == 255


def test_prefix_cache_path_equals_no_cache_path_and_a_plain_forward(tiny: Path) -> None:
    shared, unshared = _backend(tiny), _backend(tiny, share_prefix=False)
    work = Work({"ticket": "charged twice", "lines": [1, 2]}, (NOUL, CHOICE, SCORE))
    prepared = shared.prepare(work)
    assert len(prepared.features.prefix) > 20  # system text and state, run once
    logits = shared.forward([prepared])
    assert unshared.prepare(work).features.prefix == ()
    assert_logits_close(logits, unshared.forward([unshared.prepare(work)]))
    # Reference: each whole prompt through the unmodified model, logits of the labels at the last token
    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    reference = []
    for prompt in prepared.features.prompts:
        with torch.inference_mode():
            last = model(input_ids=torch.tensor([prompt.ids])).logits[0, -1]
        (question,) = prompt.questions
        by_option = dict(zip(question.options, question.labels, strict=True))
        keys = ["false", "true"] if question.type == "noul" else list(question.options)
        reference += [last[shared._label_id[by_option[key]]].item() for key in keys]
    assert_logits_close(logits, torch.tensor(reference))


def test_an_answer_does_not_depend_on_other_questions_or_requests(tiny: Path) -> None:
    backend = _backend(tiny)
    alone = backend.forward([backend.prepare(Work("the state", (CHOICE,)))])
    together = backend.forward([backend.prepare(Work("the state", (SCORE, CHOICE, NOUL)))])
    assert_logits_close(alone, together[3:6])
    other = backend.prepare(Work("a much longer, different state " * 5, (NOUL, SCORE)))
    batched = backend.forward([other, backend.prepare(Work("the state", (CHOICE,))), other])
    assert_logits_close(alone, batched[5:8])
    assert_logits_close(batched[:5], batched[8:])


def test_permutations_cancel_the_order_of_options(tiny: Path) -> None:
    """Averaged over every cyclic shift, a choice's logits do not depend on the order the options were sent in."""
    backend = _backend(tiny, permutations=3)
    rotated = Question("choice", CHOICE.instructions, CHOICE.options[1:] + CHOICE.options[:1])
    prepared = backend.prepare(Work("state", (CHOICE,)))
    assert prepared.features.slot_reads == (3, 3, 3)
    logits = backend.forward([prepared])
    logits_rotated = backend.forward([backend.prepare(Work("state", (rotated,)))])
    assert_logits_close(logits, torch.roll(logits_rotated, 1))
    plain = _backend(tiny).forward([_backend(tiny).prepare(Work("state", (CHOICE,)))])
    assert not torch.allclose(logits, plain, atol=1e-3)
    assert cyclic_shifts(4, 2) == [0, 2] and cyclic_shifts(3, 8) == [0, 1, 2] and cyclic_shifts(5, 1) == [0]


def test_bad_backend_options_fail_at_load_naming_the_key(tiny: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="permutations"):
        load_model(_manifest(tmp_path, tiny, permutations=0), Settings())
    with pytest.raises(ValueError, match="permutation"):
        load_model(_manifest(tmp_path, tiny, permutation=2), Settings())


def test_decision_json_labels_and_temperature_are_read(tiny: Path, tmp_path: Path) -> None:
    """A checkpoint's decision.json sets its labels (so its option limit) and its temperatures."""
    model = tmp_path / "with-config"
    shutil.copytree(tiny, model)
    decision = {"labels": {"choice": ["A", "B", "C"]}, "temperature": {"score": 2.0}}
    (model / "decision.json").write_text(json.dumps(decision), encoding="utf-8")
    manifest = _manifest(tmp_path, model)
    served = load_model(manifest, Settings())
    try:
        assert served.backend.temperature("score") == 2.0
        assert served.backend.temperature("choice") == 1.0
    finally:
        served.engine.close()
    four = {
        "state": "s",
        "questions": {"q": {"type": "choice", "criteria": {"a": None, "b": None, "c": None, "d": None}}},
    }
    (response,) = _serve(manifest, [("POST", "/v1/systemone", four)])
    assert response.status_code == 400
    assert response.json()["detail"]["error_type"] == "api_usage_error"
    assert "at most 3" in response.json()["detail"]["message"]


def test_a_prompt_longer_than_the_window_is_refused_with_max_tokens_exceeded(tiny: Path, tmp_path: Path) -> None:
    request = {"state": "word " * 400, "questions": {"q": {"type": "noul", "instructions": "Is it long?"}}}
    (response,) = _serve(_manifest(tmp_path, tiny, window=256), [("POST", "/v1/systemone", request)])
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail["error_type"] == "max_tokens_exceeded"
    assert "256" in detail["message"] and "word" not in detail["message"]


def test_usage_counts_the_shared_prefix_once(tiny: Path) -> None:
    backend = _backend(tiny)
    work = Work("a state of some length " * 4, (NOUL, CHOICE, SCORE))
    prepared = backend.prepare(work)
    whole = sum(len(prompt.ids) for prompt in prepared.features.prompts)
    prefix = len(prepared.features.prefix)
    assert prepared.input_tokens == whole - 2 * prefix


def test_a_checkpoint_with_a_decision_head_answers_through_its_head(tiny: Path, tmp_path: Path) -> None:
    """AutoModelForDecision checkpoints (here a tiny JEV head on a Qwen2 trunk) answer as the pipeline does."""
    from transformers import JevConfig, JevForDecision

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    text = {
        "model_type": "qwen2",
        "vocab_size": len(tokenizer) + 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
    }
    torch.manual_seed(0)
    folder = tmp_path / "jev"
    JevForDecision(
        JevConfig(hidden_size=64, text_config=text, num_verbalizers=40, initializer_range=0.5)
    ).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    manifest = _manifest(tmp_path, folder, name="tiny-jev")
    (response, health) = _serve(manifest, [("POST", "/v1/systemone", TRIAGE), ("GET", "/health", None)])
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    expected = pipeline("decision", model=str(folder))(TRIAGE)
    assert answers["is_urgent"]["noul"] == pytest.approx(
        expected["is_urgent"]["noul"], abs=WIRE_STEP + PROBABILITY_ATOL
    )
    for name in ("department", "frustration"):
        for key, probability in expected[name]["probabilities"].items():
            assert answers[name]["probabilities"][key] == pytest.approx(probability, abs=WIRE_STEP + PROBABILITY_ATOL)
    assert health.json()["models"][0]["backend"] == "causal_lm"


def test_negation_complement_answers_a_negated_noul_as_one_minus_its_positive(tiny: Path) -> None:
    """With ``negation = "complement"`` "Is it not late?" is read as "Is it late?" with yes and no swapped,
    so the two sum to 1 (a real model says yes to both); ``as_asked`` reads the text as sent."""
    from decisiond.readout import read

    sides = (Option("false", None), Option("true", None))
    plain, negated = Question("noul", "Is it late?", sides), Question("noul", "Is it not late?", sides)
    complement = _backend(tiny, negation="complement")
    logits = complement.forward([complement.prepare(Work("The train left at 9.", (plain, negated)))])
    yes_plain, yes_negated = (p[1] for p in read(logits, [2, 2], [1.0, 1.0]).probabilities)
    assert yes_plain + yes_negated == pytest.approx(1.0, abs=1e-5)
    as_asked = _backend(tiny)
    alone = as_asked.forward([as_asked.prepare(Work("The train left at 9.", (plain,)))])
    assert torch.allclose(logits[:2], alone, atol=1e-4)  # the positive question is read as before
    assert [complement.complements(q) for q in (plain, negated)] == [False, True]
    assert not as_asked.complements(negated)


def test_negation_complement_still_sums_to_one_under_a_calibration_offset(tiny: Path) -> None:
    """The served answer (the engine's readout with the manifest's calibration): the noul offset is the
    positive question's, so a question and its negation sum to 1 whatever the offset."""
    from decisiond.calibration import Calibration
    from decisiond.engine import read_output

    sides = (Option("false", None), Option("true", None))
    questions = (Question("noul", "Is it late?", sides), Question("noul", "Isn't it late?", sides))
    backend = _backend(tiny, negation="complement")
    backend.calibration = Calibration(noul=0.3, noul_offset=-0.9)
    logits = backend.forward([backend.prepare(Work("The train left at 9.", questions))])
    yes_plain, yes_negated = (p[1] for p in read_output(backend, questions, logits).probabilities)
    assert yes_plain + yes_negated == pytest.approx(1.0, abs=1e-5)


def test_choices_by_key_answer_a_reordered_choice_alike(tiny: Path) -> None:
    """``option_order = "by_key"`` shows a choice's options sorted by key: the order sent changes nothing
    (each option keeps its logit), where the pipeline's order (``as_sent``) is read as sent."""
    options = CHOICE.options
    reordered = Question("choice", CHOICE.instructions, (options[2], options[0], options[1]))
    by_key = _backend(tiny, option_order="by_key", permutations=2)
    as_sent = _backend(tiny, permutations=2)

    def per_key(backend: CausalLMBackend, question: Question) -> dict[str, float]:
        logits = backend.forward([backend.prepare(Work("Refund my double charge.", (question,)))])
        return {o.key: float(v) for o, v in zip(question.options, logits, strict=True)}

    first, second = per_key(by_key, CHOICE), per_key(by_key, reordered)
    atol = logit_atol(list(first.values()), TINY_REDUCTION)
    assert all(abs(first[k] - second[k]) <= atol for k in first)
    plain, moved = per_key(as_sent, CHOICE), per_key(as_sent, reordered)
    assert max(abs(plain[k] - moved[k]) for k in plain) > 1e-3
