"""Prometheus metrics for ``GET /metrics``: one registry per app, never the process-global one.

Request counters and latency are observed by the app's middleware; questions answered by type by
the decide route; queue depth, batch sizes, model load time, failures and cache counters are read
from the engines and backends at scrape time (a custom collector), so the model thread does no
bookkeeping for Prometheus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .service import ServedModel

#: The content type of the text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Request latency buckets (seconds): 1 ms to 30 s.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Batch size buckets (requests per micro-batch).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ModelCollector(Collector):
    """Reads the served models' engines and backends at scrape time.

    Args:
        models (Callable[[], Sequence[ServedModel]]): the models served now (none while loading).
    """

    def __init__(self, models: Callable[[], Sequence[ServedModel]]) -> None:
        self.models = models

    def collect(self) -> Iterator[Metric]:
        """Queue depth, thread liveness, load time, batch sizes, failures and cache counters per model."""
        depth = GaugeMetricFamily("decisiond_queue_depth", "requests waiting for the model thread", labels=["model"])
        alive = GaugeMetricFamily("decisiond_model_thread_alive", "1 while the model thread runs", labels=["model"])
        load = GaugeMetricFamily("decisiond_model_load_seconds", "time to load the model", labels=["model"])
        batches = HistogramMetricFamily("decisiond_batch_size", "requests per micro-batch", labels=["model"])
        failed = CounterMetricFamily("decisiond_failed_requests", "requests failed by the model", labels=["model"])
        expired = CounterMetricFamily("decisiond_expired_requests", "requests that waited too long", labels=["model"])
        oom = CounterMetricFamily("decisiond_out_of_memory", "out-of-memory errors in batches", labels=["model"])
        cache = CounterMetricFamily("decisiond_cache", "cache lookups by result", labels=["model", "cache", "result"])
        entries = GaugeMetricFamily("decisiond_cache_entries", "entries held by a cache", labels=["model", "cache"])
        for served in self.models():
            name, engine, stats = served.name, served.engine, served.engine.stats
            depth.add_metric([name], engine.queue_depth())
            alive.add_metric([name], 1.0 if engine.alive else 0.0)
            load.add_metric([name], served.load_seconds)
            batches.add_metric([name], *_histogram(dict(stats.size_counts)))
            failed.add_metric([name], stats.failed)
            expired.add_metric([name], stats.expired)
            oom.add_metric([name], stats.out_of_memory)
            for cache_name, counters in served.backend.cache_stats().items():
                cache.add_metric([name, cache_name, "hit"], counters.get("hits", 0))
                cache.add_metric([name, cache_name, "miss"], counters.get("misses", 0))
                entries.add_metric([name, cache_name], counters.get("entries", 0))
        yield from (depth, alive, load, batches, failed, expired, oom, cache, entries)


def _histogram(counts: dict[int, int]) -> tuple[list[tuple[str, float]], float]:
    """Cumulative ``(le, count)`` buckets and the sum of a size → count table."""
    buckets = [(str(float(le)), float(sum(n for size, n in counts.items() if size <= le))) for le in BATCH_BUCKETS]
    buckets.append(("+Inf", float(sum(counts.values()))))
    return buckets, float(sum(size * n for size, n in counts.items()))


class Metrics:
    """The metrics of one app.

    Args:
        models (Callable[[], Sequence[ServedModel]]): the models served now.

    Example:
        >>> metrics = Metrics(lambda: [])
        >>> metrics.observe_request("/health", "GET", 200, 0.002)
        >>> b'decisiond_requests_total{method="GET",route="/health",status="200"} 1.0' in metrics.render()
        True
    """

    def __init__(self, models: Callable[[], Sequence[ServedModel]]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "decisiond_requests",
            "HTTP requests by route and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "decisiond_request_duration_seconds",
            "HTTP request latency (s)",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.questions = Counter(
            "decisiond_questions_answered", "questions answered by type", ["model", "type"], registry=self.registry
        )
        self.registry.register(ModelCollector(models))

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one HTTP response and its latency (s)."""
        self.requests.labels(route=route, method=method, status=str(status)).inc()
        self.latency.labels(route=route).observe(seconds)

    def observe_answers(self, model: str, kinds: Sequence[str]) -> None:
        """Count the questions of one answered request by type (``noul``, ``choice``, ``score``)."""
        for kind in set(kinds):
            self.questions.labels(model=model, type=kind).inc(kinds.count(kind))

    def render(self) -> bytes:
        """The text exposition of every metric."""
        return generate_latest(self.registry)
