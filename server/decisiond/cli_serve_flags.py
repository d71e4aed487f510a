"""The flags of ``decisiond serve``: one ``add_argument`` per setting of :class:`decisiond.config.Settings`
that the command line offers, with its help text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .cli_parser import port


def add_serve_parser(sub: Any) -> None:
    """The ``serve`` subcommand and its flags (each also read from a ``DECISIOND_*`` variable)."""
    serve = sub.add_parser(
        "serve",
        help="serve POST /v1/systemone on a local model",
        description="Serve the System One wire on one or more local models. The first --model is the default "
        "and answers `jev-latest`. Weights are never downloaded: they come from a folder, an installed package "
        "or the local Hugging Face cache, as each manifest says (`decisiond pull` fetches a pullable model once). "
        "A setting flag can also be given as an environment variable DECISIOND_<NAME> (e.g. DECISIOND_PORT=8001, "
        "DECISIOND_MAX_WAIT_MS=2); a flag given wins.",
    )
    serve.add_argument("--model", action="append", help="model name, alias or manifest path (repeatable)")
    serve.add_argument(
        "--alias",
        action="append",
        dest="aliases",
        metavar="NAME=MODEL",
        help="one more model id: requests for NAME are answered by MODEL, a served name or alias (repeatable)",
    )
    serve.add_argument(
        "--strict-models",
        action="store_const",
        const=True,
        help="answer only the served names and aliases, not the hosted Jev ids (jev-1.13, typesafe/jev-latest, ...); "
        "default off",
    )
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=port, help="port to bind (default 8000)")
    serve.add_argument("--device", choices=["auto", "cpu", "cuda"], help="auto: CUDA when present (default auto)")
    serve.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="auto: bf16 on CUDA; on a CPU, bf16 for a causal LM where the CPU has AMX or AVX512-BF16, else fp32",
    )
    serve.add_argument(
        "--models-dir",
        type=Path,
        help="folder of model manifests (default ./models); the manifests shipped in the package are known too",
    )
    serve.add_argument("--max-batch-tokens", type=int, help="token budget of one micro-batch (default 16384)")
    serve.add_argument(
        "--max-wait-ms",
        type=float,
        help="micro-batch gathering window under load, in ms (default 8; a lone request never waits)",
    )
    serve.add_argument("--max-queue", type=int, help="requests waiting before 529 (default 256)")
    serve.add_argument(
        "--threads",
        type=int,
        help="torch intra-op threads (default: one per CPU this process may use, less one for the event loop "
        "from 4 CPUs up; an OMP_NUM_THREADS you set is kept)",
    )
    serve.add_argument(
        "--request-timeout-s",
        type=float,
        help="longest time from a request's arrival to its answer, whatever it waits on, before 529 (default 30)",
    )
    serve.add_argument("--max-body-bytes", type=int, help="largest request body, 413 above (default 16 MiB)")
    serve.add_argument(
        "--max-header-bytes", type=int, help="request line and headers together, 431 above (default 64 KiB)"
    )
    serve.add_argument(
        "--header-timeout-s",
        type=float,
        help="time for a connection to send its request headers, 408 after (default 10)",
    )
    serve.add_argument("--body-timeout-s", type=float, help="time to send the request body, 408 after (default 30)")
    serve.add_argument(
        "--keep-alive-timeout-s", type=int, help="idle keep-alive connections are closed after (default 5)"
    )
    serve.add_argument("--max-questions", type=int, help="questions per request (default 512)")
    serve.add_argument("--max-options", type=int, help="options per choice question, at most 255 (default 255)")
    serve.add_argument("--max-levels", type=int, help="levels per score question (default 10)")
    serve.add_argument("--max-state-tokens", type=int, help="state tokens per request (default 32768)")
    serve.add_argument("--max-total-tokens", type=int, help="state + question tokens per request (default 65536)")
    serve.add_argument("--max-images", type=int, help="images per request (default 16)")
    serve.add_argument("--max-image-bytes", type=int, help="bytes of one image file (default 8 MiB)")
    serve.add_argument("--max-image-pixels", type=int, help="pixels of one image, width x height (default 25,000,000)")
    serve.add_argument(
        "--max-request-pixels", type=int, help="decoded pixels of one request's images together (default 100,000,000)"
    )
    serve.add_argument("--max-decodes", type=int, help="images decoded at once, across all requests (default 2)")
    serve.add_argument(
        "--cache-dir", type=Path, help="user cache folder for converted weights (default ~/.cache/decisiond)"
    )
    serve.add_argument(
        "--max-text-chars",
        type=int,
        help="characters of the state and question texts, refused before tokenising (default 2,000,000)",
    )
    serve.add_argument("--max-json-depth", type=int, help="nesting of the state and of question texts (default 64)")
    serve.add_argument(
        "--api-keys-file",
        type=Path,
        help="file of API keys, one per line (blank lines and # comments ignored); with keys, /v1/* and /metrics "
        "need Authorization: Bearer <key>. Keys can also come from DECISIOND_API_KEYS (comma-separated). "
        "Default: no keys, auth off",
    )
    serve.add_argument(
        "--shutdown-timeout-s", type=float, help="on SIGTERM, time to finish in-flight requests (default 30)"
    )
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="default info")
    serve.add_argument(
        "--log-format",
        choices=["auto", "json", "text"],
        help="text: readable lines; json: one object per line; auto: text on a terminal, json elsewhere (default "
        "auto). One access line per request; /health, /ready and /metrics polls only at --log-level debug",
    )
    serve.add_argument(
        "--replay", action="append", type=Path, help="answer recorded requests from this cassette (repeatable)"
    )
    serve.add_argument(
        "--replay-mode",
        choices=["strict", "fallback"],
        help="an unrecorded request: strict answers 404, no model loaded; fallback asks the model (default strict)",
    )
    serve.add_argument(
        "--scripted", type=Path, help="serve scripted answers from this rules file (TOML or YAML) instead of a model"
    )
    serve.add_argument(
        "--no-playground",
        dest="playground",
        action="store_false",
        default=None,
        help="do not serve the browser playground at / (default: served; DECISIOND_PLAYGROUND=false)",
    )
    serve.add_argument(
        "--ray-address",
        help="deploy to this running Ray cluster (e.g. ray://head:10001 or auto) as Ray Serve application "
        "`decisiond`, one deployment per model, and return (needs the ray extra; see deploy/serve.yaml)",
    )
