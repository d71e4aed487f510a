"""Sentence-embedding models (BERT-like, mean pooling): logit = cosine(state, slot text).

The state is embedded once per request, whatever the number of questions; every slot text
(built by :class:`~decisiond.render.SlotTemplates` from the instructions and the option, level or
noul side) is embedded once and kept in a bounded LRU. :meth:`BiEncoderBackend.prepare` only
renders the texts; :meth:`BiEncoderBackend.complete` tokenises a whole micro-batch's states and
new slot texts in one tokenizer call on the model thread (slot texts' token ids are kept too).
A text longer than the window is read in overlapping windows whose embeddings are pooled
(:mod:`.windows`). The readout divides the cosine by the manifest's temperature.

A noul without criteria is read as a statement instead (:mod:`.statements`): its instructions
made affirmative by rule, and p(true) = sigmoid(NOUL_SLOPE · z + NOUL_OFFSET) with z the z-score
of cos(state, statement) among the cosines of a fixed bank of generic texts (embedded at load)
with the same statement; a negated question answers the complement of its affirmative. A noul
with one described side compares its sides under its affirmative instructions, swapped when
negated. A state the tokenizer reads mostly as unknown tokens (a script outside the vocabulary)
gets uniform answers and an ``x_warnings`` note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from cachetools import LRUCache
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..cache import TensorLRU, digest
from ..config import Settings
from ..errors import MaxTokensExceeded
from ..manifest import Manifest
from ..render import Question, SlotTemplates, to_text
from .base import Backend, Prepared, TokenLimits, Work
from .noul_statements import NOUL_OFFSET, NOUL_SLOPE, UNREADABLE_SHARE, one_sided, statement_text
from .padding import pad, run_sorted
from .statements import GENERIC_TEXTS
from .windows import pool_windows, split_windows

#: Distinct slot texts whose token counts are kept between requests (for the batch budget).
SLOT_TOKEN_ENTRIES = 20_000
#: Bytes of slot-text token windows kept between requests (8 per id); keys are digests, so a long
#: slot text costs what its ids cost, never its characters too.
SLOT_WINDOW_BYTES = 32 * 1024 * 1024


def _windows_bytes(windows: list[list[int]]) -> int:
    return 8 * sum(len(w) for w in windows) + 64


@dataclass
class BiEncoderFeatures:
    """The texts of one request, and their token ids once :meth:`BiEncoderBackend.complete` ran.

    Attributes:
        state_text (str): the state as the model reads it.
        slot_texts (list[str]): every slot's text, in slot order.
        state_windows (list[list[int]] | None): the state's windows, special tokens included.
        slot_windows (dict[str, list[list[int]]] | None): the windows of each distinct slot text.
        statements (tuple[tuple[int, bool], ...]): each statement noul's first slot index (both of its
            slots hold the statement) and whether it is negated.
        swaps (tuple[int, ...]): the first slot index of each negated one-sided noul (logits swapped).
        unreadable (bool): the state is mostly unknown tokens; every slot's logit is 0 (set by complete).
    """

    state_text: str
    slot_texts: list[str]
    state_windows: list[list[int]] | None = None
    slot_windows: dict[str, list[list[int]]] | None = None
    statements: tuple[tuple[int, bool], ...] = ()
    swaps: tuple[int, ...] = ()
    unreadable: bool = False


class BiEncoderBackend(Backend):
    """Cosine similarity of mean-pooled, normalised embeddings.

    ``prepare`` renders only (``light_prepare``); the tokenizer runs on the model thread alone, so
    it needs no lock.

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
    light_prepare = True

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
        # model thread only: slot text -> windows; the counts are read by prepare (dict reads are atomic)
        self._slot_windows: LRUCache[bytes, list[list[int]]] = LRUCache(SLOT_WINDOW_BYTES, getsizeof=_windows_bytes)
        self._slot_tokens: dict[bytes, int] = {}
        self._cls = [tokenizer.cls_token_id] if tokenizer.cls_token_id is not None else []
        self._sep = [tokenizer.sep_token_id] if tokenizer.sep_token_id is not None else []
        self._pad = tokenizer.pad_token_id or 0
        self._unk = tokenizer.unk_token_id
        self.bank = self._embed_texts(self._windows(list(GENERIC_TEXTS)))  # [G, d] unit vectors

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
        """Token windows of ``texts``, one tokenizer call (model thread)."""
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        specials = len(self._cls) + len(self._sep)
        return [
            [
                self._cls + w + self._sep
                for w in split_windows(ids, window=self.window, overlap=self.overlap, specials=specials)
            ]
            for ids in encoded
        ]

    def _estimate(self, text: str) -> int:
        """Tokens of ``text`` before it is tokenised, for the batch budget: its characters (a word
        piece holds at least one) plus each window's specials; a slot text seen before counts exactly."""
        known = self._slot_tokens.get(digest(text))
        if known is not None:
            return known
        specials = len(self._cls) + len(self._sep)
        return len(text) + specials * (1 + len(text) // max(1, self.window - self.overlap - specials))

    def complements(self, question: Question) -> bool:
        """True for a negated noul read as a statement or as one described side (its affirmative's
        complement: :func:`~.noul_statements.statement_text`, :func:`~.noul_statements.one_sided`)."""
        statement, sided = statement_text(question), one_sided(question)
        return bool((sided or statement or (None, False))[1])

    def prepare(self, work: Work) -> Prepared:
        """Render the state and every slot text; estimate the tokens for the batch budget. The
        tokenising, the exact counts and the token limits come in :meth:`complete`."""
        slot_texts: list[str] = []
        statements: list[tuple[int, bool]] = []
        swaps: list[int] = []
        for question in work.questions:
            statement, sided = statement_text(question), one_sided(question)
            if sided is not None:
                swaps.extend([len(slot_texts)] if sided[1] else [])
                slot_texts.extend(self.templates.slot_texts(sided[0]))
            elif statement is None:
                slot_texts.extend(self.templates.slot_texts(question))
            else:
                statements.append((len(slot_texts), statement[1]))
                slot_texts.extend([statement[0], statement[0]])
        state_text = to_text(work.state)
        cost = self._estimate(state_text) + sum(self._estimate(text) for text in dict.fromkeys(slot_texts))
        features = BiEncoderFeatures(state_text, slot_texts, statements=tuple(statements), swaps=tuple(swaps))
        return Prepared(work, input_tokens=0, cost=cost, features=features)

    def complete(self, batch: Sequence[Prepared]) -> list[Exception | None]:
        """Tokenise every state and every slot text not seen before of the micro-batch in one call;
        set each request's exact ``input_tokens`` and ``cost``; refuse those over a token limit."""
        todo = [p for p in batch if p.features.state_windows is None]
        known: dict[str, list[list[int]]] = {}
        for p in todo:
            for text in p.features.slot_texts:
                if text not in known and (windows := self._slot_windows.get(digest(text))) is not None:
                    known[text] = windows
        new = list(dict.fromkeys(t for p in todo for t in p.features.slot_texts if t not in known))
        windows = self._windows([p.features.state_text for p in todo] + new)
        for text, text_windows in zip(new, windows[len(todo) :], strict=True):
            key = digest(text)
            known[text] = self._slot_windows[key] = text_windows
            if len(self._slot_tokens) >= SLOT_TOKEN_ENTRIES:
                self._slot_tokens.clear()
            self._slot_tokens[key] = sum(len(w) for w in text_windows)
        errors: dict[int, Exception] = {}
        for p, state_windows in zip(todo, windows, strict=False):
            try:
                self._count(p, state_windows, known)
            except MaxTokensExceeded as exc:
                errors[id(p)] = exc
        return [errors.get(id(p)) for p in batch]

    def _count(self, prepared: Prepared, state_windows: list[list[int]], known: dict[str, list[list[int]]]) -> None:
        """Attach the windows, count the tokens (each window with its specials), check the limits."""
        features: BiEncoderFeatures = prepared.features
        slot_windows = {text: known[text] for text in dict.fromkeys(features.slot_texts)}
        state_tokens = sum(len(w) for w in state_windows)
        slot_tokens = {text: sum(len(w) for w in ws) for text, ws in slot_windows.items()}
        total = state_tokens + sum(slot_tokens[text] for text in features.slot_texts)
        self.limits.check(state_tokens, total)
        features.state_windows, features.slot_windows = state_windows, slot_windows
        prepared.input_tokens = total
        prepared.cost = state_tokens + sum(slot_tokens.values())
        share = self._unknown_share(state_windows)
        if share >= UNREADABLE_SHARE:
            features.unreadable = True
            prepared.warnings = (
                f"this model cannot read the state: {share:.0%} of its tokens are unknown to the tokenizer "
                "(a script outside its vocabulary); every answer is uniform. Use a multilingual model.",
            )

    def _unknown_share(self, windows: list[list[int]]) -> float:
        """The share of unknown tokens among a text's tokens (specials excluded), 0 for an empty text."""
        specials = len(self._cls) + len(self._sep)
        tokens = sum(max(0, len(w) - specials) for w in windows)
        if self._unk is None or tokens == 0:
            return 0.0
        return sum(w.count(self._unk) for w in windows) / tokens

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
        """States and uncached slot texts embedded in one pass; cosines gathered by index.

        Raises:
            MaxTokensExceeded: a request of ``batch`` had not been completed and is over a limit.
        """
        for error in self.complete(batch):  # a no-op after the engine's complete()
            if error is not None:
                raise error
        features: list[BiEncoderFeatures] = [p.features for p in batch]
        windows_of = {text: ws for f in features for text, ws in (f.slot_windows or {}).items()}
        found = {text: self.cache.get(text) for text in windows_of}  # distinct texts of the batch
        missing = [text for text, vector in found.items() if vector is None]
        state_windows = [f.state_windows or [] for f in features]
        embedded = self._embed_texts(state_windows + [windows_of[t] for t in missing])
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
        cosines = (table[slot_index] * states[owner]).sum(dim=1).float()  # [N]
        return self._read_statements(cosines, features, table[slot_index]).cpu()

    def _read_statements(
        self, cosines: torch.Tensor, features: list[BiEncoderFeatures], slots: torch.Tensor
    ) -> torch.Tensor:
        """Statement nouls' slots → logits (0, ±(NOUL_SLOPE · z + NOUL_OFFSET) · T); negated one-sided nouls'
        two cosines swapped; unreadable states' → 0.

        Args:
            cosines: ``[N]`` cos(state, slot text).
            features: the batch's requests.
            slots: ``[N, d]`` slot-text embeddings.
        """
        out = cosines.clone()
        temperature = self._temperature  # the readout divides by it again
        start = 0
        for f in features:
            if f.statements:
                first = torch.tensor([start + i for i, _ in f.statements], device=out.device)  # [S]
                bank = slots[first] @ self.bank.T  # [S, G] cos(generic text, statement)
                z = (cosines[first] - bank.mean(dim=1)) / bank.std(dim=1).clamp(min=1e-6)  # [S]
                sign = torch.tensor([-1.0 if negated else 1.0 for _, negated in f.statements], device=out.device)
                out[first] = 0.0
                out[first + 1] = sign * (NOUL_SLOPE * z + NOUL_OFFSET) * temperature
            for first in f.swaps:
                out[start + first], out[start + first + 1] = cosines[start + first + 1], cosines[start + first]
            if f.unreadable:
                out[start : start + len(f.slot_texts)] = 0.0
            start += len(f.slot_texts)
        return out

    def cache_stats(self) -> dict[str, dict[str, int]]:
        return {"slot_embeddings": self.cache.stats()}


def load_encoder(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """An encoder and its tokenizer from a local folder, offline, with SDPA attention."""
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="sdpa")
    return model, tokenizer
