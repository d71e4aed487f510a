"""Zero-shot object detectors (OWL-ViT, OWLv2): every question type about an image, ``box`` included.

Any checkpoint that ``AutoModelForZeroShotObjectDetection`` loads with OWL-ViT's heads
(``image_embedder``, ``box_predictor``, ``class_predictor``: OWL-ViT and OWLv2), its tokenizer
and its image processor. The vision tower proposes one candidate box per patch (576 for OWL-ViT
B/32, 3,600 for OWLv2 B/16) and the class head gives each candidate a logit for each text query.

What each question asks the detector:

* **box**: the instructions are the query (asset placeholders taken out). The candidates of the
  question's image (:mod:`decisiond.box_images`) and their logits go to
  :func:`~decisiond.readout.read_boxes`: softmax over candidates with the manifest's temperature,
  edges the expectation, confidence σ(best logit / T).
* **noul** ("is there a dog?"): the true side's query is its description, or else the
  instructions; its logit is the best candidate's logit over every image of the request. The
  false side is its own query's best logit when described, else 0, so that
  ``noul = σ(best logit / T)``: the best candidate's detection probability, as OWL-ViT's
  post-processing scores a box (and the box answer's confidence for the same text).
* **choice** and **score**: each option or level text is a query (template ``{option}`` by
  default: the key, ``key: description``, or the level's text), its logit the best candidate's over
  every image; the readout's softmax over options follows.

Boxes come out in the padded square that OWLv2's processor makes (it pads bottom and right to a
square before resizing); they are scaled back so that edges refer to the image as sent (already
turned upright by its EXIF orientation in :mod:`decisiond.media`), and a candidate whose centre
lies in the padding is no candidate of the image (left out of every question about it). Query embeddings are cached.
Grounding DINO fuses text into the vision encoder, so its candidates cannot be scored from cached
query embeddings: it is refused at load.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from transformers import AutoImageProcessor, AutoModelForZeroShotObjectDetection, AutoTokenizer, PreTrainedModel

from ..cache import TensorLRU
from ..config import Settings
from ..errors import ApiUsageError
from ..manifest import Manifest
from ..readout import BoxCandidates
from ..render import Question, SlotTemplates, to_text
from .base import Backend, Logits, Prepared, TokenLimits, Work
from .clip import encode_texts, special_tokens
from .windows import split_windows

#: The heads the backend calls (OWL-ViT and OWLv2 have them).
HEADS = ("image_embedder", "box_predictor", "class_predictor")


@dataclass(frozen=True)
class DetectorFeatures:
    """One request after the CPU stage.

    Attributes:
        pixel_values (torch.Tensor): ``[I, 3, S, S]`` float32, the request's images processed.
        scale (torch.Tensor): ``[I, 2]`` factors (x, y) from the processed square to the image.
        queries (list[str]): the request's distinct query texts.
        windows (dict[str, list[list[int]]]): each query's token windows.
        slots (list[int | None]): per slot of the non-box questions, its query's index in
            ``queries`` (None: the constant logit 0 of an undescribed noul false side).
        boxes (list[tuple[int, int]]): per box question, (image index, query index).
    """

    pixel_values: torch.Tensor
    scale: torch.Tensor
    queries: list[str]
    windows: dict[str, list[list[int]]]
    slots: list[int | None]
    boxes: list[tuple[int, int]]


def _index(values: list[int], device: torch.device) -> torch.Tensor:
    """An int64 index tensor (also when empty: a request may ask no box, or only boxes)."""
    return torch.tensor(values, dtype=torch.int64, device=device)


def _described(value: Any) -> bool:
    return value is not None and bool(to_text(value).strip())


class DetectorBackend(Backend):
    """OWL-ViT / OWLv2 candidates and per-query logits.

    Args:
        model (PreTrainedModel): an ``OwlViTForObjectDetection`` or ``Owlv2ForObjectDetection``.
        tokenizer (Any): its tokenizer.
        image_processor (Any): its image processor (PIL images → ``pixel_values``).
        window (int, optional): query tokens per window, capped at the text positions (16).
        overlap (int, optional): tokens shared by consecutive windows. Defaults to 4.
        templates (SlotTemplates, optional): choice and score query texts. Defaults to ``{option}``.
        cache_entries (int, optional): query-embedding cache entries. Defaults to 50,000.
        cache_bytes (int, optional): query-embedding cache bytes. Defaults to 128 MiB.
        **kwargs: device, dtype, temperature, limits, modalities for :class:`Backend`.
    """

    family = "detector"
    question_types: ClassVar[frozenset[str]] = frozenset({"noul", "choice", "score", "box"})

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: Any,
        image_processor: Any,
        *,
        window: int = 16,
        overlap: int = 4,
        templates: SlotTemplates | None = None,
        cache_entries: int = 50_000,
        cache_bytes: int = 128 * 1024 * 1024,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("modalities", frozenset({"text", "image"}))
        super().__init__(**kwargs)
        missing = [head for head in HEADS if not hasattr(model, head)]
        if missing:
            raise ValueError(
                f"{type(model).__name__} lacks {', '.join(missing)}; the detector backend reads OWL-ViT and "
                "OWLv2 checkpoints (Grounding DINO fuses text into its vision encoder and is not supported)"
            )
        self.model = model.to(self.device, self.dtype).eval()
        self.encoder = getattr(model, model.base_model_prefix)
        self.window = min(window, model.config.text_config.max_position_embeddings)
        if overlap >= (self.window - 2) // 2:
            raise ValueError(f"overlap {overlap} must be under half the query window {self.window}")
        self.overlap = overlap
        self.tokenizer = tokenizer
        self.tokenizer.model_max_length = 1 << 62  # windows are cut here
        self.image_processor = image_processor
        self.pads_to_square = bool(getattr(image_processor, "do_pad", False))
        self.templates = templates or SlotTemplates(choice="{option}", score="{option}")
        self.cache: TensorLRU[str] = TensorLRU(cache_entries, cache_bytes)
        self._prefix, self._suffix = special_tokens(tokenizer)
        self._pad = tokenizer.pad_token_id or 0
        self._tokenizer_lock = threading.Lock()
        vision = model.config.vision_config
        self.candidates = (vision.image_size // vision.patch_size) ** 2
        self.image_tokens = self.candidates + 1

    @classmethod
    def from_manifest(
        cls, manifest: Manifest, *, device: torch.device, dtype: torch.dtype, limits: TokenLimits, settings: Settings
    ) -> DetectorBackend:
        """Load the detector, tokenizer and image processor from the manifest's weights (offline).

        Raises:
            ValueError: ``image`` is not among the manifest's modalities, unknown keys, or a
                checkpoint without OWL-ViT's heads.
        """
        if "image" not in manifest.modalities:
            raise ValueError(f'{manifest.name}: a detector reads images; add "image" to modalities')
        if manifest.backend_options:
            raise ValueError(f"{manifest.name}: unknown detector keys {sorted(manifest.backend_options)}")
        path = manifest.weights_path()
        model, tokenizer, processor = load_detector(path)
        return cls(
            model,
            tokenizer,
            processor,
            window=manifest.window,
            overlap=manifest.overlap,
            templates=SlotTemplates(**{"choice": "{option}", "score": "{option}", **manifest.templates}),
            device=device,
            dtype=dtype,
            temperature=manifest.temperature,
            limits=limits,
            modalities=frozenset(manifest.modalities),
            cache_entries=settings.cache_entries,
            cache_bytes=settings.cache_bytes,
        )

    # ---------------------------------------------------------------- CPU stage

    def _query(self, value: Any, names: Sequence[str | None]) -> str:
        """The text a query reads: placeholders of the request's images taken out, spaces squeezed."""
        text = to_text(value)
        for name in names:
            if name:
                text = text.replace(name, " ")
        return " ".join(text.split())

    def _slot_queries(self, question: Question, names: Sequence[str | None]) -> list[str | None]:
        """The query of each slot of a noul, choice or score question (None: logit 0)."""
        if question.kind != "noul":
            return [self._query(t, names) for t in self.templates.slot_texts(question)]
        false, true = (option.description for option in question.options)
        return [
            self._query(false, names) if _described(false) else None,
            self._query(true if _described(true) else question.instructions, names),
        ]

    def prepare(self, work: Work) -> Prepared:
        """Process the images in one call of the checkpoint's processor; tokenise every distinct query.

        Raises:
            ApiUsageError: the request carries no image, or a box question names an image it lacks.
            MaxTokensExceeded: over a token budget.
        """
        if not work.images:
            raise ApiUsageError("this model answers about images; the request carries none (send `images` or `assets`)")
        pixel_values = self.image_processor(images=list(work.images), return_tensors="pt")["pixel_values"]
        sizes = torch.tensor([image.size for image in work.images], dtype=torch.float32)  # [I, 2] (width, height)
        side = sizes.max(dim=1, keepdim=True).values  # the padded square's side
        scale = side / sizes if self.pads_to_square else torch.ones_like(sizes)
        queries: dict[str, int] = {}
        slots: list[int | None] = []
        boxes: list[tuple[int, int]] = []
        names = work.image_names
        for question in work.questions:
            if question.kind == "box":
                image = question.image or 0
                if not 0 <= image < len(work.images):
                    raise ApiUsageError(f"a box question is about image {image}; there are {len(work.images)}")
                text = self._query(question.instructions, names)
                boxes.append((image, queries.setdefault(text, len(queries))))
                continue
            for text in self._slot_queries(question, names):
                slots.append(None if text is None else queries.setdefault(text, len(queries)))
        with self._tokenizer_lock:
            encoded = self.tokenizer(list(queries), add_special_tokens=False)["input_ids"]
        specials = len(self._prefix) + len(self._suffix)
        windows = {
            text: [
                self._prefix + w + self._suffix
                for w in split_windows(ids, window=self.window, overlap=self.overlap, specials=specials)
            ]
            for text, ids in zip(queries, encoded, strict=True)
        }
        text_tokens = sum(len(w) for ws in windows.values() for w in ws)
        image_tokens = self.image_tokens * len(work.images)
        self.limits.check(0, image_tokens + text_tokens)
        features = DetectorFeatures(pixel_values.float(), scale, list(queries), windows, slots, boxes)
        return Prepared(
            work, input_tokens=image_tokens + text_tokens, cost=image_tokens + text_tokens, features=features
        )

    # ---------------------------------------------------------------- model stage

    def _query_table(self, features: Sequence[DetectorFeatures]) -> tuple[torch.Tensor, dict[str, int]]:
        """``[U, d]`` embeddings of every distinct query of the batch (cached), and each text's row."""
        windows_of = {text: ws for f in features for text, ws in f.windows.items()}
        found = {text: self.cache.get(text) for text in windows_of}
        missing = [text for text, vector in found.items() if vector is None]
        if missing:
            encoded = encode_texts(
                self.encoder.get_text_features,
                [windows_of[t] for t in missing],
                pad_id=self._pad,
                device=self.device,
                max_tokens=8192,
            )
            for text, vector in zip(missing, encoded, strict=True):
                found[text] = vector
                self.cache.put(text, vector)
        index = {text: i for i, text in enumerate(found)}
        return torch.stack([v.to(self.device) for v in found.values()]), index  # type: ignore[union-attr]

    @torch.inference_mode()
    def forward(self, batch: Sequence[Prepared]) -> Logits:
        """Every image of the batch in one vision pass; each image scored against its request's queries.

        Returns:
            Logits: ``slots`` ``[N]`` (the best candidate's logit per slot query, over the request's
            images; 0 for an undescribed noul false side) and ``boxes`` (per box question, every
            candidate of its image with its logit and ``top, left, bottom, right`` edges).
        """
        features: list[DetectorFeatures] = [p.features for p in batch]
        pixels = torch.cat([f.pixel_values for f in features]).to(self.device, self.dtype)  # [I, 3, S, S]
        feature_map = self.model.image_embedder(pixel_values=pixels)[0]  # [I, h, w, d]
        image_feats = feature_map.reshape(feature_map.shape[0], -1, feature_map.shape[-1])  # [I, P, d]
        cxcywh = self.model.box_predictor(image_feats, feature_map).float()  # [I, P, 4] in the processed square
        scale = torch.cat([f.scale for f in features]).to(cxcywh.device)  # [I, 2]
        half = cxcywh[..., 2:] / 2
        x0y0, x1y1 = (cxcywh[..., :2] - half) * scale[:, None], (cxcywh[..., :2] + half) * scale[:, None]
        edges = torch.stack(
            [x0y0[..., 1], x0y0[..., 0], x1y1[..., 1], x1y1[..., 0]], dim=-1
        )  # top, left, bottom, right
        inside = ((cxcywh[..., :2] * scale[:, None]) <= 1.0).all(dim=-1)  # [I, P]: centred on the image, not the pad
        inside |= ~inside.any(dim=1, keepdim=True)  # an image with no such candidate keeps them all

        table, row = self._query_table(features)
        images = [len(f.pixel_values) for f in features]
        width = max(len(f.queries) for f in features)
        rows = torch.zeros(len(features), width, dtype=torch.int64)  # [R, Umax] query rows per request
        mask = torch.zeros(len(features), width, dtype=torch.bool)
        for r, f in enumerate(features):
            rows[r, : len(f.queries)] = torch.tensor([row[t] for t in f.queries])
            mask[r, : len(f.queries)] = True
        owner = torch.repeat_interleave(torch.arange(len(features)), torch.tensor(images))  # [I]
        queries = table[rows[owner].to(table.device)].to(self.dtype)  # [I, Umax, d]
        logits = self.model.class_predictor(image_feats, queries, mask[owner].to(table.device))[0].float()  # [I,P,U]
        logits = logits.masked_fill(~inside.unsqueeze(2), float("-inf"))

        best = logits.max(dim=1).values  # [I, Umax]: the best candidate per image and query
        over = owner.to(best.device).unsqueeze(1).expand_as(best)
        best = torch.full((len(features), width), float("-inf"), device=best.device).scatter_reduce_(
            0, over, best, "amax"
        )  # [R, Umax]: over the request's images
        first = torch.tensor([0, *images]).cumsum(0)[:-1].tolist()  # each request's first image
        slot_r = _index([r for r, f in enumerate(features) for _ in f.slots], best.device)
        slot_u = _index([0 if u is None else u for f in features for u in f.slots], best.device)
        known = torch.tensor([u is not None for f in features for u in f.slots], dtype=torch.bool, device=best.device)
        slots = torch.where(known, best[slot_r, slot_u], torch.zeros((), device=best.device))  # [N]

        box_i = _index([first[r] + i for r, f in enumerate(features) for i, _ in f.boxes], logits.device)
        box_u = _index([u for f in features for _, u in f.boxes], logits.device)
        kept = inside[box_i]  # [Qb, P]: each box question's candidates, a ragged selection (its sizes sync once)
        return Logits(
            slots=slots.cpu(),
            boxes=BoxCandidates(
                logits=logits[box_i, :, box_u][kept], boxes=edges[box_i][kept], sizes=kept.sum(dim=1).tolist()
            ),
        )

    def cache_stats(self) -> dict[str, dict[str, int]]:
        return {"query_embeddings": self.cache.stats()}


def load_detector(path: Path) -> tuple[PreTrainedModel, Any, Any]:
    """A zero-shot detector, its tokenizer and image processor from a local folder, offline."""
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    processor = AutoImageProcessor.from_pretrained(path, local_files_only=True)
    model = AutoModelForZeroShotObjectDetection.from_pretrained(path, local_files_only=True)
    return model, tokenizer, processor
