"""Bearer-key auth (spec/wire.md §6): off without keys; with keys, ``/v1/*`` and ``/metrics`` need one.

:func:`bearer_auth` builds the dependency the app attaches to the protected routers only when keys
are configured (infinity's ``route_dependencies``), so that with auth off an ``Authorization``
header is never looked at. A missing key is 403 and a wrong one 401, both ``authentication_error``;
the given key is compared with every configured key in constant time (``hmac.compare_digest``)
and never logged or echoed.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence

from fastapi import Request, Security
from fastapi.security import HTTPBearer

from .errors import AuthenticationError

#: Declares the scheme in the OpenAPI document; the check itself is :func:`bearer_auth`'s.
BEARER = HTTPBearer(auto_error=False, description="an API key configured with --api-keys-file or DECISIOND_API_KEYS")


def matches(given: str, keys: Sequence[bytes]) -> bool:
    """Whether ``given`` equals one of ``keys``, comparing with every key in constant time.

    Example:
        >>> matches("k1", [b"k0", b"k1"])
        True
    """
    candidate = given.encode("utf-8", "surrogateescape")
    found = False
    for key in keys:
        found |= hmac.compare_digest(candidate, key)
    return found


def bearer_auth(keys: Sequence[str]) -> Callable[..., Awaitable[None]]:
    """The dependency that admits ``Authorization: Bearer <key>`` for one of ``keys``.

    Args:
        keys (Sequence[str]): at least one configured key.

    Returns:
        Callable[..., Awaitable[None]]: a FastAPI dependency (async: a plain function would be run
        on a thread for every request).

    Raises:
        ValueError: ``keys`` is empty (auth off means: do not attach the dependency).
    """
    if not keys:
        raise ValueError("bearer auth needs at least one key")
    encoded = [key.encode("utf-8") for key in keys]

    async def require_key(request: Request, _: object = Security(BEARER)) -> None:
        header = request.headers.get("authorization")
        if header is None or not header.strip():
            raise AuthenticationError("an API key is required: send Authorization: Bearer <key>", status=403)
        scheme, _sep, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not matches(token.strip(), encoded):
            raise AuthenticationError("the API key is not valid", status=401)

    return require_key
