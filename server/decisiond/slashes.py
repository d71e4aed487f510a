"""One trailing slash on an API route means the route: ``POST /v1/systemone/`` is ``POST
/v1/systemone``.

Starlette answers such a request with a 307 redirect and an empty body, which many clients do not
follow for a POST (and none should have to). Only the app's own API routes are rewritten, so a
mounted folder (``/static/``) and ``/`` keep their meaning.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send


class TrailingSlashMiddleware:
    """Strip one trailing slash from a path when the path without it is one of ``routes`` (mounts
    excepted: a mounted folder redirects ``/folder`` to ``/folder/`` itself).

    Args:
        app (ASGIApp): the app inside.
        routes (list[BaseRoute]): the app's routes (read at each request, so routes added after the
            middleware count too).
    """

    def __init__(self, app: ASGIApp, routes: list[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and len(path) > 1 and path.endswith("/") and not path.endswith("//"):
            stripped = {**scope, "path": path[:-1]}
            if self._is_route(stripped):
                if isinstance(scope.get("raw_path"), bytes) and scope["raw_path"].endswith(b"/"):
                    stripped["raw_path"] = scope["raw_path"][:-1]
                scope = stripped
        await self.app(scope, receive, send)

    def _is_route(self, scope: Scope) -> bool:
        """Whether a route other than a mount matches ``scope``'s path (any method: a wrong method
        still deserves the route's 405)."""
        return any(not isinstance(route, Mount) and route.matches(scope)[0] is not Match.NONE for route in self.routes)
