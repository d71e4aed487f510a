"""Sentence-embedding models (BERT-like, mean pooling): logit = cosine(state, slot text).

The state is embedded once per request, whatever the number of questions; every slot text
(built by :class:`~decisiond.render.SlotTemplates` from the instructions and the option, level or
noul side) is embedded once and kept in a bounded LRU. A text longer than the window is read in
overlapping windows whose embeddings are pooled (:mod:`.windows`). The readout divides the cosine
by the manifest's temperature.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..cache import TensorLRU
from ..config import Settings
from ..manifest import Manifest
from ..render import SlotTemplates, to_text
from .base import Backend, Prepared, TokenLimits, Work
from .padding import pad, run_sorted
from .tokenizers import TokenizerPool
from .windows import pool_windows, split_windows


@dataclass(frozen=True)
class BiEncoderFeatures:
    """Token ids of one request.

    Attributes:
        state_windows (list[list[int]]): the state's windows, special tokens included.
        slot_texts (list[str]): every slot's text, in slot order.
        slot_windows (dict[str, list[list[int]]]): the windows of each distinct slot text.
    """

    state_windows: list[list[int]]
    slot_texts: list[str]
    slot_windows: dict[str, list[list[int]]]


class BiEncoderBackend(Backend):
    """Cosine similarity of mean-pooled, normalised embeddings.

    Args:
        model (PreTrainedModel): an encoder whose output has ``last_hidden_state`` ``[B, T, d]``.
        tokenizer (PreTrainedTokenizerBase): its tokenizer (a fast one; CLS/SEP added per window).
        window (int, optional): tokens per window, specials included. Defaults to 256.
        overlap (int, optional): tokens shared by consecutive windows. Defaults to 32.
        templates (SlotTemplates, optional): slot texts. Defaults to :class:`SlotTemplates`.
        encode_tokens (int, optional): padded tokens per encoder call. Defaults to 8192.
        cache_entries (int, optional): slot-embedding cache entries. Defaults to 50,000.
        cache_bytes (int, optional): slot-embedding cache bytes. Defaults to 128 MiB.
        **kwargs: device, dtype, temperature, limits for :class:`Backend`.
    """

    family = "bi_encoder"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        window: int = 256,
        overlap: int = 32,
        templates: SlotTemplates | None = None,
        encode_tokens: int = 8192,
        cache_entries: int = 50_000,
        cache_bytes: int = 128 * 1024 * 1024,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        max_positions = getattr(model.config, "max_position_embeddings", window)
        if window > max_positions:
            raise ValueError(f"window {window} is longer than the model's {max_positions} positions")
        self.model = model.to(self.device, self.dtype).eval()
        self.tokenizer = tokenizer
        tokenizer.model_max_length = 1 << 30  # long texts are windowed here: silence "longer than the model" warnings
        self.window = window
        self.overlap = overlap
        self.templates = templates or SlotTemplates()
        self.encode_tokens = encode_tokens
        self.cache: TensorLRU[str] = TensorLRU(cache_entries, cache_bytes)
        self._tokenizers = TokenizerPool(tokenizer)  # a copy per concurrent request, no shared lock
        self._cls = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
        self._sep = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
        self._pad = tokenizer.pad_token_id or 0

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest,
        *,
        device: torch.device,
        dtype: torch.dtype,
        limits: TokenLimits,
        settings: Settings,
    ) -> BiEncoderBackend:
        """Load the encoder and tokenizer from the manifest's weights (never a download)."""
        path = manifest.weights_path()
        model, tokenizer = load_encoder(path)
        return cls(
            model,
            tokenizer,
            window=manifest.window,
            overlap=manifest.overlap,
            templates=SlotTemplates(**manifest.templates),
            device=device,
            dtype=dtype,
            temperature=manifest.temperature,
            limits=limits,
            cache_entries=settings.cache_entries,
            cache_bytes=settings.cache_bytes,
        )

    # ---------------------------------------------------------------- CPU stage

    def _windows(self, texts: list[str]) -> list[list[list[int]]]:
        with self._tokenizers.borrow() as tokenizer:
            encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
        specials = len(self._cls) + len(self._sep)
        return [
            [
                self._cls + w + self._sep
                for w in split_windows(ids, window=self.window, overlap=self.overlap, specials=specials)
            ]
            for ids in encoded
        ]

    def prepare(self, work: Work) -> Prepared:
        """Tokenise the state and every slot text; count tokens (each window with its specials)."""
        slot_texts = [text for q in work.questions for text in self.templates.slot_texts(q)]
        distinct = list(dict.fromkeys(slot_texts))
        windows = self._windows([to_text(work.state), *distinct])
        state_windows, slot_windows = windows[0], dict(zip(distinct, windows[1:], strict=True))
        state_tokens = sum(len(w) for w in state_windows)
        slot_tokens = {text: sum(len(w) for w in ws) for text, ws in slot_windows.items()}
        total = state_tokens + sum(slot_tokens[text] for text in slot_texts)
        self.limits.check(state_tokens, total)
        features = BiEncoderFeatures(state_windows, slot_texts, slot_windows)
        return Prepared(work, input_tokens=total, cost=state_tokens + sum(slot_tokens.values()), features=features)

    # ---------------------------------------------------------------- model stage

    @torch.inference_mode()
    def encode(self, sequences: Sequence[list[int]]) -> torch.Tensor:
        """Embed token-id sequences, length-sorted and padded in chunks of ``encode_tokens``.

        Args:
            sequences (Sequence[list[int]]): ``M`` sequences, special tokens included.

        Returns:
            torch.Tensor: ``[M, d]`` float32 unit vectors, in input order, on the model's device.
        """
        return run_sorted(
            sequences, lambda chunk: self._encode_padded([sequences[i] for i in chunk]), max_tokens=self.encode_tokens
        )

    def _encode_padded(self, sequences: list[list[int]]) -> torch.Tensor:
        ids, mask = pad(sequences, self._pad)
        ids, mask = ids.to(self.device), mask.to(self.device)
        hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state.float()  # [B, T, d]
        weights = mask.unsqueeze(-1).float()  # [B, T, 1]
        pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)  # [B, d]
        return torch.nn.functional.normalize(pooled, dim=1)

    def _embed_texts(self, windows: list[list[list[int]]]) -> torch.Tensor:
        """Windows of ``n`` texts → ``[n, d]`` pooled unit vectors."""
        flat = [w for text_windows in windows for w in text_windows]
        owner = torch.repeat_interleave(torch.arange(len(windows)), torch.tensor([len(ws) for ws in windows])).to(
            self.device
        )  # [W]
        return pool_windows(self.encode(flat), owner, len(windows))

    @torch.inference_mode()
    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        """States and uncached slot texts embedded in one pass; cosines gathered by index."""
        features: list[BiEncoderFeatures] = [p.features for p in batch]
        windows_of = {text: ws for f in features for text, ws in f.slot_windows.items()}
        found = {text: self.cache.get(text) for text in windows_of}  # distinct texts of the batch
        missing = [text for text, vector in found.items() if vector is None]
        embedded = self._embed_texts([f.state_windows for f in features] + [windows_of[t] for t in missing])
        states = embedded[: len(features)]  # [B, d]
        for text, vector in zip(missing, embedded[len(features) :], strict=True):
            found[text] = vector
            self.cache.put(text, vector)
        index = {text: i for i, text in enumerate(found)}
        table = torch.stack(list(found.values()))  # [U, d]
        slot_index = torch.tensor([index[t] for f in features for t in f.slot_texts], device=table.device)  # [N]
        owner = torch.repeat_interleave(
            torch.arange(len(features)), torch.tensor([len(f.slot_texts) for f in features])
        ).to(states.device)  # [N]
        return (table[slot_index] * states[owner]).sum(dim=1).float().cpu()  # [N] cosines

    def cache_stats(self) -> dict[str, dict[str, int]]:
        return {"slot_embeddings": self.cache.stats()}


def load_encoder(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """An encoder and its tokenizer from a local folder, offline, with SDPA attention."""
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="sdpa")
    return model, tokenizer
