"""The app's exception handlers: every refusal in the wire's JSON shapes (spec/wire.md §5), never a
traceback, never an echo of the body."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .config import Settings
from .errors import ApiUsageError, DecisionError


def error_response(exc: DecisionError) -> JSONResponse:
    """The JSON response of a refusal: its wire body, status and headers."""
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def decision_error(_: Request, exc: Exception) -> JSONResponse:
    """A :class:`~decisiond.errors.DecisionError` as its wire body (spec/wire.md §5)."""
    assert isinstance(exc, DecisionError)
    return error_response(exc)


def served_model_name(request: Request, name: Any) -> str | None:
    """The served model a body's ``model`` resolves to (absent: the default), for the access line of
    a refused request; None while nothing is served or when it names no served model, so the
    caller's own text never reaches the log."""
    service = getattr(getattr(request.app.state, "runtime", None), "service", None)
    if service is None or not (name is None or isinstance(name, str)):
        return None
    try:
        return str(service.resolve(name).name)
    except ApiUsageError:
        return None


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 shape without ``input`` or ``ctx``, so no error body quotes the state or a key.
    The access line names the model the body asked for, when it is a served one (the body is already
    parsed: FastAPI hands it over with the errors)."""
    assert isinstance(exc, RequestValidationError)
    if isinstance(exc.body, dict):
        request.state.model = served_model_name(request, exc.body.get("model"))
    detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=422)


def http_error(settings: Settings) -> Any:
    """The handler of Starlette's ``HTTPException`` (404, 405, and FastAPI's body-parsing 400) in
    the wire's shapes: a body that is not JSON is a 422 (spec §5), one nested too deeply to parse
    (a JSON bomb: Python's parser raises ``RecursionError``) a 400 naming the limit."""

    async def handle(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        cause = exc.__cause__
        if isinstance(cause, DecisionError):  # raised while reading the body (a streamed body over the limit)
            return error_response(cause)
        if isinstance(cause, RecursionError):
            return error_response(
                ApiUsageError(f"the body is nested too deeply to read; the limit is {settings.max_json_depth} levels")
            )
        if exc.status_code == 400 and cause is not None:
            detail = [{"loc": ["body"], "msg": "the body is not valid JSON in UTF-8", "type": "json_invalid"}]
            return JSONResponse({"detail": detail}, status_code=422)
        error_type = "not_found_error" if exc.status_code == 404 else "api_usage_error"
        body = {"detail": {"error_type": error_type, "message": str(exc.detail)}}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    return handle
