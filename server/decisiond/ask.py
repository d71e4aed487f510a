"""``decisiond ask``: ask a decision model from the terminal and print the answers with bars.

Of a running server (``--url``, through :class:`~decisiond.client.DecisionClient`) or in-process
on a local model (``--model``, loaded from its manifest and served through the same app and
client over an in-memory ASGI transport, so both print the same thing). Questions come from
flags (``--choice``, ``--noul``, ``--score``, in the order given, each optionally named by the
``--id`` before it) or from a wire-shaped JSON request file (``--request``; ``-`` reads stdin).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .client import (
    AsyncDecisionClient,
    Choice,
    ChoiceAnswer,
    DecisionClient,
    DecisionClientError,
    DecisionRequest,
    DecisionResponse,
    Noul,
    NoulAnswer,
    Question,
    Score,
    request_from_wire,
)

BAR_WIDTH = 30
EPILOG = """\
examples:
  decisiond ask --model minilm-l6 --state "I was charged twice" --choice "Which team?" billing technical other
  decisiond ask --url http://127.0.0.1:8000 --state-file ticket.txt \\
      --id team --choice "Which team?" "billing=Payments, refunds" technical other \\
      --noul "Is it urgent?" --score "How angry?" Calm Annoyed Furious
  decisiond ask --url http://127.0.0.1:8000 --request request.json --json
  echo '{"state": "hi", "questions": {"q": {"type": "noul", "instructions": "A greeting?"}}}' \\
      | decisiond ask --request -

An option written key=description sends the description with the key. A noul takes its
instructions alone, or instructions, what yes means and what no means.
"""


class UsageError(Exception):
    """A bad combination of flags or a question the vocabulary refuses (exit status 2)."""


class _Collect(argparse.Action):
    """Append ``(kind, values)`` to ``namespace.asked`` so questions keep the order they were given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        asked = list(getattr(namespace, "asked", None) or [])
        asked.append((self.metavar_kind, [values] if isinstance(values, str) else list(values)))
        namespace.asked = asked

    @property
    def metavar_kind(self) -> str:
        return str(self.const)


def add_ask_parser(sub: Any) -> None:
    """Register ``decisiond ask`` on the ``decisiond`` subparsers."""
    ask = sub.add_parser(
        "ask",
        help="ask a model typed questions about a state and print the answers",
        description="Ask a decision model typed questions about one state: of a running server (--url) or "
        "in-process on a local model (--model, default minilm-l6). Prints each answer with probability bars, "
        "or the response body with --json.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = ask.add_argument_group("where to ask")
    where.add_argument("--url", help="a running server's base URL (e.g. http://127.0.0.1:8000)")
    where.add_argument(
        "--model",
        help="with --url: the server's model id (default: its default); "
        "without: a local model name, alias or manifest path (default minilm-l6)",
    )
    where.add_argument("--path", default="/v1/systemone", help="with --url: the decision path (default /v1/systemone)")
    where.add_argument("--api-key", help="with --url: sent as Authorization: Bearer")
    where.add_argument("--timeout", type=float, default=60.0, help="with --url: seconds per attempt (default 60)")
    where.add_argument("--models-dir", type=Path, help="local: folder of model manifests (default models)")
    where.add_argument("--device", choices=["auto", "cpu", "cuda"], help="local: device (default auto)")
    what = ask.add_argument_group("the state")
    states = what.add_mutually_exclusive_group()
    states.add_argument("--state", help="the state as text")
    states.add_argument("--state-file", help="read the state from a file ('-': stdin)")
    what.add_argument("--state-json", action="store_true", help="parse the state as JSON (an object or array state)")
    questions = ask.add_argument_group("the questions (repeatable, asked in the order given)")
    questions.add_argument(
        "--choice",
        nargs="+",
        action=_Collect,
        const="choice",
        metavar="TEXT",
        help="instructions, then one or more options (key or key=description)",
    )
    questions.add_argument(
        "--noul",
        nargs="+",
        action=_Collect,
        const="noul",
        metavar="TEXT",
        help="instructions, optionally followed by what yes means and what no means",
    )
    questions.add_argument(
        "--score",
        nargs="+",
        action=_Collect,
        const="score",
        metavar="TEXT",
        help="instructions, then two or more levels, lowest first",
    )
    questions.add_argument(
        "--id",
        action=_Collect,
        const="id",
        metavar="ID",
        help="the id of the question that follows (default: its kind, numbered when repeated)",
    )
    questions.add_argument("--request", help="a JSON request file in the wire's shape ('-': stdin)")
    out = ask.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the response body as JSON")
    out.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], default="warning", help="default warning"
    )


# -- building the request --------------------------------------------------------------------


def _read(source: str, stdin: TextIO) -> str:
    if source == "-":
        return stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror}") from exc


def _option(token: str) -> tuple[str, str | None]:
    key, sep, description = token.partition("=")
    return (key, description) if sep and description else (key, None)


def _question(kind: str, values: list[str]) -> Question:
    instructions, rest = values[0], values[1:]
    if kind == "choice":
        if not rest:
            raise UsageError("--choice needs instructions and at least one option")
        options = dict(_option(token) for token in rest)
        if len(options) != len(rest):
            raise UsageError(f"--choice {instructions!r} names an option twice")
        return Choice(instructions, options)
    if kind == "score":
        if len(rest) < 2:
            raise UsageError("--score needs instructions and at least two levels, lowest first")
        return Score(instructions, rest)
    if len(rest) not in (0, 2):
        raise UsageError("--noul takes its instructions alone, or instructions, what yes means and what no means")
    return Noul(instructions, *rest) if rest else Noul(instructions)


def questions_from_flags(asked: Sequence[tuple[str, list[str]]]) -> dict[str, Question]:
    """The flag questions by id, in the order given.

    Raises:
        UsageError: a flag with too few values, a repeated id, an ``--id`` naming no question.
    """
    questions: dict[str, Question] = {}
    pending: str | None = None
    for kind, values in asked:
        if kind == "id":
            if pending is not None:
                raise UsageError(f"--id {pending!r} is not followed by a question")
            pending = values[0]
            continue
        question_id = pending or _auto_id(kind, questions)
        if question_id in questions:
            raise UsageError(f"two questions have the id {question_id!r}")
        try:
            questions[question_id] = _question(kind, values)
        except ValueError as exc:
            raise UsageError(f"--{kind} {values[0]!r}: {exc}") from exc
        pending = None
    if pending is not None:
        raise UsageError(f"--id {pending!r} is not followed by a question")
    return questions


def _auto_id(kind: str, taken: dict[str, Question]) -> str:
    if kind not in taken:
        return kind
    n = 2
    while f"{kind}_{n}" in taken:
        n += 1
    return f"{kind}_{n}"


def _state(text: str, as_json: bool) -> Any:
    if not as_json:
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--state-json: the state is not JSON (line {exc.lineno}, column {exc.colno})") from exc


def _state_of(args: argparse.Namespace, stdin: TextIO) -> Any:
    """The state the flags give, or None."""
    if args.state is not None:
        return _state(args.state, args.state_json)
    if args.state_file is not None:
        return _state(_read(args.state_file, stdin), args.state_json)
    return None


def _from_file(source: str, state: Any, stdin: TextIO) -> tuple[str | None, DecisionRequest]:
    """A wire-shaped request file; a state from the flags replaces the file's."""
    try:
        body = json.loads(_read(source, stdin))
    except json.JSONDecodeError as exc:
        raise UsageError(f"--request is not JSON (line {exc.lineno}, column {exc.colno})") from exc
    if state is not None and isinstance(body, dict):
        body = {**body, "state": state}
    try:
        return request_from_wire(body)
    except ValueError as exc:
        raise UsageError(f"--request: {exc}") from exc


def build_request(args: argparse.Namespace, stdin: TextIO) -> tuple[str | None, DecisionRequest]:
    """The model id (from a request file, if any) and the request the flags describe.

    Raises:
        UsageError: what is missing or contradictory, in words.
    """
    asked = getattr(args, "asked", None) or []
    if args.request == "-" and args.state_file == "-":
        raise UsageError("--request - and --state-file - cannot both read stdin")
    state = _state_of(args, stdin)
    if args.request is not None:
        if asked:
            raise UsageError("give the questions either by flags or by --request, not both")
        return _from_file(args.request, state, stdin)
    if not asked:
        raise UsageError("ask at least one question: --choice, --noul, --score, or --request FILE")
    if state is None:
        raise UsageError("give the state: --state TEXT or --state-file FILE ('-' for stdin)")
    return None, DecisionRequest(state, questions_from_flags(asked))


# -- printing --------------------------------------------------------------------------------


def _short(value: Any, limit: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bar(probability: float, full: str, empty: str) -> str:
    filled = round(probability * BAR_WIDTH)
    return full * filled + empty * (BAR_WIDTH - filled)


def _rows(rows: list[tuple[str, float, bool]], full: str, empty: str) -> list[str]:
    width = max(len(label) for label, _, _ in rows)
    return [
        f"  {label.ljust(width)}  {_bar(p, full, empty)}  {p:.4f}{'  <' if mark else ''}" for label, p, mark in rows
    ]


def render(request: DecisionRequest, response: DecisionResponse, *, unicode: bool = True) -> str:
    """The answers as readable text: per question its id, kind and instructions, a bar per option,
    level or side, and a summary line; then the model and the tokens read."""
    full, empty = ("█", "░") if unicode else ("#", ".")
    lines: list[str] = []
    for question_id, question in request.questions.items():
        answer = response[question_id]
        lines.append(f"{question_id}  ({question.kind}) {_short(question.instructions)}")
        if isinstance(answer, ChoiceAnswer):
            lines += _rows(
                [(_short(k, 40), p, k == answer.choice) for k, p in answer.probabilities.items()], full, empty
            )
            lines.append(f"  -> {answer.choice}  (confidence {answer.confidence:.2f}, margin {answer.margin():.2f})")
        elif isinstance(answer, NoulAnswer):
            yes = answer.probability
            lines += _rows([("no", 1.0 - yes, yes < 0.5), ("yes", yes, yes >= 0.5)], full, empty)
            lines.append(f"  -> {'yes' if yes >= 0.5 else 'no'}  (probability of yes {yes:.4f})")
        else:
            top = answer.top_level
            labels = [f"{i} {_short(level, 40)}" for i, level in enumerate(answer.legend)]
            lines += _rows(
                [(lab, p, i == top) for i, (lab, p) in enumerate(zip(labels, answer.probabilities, strict=True))],
                full,
                empty,
            )
            lines.append(
                f"  -> {answer.score:.2f} on 0..{len(answer.legend) - 1}, nearest {answer.level()} "
                f"{_short(answer.label(), 40)}  (confidence {answer.confidence:.2f})"
            )
    tokens = f" · {response.input_tokens} input tokens" if response.input_tokens is not None else ""
    lines.append(f"model {response.model or '(not named)'}{tokens}")
    return "\n".join(lines)


# -- asking ----------------------------------------------------------------------------------


def _ask_url(args: argparse.Namespace, model: str | None, request: DecisionRequest) -> DecisionResponse:
    with DecisionClient(args.url, path=args.path, api_key=args.api_key, timeout=args.timeout) as client:
        return client.decide(model, request)


def _ask_local(args: argparse.Namespace, model: str | None, request: DecisionRequest) -> DecisionResponse:
    """Load the model, serve it in memory, and ask through the same client as ``--url``."""
    import httpx

    from . import threads
    from .app import create_app
    from .config import Settings
    from .manifest import find_manifest
    from .service import Service, load_model

    given = {"models_dir": args.models_dir, "device": args.device}
    settings = Settings(max_wait_ms=0, **{k: v for k, v in given.items() if v is not None})
    manifest = find_manifest(model or settings.model[0], settings.models_dir)
    threads.apply(settings.threads)  # as `serve` does, before the model loads
    service = Service([load_model(manifest, settings)], settings)

    async def ask() -> DecisionResponse:
        transport = httpx.ASGITransport(app=create_app(settings, service=service))
        async with httpx.AsyncClient(transport=transport, timeout=None) as http:
            client = AsyncDecisionClient("http://decisiond.local", http_client=http, max_retries=0)
            return await client.decide(manifest.name, request)

    try:
        return asyncio.run(ask())
    finally:
        service.close()


def run_ask(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Run ``decisiond ask``. Returns 0 on answers, 1 when the server or model refused, 2 on bad flags."""
    from .manifest import ManifestError

    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    err = sys.stderr
    try:
        file_model, request = build_request(args, stdin)
        model = args.model or file_model
        response = _ask_url(args, model, request) if args.url else _ask_local(args, model, request)
    except UsageError as exc:
        print(f"decisiond ask: error: {exc}", file=err)  # noqa: T201
        return 2
    except ManifestError as exc:
        print(f"decisiond ask: error: {exc}", file=err)  # noqa: T201
        return 2
    except DecisionClientError as exc:
        print(f"decisiond ask: {exc}", file=err)  # noqa: T201
        return 1
    if args.json:
        print(json.dumps(dict(response.body), indent=2, ensure_ascii=False), file=stdout)  # noqa: T201
    else:
        encoding = (getattr(stdout, "encoding", None) or "").lower().replace("-", "")
        print(render(request, response, unicode=encoding in ("utf8", "")), file=stdout)  # noqa: T201
    return 0
