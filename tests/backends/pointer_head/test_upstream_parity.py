"""decisiond answers as upstream's own code does, on checkpoints upstream's own code wrote.

PyPI ``wev-ai`` 0.2.2 and ``strands-decider`` 0.2.0 (the ``test`` extra) build tiny random
checkpoints with their own save / export functions (:mod:`decisiond.testing.upstream`) and score
requests with their own scoring code, unrounded; decisiond loads the same folders and must give
every probability within 1e-4 (float32, CPU). Kev is not on PyPI: its LoRA runs share OpenJev's
``head.pt`` layout and ``wev/model.py`` is Kev's ``kev/model.py`` adapted, so OpenJev's code scores
them; Kev's text is checked line by line against Kev's own in ``test_kev_render_parity.py``.

The requests are the fixed parity set (:data:`decisiond.testing.parity.REQUESTS`) and generated
ones: nested objects and lists, empty values, whitespace, Unicode, ``<|...|>`` text, numbers and
booleans inside structures.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decisiond.backends.pointer_head.backend import PointerHeadBackend
from decisiond.errors import ApiUsageError
from decisiond.testing.parity import REQUESTS, max_difference, probabilities, work_of

TOLERANCE = 1e-4
KEV_WEV = ("kev_qwen3", "kev_qwen3_5", "kev_full", "kev_special_embeddings", "wev_run_keep_layers", "wev_export")
STRANDS = ("strands_qwen3", "strands_qwen3_5", "strands_sliding", "strands_force_bos")


def check(pair: Callable[[str], Any], name: str, request: dict[str, Any]) -> float:
    """Score ``request`` both ways; assert agreement (or the same refusal) and return max |Δp|."""
    backend, scorer = pair(name)
    try:
        theirs = scorer(request)
    except ValueError as exc:  # strands: an option line left without a token of its own
        assert "has no tokens left" in str(exc)
        with pytest.raises(ApiUsageError, match="has no token of its own"):
            probabilities(backend, request)
        return 0.0
    ours = probabilities(backend, request)
    difference = max_difference(ours, theirs)
    assert difference <= TOLERANCE, f"{name}: max |Δp| {difference:.2e}\nours {ours}\ntheirs {theirs}"
    return difference


@pytest.mark.parametrize("name", KEV_WEV + STRANDS)
def test_the_parity_set_answers_as_upstream(name: str, pair: Callable[[str], Any]) -> None:
    """Regression: object states, nested lists, empty descriptions and ``<|...|>`` text (Kev, wev:
    up to 0.54), every layer run where the run keeps one (0.50), and strands' template (1.00)."""
    for request in REQUESTS:
        check(pair, name, request)


def test_the_parity_set_is_not_trivial(pair: Callable[[str], Any]) -> None:
    """The comparison is between non-uniform distributions that differ per checkpoint."""
    backend, _ = pair("kev_qwen3")
    values = [p for q in probabilities(backend, REQUESTS[0]) for p in q]
    assert max(values) - min(values) > 0.01


# ---------------------------------------------------------------- generated requests

WORDS = st.sampled_from(
    ["refund", "late", " two  spaces ", "line one\nline two", "résumé", "東京", "🙂", "<|im_start|>", "<|a-b|>",
     "<||>", "<|x y|>", "<|fim_suffix|>", "", " ", "\t", "- dash", "key: value", "None", "True", "0"]
)  # fmt: skip
TEXT = st.one_of(WORDS, st.text(st.characters(exclude_categories=("Cs",)), max_size=12))
KEYS = st.one_of(WORDS, st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=6))
LEAF = st.one_of(
    TEXT, st.integers(-999, 999), st.floats(-1e3, 1e3, allow_nan=False, width=32), st.booleans(), st.none()
)
JSON = st.recursive(
    LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3), max_leaves=6
)
STRUCTURED = st.one_of(
    TEXT, st.lists(JSON, max_size=3), st.dictionaries(KEYS, JSON, max_size=3)
)  # the wire's text: a string, an array or an object


def question(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """A question of ``kind`` valid for every family (strands' schema is the narrowest)."""
    if kind == "noul":
        sides = st.dictionaries(st.sampled_from(["true", "false"]), st.none() | STRUCTURED, max_size=2)
        criteria: st.SearchStrategy[Any] = st.none() | sides
    elif kind == "choice":
        criteria = st.dictionaries(KEYS, st.none() | STRUCTURED, min_size=2, max_size=4)
    else:
        criteria = st.lists(TEXT, min_size=2, max_size=4)
    return st.fixed_dictionaries({"type": st.just(kind), "instructions": STRUCTURED, "criteria": criteria}).map(
        lambda q: {k: v for k, v in q.items() if not (k == "criteria" and v is None)}
    )


REQUEST = st.fixed_dictionaries(
    {
        "state": STRUCTURED,
        "questions": st.lists(
            st.sampled_from(["noul", "choice", "score"]).flatmap(question), min_size=1, max_size=3
        ).map(lambda qs: {f"q{i}": q for i, q in enumerate(qs)}),
    }
)

GENERATED = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("name", ["kev_qwen3", "kev_qwen3_5", "wev_export", "strands_qwen3", "strands_qwen3_5"])
@GENERATED
@given(request=REQUEST)
def test_generated_requests_answer_as_upstream(name: str, request: dict[str, Any], pair: Callable[[str], Any]) -> None:
    check(pair, name, request)


def test_force_bos_puts_the_bos_token_first(pair: Callable[[str], Any]) -> None:
    """strands-decider's ``force_bos``: the state starts with BOS; without it, with no BOS."""
    bos_backend, _ = pair("strands_force_bos")
    plain_backend, _ = pair("strands_qwen3")
    bos = bos_backend.renderer.tokenizer.bos_token_id
    assert bos_backend.prepare(work_of(REQUESTS[0])).features.state[0] == bos
    assert bos not in plain_backend.prepare(work_of(REQUESTS[0])).features.state


def test_a_sliding_window_base_keeps_its_window(
    upstream_checkpoints: dict[str, Path], pair: Callable[[str], Any], load: Callable[..., PointerHeadBackend]
) -> None:
    """Regression: the packed form's block mask replaced the sliding window (1.0 differences past it).
    The base's second layer sees 4 tokens; every state here is longer. Both forms that keep the
    window agree with upstream; the packed form is refused."""
    backend, scorer = pair("strands_sliding")
    assert backend.isolation == "prefix"
    rows = load(upstream_checkpoints["strands_sliding"], isolation="rows")
    for request in REQUESTS:
        assert len(backend.prepare(work_of(request)).features.state) > 4
        assert max_difference(probabilities(rows, request), scorer(request)) <= TOLERANCE
    with pytest.raises(ValueError, match="sliding window"):
        load(upstream_checkpoints["strands_sliding"], isolation="packed")


def test_a_state_over_the_window_is_refused_by_default_and_fitted_as_upstream_on_request(
    upstream_checkpoints: dict[str, Path], pair: Callable[[str], Any], load: Callable[..., PointerHeadBackend]
) -> None:
    """strands-decider fits a prompt over its window (``max_length``; 40 tokens here) by cutting the
    questions' fronts and the state's end. decisiond refuses such a request unless the manifest asks
    for ``strands_window = "fit"``; then it cuts exactly as upstream and says so in ``x_window_fit``.
    Here the state is 212 tokens and the questions 146 and 188: the longer question loses 38 tokens
    (the questions may claim 150), the state keeps 50."""
    from decisiond.errors import MaxTokensExceeded

    refusing, scorer = pair("strands_short_window")
    fitting = load(upstream_checkpoints["strands_short_window"], strands_window="fit")
    request = {
        "state": "refund late " * 40,
        "questions": {
            "n": {"type": "noul", "instructions": "late?"},
            "c": {
                "type": "choice",
                "instructions": "which team " * 12,
                "criteria": {"billing": "refund", "other": None},
            },
        },
    }
    with pytest.raises(MaxTokensExceeded, match="reads at most 200"):
        refusing.prepare(work_of(request))
    prepared = fitting.prepare(work_of(request))
    report = prepared.extra["x_window_fit"]
    assert report == {"state_tokens_dropped": 162, "questions_tokens_dropped": 38}
    assert len(prepared.features.state) + max(len(b.ids) for b in prepared.features.branches) == 200
    assert max_difference(probabilities(fitting, request), scorer(request)) <= TOLERANCE
    short = {"state": "late", "questions": {"q": {"type": "noul", "instructions": "x"}}}
    assert fitting.prepare(work_of(short)).extra == {}


def test_the_window_fit_reaches_the_response(upstream_checkpoints: dict[str, Path], tmp_path: Path) -> None:
    """Over HTTP, a fitted request says what was cut in the top-level ``x_window_fit`` field."""
    import asyncio

    import httpx
    from asgi_lifespan import LifespanManager

    from decisiond.app import create_app
    from decisiond.config import Settings
    from decisiond.manifest import read_manifest

    manifest = tmp_path / "short.toml"
    folder = upstream_checkpoints["strands_short_window"]
    manifest.write_text(
        f'name = "short"\nbackend = "pointer_head"\nfamily = "strands"\nstrands_window = "fit"\n'
        f'weights = {{ path = "{folder}" }}\n',
        encoding="utf-8",
    )
    body = {"state": "refund late " * 40, "questions": {"n": {"type": "noul", "instructions": "late?"}}}

    async def ask() -> httpx.Response:
        settings = Settings(model=[str(manifest)], device="cpu", dtype="float32")
        app = create_app(settings, manifests=[read_manifest(manifest)])
        async with LifespanManager(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
                for _ in range(600):  # the model loads on a background thread
                    if (await client.get("/health")).json()["status"] != "loading":
                        break
                    await asyncio.sleep(0.05)
                return await client.post("/v1/systemone", json=body)

    response = asyncio.run(ask())
    assert response.status_code == 200, response.text
    assert response.json()["x_window_fit"]["state_tokens_dropped"] > 0
    assert set(response.json()["answers"]) == {"n"}


def test_more_questions_than_upstream_fits_together(
    upstream_checkpoints: dict[str, Path], pair: Callable[[str], Any], load: Callable[..., PointerHeadBackend]
) -> None:
    """strands-decider fits 32 questions at a time. 33 alike questions give both groups the same
    state, and decisiond answers as upstream; when the groups would cut the state differently,
    decisiond (one state per request) refuses rather than answer otherwise."""
    _, scorer = pair("strands_short_window")
    fitting = load(upstream_checkpoints["strands_short_window"], strands_window="fit")
    alike = {f"q{i}": {"type": "noul", "instructions": "late?"} for i in range(33)}
    request = {"state": "refund late " * 40, "questions": alike}
    assert max_difference(probabilities(fitting, request), scorer(request)) <= TOLERANCE
    unlike = alike | {"q32": {"type": "noul", "instructions": "which team " * 12}}
    with pytest.raises(ApiUsageError, match="send at most 32 questions per request"):
        fitting.prepare(work_of({"state": "refund late " * 40, "questions": unlike}))
