"""The ``decisiond`` command: ``serve`` a model, list ``models``, ``ask`` a model questions.

The flags of ``serve`` are in :mod:`.cli_serve_flags`; ``models`` and ``pull`` in :mod:`.cli_models`.

Run ``decisiond --help`` or ``decisiond serve --help`` for every flag; each flag also reads a
``DECISIOND_*`` environment variable (see :mod:`decisiond.config`).
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import ValidationError

from . import __version__, logs
from .ask import add_ask_parser, run_ask
from .calibrate_cli import add_calibrate_parser as _add_calibrate
from .calibrate_cli import run_calibrate
from .cassette import CassetteError
from .cli_models import add_models_parser, add_pull_parser, run_models, run_pull
from .cli_parser import Parser, describe_settings_error, port, upstream_url
from .cli_serve_flags import add_serve_parser
from .config import Settings, hf_offline_env, quiet_openmp_env, read_env
from .manifest import Manifest, ManifestError, find_manifest
from .model_names import name_table
from .shutdown import exit_on_sigterm

if TYPE_CHECKING:
    import uvicorn

    from .app import Runtime

log = logging.getLogger("decisiond")


def _settings(args: argparse.Namespace) -> Settings:
    """Flags that were given override the environment's settings."""
    given = {k: v for k, v in vars(args).items() if v is not None and k in Settings.model_fields}
    return Settings(**given)


def _add_record(sub: Any) -> None:
    record = sub.add_parser(
        "record",
        help="record a real service's answers into a cassette, for replay in tests",
        description="Run a local proxy on /v1/systemone and /v1/models that forwards each request to the upstream "
        "service, returns its answer unchanged and appends the exchange to a cassette (JSON lines). Point your "
        "application at the proxy, run it, then serve the cassette with `decisiond serve --replay PATH`. "
        "The API key is sent upstream only, never written to the cassette.",
    )
    record.add_argument(
        "--upstream",
        required=True,
        type=upstream_url,
        help="base URL of the real service, e.g. https://api.example.com",
    )
    record.add_argument("--cassette", required=True, type=Path, help="cassette to append to (created when missing)")
    record.add_argument(
        "--api-key-env",
        help="environment variable holding the upstream API key (default: pass on the caller's Authorization header)",
    )
    record.add_argument("--host", default="127.0.0.1", help="address to bind")
    record.add_argument("--port", type=port, default=8000, help="port to bind")
    record.add_argument("--timeout-s", type=float, default=60.0, help="upstream timeout in seconds")
    record.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    record.add_argument(
        "--log-format", choices=["auto", "json", "text"], default="auto", help="auto: text on a terminal, else json"
    )


def record(args: argparse.Namespace) -> int:
    """Run the recording proxy until interrupted. Returns the process exit code."""
    import uvicorn

    from .record import create_record_app

    logs.configure(args.log_level, args.log_format)  # one line per request: recorded, or why not
    api_key = None
    if args.api_key_env:
        api_key = read_env(args.api_key_env)
        if api_key is None:
            log.error("the environment variable %s is not set; export the upstream API key there", args.api_key_env)
            return 2
    if problem := port_problem(args.host, args.port):
        log.error("%s", problem)
        return 2
    app = create_record_app(args.upstream, args.cassette, api_key=api_key, timeout_s=args.timeout_s)
    log.info("recording %s into %s on http://%s:%d", args.upstream, args.cassette, args.host, args.port)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, log_config=None, access_log=False)
    return 0


def _resolve_manifests(settings: Settings) -> list[Manifest]:
    """Read every requested manifest and check its weights are here, before binding a port."""
    if not settings.needs_model:
        return []
    if settings.scripted is not None:
        from .backends.scripted import scripted_manifest

        return [scripted_manifest(settings.scripted)]
    manifests = [find_manifest(name, settings.models_dir) for name in settings.model]
    for manifest in manifests:
        path = manifest.weights_path(settings.cache_dir)
        log.info("%s: %s weights at %s", manifest.name, manifest.backend, path)
    return manifests


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine.

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _make_server(config: uvicorn.Config, runtime: Runtime) -> uvicorn.Server:
    """A uvicorn server that, on SIGTERM or SIGINT, first marks the runtime as draining (new requests
    get 503, ``/health`` says ``stopping``) and then lets uvicorn finish what is in flight."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if not runtime.draining:
                log.info("signal %d: draining, finishing in-flight requests", sig)
            runtime.stop()
            super().handle_exit(sig, frame)

    return DrainingServer(config)


def watch(runtime: Runtime, server: Any, settings: Settings, *, poll_s: float = 0.2) -> None:
    """Until the server exits: log readiness, and stop the server when loading fails or a model
    thread dies, so that the process exits non-zero instead of hanging (``server.should_exit``)."""
    ready = False
    while not server.should_exit:
        status, _ = runtime.health()
        if status == "error":
            why = runtime.error or f"the model thread of {', '.join(runtime.dead_models())} died"
            log.critical("stopping: %s", why)
            server.should_exit = True
            return
        if status == "ok" and not ready:
            ready = True
            log.info("ready on http://%s:%d", settings.host, server.config.port)
        time.sleep(poll_s)


def models_dir_problem(settings: Settings) -> str | None:
    """Why ``settings.models_dir`` cannot be used, or None. A folder that was asked for
    (``--models-dir``, ``DECISIOND_MODELS_DIR``) must exist; the default ``models`` may be missing
    (the embedded default model serves without it)."""
    if "models_dir" not in settings.model_fields_set or settings.models_dir.is_dir():
        return None
    if settings.models_dir.exists():
        return f"--models-dir {settings.models_dir} is not a folder"
    return f"--models-dir {settings.models_dir}: no such folder (resolved to {settings.models_dir.absolute()})"


def port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound now, or None. Checked before any model loads, with the
    ``SO_REUSEADDR`` that uvicorn sets, so a port in TIME_WAIT is not refused."""
    if port == 0:
        return None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        return f"cannot resolve the host {host!r} ({exc.strerror}); pass an address with --host"
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"port {port} on {host} is already in use (another decisiond?); stop what holds it "
                    f"(`ss -ltnp 'sport = :{port}'` shows it) or pick another port with --port"
                )
            if exc.errno == errno.EACCES:
                return f"no permission to bind port {port} on {host}; ports below 1024 need privileges, use --port"
            return f"cannot bind {host}:{port}: {exc.strerror}"
    return None


def serve(settings: Settings) -> int:
    """Run the server until SIGTERM or SIGINT. Returns the process exit code: 0 after a clean
    shutdown, 1 when loading failed or a model thread died, 2 for a configuration error (a missing
    models folder, a port in use, an unknown model, unreadable keys)."""
    import uvicorn

    from . import threads
    from .app import create_app
    from .connections import server_options
    from .shutdown import UVICORN_MARGIN_S, exit_now

    if problem := models_dir_problem(settings):
        log.error("%s", problem)
        return 2
    try:
        policy = threads.apply(settings.threads)  # before the model loads: torch's first parallel work
        log.info("%s", policy.describe(), extra={"fields": {"threads": policy.as_dict()}})
        manifests = _resolve_manifests(settings)
        if manifests:  # an --alias that names no served model is a configuration error, before binding
            name_table([m.names() for m in manifests], settings.aliases, strict=settings.strict_models)
        keys = settings.keys()
        if not keys and not is_loopback(settings.host):
            log.warning(
                "binding %s without API keys: anyone who can reach this address can use the model; "
                "set --api-keys-file or DECISIOND_API_KEYS",
                settings.host,
            )
        app = create_app(settings, manifests=manifests)
    except (ManifestError, CassetteError, ValueError) as exc:  # ValueError: keys file, rules file (RulesError)
        log.error("%s", exc)
        return 2
    if problem := port_problem(settings.host, settings.port):  # before the models load, not after
        log.error("%s", problem)
        return 2
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=settings.shutdown_timeout_s + UVICORN_MARGIN_S,  # the app answers first
        **server_options(settings),  # header size and time, keep-alive (decisiond.connections)
    )
    runtime: Runtime = app.state.runtime
    server = _make_server(config, runtime)
    threading.Thread(target=watch, args=(runtime, server, settings), name="decisiond-watch", daemon=True).start()
    # uvicorn re-raises the signal it caught once it has stopped; a drained SIGTERM or Ctrl+C is a clean
    # exit, not a kill (nor a KeyboardInterrupt traceback).
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    status, _ = runtime.health()
    code = 1 if status == "error" else 0
    exit_now(code)  # a model still loading or inside a forward pass is not waited for
    return code


def build_parser() -> argparse.ArgumentParser:
    """The ``decisiond`` argument parser."""
    parser = Parser(
        prog="decisiond",
        description="A local reference server for System One decision models (POST /v1/systemone).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_serve_parser(sub)
    _add_record(sub)
    add_models_parser(sub)
    add_ask_parser(sub)
    add_pull_parser(sub)
    _add_calibrate(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``decisiond`` console script."""
    quiet_openmp_env()  # before anything imports torch: OpenMP reads these once, when it loads
    hf_offline_env()
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        exit_on_sigterm()  # until uvicorn handles signals, a SIGTERM is a clean exit
    if args.command == "models":
        return run_models(args)
    if args.command == "ask":
        return run_ask(args)
    if args.command == "record":
        return record(args)
    if args.command == "pull":
        return run_pull(args)
    if args.command == "calibrate":
        return run_calibrate(args)
    args.model = args.model or None
    try:
        settings = _settings(args)
    except ValidationError as exc:  # a flag or a DECISIOND_* variable out of range
        print(f"decisiond serve: error: {describe_settings_error(exc)}", file=sys.stderr)  # noqa: T201
        return 2
    logs.configure(settings.log_level, settings.log_format)
    if args.ray_address:
        return _deploy_to_ray(settings, args.ray_address)
    return serve(settings)


def run() -> NoReturn:
    """The ``decisiond`` console script: :func:`main`, then exit at once with its code.

    Once ``main`` returns, the server has stopped, its models are closed and its files are written;
    what is left is the interpreter's teardown of torch and transformers, which took 2 to 5 s on a
    busy 2-core machine after "Finished server process". Logs and standard streams are flushed,
    then the process ends without it (``os._exit``).
    """
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _deploy_to_ray(settings: Settings, address: str) -> int:
    """``decisiond serve --ray-address ADDR`` (:func:`decisiond.ray.deploy`): 2 for a configuration
    error or when Ray is not installed."""
    try:
        from .ray import deploy
    except ImportError as exc:
        log.error("--ray-address needs Ray Serve: pip install 'decisiond[ray]' (%s)", exc)
        return 2
    try:
        return deploy(settings, address)
    except (ManifestError, ValueError) as exc:
        log.error("%s", exc)
        return 2


if __name__ == "__main__":
    run()
