"""Helpers for tests and device checks: tiny random models in real on-disk formats (offline)."""

from __future__ import annotations
