"""The ``causal_lm`` backend: any ``AutoModelForCausalLM`` read by its option labels' next-token logits,
or an ``AutoModelForDecision`` checkpoint through its own head (see :mod:`.backend`)."""

from __future__ import annotations

from .backend import CausalLMBackend
from .options import CausalLMOptions

__all__ = ["CausalLMBackend", "CausalLMOptions"]
