"""Helpers that build tiny, randomly initialised models offline, for tests and device checks."""

from __future__ import annotations
