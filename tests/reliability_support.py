"""Shared helpers for the reliability tests: a served fake model, an in-process app, a client.

Kept out of ``conftest.py`` so that it merges cleanly with other branches' fixtures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from decisiond.app import create_app
from decisiond.backends.base import Backend
from decisiond.backends.fake import FakeBackend
from decisiond.config import Settings
from decisiond.manifest import Manifest, Weights
from decisiond.service import ServedModel, Service, start_engine

#: A request every test can send: the fake backend answers "billing" (2 occurrences against 0).
VALID = {
    "state": "billing billing",
    "questions": {
        "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "technical": None}},
        "urgent": {"type": "noul", "instructions": "Is it urgent?"},
        "mood": {"type": "score", "instructions": "How angry?", "criteria": ["calm", "angry"]},
    },
}


def fake_manifest(name: str = "fake-model") -> Manifest:
    """A manifest for the fake backend (weights point at this folder, never read)."""
    return Manifest(name=name, backend="fake", weights=Weights(path=str(Path(__file__).parent)), aliases=["jev-latest"])


def fake_service(settings: Settings, backend: Backend | None = None) -> Service:
    """A service over one started engine on ``backend`` (a :class:`FakeBackend` by default)."""
    backend = backend or FakeBackend()
    served = ServedModel(fake_manifest(), backend, start_engine(backend, settings), load_seconds=0.25)
    return Service([served], settings)


def settings(**overrides: Any) -> Settings:
    """Settings that never read this machine's ``DECISIOND_*`` environment."""
    base: dict[str, Any] = {"model": ["fake-model"], "max_wait_ms": 0.0}
    return Settings(**{**base, **overrides})


@asynccontextmanager
async def served_app(
    app_settings: Settings | None = None, backend: Backend | None = None
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app on a fake service with its lifespan running, and an httpx client bound to it."""
    app_settings = app_settings or settings()
    app = create_app(app_settings, service=fake_service(app_settings, backend))
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield app, client
