"""Bearer-key auth (spec/wire.md §6): off without keys; with keys, ``/v1/*`` and ``/metrics`` need one.

:class:`AuthMiddleware` is the one check, in front of everything that reads a body or answers from
a cassette: it runs on the request's headers alone, before the body is read, the same way in every
mode (a model, ``--replay`` strict or fallback, scripted). With auth off it is not installed, so an
``Authorization`` header is never looked at. A missing key is 403 and a wrong one 401, both
``authentication_error``; the key is compared as the bytes sent (UTF-8 keys work) with every
configured key in constant time (``hmac.compare_digest``) and never logged or echoed.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import AuthenticationError

#: Paths open without a key: the status probe and the API's own description.
OPEN_PATHS = frozenset(
    {"/health", "/ready", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
    # the playground's page and files hold no secret; the routes they call need the key (decisiond.playground)
    | {"/", "/playground/app.js", "/playground/code.js", "/playground/style.css"}
)

#: Declares the scheme in the OpenAPI document; the check itself is :class:`AuthMiddleware`'s.
BEARER = HTTPBearer(auto_error=False, description="an API key configured with --api-keys-file or DECISIOND_API_KEYS")


def matches(given: str | bytes, keys: Sequence[bytes]) -> bool:
    """Whether ``given`` equals one of ``keys``, comparing bytes with every key in constant time.

    Example:
        >>> matches("k1", [b"k0", b"k1"])
        True
    """
    candidate = given if isinstance(given, bytes) else given.encode("utf-8", "surrogateescape")
    found = False
    for key in keys:
        found |= hmac.compare_digest(candidate, key)
    return found


def check_header(header: bytes | None, keys: Sequence[bytes]) -> AuthenticationError | None:
    """The refusal for an ``Authorization`` header as sent (raw bytes), or None when it carries a key.

    Returns:
        AuthenticationError | None: 403 when no key was sent, 401 when it is not ``Bearer <key>``
        for one of ``keys``.
    """
    if header is None or not header.strip():
        return AuthenticationError("an API key is required: send Authorization: Bearer <key>", status=403)
    scheme, _sep, token = header.strip().partition(b" ")
    if scheme.lower() != b"bearer" or not matches(token.strip(), keys):
        return AuthenticationError("the API key is not valid", status=401)
    return None


class AuthMiddleware:
    """Refuse a request without a valid key before its body is read (see the module docstring).

    Every path but :data:`OPEN_PATHS` needs a key. Whether the caller sent a valid key is left in
    ``scope["state"]["authenticated"]``, so that ``/health`` shows its detail only to a key holder.

    Args:
        app (ASGIApp): everything behind the check.
        keys (Sequence[str]): at least one configured key.

    Raises:
        ValueError: ``keys`` is empty (auth off means: do not install the middleware).
    """

    def __init__(self, app: ASGIApp, keys: Sequence[str]) -> None:
        if not keys:
            raise ValueError("bearer auth needs at least one key")
        self.app = app
        self.keys = [key.encode("utf-8") for key in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = next((value for name, value in scope.get("headers") or [] if name == b"authorization"), None)
        refusal = check_header(header, self.keys)
        scope.setdefault("state", {})["authenticated"] = refusal is None
        if refusal is not None and route_path(scope) not in OPEN_PATHS:
            body = refusal.body()
            await JSONResponse(body, status_code=refusal.status, headers=refusal.headers)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def route_path(scope: Scope) -> str:
    """The request's path inside the app: ``root_path`` taken off (an app mounted under a prefix, as
    Ray Serve's route prefixes mount it, sees ``/prefix/health`` for its ``/health``)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def authenticated(scope: Scope) -> bool:
    """Whether the request carried a valid key (always False when auth is off: nothing to show it)."""
    return bool((scope.get("state") or {}).get("authenticated"))
