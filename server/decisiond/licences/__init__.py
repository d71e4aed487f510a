"""Licence notices shipped beside weights that ``decisiond pull`` fetches."""

from __future__ import annotations
