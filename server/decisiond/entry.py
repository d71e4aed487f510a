"""The ``decisiond`` console script and ``python -m decisiond``: a SIGTERM is a clean exit from the
first instant, before the command's imports (about a second) and until uvicorn handles signals."""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _leave(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def main() -> int:
    """Install the early SIGTERM handler, then run :func:`decisiond.cli.main`."""
    signal.signal(signal.SIGTERM, _leave)
    from .cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
