"""Helpers shared by the test suite and the check scripts (tiny models, manifests). Never imported by the server."""

from __future__ import annotations
