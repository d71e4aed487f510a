"""Tiny random Kev, OpenJev (wev) and strands-decider checkpoints, in each family's own format.

Used by the test suite and ``scripts/gpu_check.py``; everything is built offline from configs:
a word-level tokenizer carrying the five delimiter tokens, a tiny Qwen3 (attention-only) or
Qwen3.5 (hybrid: Gated DeltaNet + attention) trunk, a PEFT LoRA with random non-zero weights,
and a random pointer head.

Example:
    >>> folder = build_kev_checkpoint(tmp_path / "kev")          # doctest: +SKIP
    >>> manifest = checkpoint_manifest(folder)                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from .upstream import HIDDEN, base_config

#: Delimiters of Kev and OpenJev, in role order state, question, option start, option end, decide.
DELIMITERS = ("<|fim_prefix|>", "<|fim_middle|>", "<|box_start|>", "<|box_end|>", "<|fim_suffix|>")
SPECIALS = ("[PAD]", "[UNK]", *DELIMITERS)

#: Words of the tiny vocabulary (after the specials, in this order). Tests name words, never ids.
WORDS = (
    tuple(
        """
    a an the and or not is are was be to of in on for with by at it this that yes no true false
    ticket customer charged twice order refund refunds duplicate today now deadline urgent calm angry very
    concerned but civil frustrated billing technical other payments invoicing none above team handle which
    should does how plan pro seats owner name ada flags status open closed priority high low
    state question type noul choice score answer decide whether statement fits best one option place scale
    choose pick level levels True False Decide Choose Place null
    """.split()
    )
    + tuple(str(i) for i in range(21))
    + tuple(string.punctuation)
    + ("—", "¦", "fim_prefix", "fim_suffix")
)

HEAD_DIM = 16


def vocabulary() -> dict[str, int]:
    """Token → id of the tiny tokenizer: the specials, then :data:`WORDS` (first occurrence)."""
    vocab: dict[str, int] = {}
    for token in (*SPECIALS, *WORDS):
        vocab.setdefault(token, len(vocab))
    return vocab


def build_tokenizer(folder: Path) -> PreTrainedTokenizerFast:
    """A word-level tokenizer (whitespace split, punctuation isolated) with the five delimiters as
    added special tokens, saved to ``folder``."""
    model = models.WordLevel(vocab=vocabulary(), unk_token="[UNK]")
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="isolated")]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", additional_special_tokens=list(DELIMITERS)
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    return tokenizer


def _config(hybrid: bool):  # type: ignore[no-untyped-def]
    return base_config("qwen3_5" if hybrid else "qwen3", len(vocabulary()), max_positions=1024)


def build_base(folder: Path, *, hybrid: bool = False, seed: int = 0) -> Path:
    """A tiny random causal LM (Qwen3, or Qwen3.5 when ``hybrid``) and its tokenizer in ``folder``."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_config(hybrid))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    build_tokenizer(folder)
    return folder


def _lora(folder: Path, base: Path, *, hybrid: bool, seed: int) -> None:
    """A rank-4 PEFT LoRA with random (non-zero) A and B over the base's decoder, saved to ``folder``."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed + 1)
    decoder = AutoModelForCausalLM.from_pretrained(base, local_files_only=True).model
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    if hybrid:
        targets += ["in_proj_qkv", "in_proj_z", "out_proj"]
    config = LoraConfig(r=4, lora_alpha=8, target_modules=targets, init_lora_weights=False)
    peft_model = get_peft_model(decoder, config)
    peft_model.save_pretrained(folder)


def random_head(*, norm: bool, seed: int, hidden: int = HIDDEN, head_dim: int = HEAD_DIM) -> dict[str, torch.Tensor]:
    """Random head tensors with Kev's names (and strands-decider's LayerNorm when ``norm``)."""
    gen = torch.Generator().manual_seed(seed + 2)
    scale = 0.3  # keeps logits of a few units, so that probabilities are far from one-hot
    tensors = {
        "q.weight": scale * torch.randn(head_dim, hidden, generator=gen),
        "q.bias": scale * torch.randn(head_dim, generator=gen),
        "k.weight": scale * torch.randn(head_dim, hidden, generator=gen),
        "k.bias": scale * torch.randn(head_dim, generator=gen),
    }
    if norm:
        tensors["norm.weight"] = 1.0 + 0.1 * torch.randn(hidden, generator=gen)
        tensors["norm.bias"] = 0.1 * torch.randn(hidden, generator=gen)
    return tensors


def build_kev_checkpoint(folder: Path, *, hybrid: bool = False, seed: int = 0, temperature: float = 2.35) -> Path:
    """A Kev LoRA checkpoint: ``adapter_config.json`` + ``adapter_model.safetensors`` + ``head.pt``;
    the base (``folder/base``) is named in ``head.pt`` by its absolute path.

    Returns:
        Path: ``folder``.
    """
    folder = folder.resolve()
    base = build_base(folder / "base", hybrid=hybrid, seed=seed)
    _lora(folder, base, hybrid=hybrid, seed=seed)
    torch.save(
        {
            "base": str(base),
            "base_revision": None,
            "head": random_head(norm=False, seed=seed),
            "head_dim": HEAD_DIM,
            "temperature": temperature,
            "weights_dtype": "fp32",
            "option_isolation": False,
        },
        folder / "head.pt",
    )
    return folder


def build_wev_checkpoint(folder: Path, *, seed: int = 0, temperature: float = 1.7) -> Path:
    """An OpenJev export: ``wev.json``, a merged trunk (``config.json`` + ``model.safetensors``,
    loaded with ``AutoModel``), ``head.safetensors`` and the tokenizer files.

    Returns:
        Path: ``folder``.
    """
    from transformers import AutoModel

    folder = folder.resolve()
    torch.manual_seed(seed)
    AutoModel.from_config(_config(False)).save_pretrained(folder)
    build_tokenizer(folder)
    save_file(random_head(norm=False, seed=seed), str(folder / "head.safetensors"))
    meta = {
        "format": "wev",
        "base": "Qwen/Qwen3-1.7B",
        "head_type": "pointer",
        "head_dim": HEAD_DIM,
        "keep_layers": 2,
        "max_state": 512,
        "max_branch": 256,
        "temperature": temperature,
    }
    (folder / "wev.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return folder


def build_strands_checkpoint(folder: Path, *, hybrid: bool = False, seed: int = 0) -> Path:
    """A strands-decider checkpoint: ``strands_decider_config.json``, ``lora/`` (PEFT),
    ``head.safetensors`` (LayerNorm + q/k) and the tokenizer files; the base in ``folder/base``.

    Returns:
        Path: ``folder``.
    """
    folder = folder.resolve()
    base = build_base(folder / "base", hybrid=hybrid, seed=seed)
    _lora(folder / "lora", base, hybrid=hybrid, seed=seed)
    build_tokenizer(folder)
    save_file(random_head(norm=True, seed=seed), str(folder / "head.safetensors"))
    meta = {
        "base_model": str(base),
        "base_revision": None,
        "head_type": "pointer",
        "pointer_dim": HEAD_DIM,
        "temperature": 1.0,
        "temperature_by_kind": {"noul": 1.2, "choice": 0.9, "score": 1.1},
        "max_length": 3072,
    }
    (folder / "strands_decider_config.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return folder
