"""The ``causal_lm`` settings of a manifest: permutations, prefix sharing and caches, the negation rule,
contextual calibration."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...manifest import Manifest


class CausalLMOptions(BaseModel):
    """The ``causal_lm`` settings of a manifest (its extra top-level keys).

    Attributes:
        permutations: readings of each choice, its options cyclically shifted, logits averaged (1: as sent).
        share_prefix: run a request's state once and reuse its key-value cache for every question.
        prefix_cache_entries: state prefixes kept between requests (0: none).
        prefix_cache_bytes: bytes of key-value cache kept between requests.
        forward_tokens: padded tokens per forward call, prefix caches included (bounds memory).
        negation: ``complement`` asks a negated noul positively and answers the complement (a noul
            and its negation then sum to 1); ``as_asked`` reads it as sent (pipeline parity).
        content_free: a content-free state (``"N/A"``): each question of the types in
            ``content_free_types`` is answered by its slot logits minus those it gets about this state
            (contextual calibration, :mod:`.priors`); None (the default): read as the pipeline reads.
        content_free_types: the question types so corrected.
        option_order: ``by_key`` shows a choice's options sorted by key (a reorder then changes nothing);
            ``as_sent`` (the default) in the order sent, as the pipeline does.
    """

    model_config = ConfigDict(extra="forbid")

    permutations: int = Field(default=1, ge=1, le=32)
    share_prefix: bool = True
    prefix_cache_entries: int = Field(default=256, ge=0)
    prefix_cache_bytes: int = Field(default=512 * 1024 * 1024, ge=0)
    forward_tokens: int = Field(default=32768, ge=256)
    negation: Literal["as_asked", "complement"] = "as_asked"
    content_free: str | None = None
    content_free_types: tuple[Literal["noul", "choice", "score"], ...] = ("choice",)
    option_order: Literal["as_sent", "by_key"] = "as_sent"

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> CausalLMOptions:
        """Validate the manifest's extra keys.

        Raises:
            ValueError: naming the manifest, the key and the problem.
        """
        try:
            return cls.model_validate(manifest.backend_options)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"manifest {manifest.name}: bad causal_lm setting ({problems})") from exc
