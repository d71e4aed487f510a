"""Shared fixtures: apps on the fake backend (exact numbers) and on the real default model."""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import httpx
import pytest
import torch
from asgi_lifespan import LifespanManager

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from decisiond.app import create_app  # noqa: E402
from decisiond.backends import Prepared, TokenLimits  # noqa: E402
from decisiond.backends.fake import FakeBackend  # noqa: E402
from decisiond.config import Settings  # noqa: E402
from decisiond.manifest import Manifest, Weights, find_manifest  # noqa: E402
from decisiond.service import ServedModel, Service, load_model, start_engine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"


class GatedFake(FakeBackend):
    """A fake backend that blocks in ``forward`` until ``gate`` is set, so a queue builds up behind it;
    ``entered`` is set once the model thread is inside."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.gate = threading.Event()
        self.entered = threading.Event()

    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        self.entered.set()
        self.gate.wait(10)
        return super().forward(batch)


def fake_manifest(name: str = "fake-1", aliases: list[str] | None = None) -> Manifest:
    """A manifest for a FakeBackend (no weights are read)."""
    return Manifest(
        name=name,
        aliases=aliases or [],
        backend="fake",
        weights=Weights(path="."),
        description="keyword counts",
        release_date="2026-01-01",
    )


def fake_service(settings: Settings | None = None, **backend_kwargs: object) -> Service:
    """A service over one FakeBackend."""
    settings = settings or Settings(max_wait_ms=0)
    limits = TokenLimits(settings.max_state_tokens, settings.max_total_tokens)
    backend = FakeBackend(limits=limits, **backend_kwargs)  # type: ignore[arg-type]
    return Service([ServedModel(fake_manifest(), backend, start_engine(backend, settings))], settings)


@pytest.fixture
async def fake_client() -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of an app serving the fake backend."""
    settings = Settings(max_wait_ms=0)
    app = create_app(settings, service=fake_service(settings))
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


@pytest.fixture(scope="session")
def minilm_service() -> Iterator[Service]:
    """The real default model, loaded once per session."""
    settings = Settings(max_wait_ms=0, models_dir=MODELS)
    service = Service([load_model(find_manifest("minilm-l6", MODELS), settings)], settings)
    yield service
    service.close()


@pytest.fixture
async def minilm_client(minilm_service: Service) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of an app serving the real default model."""
    app = create_app(minilm_service.settings, service=minilm_service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client
