"""Causal LMs read by the next-token logits of their option labels, or by their own decision head.

The prompts, labels and decision config are transformers' (:mod:`transformers.decision`): a model
answers here as through ``pipeline("decision")``. What this backend adds: every question of every
request of a micro-batch in one forward; the shared prefix (system text and state) of a request run
once, its key-value cache kept in a bounded LRU and copied into each question's row, so no
question sees another; up to 255 options (labels past ``Z``, :mod:`.labels`); and optional
averaging over cyclic shifts of a choice's options (``permutations = N``) against position bias.
The head is computed in float32 on the label rows of the output embedding only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers.decision import DecisionConfig, label_token_ids
from transformers.decision.template_utils import MARK, SPLIT
from transformers.tokenization_utils_base import AddedToken

from ...cache import TensorLRU
from ...config import Settings
from ...errors import ApiUsageError, MaxTokensExceeded
from ...manifest import Manifest
from ...render import Kind, Question
from ..base import Backend, Prepared, TokenLimits, Work
from .labels import MAX_LABELS, choose_labels
from .loading import converted_gguf, load_checkpoint
from .options import CausalLMOptions
from .priors import ContentFreePriors
from .prompts import PROBE, Prompt, asked_positively, render, shared_prefix, slot_map, template_request
from .rows import RowRunner

log = logging.getLogger("decisiond.backends.causal_lm")

_ORDINALS = ("first", "second", "third")


@dataclass(frozen=True)
class CausalLMFeatures:
    """One request, tokenised.

    Attributes:
        prefix (tuple[int, ...]): the shared prefix (``P`` tokens; empty when not shared).
        prefix_key (bytes): digest of ``prefix`` (the prefix cache's key).
        rows (tuple[tuple[int, ...], ...]): each prompt's ids after the prefix.
        reads (tuple[tuple[int, ...], ...]): read positions within each row.
        prompts (tuple[Prompt, ...]): the whole prompts (decision-head models run these).
        label_ids (tuple[int, ...]): ``M`` label token ids, read by read, option by option.
        label_read (tuple[int, ...]): ``M`` indices of the read (over the request's reads) of each label.
        label_slot (tuple[int, ...]): ``M`` slot indices (within the request) each label scores.
        slot_reads (tuple[int, ...]): ``N`` readings of each slot (more than 1 with permutations).
    """

    prefix: tuple[int, ...]
    prefix_key: bytes
    rows: tuple[tuple[int, ...], ...]
    reads: tuple[tuple[int, ...], ...]
    prompts: tuple[Prompt, ...]
    label_ids: tuple[int, ...]
    label_read: tuple[int, ...]
    label_slot: tuple[int, ...]
    slot_reads: tuple[int, ...]


def _full_attention(config: Any) -> bool:
    """Whether every layer attends to the whole past (so a copied key-value prefix is exact)."""
    text = config.get_text_config(decoder=True)
    layer_types = getattr(text, "layer_types", None) or []
    if any(kind != "full_attention" for kind in layer_types):
        return False
    return getattr(text, "sliding_window", None) is None or getattr(text, "use_sliding_window", True) is False


def _digest(ids: Sequence[int]) -> bytes:
    return hashlib.blake2b(struct.pack(f"<{len(ids)}q", *ids), digest_size=16).digest()


class CausalLMBackend(Backend):
    """Any ``AutoModelForCausalLM`` (or ``AutoModelForDecision``) checkpoint.

    Args:
        model (Any): a causal LM (``get_decoder()``, ``get_output_embeddings()``) or a decision model
            (``decide``), on the CPU or already on ``device``.
        tokenizer (Any): its tokenizer, with a chat template.
        decision_config (DecisionConfig, optional): the checkpoint's (``decision.json``). Defaults to
            transformers' defaults.
        has_head (bool, optional): the model scores options with its own head. Defaults to False.
        options (CausalLMOptions, optional): manifest settings. Defaults to :class:`CausalLMOptions`.
        context (int, optional): longest prompt in tokens. Defaults to the model's positions.
        **kwargs: device, dtype, temperature, limits for :class:`Backend`.

    Raises:
        ValueError: the decision config's labels are not distinct single tokens of the tokenizer.
    """

    family = "causal_lm"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        decision_config: DecisionConfig | None = None,
        has_head: bool = False,
        options: CausalLMOptions | None = None,
        context: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.has_head = has_head
        self.options = options or CausalLMOptions()
        text_config = model.config.get_text_config(decoder=True)
        self.context = context or int(getattr(text_config, "max_position_embeddings", 4096))
        self._lock = threading.Lock()  # fast tokenizers are not safe to share across threads
        if MARK not in tokenizer.get_vocab():  # as prepare_inputs does, once, before any request thread
            tokenizer.add_tokens([AddedToken(token, special=True, normalized=False) for token in (MARK, SPLIT)])
        config = decision_config or DecisionConfig()
        if not has_head:  # labels past Z, unless the checkpoint names its own
            extended = choose_labels(tokenizer, MAX_LABELS)
            config = dataclasses.replace(config, labels={"choice": extended, "score": extended, **config.labels})
        self.decision_config = config
        self.labels: dict[str, list[str]] = {
            kind: config.labels.get(kind) or (["Yes", "No"] if kind == "noul" else [])
            for kind in ("noul", "choice", "score")
        }
        self._label_id: dict[str, int] = {}
        if not has_head:
            for labels in self.labels.values():
                self._label_id.update(zip(labels, label_token_ids(tokenizer, tuple(labels)), strict=True))
            self.runner = RowRunner(
                model.get_decoder(),
                pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0),
                forward_tokens=self.options.forward_tokens,
            )
            self._head = model.get_output_embeddings()
            self._softcap = getattr(text_config, "final_logit_softcapping", None)
        self.share_prefix = self.options.share_prefix and not has_head and _full_attention(model.config)
        self.cache: TensorLRU[bytes] = TensorLRU(self.options.prefix_cache_entries, self.options.prefix_cache_bytes)
        self.priors = (
            None
            if self.options.content_free is None
            else ContentFreePriors(self._content_free_reading, frozenset(self.options.content_free_types))
        )

    @classmethod
    def from_manifest(
        cls,
        manifest: Manifest,
        *,
        device: torch.device,
        dtype: torch.dtype,
        limits: TokenLimits,
        settings: Settings,
    ) -> CausalLMBackend:
        """Load the checkpoint the manifest names (a folder, or a GGUF file converted once into the cache).

        Raises:
            ManifestError: the weights are not on this machine.
            ValueError: a bad manifest setting, or media the backend cannot read.
        """
        options = CausalLMOptions.from_manifest(manifest)
        if set(manifest.modalities) != {"text"}:
            raise ValueError(
                f"manifest {manifest.name}: the causal_lm backend reads text only, not {manifest.modalities}"
            )
        path = manifest.weights_path(settings.cache_dir)
        if manifest.weights.gguf_file:
            saved = torch.bfloat16 if manifest.weights.gguf_dtype == "bfloat16" else torch.float32
            path = converted_gguf(path, manifest.weights.gguf_file, settings.cache_dir, dtype=saved)
        model, tokenizer, has_head = load_checkpoint(path, dtype=dtype)
        config = model.decision_config if has_head else DecisionConfig.from_pretrained(str(path), local_files_only=True)
        if config.adapter:  # a LoRA in a subfolder, as pipeline("decision") loads it
            model.load_adapter(str(path), adapter_kwargs={"subfolder": config.adapter})
        return cls(
            model,
            tokenizer,
            decision_config=config,
            has_head=has_head,
            options=options,
            context=manifest.window if "window" in manifest.model_fields_set else None,
            device=device,
            dtype=dtype,
            temperature=manifest.temperature,
            limits=limits,
        )

    def temperature(self, kind: Kind) -> float:
        """The decision config's temperature for ``kind``, else the manifest's; 1 for decision heads,
        whose ``decide`` applies their own."""
        if self.has_head:
            return 1.0
        return float(self.decision_config.temperature.get(kind, self._temperature))

    def complements(self, question: Question) -> bool:
        """True for a negated noul under ``negation = "complement"`` (asked positively, answered with the
        complement: :func:`~.prompts.asked_positively`)."""
        return self.options.negation == "complement" and asked_positively(question) is not None

    # ---------------------------------------------------------------- CPU stage

    def _check_sizes(self, questions: Sequence[Question]) -> None:
        for index, question in enumerate(questions):
            most = len(self.labels[question.kind]) if self.labels[question.kind] or not self.has_head else None
            if most is not None and question.size > most:
                which = _ORDINALS[index] if index < len(_ORDINALS) else f"#{index + 1}"
                raise ApiUsageError(
                    f"the {which} question ({question.kind}) has {question.size} options; this model reads at most "
                    f"{most} (it has {most} single-token labels for a {question.kind})"
                )

    def prepare(self, work: Work) -> Prepared:
        """Render every question with transformers, split off the shared prefix, map labels to slots.

        Raises:
            ApiUsageError: more options than the model has labels, or a request it cannot render.
            MaxTokensExceeded: a prompt longer than the model's context, or over a token budget.
        """
        self._check_sizes(work.questions)
        request, owners, negated = template_request(
            work.state,
            work.questions,
            self.options.permutations,
            complement_negations=self.options.negation == "complement",
            choices_by_key=self.options.option_order == "by_key",
        )
        with self._lock:
            try:
                prompts = render(self.decision_config, self.tokenizer, request)
                probe = render(self.decision_config, self.tokenizer, {"state": work.state, "questions": {"p": PROBE}})
            except ValueError as exc:
                raise ApiUsageError(f"this model cannot read the request: {str(exc)[:300]}") from exc
        shared = shared_prefix(prompts, probe[0].ids)
        longest = max(len(prompt.ids) for prompt in prompts)
        if longest > self.context:
            raise MaxTokensExceeded(
                f"a question's prompt (state included) is {longest} tokens; this model reads at most {self.context} "
                "at once (shorten the state)"
            )
        cut = shared if self.share_prefix else 0
        rows = tuple(prompt.ids[cut:] for prompt in prompts)
        total = cut + sum(len(row) for row in rows)
        self.limits.check(shared, total)
        features = CausalLMFeatures(
            prefix=prompts[0].ids[:cut],
            prefix_key=_digest(prompts[0].ids[:cut]),
            rows=rows,
            reads=tuple(tuple(read - cut for read in prompt.reads) for prompt in prompts),
            prompts=tuple(prompts),
            **self._label_map(work.questions, prompts, owners, negated),
        )
        return Prepared(work, input_tokens=total, cost=max(total, 1), features=features)

    def _label_map(
        self,
        questions: Sequence[Question],
        prompts: Sequence[Prompt],
        owners: dict[str, tuple[int, int]],
        negated: frozenset[int] = frozenset(),
    ) -> dict[str, tuple[int, ...]]:
        """Which label token each (read, option) is, and which slot of the request it scores (a noul
        asked positively in place of its negation scores the other side)."""
        bases = [0]
        for question in questions:
            bases.append(bases[-1] + question.size)
        slots = [slot_map(question) for question in questions]
        label_ids: list[int] = []
        label_read: list[int] = []
        label_slot: list[int] = []
        slot_reads = [0] * bases[-1]
        read = 0
        for prompt in prompts:
            for template_question in prompt.questions:
                index, _ = owners[template_question.name]
                for label, option in zip(template_question.labels, template_question.options, strict=True):
                    side = slots[index][option]
                    slot = bases[index] + (1 - side if index in negated else side)
                    label_ids.append(self._label_id.get(label, -1))
                    label_read.append(read)
                    label_slot.append(slot)
                    slot_reads[slot] += 1
                read += 1
        return {
            "label_ids": tuple(label_ids),
            "label_read": tuple(label_read),
            "label_slot": tuple(label_slot),
            "slot_reads": tuple(slot_reads),
        }

    # ---------------------------------------------------------------- model stage

    @torch.inference_mode()
    def forward(self, batch: Sequence[Prepared]) -> torch.Tensor:
        """Every question row of the batch in one forward (chunked only past ``forward_tokens``), less
        each question's content-free reading when the manifest sets ``content_free``.

        Returns:
            torch.Tensor: ``[N]`` float32 slot logits; a slot read under several shifts gets the mean.
        """
        logits = self._slot_logits(batch)
        if self.priors is None:
            return logits
        return logits - self.priors.of([question for prepared in batch for question in prepared.work.questions])

    def _content_free_reading(self, question: Question) -> torch.Tensor:
        """``[size]`` slot logits of ``question`` alone about the content-free state (uncorrected)."""
        return self._slot_logits([self.prepare(Work(self.options.content_free, (question,)))])

    def _slot_logits(self, batch: Sequence[Prepared]) -> torch.Tensor:
        features: list[CausalLMFeatures] = [prepared.features for prepared in batch]
        scores = self._head_scores(features) if self.has_head else self._label_logits(features)  # [M] float32
        slot = torch.tensor(self._offset(features, "label_slot", [len(f.slot_reads) for f in features]))
        reads = torch.tensor([count for f in features for count in f.slot_reads], dtype=torch.float32)
        totals = torch.zeros(len(reads), dtype=torch.float32).index_add_(0, slot, scores.cpu())
        return totals / reads

    @staticmethod
    def _offset(features: Sequence[CausalLMFeatures], name: str, sizes: Sequence[int]) -> list[int]:
        """``features[r].<name>`` concatenated, each request's indices shifted past the requests before it."""
        out: list[int] = []
        start = 0
        for feature, size in zip(features, sizes, strict=True):
            out.extend(start + value for value in getattr(feature, name))
            start += size
        return out

    def _prefix_caches(self, features: Sequence[CausalLMFeatures]) -> list[torch.Tensor | None]:
        """Each request's prefix key-value cache ``[L, 2, H, P, D]``: from the LRU, or run now (once per prefix)."""
        found: dict[bytes, torch.Tensor | None] = {}
        for feature in features:
            if feature.prefix and feature.prefix_key not in found:
                found[feature.prefix_key] = self.cache.get(feature.prefix_key)
        missing = [key for key, value in found.items() if value is None]
        if missing:
            first = {f.prefix_key: f.prefix for f in reversed(features) if f.prefix}
            for key, kv in zip(missing, self.runner.prefixes([first[key] for key in missing]), strict=True):
                found[key] = kv
                self.cache.put(key, kv)
        return [found[f.prefix_key] if f.prefix else None for f in features]

    def _label_logits(self, features: Sequence[CausalLMFeatures]) -> torch.Tensor:
        """``[M]`` float32 logits of every label at its read position."""
        pasts = self._prefix_caches(features)
        rows = [row for f in features for row in f.rows]
        row_pasts = [past for f, past in zip(features, pasts, strict=True) for _ in f.rows]
        reads = [read for f in features for read in f.reads]
        hidden = self.runner.read(rows, row_pasts, reads)  # [reads, d]
        read_index = torch.tensor(self._offset(features, "label_read", [sum(map(len, f.reads)) for f in features]))
        label_ids = torch.tensor([i for f in features for i in f.label_ids], device=hidden.device)
        weight = self._head.weight[label_ids].float()  # [M, d]
        logits = (hidden[read_index.to(hidden.device)].float() * weight).sum(dim=-1)  # [M]
        if getattr(self._head, "bias", None) is not None:
            logits = logits + self._head.bias[label_ids].float()
        if self._softcap:
            logits = self._softcap * torch.tanh(logits / self._softcap)
        return logits

    def _head_scores(self, features: Sequence[CausalLMFeatures]) -> torch.Tensor:
        """``[M]`` float32 option scores of a decision-head model, prompt by prompt through its ``decide``."""
        scores: list[torch.Tensor] = []
        for feature in features:
            for prompt in feature.prompts:
                inputs = {key: value for key, value in prompt.inputs.items() if key != "marks"}
                per_question = self.model.decide(
                    **inputs,
                    marks=prompt.inputs["marks"],
                    decision_questions=list(prompt.questions),
                    decision_config=self.decision_config,
                )
                scores.extend(score.float().reshape(-1).cpu() for score in per_question)
        return torch.cat(scores)

    def cache_stats(self) -> dict[str, dict[str, int]]:
        priors = {} if self.priors is None else {"content_free": self.priors.cache.stats()}
        return {"prefix_kv": self.cache.stats(), **priors}
