"""House rules that code review would otherwise have to catch."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "server" / "decisiond"


def test_only_config_reads_the_environment() -> None:
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "config.py" and re.search(r"os\.environ|os\.getenv", path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_every_module_has_future_annotations_and_a_docstring() -> None:
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if not text.strip():
            continue
        assert "from __future__ import annotations" in text, path
        assert text.lstrip().startswith('"""'), path
