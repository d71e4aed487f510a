"""decisiond: a local reference server for System One decision models."""

from __future__ import annotations

__version__ = "0.1.0"
