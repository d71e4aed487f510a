"""GET /metrics: a registry per app, requests, latency, questions by type, batches, queue, load, caches."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from decisiond.backends.fake import FakeBackend

from .reliability_support import VALID, served_app


class CachedFake(FakeBackend):
    def cache_stats(self) -> dict[str, dict[str, int]]:
        return {"slot_embeddings": {"entries": 7, "hits": 5, "misses": 2}}


def _scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async def run() -> str:
        async with served_app(backend=CachedFake()) as (_, client):
            await client.post("/v1/systemone", json=VALID)
            await client.post("/v1/systemone", json=VALID)
            await client.post("/v1/systemone", json={"state": "x"})
            await client.get("/no-such-route")
            response = await client.get("/metrics")
            assert response.headers["content-type"].startswith("text/plain")
            return response.text

    samples = {}
    for family in text_string_to_metric_families(asyncio.run(run())):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_requests_latency_and_questions_are_counted() -> None:
    samples = _scrape()
    decide = (("method", "POST"), ("route", "/v1/systemone"))
    assert samples[("decisiond_requests_total", (*decide, ("status", "200")))] == 2
    assert samples[("decisiond_requests_total", (*decide, ("status", "422")))] == 1
    assert samples[("decisiond_requests_total", (("method", "GET"), ("route", "unmatched"), ("status", "404")))] == 1
    assert samples[("decisiond_request_duration_seconds_count", (("route", "/v1/systemone"),))] == 3
    for kind in ("noul", "choice", "score"):
        assert samples[("decisiond_questions_answered_total", (("model", "fake-model"), ("type", kind)))] == 2


def test_engine_and_backend_state_is_read_at_scrape_time() -> None:
    samples = _scrape()
    model = (("model", "fake-model"),)
    assert samples[("decisiond_queue_depth", model)] == 0
    assert samples[("decisiond_model_thread_alive", model)] == 1
    assert samples[("decisiond_model_load_seconds", model)] == 0.25
    assert samples[("decisiond_batch_size_count", model)] == 2
    assert samples[("decisiond_batch_size_sum", model)] == 2
    assert samples[("decisiond_batch_size_bucket", (("le", "1.0"), *model))] == 2
    cache = (("cache", "slot_embeddings"), ("model", "fake-model"))
    assert samples[("decisiond_cache_total", (*cache, ("result", "hit")))] == 5
    assert samples[("decisiond_cache_total", (*cache, ("result", "miss")))] == 2
    assert samples[("decisiond_cache_entries", cache)] == 7


def test_each_app_has_its_own_registry() -> None:
    first, second = _scrape(), _scrape()
    key = ("decisiond_requests_total", (("method", "POST"), ("route", "/v1/systemone"), ("status", "200")))
    assert first[key] == second[key] == 2
