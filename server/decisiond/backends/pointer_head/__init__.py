"""Pointer-head checkpoints (Kev, OpenJev, strands-decider): see spec/pointer-head.md.

:mod:`.families` holds the presets and manifest options (no torch), :mod:`.render` the rendering
and token layout, :mod:`.head` the pointer head, :mod:`.loading` checkpoint loading and refusals,
:mod:`.backend` the :class:`~decisiond.backends.base.Backend` subclass.
"""

from __future__ import annotations
