"""CLIP-style image-text models: logit = logit_scale × cosine(image, slot text) (+ logit_bias).

Any checkpoint that ``AutoModel`` loads with ``get_text_features``, ``get_image_features`` and a
``logit_scale`` (CLIP; SigLIP, whose ``logit_bias`` is added too), with its tokenizer and image
processor. Each slot's text (:class:`~decisiond.render.SlotTemplates`) is scored against the
request's images, decoded and checked by :mod:`decisiond.media`:

* **several images are pooled** by averaging their unit embeddings, so a slot's logit is the
  scale times the *mean* of its cosines with every image (cosine is linear in the image vector):
  an option that fits all the images beats one that fits a single image very well;
* **at least one image is required**: CLIP's scale is calibrated for image-text pairs, and its
  text-text similarities are not a meaningful decision, so a request without an image is refused
  (400) instead of answered with noise. The state's text is not read; it (or a question) carries
  the asset placeholders that say where the images belong.

Slot texts longer than the text window (77 tokens for CLIP) are read in overlapping windows whose
embeddings are averaged, as the bi-encoder does; nothing is cut. Slot-text embeddings are cached.
The logit already carries the model's own scale, so the manifest's temperature defaults to 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoImageProcessor, AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..cache import TensorLRU
from ..config import Settings
from ..errors import ApiUsageError
from ..manifest import Manifest
from ..render import SlotTemplates
from .base import Backend, Prepared, TokenLimits, Work
from .padding import pad, run_sorted
from .tokenizers import TokenizerPool
from .windows import pool_windows, split_windows


@dataclass(frozen=True)
class ClipFeatures:
    """One request after the CPU stage.

    Attributes:
        pixel_values (torch.Tensor): ``[I, 3, H, W]`` float32, the request's images processed.
        slot_texts (list[str]): every slot's text, in slot order.
        slot_windows (dict[str, list[list[int]]]): the windows of each distinct slot text.
    """

    pixel_values: torch.Tensor
    slot_texts: list[str]
    slot_windows: dict[str, list[list[int]]]


def _features(output: Any) -> torch.Tensor:
    """``get_*_features`` returns a tensor (transformers 4) or an output whose pooler is it (5)."""
    return output if isinstance(output, torch.Tensor) else output.pooler_output


def special_tokens(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The ids a tokenizer puts before and after one text (``<|startoftext|>`` … ``<|endoftext|>``).

    Raises:
        ValueError: the tokenizer's encoding is not ``prefix text suffix``.
    """
    bare = tokenizer("alpha", add_special_tokens=False)["input_ids"]
    full = tokenizer("alpha")["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    raise ValueError(f"cannot read the special tokens of {type(tokenizer).__name__}")


def encode_texts(
    encoder: Callable[..., Any],
    windows: list[list[list[int]]],
    *,
    pad_id: int,
    device: torch.device,
    max_tokens: int,
) -> torch.Tensor:
    """Windows of ``n`` texts → ``[n, d]`` float32 unit vectors: each window encoded (in
    length-sorted chunks of at most ``max_tokens`` padded tokens) and normalised, a text's windows
    averaged and normalised again (:func:`~decisiond.backends.windows.pool_windows`).

    Args:
        encoder (Callable): ``get_text_features(input_ids=, attention_mask=)`` of a CLIP-style model.
        windows (list[list[list[int]]]): per text, its windows of token ids (special tokens included).
        pad_id (int): the padding id.
        device (torch.device): where the encoder runs.
        max_tokens (int): padded tokens per encoder call.
    """
    flat = [w for ws in windows for w in ws]

    def run(chunk: list[int]) -> torch.Tensor:
        ids, mask = pad([flat[i] for i in chunk], pad_id)
        out = encoder(input_ids=ids.to(device), attention_mask=mask.to(device))
        return torch.nn.functional.normalize(_features(out).float(), dim=-1)

    embedded = run_sorted(flat, run, max_tokens=max_tokens)  # [W, d]
    owner = torch.repeat_interleave(torch.arange(len(windows)), torch.tensor([len(ws) for ws in windows]))
    return pool_windows(embedded, owner.to(embedded.device), len(windows))


class ClipBackend(Backend):
    """Image-text similarity of a CLIP-style dual encoder.

    Args:
        model (PreTrainedModel): with ``get_text_features``, ``get_image_features``, ``logit_scale``.
        tokenizer (PreTrainedTokenizerBase): its tokenizer.
        image_processor (Any): its image processor (PIL images → ``pixel_values``).
        window (int, optional): text tokens per window, special tokens included; capped at the
            text model's positions. Defaults to 77.
        overlap (int, optional): tokens shared by consecutive windows. Defaults to 16.
        templates (SlotTemplates, optional): slot texts. Defaults to :class:`SlotTemplates`.
        encode_tokens (int, optional): padded text tokens per encoder call. Defaults to 8192.
        cache_entries (int, optional): slot-embedding cache entries. Defaults to 50,000.
        cache_bytes (int, optional): slot-embedding cache bytes. Defaults to 128 MiB.
        **kwargs: device, dtype, temperature, limits for :class:`Backend`.
    """

    family = "clip"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        image_processor: Any,
        *,
        window: int = 77,
        overlap: int = 16,
        templates: SlotTemplates | None = None,
        encode_tokens: int = 8192,
        cache_entries: int = 50_000,
        cache_bytes: int = 128 * 1024 * 1024,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("modalities", frozenset({"text", "image"}))
        super().__init__(**kwargs)
        text_config = getattr(model.config, "text_config", model.config)
        self.window = min(window, getattr(text_config, "max_position_embeddings", window))
        if overlap >= (self.window - 2) // 2:
            raise ValueError(f"overlap {overlap} must be under half the text window {self.window}")
        self.model = model.to(self.device, self.dtype).eval()
        self.tokenizer = tokenizer
        self.tokenizer.model_max_length = 1 << 62  # windows are cut here; silence its too-long warning
        self.image_processor = image_processor
        self.overlap = overlap
        self.templates = templates or SlotTemplates()
        self.encode_tokens = encode_tokens
        self.cache: TensorLRU[str] = TensorLRU(cache_entries, cache_bytes)
        self._prefix, self._suffix = special_tokens(tokenizer)
        self._pad = tokenizer.pad_token_id or 0
        self._tokenizers = TokenizerPool(tokenizer)  # a copy per concurrent request, no shared lock
        vision = getattr(model.config, "vision_config", None)
        patches = (vision.image_size // vision.patch_size) ** 2 + 1 if vision is not None else 1
        self.image_tokens = int(patches)  # positions the vision tower reads per image (usage, batch cost)
        self.image_side = int(vision.image_size) if vision is not None else None  # decode no larger than needed

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest,
        *,
        device: torch.device,
        dtype: torch.dtype,
        limits: TokenLimits,
        settings: Settings,
    ) -> ClipBackend:
        """Load the model, tokenizer and image processor from the manifest's weights (offline).

        Raises:
            ValueError: the manifest does not list ``image`` among its modalities, or sets keys
                this backend does not read.
        """
        if "image" not in manifest.modalities:
            raise ValueError(f'{manifest.name}: a clip model reads images; add "image" to modalities')
        if manifest.backend_options:
            raise ValueError(f"{manifest.name}: unknown clip keys {sorted(manifest.backend_options)}")
        model, tokenizer, processor = load_clip(manifest.weights_path())
        return cls(
            model,
            tokenizer,
            processor,
            window=manifest.window,
            overlap=manifest.overlap,
            templates=SlotTemplates(**manifest.templates),
            device=device,
            dtype=dtype,
            temperature=manifest.temperature,
            limits=limits,
            modalities=frozenset(manifest.modalities),
            cache_entries=settings.cache_entries,
            cache_bytes=settings.cache_bytes,
        )

    # ---------------------------------------------------------------- CPU stage

    def prepare(self, work: Work) -> Prepared:
        """Process the images; tokenise every distinct slot text into windows.

        Raises:
            ApiUsageError: the request carries no image.
            MaxTokensExceeded: over a token budget.
        """
        if not work.images:
            raise ApiUsageError(
                "this model reads images and answers about them; the request carries none (send `images` or `assets`)"
            )
        pixel_values = self.image_processor(images=list(work.images), return_tensors="pt")["pixel_values"]
        slot_texts = [text for q in work.questions for text in self.templates.slot_texts(q)]
        distinct = list(dict.fromkeys(slot_texts))
        with self._tokenizers.borrow() as tokenizer:
            encoded = tokenizer(distinct, add_special_tokens=False)["input_ids"]
        specials = len(self._prefix) + len(self._suffix)
        slot_windows = {
            text: [
                self._prefix + w + self._suffix
                for w in split_windows(ids, window=self.window, overlap=self.overlap, specials=specials)
            ]
            for text, ids in zip(distinct, encoded, strict=True)
        }
        text_tokens = {text: sum(len(w) for w in ws) for text, ws in slot_windows.items()}
        image_tokens = self.image_tokens * len(work.images)
        total = image_tokens + sum(text_tokens[t] for t in slot_texts)
        self.limits.check(0, total)
        features = ClipFeatures(pixel_values.float(), slot_texts, slot_windows)
        return Prepared(work, input_tokens=total, cost=image_tokens + sum(text_tokens.values()), features=features)

    # ---------------------------------------------------------------- model stage

    def _encode_texts(self, windows: list[list[list[int]]]) -> torch.Tensor:
        """Windows of ``n`` texts → ``[n, d]`` float32 unit vectors (window embeddings averaged)."""
        return encode_texts(
            self.model.get_text_features, windows, pad_id=self._pad, device=self.device, max_tokens=self.encode_tokens
        )

    @torch.inference_mode()
    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        """Images of the batch in one vision pass, uncached slot texts in one text pass.

        Returns:
            torch.Tensor: ``[N]`` float32 logits ``scale · mean_i cos(image_i, slot)`` (+ bias).
        """
        features: list[ClipFeatures] = [p.features for p in batch]
        pixels = torch.cat([f.pixel_values for f in features]).to(self.device, self.dtype)  # [I, 3, H, W]
        images = torch.nn.functional.normalize(
            _features(self.model.get_image_features(pixel_values=pixels)).float(), dim=-1
        )
        counts = torch.tensor([len(f.pixel_values) for f in features], device=images.device)
        image_owner = torch.repeat_interleave(torch.arange(len(features), device=images.device), counts)  # [I]
        pooled = torch.zeros(len(features), images.shape[1], device=images.device).index_add_(0, image_owner, images)
        pooled = pooled / counts.unsqueeze(1)  # [B, d] mean of unit vectors (not renormalised)

        windows_of = {text: ws for f in features for text, ws in f.slot_windows.items()}
        found = {text: self.cache.get(text) for text in windows_of}
        missing = [text for text, vector in found.items() if vector is None]
        if missing:
            for text, vector in zip(missing, self._encode_texts([windows_of[t] for t in missing]), strict=True):
                found[text] = vector
                self.cache.put(text, vector)
        index = {text: i for i, text in enumerate(found)}
        table = torch.stack([v.to(images.device) for v in found.values()])  # [U, d]
        slot_index = torch.tensor([index[t] for f in features for t in f.slot_texts], device=images.device)  # [N]
        owner = torch.repeat_interleave(
            torch.arange(len(features), device=images.device),
            torch.tensor([len(f.slot_texts) for f in features], device=images.device),
        )  # [N]
        cosines = (table[slot_index] * pooled[owner]).sum(dim=1)  # [N]
        logits = cosines * self.model.logit_scale.float().exp()
        bias = getattr(self.model, "logit_bias", None)
        if bias is not None:
            logits = logits + bias.float()
        return logits.float().cpu()

    def cache_stats(self) -> dict[str, dict[str, int]]:
        return {"slot_embeddings": self.cache.stats()}


def load_clip(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, Any]:
    """A CLIP-style model, its tokenizer and image processor from a local folder, offline, SDPA
    where the architecture supports it."""
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    processor = AutoImageProcessor.from_pretrained(path, local_files_only=True)
    try:
        model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="sdpa")
    except (ValueError, ImportError):  # an architecture without SDPA: its default attention
        model = AutoModel.from_pretrained(path, local_files_only=True)
    for method in ("get_text_features", "get_image_features"):
        if not hasattr(model, method) or not hasattr(model, "logit_scale"):
            raise ValueError(f"{path} is not a CLIP-style model (it lacks {method} or logit_scale)")
    return model, tokenizer, processor
