"""A stand-in for a hosted decision service, for recording tests: deterministic answers in its own
formatting (indented JSON, a call counter in ``x_latency_ms``), so that a replay that recomputed or
re-serialised an answer instead of sending the recorded bytes would be caught."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

UPSTREAM_MODEL = "jev-upstream-7"


def _answer(question: dict[str, Any]) -> dict[str, Any]:
    if question["type"] == "noul":
        return {"type": "noul", "noul": 0.8125}
    if question["type"] == "choice":
        keys = list(question["criteria"])
        return {
            "type": "choice",
            "choice": keys[-1],
            "probabilities": {k: (0.75 if k == keys[-1] else round(0.25 / max(len(keys) - 1, 1), 4)) for k in keys},
            "confidence": 0.625,
        }
    levels = question["criteria"]
    n = len(levels)
    return {
        "type": "score",
        "score": float(n - 1),
        "legend": {str(i): level for i, level in enumerate(levels)},
        "probabilities": {str(i): (1.0 if i == n - 1 else 0.0) for i in range(n)},
        "confidence": 1.0,
    }


def upstream_app(seen: list[dict[str, str]]) -> FastAPI:
    """The fake upstream; ``seen`` collects each request's headers (to check the key went upstream)."""
    app = FastAPI()

    @app.post("/v1/systemone")
    async def decide(request: Request) -> Response:
        seen.append(dict(request.headers))
        body = json.loads(await request.body())
        if "questions" not in body:
            detail = {"detail": [{"loc": ["body", "questions"], "msg": "Field required", "type": "missing"}]}
            return Response(json.dumps(detail), status_code=422, media_type="application/json")
        if body.get("model") == "no-such-model":
            detail = {"detail": {"error_type": "api_usage_error", "message": "unknown model 'no-such-model'"}}
            return Response(json.dumps(detail), status_code=400, media_type="application/json")
        answers = {qid: _answer(q) for qid, q in body["questions"].items()}
        usage = {"input_tokens": 42, "output_tokens": 0}
        text = json.dumps(
            {"model": UPSTREAM_MODEL, "answers": answers, "usage": usage, "x_latency_ms": len(seen) * 1.5}, indent=1
        )
        return Response(text, media_type="application/json")

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        seen.append(dict(request.headers))
        card = {"name": UPSTREAM_MODEL, "description": "hosted", "release_date": "2026-02-01"}
        return Response(json.dumps({"models": [card]}, indent=1), media_type="application/json")

    return app
