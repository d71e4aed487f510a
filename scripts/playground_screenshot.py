"""A screenshot of the playground answering the README's first request: ``docs/playground.png``.

Serves the default model (``minilm-l6``) in-process on port 8000 (any free one when taken), opens
``/`` in Debian's headless chromium (see :mod:`decisiond.testing.browser`), clicks Ask on the
example the page opens with (twice: the second answer is drawn warm), and saves the whole page.
Needs ``/usr/bin/chromium`` and the ``test`` extra (Playwright).

Usage: python scripts/playground_screenshot.py [--model minilm-l6] [--out docs/playground.png]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a script, not the package: it may set its own environment

import httpx  # noqa: E402

from decisiond.app import create_app  # noqa: E402
from decisiond.config import Settings  # noqa: E402
from decisiond.inprocess import BackgroundServer  # noqa: E402
from decisiond.testing import browser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    """Take the screenshot. Returns the exit code: 0 saved, 1 no browser or the page did not answer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm-l6", help="model to serve (default minilm-l6)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "playground.png", help="PNG to write")
    parser.add_argument("--port", type=int, default=8000, help="port to serve on, when free (default 8000)")
    parser.add_argument("--width", type=int, default=1400, help="viewport width in CSS pixels (default 1400)")
    args = parser.parse_args()
    if (reason := browser.missing()) is not None:
        print(reason, file=sys.stderr)  # noqa: T201
        return 1
    settings = Settings(model=[args.model], models_dir=ROOT / "models", max_wait_ms=0)
    app = create_app(settings)
    try:  # the port the README uses, so that the code shown reads as a user's would
        server = BackgroundServer(app, port=args.port)
    except OSError:
        server = BackgroundServer(app)
    with server:
        deadline = time.monotonic() + 300
        while httpx.get(server.base_url + "/health").json()["status"] != "ok":
            if time.monotonic() > deadline:
                print("the model did not load in 300 s", file=sys.stderr)  # noqa: T201
                return 1
            time.sleep(0.2)
        with tempfile.TemporaryDirectory() as profile, browser.chromium(Path(profile)) as context:
            page = context.new_page()
            page.set_viewport_size({"width": args.width, "height": 900})
            page.goto(server.base_url + "/")
            page.wait_for_selector(f'#model option[value="{args.model}"]', state="attached")
            for _ in range(2):  # the second answer is drawn with the model's caches warm, as a user sees it
                with page.expect_response(lambda response: response.url.endswith("/v1/systemone")):
                    page.click("#ask")
                page.wait_for_function("() => !document.querySelector('#ask').disabled")
            page.wait_for_selector("#results:not([hidden])")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=True)
    print(f"saved {args.out}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
