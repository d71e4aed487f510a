"""The ``decisiond`` console script and ``python -m decisiond``: a SIGTERM is a clean exit from the
first instant, before the command's imports (about a second) and until uvicorn handles signals."""

from __future__ import annotations

import signal
from types import FrameType
from typing import NoReturn


def _leave(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def main() -> NoReturn:
    """Install the early SIGTERM handler, then run :func:`decisiond.cli.run` (which exits at once
    with the command's code once it has returned)."""
    signal.signal(signal.SIGTERM, _leave)
    from .cli import run

    run()


if __name__ == "__main__":
    main()
