"""The browser playground: one static page at ``/`` that asks a served model questions.

The page (``index.html``, ``app.js``, ``code.js``, ``style.css`` in this folder, package data) is
plain HTML, JavaScript and CSS: no build step, no CDN, nothing fetched from outside the server,
so it works offline. It calls only the public routes ``GET /v1/models`` and
``POST /v1/systemone``, sends ``Authorization: Bearer <key>`` when a key is entered, and shows
each answer as bars with the winner, confidence and score position, beside the curl command and
the :mod:`decisiond.client` code of the same request.

The page itself is public (it holds no secret; the routes it calls are the ones that need a key).
``decisiond serve --no-playground`` (``Settings.playground = False``) leaves it out: ``/`` is then
a 404 like any unknown route.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse

#: The folder of the page's files.
ASSETS = Path(__file__).resolve().parent
#: The files served under ``/playground/`` and their media types; nothing else in the folder is served.
FILES = {
    "code.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
#: The page loads nothing but its own files and talks to nothing but this server.
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "cache-control": "no-cache",
}


def add_playground(app: FastAPI, *, enabled: bool = True) -> None:
    """Serve the playground: ``GET /`` (the page) and ``GET /playground/<file>`` for each of :data:`FILES`.

    Args:
        app (FastAPI): the app to add the routes to.
        enabled (bool, optional): False adds nothing (``--no-playground``). Defaults to True.

    The routes are left out of the OpenAPI schema: they are not part of the wire.
    """
    if not enabled:
        return

    @app.get("/", include_in_schema=False, name="playground")
    async def page() -> FileResponse:
        return FileResponse(ASSETS / "index.html", media_type="text/html; charset=utf-8", headers=HEADERS)

    for name, media_type in FILES.items():
        app.add_api_route(
            f"/playground/{name}",
            _file(name, media_type),
            methods=["GET"],
            include_in_schema=False,
            name=f"playground_{name.replace('.', '_')}",
        )


def _file(name: str, media_type: str) -> Callable[[], Awaitable[FileResponse]]:
    async def serve() -> FileResponse:
        return FileResponse(ASSETS / name, media_type=media_type, headers=HEADERS)

    return serve
