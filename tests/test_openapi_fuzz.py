"""Schemathesis against the served OpenAPI schema, in-process on the fake backend: no 5xx, and every
response matches its documented status codes, content type and schema."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.types import Receive, Scope, Send

from decisiond.app import create_app

from .reliability_support import fake_service
from .reliability_support import settings as app_settings

_settings = app_settings()
APP = create_app(_settings, service=fake_service(_settings))


async def served_once(scope: Scope, receive: Receive, send: Send) -> None:
    """The app without its lifespan: schemathesis' test client starts and stops one per call, and the
    app's shutdown would close the service after the first."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await APP(scope, receive, send)


SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", served_once)
CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@SCHEMA.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_schema_and_never_answers_5xx(case: schemathesis.Case) -> None:
    response = case.call()
    case.validate_response(response, checks=CHECKS)
