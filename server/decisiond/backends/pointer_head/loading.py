"""Loading a Kev, OpenJev (wev) or strands-decider checkpoint, offline, with its refusals.

spec/pointer-head.md: the trunk is the base's causal LM without its vocabulary head (``.model``)
from a folder or the local Hugging Face cache at the pinned revision, or the merged or full
weights inside the checkpoint; a PEFT LoRA is merged in float32 and the trunk cast once to the
serving dtype; the head stays float32. ``head.pt`` is read with ``torch.load(weights_only=True)``
only. Everything that cannot be served faithfully is refused at start with a
:class:`~decisiond.manifest.ManifestError` naming the file, what was expected and what to do.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from ...manifest import ManifestError, _resolve_hub
from .families import Family, PointerHeadOptions
from .head import PointerHead

log = logging.getLogger("decisiond.pointer_head")

_ATTENTION_LAYERS = {"full_attention", "sliding_attention", "attention"}


@dataclass
class Checkpoint:
    """A loaded checkpoint, ready for the backend.

    Attributes:
        trunk (torch.nn.Module): the text decoder (final norm included), in the serving dtype.
        tokenizer (PreTrainedTokenizerBase): the tokenizer the family prescribes.
        head (PointerHead): float32.
        temperatures (dict[str, float]): per question type (noul, choice, score).
        hybrid (bool): the trunk has recurrent (linear-attention) layers.
        sliding (bool): the trunk has sliding-window attention layers.
        option_isolation (bool): Kev's option isolation (options side by side, per-option mask).
        limits (dict[str, int]): family token limits (max_state_tokens, max_branch_tokens,
            max_prompt_tokens) the checkpoint declares.
    """

    trunk: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    head: PointerHead
    temperatures: dict[str, float]
    hybrid: bool
    limits: dict[str, int] = field(default_factory=dict)
    sliding: bool = False
    option_isolation: bool = False


def is_hybrid(config: Any) -> bool:
    """Whether a config declares recurrent layers (Qwen3.5's Gated DeltaNet) beside attention."""
    layer_types = getattr(config, "layer_types", None) or []
    return any(t not in _ATTENTION_LAYERS for t in layer_types)


def has_sliding_window(config: Any) -> bool:
    """Whether a config declares sliding-window attention layers (Gemma-style, or Qwen's
    ``use_sliding_window``). A custom 4-D mask replaces the sliding-window mask of every layer, so
    such a trunk must run in the row or prefix form."""
    if "sliding_attention" in (getattr(config, "layer_types", None) or []):
        return True
    return bool(getattr(config, "use_sliding_window", False) and getattr(config, "sliding_window", None))


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``.

    Raises:
        ManifestError: the file is not a JSON object.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path} is not readable JSON ({exc}); re-export the checkpoint") from exc
    if not isinstance(data, dict):
        raise ManifestError(f"{path} should hold a JSON object; re-export the checkpoint")
    return data


def read_head_pt(path: Path) -> dict[str, Any]:
    """Kev's ``head.pt``, read with ``torch.load(weights_only=True)`` only (no pickled code).

    Raises:
        ManifestError: the file is not a plain dict with a ``head`` of tensors.
    """
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError...
        raise ManifestError(
            f"{path} could not be read with torch.load(weights_only=True) ({type(exc).__name__}); decisiond never "
            "unpickles code: re-save the head as a plain dict of tensors and numbers"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("head"), dict):
        raise ManifestError(
            f"{path} should be a dict with a `head` dict of tensors (q.weight, q.bias, k.weight, k.bias)"
        )
    return data


def resolve_base(base: str, revision: str | None, *, checkpoint: Path, source: str) -> Path:
    """The base's local folder: a path (absolute or inside the checkpoint) or the HF cache.

    Raises:
        ManifestError: the base is neither a folder here nor in the local cache at ``revision``.
    """
    for candidate in (checkpoint / Path(base).expanduser(), Path(base).expanduser()):
        if candidate.is_dir():
            return candidate.resolve()
    try:
        return _resolve_hub(base, revision)
    except ManifestError as exc:
        raise ManifestError(
            f"{source} names the base {base!r}" + (f" at revision {revision}" if revision else "") + ", which is "
            f'neither a folder here nor in the local Hugging Face cache. {exc}; or set `base = "/path/to/base"` in '
            "a manifest"
        ) from exc
    except Exception as exc:  # an id the hub library rejects outright
        raise ManifestError(f"{source} names the base {base!r}, which is not a folder nor a Hugging Face id") from exc


def _decoder(model: torch.nn.Module) -> torch.nn.Module:
    """The text decoder inside a causal LM or a multimodal model."""
    inner = getattr(model, "model", model)
    return getattr(inner, "language_model", inner)


def load_trunk(path: Path, *, merged: bool = False) -> torch.nn.Module:
    """A float32 decoder from ``path``: ``AutoModelForCausalLM`` then ``.model``, or ``AutoModel``
    for a merged trunk without its vocabulary head (OpenJev exports)."""
    loader = AutoModel if merged else AutoModelForCausalLM
    model = loader.from_pretrained(path, dtype=torch.float32, local_files_only=True)
    return _decoder(model) if not merged else getattr(model, "language_model", model)


def check_adapter(adapter: Path) -> None:
    """Refuse adapters the merge cannot reproduce.

    Adapters with trained token rows (``trainable_token_indices``: Kev's ``special_embeddings``,
    the delimiter embeddings) are accepted: PEFT's merge writes those rows into the embedding
    table, which is what running the adapter unmerged computes.

    Raises:
        ManifestError: no adapter files, or whole modules trained (``modules_to_save``).
    """
    config_path = adapter / "adapter_config.json"
    if not config_path.is_file() or not (adapter / "adapter_model.safetensors").is_file():
        raise ManifestError(
            f"{adapter} should hold a PEFT adapter (adapter_config.json + adapter_model.safetensors); "
            "copy the whole checkpoint folder"
        )
    config = read_json(config_path)
    if config.get("modules_to_save"):
        raise ManifestError(
            f"{config_path}: the adapter trains whole modules (modules_to_save), which decisiond does not load; "
            "expected a LoRA adapter. Export the checkpoint with merged weights and serve that instead"
        )


def merge_adapter(model: torch.nn.Module, adapter: Path) -> torch.nn.Module:
    """Merge a PEFT LoRA into a float32 model and return the plain model.

    The adapter is applied to the decoder when its tensor names start at the decoder
    (``base_model.model.layers…``) and to the causal LM when they start one level up.

    Raises:
        ManifestError: adapter tensors that match no module of the base.
    """
    from peft import PeftConfig, get_peft_model, set_peft_model_state_dict

    check_adapter(adapter)
    state = load_file(str(adapter / "adapter_model.safetensors"))
    config = PeftConfig.from_pretrained(str(adapter))
    config.inference_mode = True
    peft_model = get_peft_model(model, config)  # type: ignore[arg-type]
    result = set_peft_model_state_dict(peft_model, state)
    if result.unexpected_keys:
        raise ManifestError(
            f"{adapter / 'adapter_model.safetensors'}: {len(result.unexpected_keys)} adapter tensors match no module "
            f"of the base (e.g. {result.unexpected_keys[0]}); the adapter belongs to another base"
        )
    merged: torch.nn.Module = peft_model.merge_and_unload()
    return merged


def _adapter_targets_decoder(adapter: Path) -> bool:
    from safetensors import safe_open

    with safe_open(str(adapter / "adapter_model.safetensors"), framework="pt") as handle:
        return not any(k.startswith("base_model.model.model.") for k in handle.keys())


def truncate_layers(trunk: torch.nn.Module, keep: Any, *, source: str) -> None:
    """Keep the first ``keep`` decoder layers (the final norm stays), as OpenJev's ``keep_layers``
    does (``wev/model.py`` ``truncate_layers``); None or 0 keeps them all.

    Raises:
        ManifestError: ``keep`` is not an integer in ``1..len(layers)``.
    """
    if keep in (None, 0):
        return
    layers = getattr(trunk, "layers", None)
    if layers is None or isinstance(keep, bool) or not isinstance(keep, int) or not 0 < keep <= len(layers):
        count = len(layers) if layers is not None else 0
        raise ManifestError(f"{source}: keep_layers is {keep!r}, expected an integer in 1..{count}")
    trunk.layers = torch.nn.ModuleList(list(layers)[:keep])
    trunk.config.num_hidden_layers = keep
    if getattr(trunk.config, "layer_types", None):
        trunk.config.layer_types = trunk.config.layer_types[:keep]


def lora_trunk(base_path: Path, adapter: Path, *, keep_layers: Any = None, source: str = "") -> torch.nn.Module:
    """The base's decoder (its first ``keep_layers`` layers when given) with the adapter merged in
    float32."""
    check_adapter(adapter)
    model = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32, local_files_only=True)
    truncate_layers(_decoder(model), keep_layers, source=source or str(adapter))
    if _adapter_targets_decoder(adapter):
        return merge_adapter(_decoder(model), adapter)
    return _decoder(merge_adapter(model, adapter))


def load_tokenizer(path: Path | str, *, source: str) -> PreTrainedTokenizerBase:
    """A tokenizer from a local folder.

    Raises:
        ManifestError: no tokenizer files there.
    """
    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{source}: no tokenizer in {path} ({exc}); copy the tokenizer files there") from exc


def temperatures(scalar: Any, by_kind: Any, options: PointerHeadOptions, source: str) -> dict[str, float]:
    base = options.temperature if options.temperature is not None else scalar
    if isinstance(base, dict):
        by_kind, base = base, None
    temps = {kind: float(base) if base is not None else 1.0 for kind in ("noul", "choice", "score")}
    for kind, value in (by_kind or {}).items():
        if kind in temps and options.temperature is None:
            temps[kind] = float(value)
    temps |= {k: float(v) for k, v in (options.temperature_by_kind or {}).items()}
    if any(not t > 0 for t in temps.values()):
        raise ManifestError(f"{source}: temperatures must be positive, got {temps}")
    return temps


def refuse_option_isolation(source: str) -> None:
    """Refuse ``option_isolation: true`` on a hybrid base: its recurrent layers cannot be masked
    (Kev refuses it too, ``kev/model.py`` ``DecisionModel``).

    Raises:
        ManifestError: always.
    """
    raise ManifestError(
        f"{source}: option_isolation is true, which a hybrid base (its recurrent layers cannot be masked) does not "
        "support; expected option_isolation false. Serve a checkpoint trained without option isolation"
    )


def refuse_head_type(head_type: Any, source: str) -> None:
    if head_type == "set":
        raise ManifestError(
            f'{source}: head_type "set" is the experimental set head, which decisiond does not implement; '
            'expected head_type "pointer". Export a pointer-head checkpoint to serve it'
        )
    if head_type not in (None, "pointer"):
        raise ManifestError(f'{source}: unknown head_type {head_type!r}; expected "pointer"')


@dataclass
class Plan:
    """What a family's metadata says, before anything heavy loads."""

    trunk: torch.nn.Module
    tokenizer_path: Path
    head_tensors: dict[str, torch.Tensor]
    head_source: str
    head_dim: int
    norm: bool
    temperatures: dict[str, float]
    option_isolation: bool = False
    special_embeddings: Any = None
    limits: dict[str, int] = field(default_factory=dict)
    force_bos: bool = False


def config_of(folder: Path) -> Any:
    return AutoConfig.from_pretrained(folder, local_files_only=True)


def _plan(folder: Path, family: Family, options: PointerHeadOptions) -> Plan:
    # the family modules build on this module's helpers, so they are imported here
    if family == "strands":
        from .strands import plan_strands

        return plan_strands(folder, options)
    from .kev import plan_kev, plan_wev

    return (plan_kev if family == "kev" else plan_wev)(folder, options)


def _write_special_embeddings(
    trunk: torch.nn.Module, rows: Any, tokenizer: PreTrainedTokenizerBase, source: str
) -> None:
    """Kev's optional ``special_embeddings``: token (string or id) → embedding row ``[d]``.

    Raises:
        ManifestError: not a mapping of known tokens to ``[d]`` tensors.
    """
    embed = trunk.get_input_embeddings()
    for token, row in dict(rows).items():
        token_id = token if isinstance(token, int) else tokenizer.convert_tokens_to_ids(token)
        if not isinstance(row, torch.Tensor) or tuple(row.shape) != (embed.weight.shape[1],) or token_id is None:
            raise ManifestError(
                f"{source}: special_embeddings should map known tokens to [{embed.weight.shape[1]}] tensors "
                f"(got {token!r}); re-save the head"
            )
        with torch.no_grad():
            embed.weight[int(token_id)] = row.to(embed.weight.dtype)


def load_checkpoint(folder: Path, family: Family, options: PointerHeadOptions, *, dtype: torch.dtype) -> Checkpoint:
    """Load a checkpoint folder of ``family`` in ``dtype`` (the head in float32).

    Args:
        folder (Path): the checkpoint.
        family (Family): kev, wev or strands.
        options (PointerHeadOptions): manifest overrides.
        dtype (torch.dtype): the serving dtype of the trunk.

    Raises:
        ManifestError: a missing base or file, a mismatched head, a "set" head, option
            isolation on a hybrid base, an adapter with trainable token rows.
    """
    plan = _plan(folder, family, options)
    tokenizer = load_tokenizer(options.tokenizer or plan.tokenizer_path, source=plan.head_source)
    config = plan.trunk.config
    hybrid = is_hybrid(config)
    if plan.option_isolation and hybrid:
        refuse_option_isolation(plan.head_source)
    if plan.force_bos:
        from .strands import ensure_bos

        ensure_bos(tokenizer, source=plan.head_source)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token  # as strands-decider does; padding is masked either way
    if plan.special_embeddings:
        _write_special_embeddings(plan.trunk, plan.special_embeddings, tokenizer, plan.head_source)
    head = PointerHead.from_tensors(
        plan.head_tensors,
        hidden=int(config.hidden_size),
        head_dim=plan.head_dim,
        norm=plan.norm,
        source=plan.head_source,
    )
    trunk = plan.trunk.to(dtype).eval()  # cast once, after the float32 merge
    limits = plan.limits | {
        k: v
        for k, v in (
            ("max_state_tokens", options.max_state_tokens),
            ("max_branch_tokens", options.max_branch_tokens),
            ("max_prompt_tokens", options.max_prompt_tokens),
        )
        if v
    }
    log.info(
        "%s checkpoint %s: %s base, head_dim %d",
        family,
        folder,
        "hybrid" if hybrid else "attention-only",
        plan.head_dim,
    )
    return Checkpoint(
        trunk,
        tokenizer,
        head,
        plan.temperatures,
        hybrid,
        limits,
        sliding=has_sliding_window(config),
        option_isolation=plan.option_isolation,
    )
