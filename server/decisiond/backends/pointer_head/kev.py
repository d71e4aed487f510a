"""Kev checkpoints, OpenJev (wev) training runs and OpenJev exports: what their metadata says.

Sources: Kev's ``kev/checkpoint.py`` (``head.pt``, ``weights: "full"``, ``option_isolation``,
``special_embeddings``) and PyPI ``wev-ai`` 0.2.2 (``wev/model.py`` ``load_run`` and
``truncate_layers``, ``wev/inference.py`` ``_load_exported``, ``wev/export.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from safetensors.torch import load_file

from ...manifest import ManifestError
from .families import PointerHeadOptions
from .loading import (
    Plan,
    config_of,
    is_hybrid,
    load_trunk,
    lora_trunk,
    read_head_pt,
    read_json,
    refuse_head_type,
    refuse_option_isolation,
    resolve_base,
    temperatures,
    truncate_layers,
)


def _family_limits(meta: dict[str, Any]) -> dict[str, int]:
    """OpenJev's ``max_state`` / ``max_branch`` (``wev.json`` or a run's ``head.pt``) as token limits."""
    limits = {}
    if meta.get("max_state"):
        limits["max_state_tokens"] = int(meta["max_state"])
    if meta.get("max_branch"):
        limits["max_branch_tokens"] = int(meta["max_branch"])
    return limits


def plan_kev(folder: Path, options: PointerHeadOptions) -> Plan:
    """Kev checkpoints and OpenJev training runs: ``head.pt`` + a LoRA adapter (or Kev's full weights).

    As ``kev/checkpoint.py`` and ``wev/model.py`` ``load_run`` do: the trunk is truncated to
    ``keep_layers`` (runs) before the adapter applies; ``head_type`` must be ``pointer``; a boolean
    ``special_embeddings`` only says the adapter may carry trained delimiter rows, which it then
    holds itself (``trainable_token_indices``).
    """
    source = folder / "head.pt"
    meta = read_head_pt(source)
    refuse_head_type(meta.get("head_type"), str(source))
    full = meta.get("weights") == "full"
    base_id = options.base or meta.get("base")
    revision = options.base_revision or meta.get("base_revision")
    if not base_id:
        raise ManifestError(f"{source} names no `base`; set `base` in a manifest to the base's folder or Hub id")
    base = resolve_base(str(base_id), revision, checkpoint=folder, source=str(source))
    if meta.get("option_isolation") and is_hybrid(config_of(folder if full else base)):
        refuse_option_isolation(str(source))
    if full:
        trunk = load_trunk(folder)
        truncate_layers(trunk, meta.get("keep_layers"), source=str(source))
    else:
        lora = meta.get("lora")
        adapter = folder / lora if isinstance(lora, str) and (folder / lora).is_dir() else folder
        if not (adapter / "adapter_config.json").is_file() and (folder / "lora").is_dir():
            adapter = folder / "lora"
        trunk = lora_trunk(base, adapter, keep_layers=meta.get("keep_layers"), source=str(source))
    special = meta.get("special_embeddings")
    return Plan(
        trunk=trunk,
        tokenizer_path=base,
        head_tensors=meta["head"],
        head_source=str(source),
        head_dim=options.head_dim or int(meta.get("head_dim", 256)),
        norm=False,
        temperatures=temperatures(meta.get("temperature"), None, options, str(source)),
        option_isolation=bool(meta.get("option_isolation", False)),
        special_embeddings=special if isinstance(special, dict) else None,
        limits=_family_limits(meta),
    )


def plan_wev(folder: Path, options: PointerHeadOptions) -> Plan:
    source = folder / "wev.json" if (folder / "wev.json").is_file() else folder / "webdecide.json"
    meta = read_json(source)
    if meta.get("format", "wev") not in ("wev", "webdecide"):
        raise ManifestError(f'{source}: format {meta.get("format")!r}, expected "wev"; is this an OpenJev export?')
    refuse_head_type(meta.get("head_type"), str(source))
    trunk = load_trunk(folder, merged=True)  # an export is saved already truncated to keep_layers
    limits = _family_limits(meta)
    return Plan(
        trunk=trunk,
        tokenizer_path=folder,
        head_tensors=load_file(str(folder / "head.safetensors")),
        head_source=str(folder / "head.safetensors"),
        head_dim=options.head_dim or int(meta.get("head_dim", 256)),
        norm=False,
        temperatures=temperatures(meta.get("temperature"), None, options, str(source)),
        limits=limits,
    )
