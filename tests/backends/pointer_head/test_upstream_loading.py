"""Checkpoint variants upstream loads: decisiond loads each as upstream does, or refuses it with a
message naming the file and the reason (never a raw exception)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from decisiond.backends.pointer_head.backend import PointerHeadBackend
from decisiond.manifest import ManifestError
from decisiond.testing.parity import REQUESTS, max_difference, probabilities

Load = Callable[..., PointerHeadBackend]


def copy(upstream_checkpoints: dict[str, Path], name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(upstream_checkpoints[name], target)
    return target


def rewrite_head_pt(folder: Path, **changes: Any) -> None:
    meta = torch.load(folder / "head.pt", weights_only=True)
    torch.save(meta | changes, folder / "head.pt")


def test_strands_slot_head_pt_and_the_legacy_config_name_load(
    upstream_checkpoints: dict[str, Path], pair: Callable[[str], Any], load: Load, tmp_path: Path
) -> None:
    """Regression: ``slot_head.pt`` (what ``save_pretrained`` writes) raised FileNotFoundError, and a
    checkpoint saved before the rename (``hobson_config.json``) was not recognised."""
    folder = copy(upstream_checkpoints, "strands_qwen3", tmp_path)
    assert (folder / "slot_head.pt").is_file() and not (folder / "head.safetensors").exists()
    (folder / "strands_decider_config.json").rename(folder / "hobson_config.json")
    _, scorer = pair("strands_qwen3")
    assert max_difference(probabilities(load(folder), REQUESTS[0]), scorer(REQUESTS[0])) <= 1e-4


def test_strands_with_both_head_files_is_refused(
    upstream_checkpoints: dict[str, Path], load: Load, tmp_path: Path
) -> None:
    folder = copy(upstream_checkpoints, "strands_qwen3", tmp_path)
    from safetensors.torch import save_file

    save_file(torch.load(folder / "slot_head.pt", weights_only=True), str(folder / "head.safetensors"))
    with pytest.raises(ManifestError, match=r"holds both head\.safetensors and slot_head\.pt"):
        load(folder)


def test_strands_slot_head_type_is_refused(upstream_checkpoints: dict[str, Path], load: Load, tmp_path: Path) -> None:
    """Upstream's default ``head_type`` is ``slot``: a config without the key is a slot-head model."""
    folder = copy(upstream_checkpoints, "strands_qwen3", tmp_path)
    config = json.loads((folder / "strands_decider_config.json").read_text())
    del config["head_type"]
    (folder / "strands_decider_config.json").write_text(json.dumps(config))
    with pytest.raises(ManifestError, match=r"strands_decider_config\.json: head_type \"slot\""):
        load(folder)


def test_strands_without_its_adapter_is_refused(
    upstream_checkpoints: dict[str, Path], load: Load, tmp_path: Path
) -> None:
    folder = copy(upstream_checkpoints, "strands_qwen3", tmp_path)
    shutil.rmtree(folder / "lora")
    with pytest.raises(ManifestError, match=r"lora: missing, but strands_decider_config\.json sets use_lora"):
        load(folder)


def test_kev_special_embeddings_flag_with_a_plain_adapter_loads(
    upstream_checkpoints: dict[str, Path], pair: Callable[[str], Any], load: Load, tmp_path: Path
) -> None:
    """Regression: ``special_embeddings: True`` in ``head.pt`` beside a plain adapter raised TypeError.
    Kev reads the flag as "the adapter may carry trained delimiter rows"; the adapter holds none here."""
    folder = copy(upstream_checkpoints, "kev_qwen3", tmp_path)
    rewrite_head_pt(folder, special_embeddings=True)
    _, scorer = pair("kev_qwen3")
    assert max_difference(probabilities(load(folder), REQUESTS[0]), scorer(REQUESTS[0])) <= 1e-4


def test_trained_delimiter_rows_are_merged(pair: Callable[[str], Any], upstream_checkpoints: dict[str, Path]) -> None:
    """The adapter's ``trainable_token_indices`` rows reach the embedding table (parity is checked in
    test_upstream_parity; here, that the rows really differ from the base's)."""
    from transformers import AutoModelForCausalLM

    backend, _ = pair("kev_special_embeddings")
    meta = torch.load(upstream_checkpoints["kev_special_embeddings"] / "head.pt", weights_only=True)
    base = AutoModelForCausalLM.from_pretrained(meta["base"]).model.embed_tokens.weight
    row = backend.renderer.ids["state"]
    assert not torch.allclose(backend.trunk.embed_tokens.weight[row], base[row])
    assert torch.equal(backend.trunk.embed_tokens.weight[row - 3], base[row - 3])  # "<|endoftext|>" untouched


@pytest.mark.parametrize("keep", [0.5, -1, 99])
def test_a_bad_keep_layers_is_refused(
    keep: Any, upstream_checkpoints: dict[str, Path], load: Load, tmp_path: Path
) -> None:
    folder = copy(upstream_checkpoints, "wev_run_keep_layers", tmp_path)
    rewrite_head_pt(folder, keep_layers=keep)
    with pytest.raises(ManifestError, match=r"head\.pt: keep_layers is .* expected an integer in 1\.\.2"):
        load(folder)


def test_a_run_with_the_set_head_is_refused(upstream_checkpoints: dict[str, Path], load: Load, tmp_path: Path) -> None:
    folder = copy(upstream_checkpoints, "wev_run_keep_layers", tmp_path)
    rewrite_head_pt(folder, head_type="set")
    with pytest.raises(ManifestError, match=r"head\.pt: head_type \"set\""):
        load(folder)


def test_keep_layers_truncates_the_trunk(pair: Callable[[str], Any]) -> None:
    """Regression: every layer ran where the run keeps one (0.50 on every request)."""
    backend, _ = pair("wev_run_keep_layers")
    assert len(backend.trunk.layers) == 1
