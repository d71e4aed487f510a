"""Oversized text is refused cheaply, and one request's tokenising never blocks the others
(issue 14, item 8)."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from decisiond.backends import Prepared, Work
from decisiond.backends.bi_encoder import BiEncoderBackend, load_encoder
from decisiond.backends.fake import FakeBackend
from decisiond.errors import ApiUsageError
from decisiond.manifest import find_manifest
from decisiond.render import to_questions
from decisiond.wire import DecisionRequest

from .reliability_support import VALID, fake_service, settings

ROOT = Path(__file__).resolve().parent.parent


class CountingFake(FakeBackend):
    """Counts the requests that reach ``prepare`` (where a real backend tokenises)."""

    prepared = 0

    def prepare(self, work: Work) -> Prepared:
        CountingFake.prepared += 1
        return super().prepare(work)


@pytest.mark.parametrize("where", ["state", "instructions", "criteria"])
def test_text_over_the_character_bound_is_refused_before_tokenising(where: str) -> None:
    """Bug: a 10 MB state was tokenised in full (seconds, under a lock every request shares) before
    the token limit refused it; now a bound on characters refuses it before any tokenising."""
    big = "word " * 5_000
    body: dict[str, Any] = {"state": "short", "questions": {"q": {"type": "choice", "criteria": {"a": None}}}}
    if where == "state":
        body["state"] = {"text": big}
    elif where == "instructions":
        body["questions"]["q"]["instructions"] = big
    else:
        body["questions"]["q"]["criteria"] = {"a": big}
    app_settings = settings(max_text_chars=20_000)
    service = fake_service(app_settings, CountingFake())
    CountingFake.prepared = 0
    with pytest.raises(ApiUsageError, match="20000 characters"):
        asyncio.run(service.decide(DecisionRequest.model_validate(body)))
    asyncio.run(service.decide(DecisionRequest.model_validate(VALID)))
    service.close()
    assert CountingFake.prepared == 1  # only the request under the bound


class HeldTokenizer:
    """A real tokenizer that blocks on texts starting with ``HOLD`` until ``release`` is set; its
    copies share the events (as each copy of a tokenizer tokenises the same way)."""

    def __init__(self, inner: Any, entered: threading.Event, release: threading.Event) -> None:
        self.inner, self.entered, self.release = inner, entered, release

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __deepcopy__(self, memo: dict[int, Any]) -> HeldTokenizer:
        return HeldTokenizer(copy.deepcopy(self.inner, memo), self.entered, self.release)

    def __call__(self, texts: Sequence[str], **kwargs: Any) -> Any:
        if any(text.startswith("HOLD") for text in texts):
            self.entered.set()
            self.release.wait(30)
        return self.inner(list(texts), **kwargs)


def test_one_requests_tokenising_does_not_hold_up_another() -> None:
    """Bug: every request tokenised under one lock shared by all requests, so a light request waited
    for a heavy one's tokenising (two refused 10 MB bodies stalled a light request from 0.23 s to 26 s).
    The bi-encoder's ``prepare`` now only renders: its tokenizer runs on the model thread alone
    (``complete``, one call per micro-batch), so no request's ``prepare`` waits on another's tokenising."""
    model, tokenizer = load_encoder(find_manifest("minilm-l6", ROOT / "models").weights_path())
    entered, release = threading.Event(), threading.Event()
    backend = BiEncoderBackend(model, HeldTokenizer(tokenizer, entered, release))
    request = DecisionRequest.model_validate(VALID)
    heavy = Work("HOLD this state", to_questions(request))
    light = Work("a light state", to_questions(request))
    release.set()  # a prepare that tokenised would still be seen entering the tokenizer
    prepared = [backend.prepare(heavy), backend.prepare(light)]
    assert not entered.is_set(), "prepare tokenised on the request's thread"
    assert backend.complete(prepared) == [None, None]
    assert entered.is_set() and all(p.input_tokens > 0 for p in prepared)
