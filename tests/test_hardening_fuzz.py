"""Arbitrary Unicode (lone surrogates included) and arbitrary JSON shapes in every field never get a
5xx: from a model, from a strict replay behind keys, or through the record proxy (issue 14)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from decisiond.app import create_app
from decisiond.backends.fake import FakeBackend
from decisiond.cassette import CassetteWriter, new_entry
from decisiond.record import create_record_app

from .reliability_support import VALID, fake_service, settings

#: Every code point, lone surrogates included (they reach the server as \\ud800 escapes).
unicode_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=24)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | unicode_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(unicode_text, children, max_size=4),
    max_leaves=25,
)
asset_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["image", "audio"]) | json_values,
        "format": json_values,
        "data_base64": json_values,
    },
)
question_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["noul", "choice", "score"]) | json_values},
    optional={"instructions": json_values, "criteria": json_values, **{"x-extra": json_values}},
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "state": json_values,
        "questions": st.dictionaries(unicode_text, question_like | json_values, max_size=3) | json_values,
        "model": json_values,
        "images": st.lists(unicode_text | json_values, max_size=3) | json_values,
        "assets": st.dictionaries(unicode_text, asset_like | json_values, max_size=2) | json_values,
        "audio": json_values,
        "video": json_values,
    },
)
KEY = "fuzz-kéy"
ANSWER = b'{"model":"jev-up","answers":{},"usage":{"input_tokens":1,"output_tokens":0}}'


def _encode(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=True, allow_nan=True).encode()  # lone surrogates as escapes


async def _send_all(app: Any, raw: bytes, headers: dict[str, Any]) -> list[int]:
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            answer = await client.post("/v1/systemone", content=raw, headers=headers)
            assert answer.headers["content-type"].startswith("application/json"), answer.text[:200]
            return [answer.status_code]


@hsettings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=request_like)
def test_any_unicode_in_any_field_never_gets_a_5xx_from_a_model(body: dict[str, Any]) -> None:
    app_settings = settings()
    app = create_app(app_settings, service=fake_service(app_settings, FakeBackend(read_images=True)))
    statuses = asyncio.run(_send_all(app, _encode(body), {"content-type": "application/json"}))
    assert all(status < 500 for status in statuses)


@hsettings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=request_like)
def test_any_unicode_in_any_field_never_gets_a_5xx_from_a_replay(tmp_path_factory: Any, body: dict[str, Any]) -> None:
    cassette: Path = tmp_path_factory.mktemp("fuzz") / "c.jsonl"
    CassetteWriter(cassette).append(new_entry("/v1/systemone", VALID, 200, "application/json", ANSWER))
    app = create_app(settings(replay=[cassette], api_keys=KEY))
    headers = {"authorization": b"Bearer " + KEY.encode(), "content-type": "application/json"}
    statuses = asyncio.run(_send_all(app, _encode(body), headers))
    assert all(status < 500 for status in statuses)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=request_like)
def test_any_unicode_in_any_field_is_passed_through_the_record_proxy(
    tmp_path_factory: Any, body: dict[str, Any]
) -> None:
    cassette: Path = tmp_path_factory.mktemp("fuzz") / "c.jsonl"
    app = create_record_app(
        "http://upstream", cassette, transport=httpx.MockTransport(lambda _: httpx.Response(200, content=ANSWER))
    )
    statuses = asyncio.run(_send_all(app, _encode(body), {"content-type": "application/json"}))
    assert statuses == [200]  # the upstream's answer always reaches the client, recorded or not
