"""A pytest plugin (entry point ``pytest11``): the ``decisiond`` fixture runs decisiond in-process.

Installed with the package; nothing to configure. In an application's test suite::

    @pytest.mark.decisiond(replay="cassettes/tickets.jsonl")      # recorded answers, no model
    def test_routes_a_refund(decisiond):
        router = TicketRouter(decisiond.base_url)                 # or use decisiond.client
        assert router.route("I was charged twice") == "billing"

    @pytest.mark.decisiond(scripted="rules.toml")                 # scripted answers, no model
    def test_urgent(decisiond): ...

    def test_with_the_default_model(decisiond): ...               # the embedded MiniLM

The marker takes ``replay`` (a path or a list of paths), ``replay_mode`` (``strict``, the default,
or ``fallback``), ``scripted`` (a rules file) and ``model`` (a model name or manifest path);
relative paths are read from the test file's folder, then from the rootdir. The same keywords can
be given as the fixture's parameter (``@pytest.mark.parametrize("decisiond", [{"scripted":
"rules.toml"}], indirect=True)``). Each distinct setup starts one server on a free loopback port,
shared by every test that asks for it, and stopped at the end of the session.

Everything heavy (torch, FastAPI, uvicorn, the client) is imported only when the fixture is
first used, so the plugin costs nothing in a session that does not use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

if TYPE_CHECKING:
    import httpx

    from .client import DecisionClient
    from .inprocess import BackgroundServer
    from .manifest import Manifest

MARKER = "decisiond"
#: How long a model may take to load before the fixture gives up (seconds).
LOAD_TIMEOUT_S = 300.0
_KEYWORDS = frozenset({"replay", "replay_mode", "scripted", "model"})


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, so ``--strict-markers`` suites accept it."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(replay=None, replay_mode='strict', scripted=None, model=None): what the `decisiond` fixture "
        "serves: recorded answers from cassettes, scripted answers from a rules file, or a local model",
    )


@dataclass(frozen=True)
class ServerSpec:
    """What one in-process server serves (the pool's key).

    Attributes:
        replay (tuple[Path, ...]): cassettes; empty for none.
        replay_mode (str): ``strict`` or ``fallback``.
        scripted (Path | None): a rules file.
        model (str | None): a model name or manifest path; None for the default model.
    """

    replay: tuple[Path, ...] = ()
    replay_mode: Literal["strict", "fallback"] = "strict"
    scripted: Path | None = None
    model: str | None = None


class DecisiondServer:
    """A running in-process decisiond: its base URL, an httpx client and a :class:`DecisionClient`.

    Attributes:
        spec (ServerSpec): what it serves.
        base_url (str): ``http://127.0.0.1:PORT``.
    """

    def __init__(self, spec: ServerSpec, server: BackgroundServer) -> None:
        self.spec = spec
        self._server = server
        self.base_url = server.base_url
        self._http: httpx.Client | None = None
        self._client: DecisionClient | None = None

    def url(self, path: str = "/v1/systemone") -> str:
        """The full URL of ``path`` on this server."""
        return self.base_url + path

    @property
    def http(self) -> httpx.Client:
        """A plain httpx client with ``base_url`` set (for raw wire tests)."""
        if self._http is None:
            import httpx

            self._http = httpx.Client(base_url=self.base_url, timeout=30.0)
        return self._http

    @property
    def client(self) -> DecisionClient:
        """A ready :class:`~decisiond.client.DecisionClient` of this server."""
        if self._client is None:
            from .client import DecisionClient

            self._client = DecisionClient(self.base_url)
        return self._client

    def close(self) -> None:
        """Close the clients and stop the server."""
        if self._client is not None:
            self._client.close()
        if self._http is not None:
            self._http.close()
        self._server.stop()


def _resolve(value: str | Path, base_dirs: list[Path]) -> Path:
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    for base in base_dirs:
        if (base / path).exists():
            return (base / path).resolve()
    return (base_dirs[0] / path).resolve()


def spec_from(options: dict[str, Any], base_dirs: list[Path]) -> ServerSpec:
    """A :class:`ServerSpec` from marker or parameter keywords.

    Raises:
        pytest.UsageError: an unknown keyword or replay mode.
    """
    unknown = set(options) - _KEYWORDS
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.{MARKER} takes {', '.join(sorted(_KEYWORDS))}; got {', '.join(sorted(unknown))}"
        )
    replay = options.get("replay") or ()
    replay = (replay,) if isinstance(replay, str | Path) else tuple(replay)
    mode: Literal["strict", "fallback"] = options.get("replay_mode") or "strict"
    if mode not in ("strict", "fallback"):
        raise pytest.UsageError(f"replay_mode must be strict or fallback, got {mode!r}")
    scripted = options.get("scripted")
    model = options.get("model")
    if model is not None and str(model).endswith(".toml"):
        model = str(_resolve(model, base_dirs))
    return ServerSpec(
        replay=tuple(_resolve(p, base_dirs) for p in replay),
        replay_mode=mode,
        scripted=_resolve(scripted, base_dirs) if scripted is not None else None,
        model=model,
    )


def default_manifest(name: str | None) -> Manifest:
    """The manifest of ``name`` (None: the embedded default) from the models folder, or built in
    (an application that only ran ``pip install decisiond`` has no ``models/`` folder).

    Raises:
        ManifestError: ``name`` is neither in the models folder nor the embedded default.
    """
    from .config import Settings
    from .manifest import find_manifest

    return find_manifest(name or "minilm-l6", Settings().models_dir)


def start_server(spec: ServerSpec) -> DecisiondServer:
    """Start decisiond for ``spec`` on a free loopback port and wait until it answers.

    Raises:
        RuntimeError: the model failed to load, or took longer than :data:`LOAD_TIMEOUT_S`.
        CassetteError, RulesError, ManifestError: a cassette, rules file or manifest is unusable.
    """
    import time

    from .app import create_app
    from .config import Settings, hf_offline_env
    from .inprocess import BackgroundServer

    hf_offline_env()
    settings = Settings(
        replay=list(spec.replay), replay_mode=spec.replay_mode, scripted=spec.scripted, host="127.0.0.1", port=0
    )
    manifests: list[Manifest] = []
    if settings.needs_model and spec.scripted is not None:
        from .backends.scripted import scripted_manifest

        manifests = [scripted_manifest(spec.scripted)]
    elif settings.needs_model:
        manifests = [default_manifest(spec.model)]
    app = create_app(settings, manifests=manifests)
    server = BackgroundServer(app).start()
    runtime = app.state.runtime
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while runtime.status == "loading" and time.monotonic() < deadline:
        time.sleep(0.02)
    if runtime.status != "ok":
        server.stop()
        raise RuntimeError(f"decisiond did not start for {spec}: {runtime.error or 'still loading'}")
    return DecisiondServer(spec, server)


class ServerPool:
    """One server per distinct :class:`ServerSpec`, started on first use, all stopped at the end."""

    def __init__(self) -> None:
        self.servers: dict[ServerSpec, DecisiondServer] = {}

    def get(self, spec: ServerSpec) -> DecisiondServer:
        """The running server for ``spec``, started now if needed."""
        if spec not in self.servers:
            self.servers[spec] = start_server(spec)
        return self.servers[spec]

    def close(self) -> None:
        """Stop every server."""
        for server in self.servers.values():
            server.close()
        self.servers.clear()


@pytest.fixture(scope="session")
def decisiond_pool() -> Iterator[ServerPool]:
    """The session's in-process decisiond servers; stopped when the session ends."""
    pool = ServerPool()
    yield pool
    pool.close()


@pytest.fixture
def decisiond(request: pytest.FixtureRequest, decisiond_pool: ServerPool) -> DecisiondServer:
    """A running decisiond chosen by ``@pytest.mark.decisiond(...)`` or the fixture's parameter.

    Returns:
        DecisiondServer: ``base_url``, ``client`` (a ready ``DecisionClient``), ``http`` (httpx).
    """
    options: dict[str, Any] = {}
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None:
        options.update(marker.kwargs)
    param = getattr(request, "param", None)
    if isinstance(param, dict):
        options.update(param)
    elif param is not None:
        raise pytest.UsageError(f"the {MARKER} fixture's parameter is a dict of {', '.join(sorted(_KEYWORDS))}")
    base_dirs = [request.path.parent, request.config.rootpath]
    return decisiond_pool.get(spec_from(options, base_dirs))
