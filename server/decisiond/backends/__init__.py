"""Model families. :data:`BACKENDS` maps a manifest's ``backend`` to the class that serves it.

Classes are imported lazily (``module:Class``) so that listing manifests or building the app with
a fake backend never imports a model family's dependencies.
"""

from __future__ import annotations

import importlib

from .base import Backend, BackendInfo, Logits, Prepared, TokenLimits, Work

BACKENDS: dict[str, str] = {
    "fake": "decisiond.backends.fake:FakeBackend",
    "bi_encoder": "decisiond.backends.bi_encoder:BiEncoderBackend",
    "cross_encoder": "decisiond.backends.cross_encoder:CrossEncoderBackend",
    "clip": "decisiond.backends.clip:ClipBackend",
    "detector": "decisiond.backends.detector:DetectorBackend",
    "pointer_head": "decisiond.backends.pointer_head.backend:PointerHeadBackend",
    "causal_lm": "decisiond.backends.causal_lm:CausalLMBackend",
    "scripted": "decisiond.backends.scripted:ScriptedBackend",
}


def backend_class(name: str) -> type[Backend]:
    """The class registered for ``name``.

    Raises:
        KeyError: with the known names, when ``name`` is not registered.
    """
    if name not in BACKENDS:
        raise KeyError(f"unknown backend {name!r}; known backends: {', '.join(sorted(BACKENDS))}")
    module_name, _, class_name = BACKENDS[name].partition(":")
    cls: type[Backend] = getattr(importlib.import_module(module_name), class_name)
    return cls


__all__ = ["BACKENDS", "Backend", "BackendInfo", "Logits", "Prepared", "TokenLimits", "Work", "backend_class"]
