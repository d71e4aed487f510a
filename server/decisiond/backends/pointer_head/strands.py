"""strands-decider checkpoints: the config, the head file, the base revision and ``force_bos``.

Source: PyPI ``strands-decider`` 0.2.0, ``strands_decider/modeling.py`` (``StrandsDeciderModel.load``,
``config_path``, ``base_revision``, ``load_head_state``, ``ensure_bos``). What cannot be served the
way upstream serves it is refused with a :class:`~decisiond.manifest.ManifestError` naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import PreTrainedTokenizerBase

from ...manifest import ManifestError
from .families import PointerHeadOptions
from .loading import Plan, load_trunk, lora_trunk, read_json, refuse_head_type, resolve_base, temperatures


def ensure_bos(tokenizer: PreTrainedTokenizerBase, *, source: str) -> None:
    """strands-decider's ``force_bos``: make the tokenizer put its BOS first whenever special tokens
    are added (``add_special_tokens=False`` stays BOS-free). A tokenizer that already does is left
    alone. Source: ``strands_decider/modeling.py`` ``ensure_bos``.

    Raises:
        ManifestError: force_bos is set but the tokenizer has no BOS token.
    """
    from tokenizers import processors

    bos, bos_id = tokenizer.bos_token, tokenizer.bos_token_id
    if bos is None or bos_id is None:
        return  # upstream leaves such a tokenizer as it is
    if tokenizer("x")["input_ids"][:1] == [bos_id]:
        return
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, bos_id)]
    )
    if tokenizer("x")["input_ids"][:1] != [bos_id]:
        raise ManifestError(f"{source}: force_bos is set, but the tokenizer still adds no BOS token")


#: strands-decider's config file, and the name checkpoints saved before the rename use.
STRANDS_CONFIGS = ("strands_decider_config.json", "hobson_config.json")


def _strands_head(folder: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """strands-decider's head: ``head.safetensors`` (an export) or ``slot_head.pt`` (``save_pretrained``).

    Raises:
        ManifestError: both files, or neither.
    """
    exported, saved = folder / "head.safetensors", folder / "slot_head.pt"
    if exported.is_file() and saved.is_file():
        raise ManifestError(
            f"{folder} holds both head.safetensors and slot_head.pt, and nothing tells which is right; keep one"
        )
    if exported.is_file():
        return load_file(str(exported)), exported
    if saved.is_file():
        try:
            state = torch.load(saved, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError...
            raise ManifestError(
                f"{saved} could not be read with torch.load(weights_only=True) ({type(exc).__name__}); decisiond "
                "never unpickles code: re-save the head as a state dict of tensors"
            ) from exc
        if not isinstance(state, dict):
            raise ManifestError(f"{saved} should hold the head's state dict (norm, q, k tensors)")
        return state, saved
    raise ManifestError(f"{folder} holds neither head.safetensors nor slot_head.pt; copy the whole checkpoint")


def _strands_revision(folder: Path, meta: dict[str, Any]) -> Any:
    """The base revision: the config's, else the one ``provenance.json`` records for the same base."""
    provenance = folder / "provenance.json"
    if meta.get("base_revision") or not provenance.is_file():
        return meta.get("base_revision")
    record = read_json(provenance)
    return record.get("base_model_revision") if record.get("base_model") == meta.get("base_model") else None


def plan_strands(folder: Path, options: PointerHeadOptions) -> Plan:
    """As ``strands_decider/modeling.py`` ``StrandsDeciderModel.load`` reads a checkpoint.

    The config is ``strands_decider_config.json`` or the legacy ``hobson_config.json``; an absent
    ``head_type`` means upstream's default, the slot head, which is refused; ``use_lora`` (default
    true) needs ``lora/``; the head is ``head.safetensors`` or ``slot_head.pt``.
    """
    source = next((folder / n for n in STRANDS_CONFIGS if (folder / n).is_file()), folder / STRANDS_CONFIGS[0])
    meta = read_json(source)
    head_type = meta.get("head_type", "slot")
    if head_type == "slot":
        raise ManifestError(
            f'{source}: head_type "slot" (the v1-v6 fixed-slot readout, upstream\'s default when the key is absent) '
            'is not implemented by decisiond; expected head_type "pointer"'
        )
    refuse_head_type(head_type, str(source))
    if meta.get("full_weight_targets"):
        raise ManifestError(f"{source}: full_weight_targets is set; strands-decider 0.2.0 loads LoRA checkpoints only")
    base_id = options.base or meta.get("base_model")
    if not base_id:
        raise ManifestError(f"{source} names no `base_model`; set `base` in a manifest")
    base = resolve_base(
        str(base_id), options.base_revision or _strands_revision(folder, meta), checkpoint=folder, source=str(source)
    )
    if meta.get("use_lora", True):
        if not (folder / "lora").is_dir():
            raise ManifestError(f"{folder / 'lora'}: missing, but {source.name} sets use_lora; copy the adapter")
        trunk = lora_trunk(base, folder / "lora", source=str(source))
    else:
        trunk = load_trunk(base)
    head_tensors, head_file = _strands_head(folder)
    limits = {"max_prompt_tokens": int(meta.get("max_length") or 3072)}
    return Plan(
        trunk=trunk,
        tokenizer_path=folder,
        head_tensors=head_tensors,
        head_source=str(head_file),
        head_dim=options.head_dim or int(meta.get("pointer_dim", 256)),
        norm=True,
        temperatures=temperatures(meta.get("temperature"), meta.get("temperature_by_kind"), options, str(source)),
        limits=limits,
        force_bos=bool(meta.get("force_bos", False)),
    )
