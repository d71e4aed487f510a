"""Sequence-pair classifiers (NLI models, rerankers): logit = the model's score of (state, slot text).

Any ``AutoModelForSequenceClassification`` checkpoint. Each slot becomes a hypothesis text
(:class:`~decisiond.render.SlotTemplates`, configurable in the manifest's ``[templates]``) and the
model reads the pair (state, hypothesis). The slot logit is:

* an NLI model (several labels): the raw logit of the entailment class, found in
  ``config.id2label`` (a label starting with ``entail``, any case) or named by the manifest's
  ``label`` key;
* a single-output reranker: its one score.

Pairs of all questions of all requests of a micro-batch go through the model together, length
sorted and padded in chunks (:mod:`.padding`). Identical pairs in a batch are scored once.

A long state is read in overlapping windows (:mod:`.windows`). The state budget of a window is
the model window less the special tokens and the question's longest hypothesis, so every slot of
one question sees the same windows and no other question changes them. The logits of one slot's
windows are pooled by **max** (default): a hypothesis holds when some part of the state supports
it, and a mean would dilute one relevant passage in many unrelated ones (MaxP in Dai & Callan,
"Deeper Text Understanding for IR with Contextual Neural Language Modeling", SIGIR 2019).
``pooling = "mean"`` in the manifest averages instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..config import Settings
from ..errors import MaxTokensExceeded
from ..manifest import Manifest
from ..render import SlotTemplates, to_text
from .base import Backend, Prepared, TokenLimits, Work
from .padding import pad, run_sorted
from .tokenizers import TokenizerPool
from .windows import split_windows

Pooling = Literal["max", "mean"]
#: Fewest state tokens a window may hold next to its hypothesis.
MIN_STATE_TOKENS = 8


@dataclass(frozen=True)
class PairTemplate:
    """Where a tokenizer puts its special tokens around a pair (learnt once from a probe pair).

    ``prefix + first + middle + second + suffix``, each part with its token type id, as BERT's
    ``[CLS] a [SEP] b [SEP]`` or RoBERTa's ``<s> a </s></s> b </s>``.
    """

    prefix: tuple[int, ...]
    middle: tuple[int, ...]
    suffix: tuple[int, ...]
    types: tuple[int, int, int, int, int]  # prefix, first, middle, second, suffix

    @property
    def specials(self) -> int:
        """Special tokens one pair adds."""
        return len(self.prefix) + len(self.middle) + len(self.suffix)

    def build(self, first: Sequence[int], second: Sequence[int]) -> tuple[list[int], list[int]]:
        """Token ids and token type ids of one pair."""
        parts = (self.prefix, first, self.middle, second, self.suffix)
        ids = [i for part in parts for i in part]
        types = [t for part, t in zip(parts, self.types, strict=True) for _ in part]
        return ids, types

    @classmethod
    def learn(cls, tokenizer: PreTrainedTokenizerBase) -> PairTemplate:
        """Read the template off the tokenizer's own encoding of a probe pair.

        Raises:
            ValueError: the tokenizer's pair encoding is not ``prefix a middle b suffix``.
        """
        a = tokenizer("alpha", add_special_tokens=False)["input_ids"]
        b = tokenizer("omega", add_special_tokens=False)["input_ids"]
        encoded = tokenizer("alpha", "omega", return_token_type_ids=True)
        ids, types = list(encoded["input_ids"]), list(encoded.get("token_type_ids") or [0] * len(encoded["input_ids"]))
        for start in range(len(ids)):
            if ids[start : start + len(a)] != a:
                continue
            for second in range(start + len(a), len(ids)):
                if ids[second : second + len(b)] == b:
                    end = second + len(b)
                    cuts = (0, start, start + len(a), second, end, len(ids))
                    part_types = tuple(types[lo] if hi > lo else 0 for lo, hi in zip(cuts, cuts[1:], strict=False))
                    return cls(tuple(ids[:start]), tuple(ids[start + len(a) : second]), tuple(ids[end:]), part_types)  # type: ignore[arg-type]
        raise ValueError(f"cannot read how {type(tokenizer).__name__} encodes a pair of texts")


@dataclass(frozen=True)
class CrossEncoderFeatures:
    """Pairs of one request.

    Attributes:
        pairs (list[tuple[tuple[int, ...], tuple[int, ...]]]): distinct (ids, type ids) pairs.
        slot_pairs (list[list[int]]): for each slot, in slot order, indices into ``pairs``.
    """

    pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]
    slot_pairs: list[list[int]]


class CrossEncoderBackend(Backend):
    """Pair classification of (state window, hypothesis).

    Args:
        model (PreTrainedModel): a sequence classifier; ``logits`` ``[B, num_labels]``.
        tokenizer (PreTrainedTokenizerBase): its tokenizer.
        label (str, optional): the label whose logit is read (NLI). Defaults to the entailment
            class of ``config.id2label``; a single-output model needs none.
        window (int, optional): tokens per pair, special tokens included. Defaults to 512.
        overlap (int, optional): state tokens shared by consecutive windows. Defaults to 32.
        pooling (Pooling, optional): ``max`` or ``mean`` over a slot's windows. Defaults to max.
        state_first (bool, optional): pair order (state, hypothesis) as NLI premises come first;
            False gives (hypothesis, state) as rerankers read (query, passage). Defaults to True.
        templates (SlotTemplates, optional): hypothesis texts. Defaults to :class:`SlotTemplates`.
        encode_tokens (int, optional): padded tokens per model call. Defaults to 8192.
        **kwargs: device, dtype, temperature, limits for :class:`Backend`.

    Raises:
        ValueError: no entailment label can be found, or the window is impossible.
    """

    family = "cross_encoder"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        label: str | None = None,
        window: int = 512,
        overlap: int = 32,
        pooling: Pooling = "max",
        state_first: bool = True,
        templates: SlotTemplates | None = None,
        encode_tokens: int = 8192,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        max_positions = getattr(model.config, "max_position_embeddings", window)
        if window > max_positions:
            raise ValueError(f"window {window} is longer than the model's {max_positions} positions")
        if pooling not in ("max", "mean"):
            raise ValueError(f"pooling must be 'max' or 'mean', got {pooling!r}")
        self.label_index = score_index(model.config.id2label, label)
        self.model = model.to(self.device, self.dtype).eval()
        self.tokenizer = tokenizer
        self.tokenizer.model_max_length = 1 << 62  # windows are cut here; silence its too-long warning
        self.template = PairTemplate.learn(tokenizer)
        self.window = window
        self.overlap = overlap
        self.pooling = pooling
        self.state_first = state_first
        self.templates = templates or SlotTemplates()
        self.encode_tokens = encode_tokens
        self._types = "token_type_ids" in tokenizer.model_input_names
        self._pad = tokenizer.pad_token_id or 0
        self._tokenizers = TokenizerPool(tokenizer)  # a copy per concurrent request, no shared lock

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest,
        *,
        device: torch.device,
        dtype: torch.dtype,
        limits: TokenLimits,
        settings: Settings,
    ) -> CrossEncoderBackend:
        """Load the classifier and tokenizer from the manifest's weights (never a download).

        Manifest keys read besides the common ones: ``label``, ``pooling``, ``state_first``.
        """
        options = manifest.backend_options
        unknown = set(options) - {"label", "pooling", "state_first"}
        if unknown:
            raise ValueError(f"{manifest.name}: unknown cross_encoder keys {sorted(unknown)}")
        model, tokenizer = load_classifier(manifest.weights_path())
        return cls(
            model,
            tokenizer,
            label=options.get("label"),
            pooling=options.get("pooling", "max"),
            state_first=bool(options.get("state_first", True)),
            window=manifest.window,
            overlap=manifest.overlap,
            templates=SlotTemplates(**manifest.templates),
            device=device,
            dtype=dtype,
            temperature=manifest.temperature,
            limits=limits,
        )

    # ---------------------------------------------------------------- CPU stage

    def prepare(self, work: Work) -> Prepared:
        """Tokenise the state and the hypotheses once; build each question's pairs.

        Raises:
            MaxTokensExceeded: a hypothesis leaves no room for the state, or a budget is exceeded.
        """
        slot_texts = [self.templates.slot_texts(q) for q in work.questions]
        distinct = list(dict.fromkeys(t for texts in slot_texts for t in texts))
        with self._tokenizers.borrow() as tokenizer:
            encoded = tokenizer([to_text(work.state), *distinct], add_special_tokens=False)["input_ids"]
        state_ids, hyp_ids = encoded[0], dict(zip(distinct, encoded[1:], strict=True))
        pair_index: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        slot_pairs: list[list[int]] = []
        windows_by_budget: dict[int, list[list[int]]] = {}
        for texts in slot_texts:
            budget = self.window - self.template.specials - max(len(hyp_ids[t]) for t in texts)
            if budget < max(MIN_STATE_TOKENS, 2 * self.overlap + 1):
                raise MaxTokensExceeded(
                    f"a question's option text is {self.window - budget - self.template.specials} tokens; "
                    f"with the state it must fit the model's window of {self.window} tokens (shorten the texts)"
                )
            if budget not in windows_by_budget:
                windows_by_budget[budget] = split_windows(state_ids, window=budget, overlap=self.overlap, specials=0)
            for text in texts:
                keys = [self._pair(window, hyp_ids[text]) for window in windows_by_budget[budget]]
                slot_pairs.append([pair_index.setdefault(key, len(pair_index)) for key in keys])
        pairs = list(pair_index)
        state_tokens = len(state_ids)
        total = sum(len(ids) for ids, _ in pairs)
        self.limits.check(state_tokens, total)
        return Prepared(work, input_tokens=total, cost=total, features=CrossEncoderFeatures(pairs, slot_pairs))

    def _pair(self, window: Sequence[int], hypothesis: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        first, second = (window, hypothesis) if self.state_first else (hypothesis, window)
        ids, types = self.template.build(first, second)
        return tuple(ids), tuple(types)

    # ---------------------------------------------------------------- model stage

    @torch.inference_mode()
    def score_pairs(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> torch.Tensor:
        """The read logit of each pair.

        Args:
            pairs (Sequence[tuple[Sequence[int], Sequence[int]]]): ``P`` (ids, type ids).

        Returns:
            torch.Tensor: ``[P]`` float32 logits, in input order, on the model's device.
        """

        def run(chunk: list[int]) -> torch.Tensor:
            ids, mask = pad([pairs[i][0] for i in chunk], self._pad)
            inputs = {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device)}
            if self._types:
                types, _ = pad([pairs[i][1] for i in chunk], 0)
                inputs["token_type_ids"] = types.to(self.device)
            logits = self.model(**inputs).logits  # [B, num_labels]
            return logits[:, self.label_index].float()

        return run_sorted([ids for ids, _ in pairs], run, max_tokens=self.encode_tokens)

    @torch.inference_mode()
    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        """Distinct pairs of the batch scored once; each slot pools its windows' logits."""
        index: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        slot_of: list[int] = []  # [W] the slot each window-pair belongs to
        pair_of: list[int] = []  # [W] the batch pair each window-pair is
        slots = 0
        for prepared in batch:
            features: CrossEncoderFeatures = prepared.features
            local = [index.setdefault(pair, len(index)) for pair in features.pairs]
            for windows in features.slot_pairs:
                slot_of.extend([slots] * len(windows))
                pair_of.extend(local[w] for w in windows)
                slots += 1
        scores = self.score_pairs(list(index))  # [P]
        owner = torch.tensor(slot_of, device=scores.device)
        window_scores = scores[torch.tensor(pair_of, device=scores.device)]  # [W]
        pooled = torch.zeros(slots, dtype=torch.float32, device=scores.device)
        reduce = "amax" if self.pooling == "max" else "mean"
        pooled = pooled.scatter_reduce(0, owner, window_scores, reduce=reduce, include_self=False)
        return pooled.cpu()  # [N]


def score_index(id2label: dict[int, str] | None, label: str | None) -> int:
    """The output column read as the slot logit (pure).

    Args:
        id2label (dict[int, str] | None): the checkpoint's ``config.id2label``.
        label (str | None): a label name to read; None finds the entailment class, or takes the
            one output of a single-output model.

    Raises:
        ValueError: the label is not there, or no entailment class can be found.

    Example:
        >>> score_index({0: "contradiction", 1: "neutral", 2: "entailment"}, None)
        2
    """
    labels = {int(i): str(name) for i, name in (id2label or {}).items()}
    if label is not None:
        for i, name in labels.items():
            if name.lower() == label.lower():
                return i
        raise ValueError(f"the label {label!r} is not among the model's labels {sorted(labels.values())}")
    if len(labels) <= 1:
        return 0
    for i, name in sorted(labels.items()):
        if name.lower().startswith("entail"):
            return i
    raise ValueError(
        f"no entailment class among the model's labels {sorted(labels.values())}; "
        "set `label` in the manifest to the label whose logit means yes"
    )


def load_classifier(path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A sequence classifier and its tokenizer from a local folder, offline, SDPA where supported."""
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            path, local_files_only=True, attn_implementation="sdpa"
        )
    except (ValueError, ImportError):  # an architecture without SDPA: its default attention
        model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True)
    return model, tokenizer
