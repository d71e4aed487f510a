"""Headless Chromium for the playground test and ``scripts/playground_screenshot.py``.

The browser is Debian's ``chromium`` package at ``/usr/bin/chromium`` driven by Playwright's Python
package (the ``test`` extra); ``playwright install`` is never run, so nothing is downloaded. Each
launch gets a new empty profile folder and flags that keep Chromium from calling out (no sync,
no component updates, no background networking, no QUIC).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext

#: Debian's chromium (``apt-get install chromium``).
CHROMIUM = Path("/usr/bin/chromium")
#: Headless, no sandbox (CI runs as root in a container), and nothing fetched from outside.
ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def missing() -> str | None:
    """Why the browser cannot run on this machine, or None when it can."""
    if not CHROMIUM.is_file():
        return f"Debian's chromium is not installed at {CHROMIUM} (apt-get install chromium; CI installs it)"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


@contextmanager
def chromium(profile: Path) -> Iterator[BrowserContext]:
    """A headless Chromium with an empty profile in ``profile`` (a new folder), closed on exit.

    Raises:
        playwright.sync_api.Error: Chromium did not start.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=list(ARGS)
        )
        try:
            yield context
        finally:
            context.close()
