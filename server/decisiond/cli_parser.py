"""The error path of the ``decisiond`` command line: one-line errors, "did you mean", port numbers,
and settings errors in words.

argparse prints the whole usage (forty flags for ``serve``) above an error, and Python 3.11's
argparse has no ``suggest_on_error``; :class:`Parser` prints one line naming the problem, with the
closest flag when one was mistyped (:func:`difflib.get_close_matches`).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any, NoReturn
from urllib.parse import urlsplit

from pydantic import ValidationError

#: The highest TCP port number.
MAX_PORT = 65535


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (``decisiond serve: error: ... (see
    decisiond serve --help)``) and whose unknown flags get the closest known flag as a hint. Its
    subparsers are of the same class (argparse makes them with ``type(parent)``)."""

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """Parse like argparse; an unknown flag is reported by the subcommand it was given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            target = self._chosen_subparser(parsed) or self
            target.error(unrecognized(extras, target))
        return parsed

    def _chosen_subparser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = getattr(parsed, action.dest or "", None)
                parser: argparse.ArgumentParser | None = action.choices.get(chosen) if chosen else None
                return parser
        return None

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see PROG --help)`` on stderr and exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def unrecognized(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """The message for arguments ``parser`` does not know, with the closest flag of each.

    Example:
        >>> p = Parser(prog="decisiond serve"); _ = p.add_argument("--port")
        >>> unrecognized(["--prot", "9000"], p)
        'unrecognized argument --prot (did you mean --port?)'
        >>> unrecognized(["extra"], p)
        "unexpected argument 'extra'"
    """
    known = [option for option in parser._option_string_actions if option.startswith("--")]
    parts = []
    for i, extra in enumerate(extras):
        if not extra.startswith("-"):
            if i == 0 or not extras[i - 1].startswith("-"):  # not the value of the unknown flag before it
                parts.append(f"unexpected argument {extra!r}")
            continue
        name = extra.split("=", 1)[0]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        parts.append(f"unrecognized argument {name}" + (f" (did you mean {close[0]}?)" if close else ""))
    return "; ".join(parts)


def port(text: str) -> int:
    """A TCP port number from the command line (0 lets the system pick one).

    Raises:
        argparse.ArgumentTypeError: not an integer from 0 to 65535.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to {MAX_PORT})") from None
    if not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0 to {MAX_PORT})")
    return value


def upstream_url(text: str) -> str:
    """The base URL of a real service for ``decisiond record --upstream``.

    Raises:
        argparse.ArgumentTypeError: not an ``http://`` or ``https://`` URL with a host (the proxy
            would otherwise start and answer every request 502).
    """
    parts = urlsplit(text.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL with a host")
    return text.strip()


def describe_settings_error(exc: ValidationError) -> str:
    """A settings ``ValidationError`` as one line per field, naming the flag and the environment
    variable, without pydantic's documentation URL.

    Example: ``--port (DECISIOND_PORT): Input should be less than or equal to 65535``.
    """
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        field = str(error["loc"][0]) if error["loc"] else "settings"
        lines.append(f"--{field.replace('_', '-')} (DECISIOND_{field.upper()}): {error['msg']}")
    return "; ".join(lines)
