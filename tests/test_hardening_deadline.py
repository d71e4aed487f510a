"""The request timeout holds from arrival, whatever the request waits on (issue 14, item 9)."""

from __future__ import annotations

import asyncio
import threading

from decisiond.backends import Prepared, Work
from decisiond.backends.fake import FakeBackend

from .conftest import GatedFake
from .reliability_support import VALID, served_app, settings


class SlowPrepare(FakeBackend):
    """A backend whose request-thread stage blocks until ``release`` is set (a long tokenising, or a
    full thread pool)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def prepare(self, work: Work) -> Prepared:
        self.release.wait(20)
        return super().prepare(work)


def _post_once(backend: FakeBackend, release: threading.Event) -> tuple[int, str, bool]:
    async def run() -> tuple[int, str, bool]:
        async with served_app(settings(request_timeout_s=1.0), backend) as (_, client):
            response = await client.post("/v1/systemone", json=VALID)
            still_held = not release.is_set()
            release.set()
            return response.status_code, response.text, still_held

    return asyncio.run(run())


def test_a_request_stuck_before_the_queue_is_answered_at_its_deadline() -> None:
    """Bug: the deadline started when the request entered the model queue, so time spent before it
    (the thread pool, tokenising) did not count: --request-timeout-s 1 answered after 16 s."""
    backend = SlowPrepare()
    status, text, still_held = _post_once(backend, backend.release)
    assert status == 529 and "1 s" in text
    assert still_held, "the answer came only after the stuck stage let go"


def test_a_request_stuck_in_the_model_is_answered_at_its_deadline() -> None:
    """The same deadline holds while the model thread runs a batch that does not end."""
    backend = GatedFake()
    status, text, still_held = _post_once(backend, backend.gate)
    assert status == 529 and "1 s" in text
    assert still_held
